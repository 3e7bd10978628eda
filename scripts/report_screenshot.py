"""Make the screenshot of `portcheck report` that README.md shows (docs/report.png): the page of the shipped
examples (fixtures/examples) for trn2 and inf2, after two runs recorded with `--history` (so the trend has two
points), its top drawn by headless Chromium (Debian's `chromium`) at 1280 px.

    .venv/bin/python scripts/report_screenshot.py [--height 1500] [--output docs/report.png]
"""

from __future__ import annotations

import argparse
import base64
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from chromium import Chromium, find_chromium  # noqa: E402  # benchmarks/chromium.py, standard library only


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--height", type=int, default=1500, help="CSS pixels of the page's top to keep")
    parser.add_argument("--output", default=str(ROOT / "docs" / "report.png"))
    args = parser.parse_args()
    binary = find_chromium()
    if binary is None:
        sys.stderr.write("report_screenshot: Chromium is not installed (apt-get install chromium)\n")
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "examples"
        shutil.copytree(ROOT / "fixtures" / "examples", tree)
        page = Path(scratch) / "report.html"
        for _ in range(2):
            subprocess.run([sys.executable, "-m", "portcheck", "report", "--isolated", "--no-cache", "--history",
                            str(Path(scratch) / "history.jsonl"), "-o", str(page), "."], cwd=tree, check=True,
                           capture_output=True)
        with Chromium(binary, width=1280, height=args.height) as browser:
            browser.open(page)
            reply = browser.call("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": 1280, "height": args.height, "scale": 1}})
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(base64.b64decode(reply["data"]))
    print(f"report_screenshot: wrote {output} ({output.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
