"""`portcheck report` on the transformers corpus against the scans it contains: how much longer the page takes than
the scans, how large it is, and how long headless Chromium takes to open it.

The report holds a scan per target (trn2 and inf2 by default), so it is compared with those two scans run on their
own, each with a warm results cache (the cache is filled once first, in a directory of this run): what a team
re-running the report each week sees. Every figure is the median of --repeat runs, wall time of whole processes.

    python benchmarks/report_speed.py [--cache-dir DIR] [--repeat 3]

Prints the scans' and the report's seconds, their ratio (the goal: at most 1.2), the HTML's size (goal: under 5 MB)
and the time from navigating Chromium to the page's load event (goal: under 3 s), with the console's errors.
Standard library only; Chromium is driven by benchmarks/chromium.py."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chromium import Chromium, find_chromium
from corpus import DEFAULT_CACHE, DEFAULT_VERSION, Fail, main_of, modeling_files, py_files

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("trn2", "inf2")


def _timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        message = " ".join(done.stderr.split())[-300:] or f"exit code {done.returncode}"
        raise Fail(f"{' '.join(command[3:])} failed: {message}")
    return seconds


def run(args: argparse.Namespace) -> int:
    corpus = modeling_files(Path(args.cache_dir), args.version)
    portcheck = [sys.executable, "-m", "portcheck"]
    with tempfile.TemporaryDirectory(prefix="portcheck-report-speed-") as scratch:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", ""))
                                                            if p), "PORTCHECK_CACHE_DIR": str(Path(scratch) / "cache")}
        env.pop("CI", None)
        common = ["--isolated", "--no-respect-gitignore"]  # the cache may sit in an ignored folder
        page = Path(scratch) / "report.html"
        scans = [[*portcheck, "scan", *common, "--target", chip, "--format", "json", "--exit-zero", "."]
                 for chip in TARGETS]
        report = [*portcheck, "report", *common, *(a for chip in TARGETS for a in ("--target", chip)), "-o",
                  str(page), "."]
        for command in scans:  # fill the results cache
            _timed(command, corpus, env)
        scan_times, report_times = [], []
        for _ in range(args.repeat):
            scan_times.append(sum(_timed(command, corpus, env) for command in scans))
            report_times.append(_timed(report, corpus, env))
        scan_s, report_s = statistics.median(scan_times), statistics.median(report_times)
        size = page.stat().st_size
        print(f"corpus: transformers {args.version}, {len(py_files(corpus))} files; targets {', '.join(TARGETS)}; "
              f"median of {args.repeat} runs, warm results cache")
        print(f"scans (one per target, summed): {scan_s:.2f} s")
        print(f"report (the same scans + the page): {report_s:.2f} s")
        print(f"report / scans: {report_s / scan_s:.2f} (goal: at most 1.20)")
        print(f"HTML: {size / 1e6:.2f} MB (goal: under 5 MB)")
        binary = find_chromium()
        if binary is None:
            print("Chromium: not installed; the page was not opened")
            return 0
        with Chromium(binary, timeout=60) as browser:
            opened = [browser.open(page) for _ in range(args.repeat)]
        load = statistics.median(o.seconds for o in opened)
        errors = opened[0].console
        print(f"Chromium: load event after {load:.2f} s (goal: under 3 s); console errors: {len(errors)}")
        for line in errors[:5]:
            print(f"  {line[:200]}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", default=str(DEFAULT_CACHE), help="where the corpus is (or is downloaded to)")
    parser.add_argument("--version", default=DEFAULT_VERSION, help="transformers release (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, the median shown (default 3)")
    args = parser.parse_args()
    if args.repeat < 1:
        print("report_speed: error: --repeat must be 1 or more", file=sys.stderr)
        return 2
    return main_of("report_speed", run, args)


if __name__ == "__main__":
    sys.exit(main())
