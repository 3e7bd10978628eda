"""How long `portcheck server` takes to show findings, side by side in one run with what it is measured against:

- **open**: a ~4,000-line model file opened in the editor, from `didOpen` to its `publishDiagnostics`, against
  `portcheck scan FILE` on the same file (a fresh process, interpreter start included, as an editor plugin that
  shells out to the command line would pay). The server is started and initialized first, as an editor does
  when it starts; each repeat is a fresh server and a fresh cache.
- **edit**: one line changed in the open file, from `didChange` to the re-published diagnostics (the debounce
  included), against one file's analysis of the edited text in a warm process (`analysed_files` on it, the
  engine already imported), the least a re-publish could cost.

The file is fixtures/examples/llm_gpu.py repeated with its names numbered (`Attention3`, `main3`, ...) until it
holds `--lines` lines. The client is this script: JSON-RPC over the server's stdin and stdout, standard library
only. It prints each measurement's median of `--repeat` runs and the ratios; the issue's target is at most 1.3x.

    python benchmarks/lsp_latency.py
    python benchmarks/lsp_latency.py --lines 4000 --repeat 5 --edits 10 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "fixtures" / "examples" / "llm_gpu.py"
NAMES = re.compile(r"\b(rotary|Attention|MoELM|MoE|main)\b")


def model_file(lines: int) -> str:
    """llm_gpu.py's imports once, then its code again and again, each copy's names numbered."""
    text = EXAMPLE.read_text()
    head, _, body = text.partition("\n\n\ndef rotary")
    body = "\n\n\ndef rotary" + body
    parts = [head]
    copy = 0
    while sum(part.count("\n") for part in parts) < lines:
        copy += 1
        parts.append(NAMES.sub(lambda m, n=copy: f"{m.group(1)}{n}", body))
    return "".join(parts)


class Client:
    """A language client over a child's stdio: requests, notifications, and waiting for a notification."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "portcheck", "server"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=root, env=env)
        self.next_id = 0
        self.call("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
                                 "workspaceFolders": [{"uri": root.as_uri(), "name": "bench"}]})
        self.notify("initialized", {})

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        length = 0
        while (line := self.process.stdout.readline().strip()):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if not length:
            raise RuntimeError("the server closed its output")
        message: dict[str, Any] = json.loads(self.process.stdout.read(length))
        return message

    def notify(self, method: str, params: dict[str, Any] | None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def call(self, method: str, params: dict[str, Any] | None) -> Any:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            message = self._read()
            if message.get("id") == self.next_id and "method" not in message:
                return message.get("result")

    def diagnostics(self, uri: str, version: int) -> list[Any]:
        """Wait for the diagnostics of `uri` at `version`."""
        while True:
            message = self._read()
            params = message.get("params") or {}
            if (message.get("method") == "textDocument/publishDiagnostics" and params.get("uri") == uri
                    and params.get("version") == version):
                return list(params["diagnostics"])

    def close(self) -> None:
        self.call("shutdown", None)
        self.notify("exit", None)
        self.process.wait(timeout=30)


def _server_run(text: str, edits: int) -> tuple[float, float, list[float], int]:
    """A fresh server and cache: seconds from its start to the answer to `initialize`, from didOpen to the
    diagnostics, then for each edit; the findings' count."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        path = root / "model.py"
        path.write_text(text)
        env = {**os.environ, "PORTCHECK_CACHE_DIR": str(root / ".cache")}
        start = time.perf_counter()
        client = Client(root, env)
        started = time.perf_counter() - start
        uri = path.as_uri()
        start = time.perf_counter()
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                "text": text}})
        found = client.diagnostics(uri, 1)
        opened = time.perf_counter() - start
        times = []
        for version in range(2, edits + 2):
            edited = text + f"\nEDITED_{version} = {version}\n"
            start = time.perf_counter()
            client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                     "contentChanges": [{"text": edited}]})
            client.diagnostics(uri, version)
            times.append(time.perf_counter() - start)
        client.close()
        return started, opened, times, len(found)


def _scan_run(text: str) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "model.py").write_text(text)
        env = {**os.environ, "PORTCHECK_CACHE_DIR": str(root / ".cache")}
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "portcheck", "scan", "--format", "json", "model.py"], cwd=root,
                              env=env, capture_output=True, text=True)
        took = time.perf_counter() - start
        return took, len(json.loads(done.stdout)["findings"])


ANALYSIS = """\
import json, statistics, sys, time
from pathlib import Path
from portcheck.config import resolve
from portcheck.static.scan import analysed_files
settings = resolve([], Path.cwd(), None)
text = Path(sys.argv[1]).read_text()
analysed_files([settings.job("model.py", Path("model.py"), text.encode())])  # warm: the engine imported
times = []
for n in range(int(sys.argv[2])):
    data = (text + f"\\nEDITED_{n} = {n}\\n").encode()
    start = time.perf_counter()
    analysed_files([settings.job("model.py", Path("model.py"), data)])
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def _analysis_run(text: str, edits: int) -> list[float]:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "model.py"
        path.write_text(text)
        done = subprocess.run([sys.executable, "-c", ANALYSIS, str(path), str(edits)], cwd=scratch,
                              capture_output=True, text=True, check=True)
        times: list[float] = json.loads(done.stdout)
        return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=4000, help="lines of the model file (default 4000)")
    parser.add_argument("--repeat", type=int, default=3, help="fresh servers and scans to take the median of")
    parser.add_argument("--edits", type=int, default=5, help="edits per server (and analyses) to time")
    parser.add_argument("--json", metavar="OUT", help="also write the measurements here")
    args = parser.parse_args()
    text = model_file(args.lines)
    starts, opens, edits, scans, analyses = [], [], [], [], []
    for _ in range(args.repeat):  # interleaved: a busy moment of the machine falls on both sides alike
        took, scanned = _scan_run(text)
        scans.append(took)
        started, opened, edited, shown = _server_run(text, args.edits)
        starts.append(started)
        opens.append(opened)
        edits.extend(edited)
        analyses.extend(_analysis_run(text, args.edits))
        if shown != scanned:
            print(f"the server showed {shown} findings, scan reported {scanned}", file=sys.stderr)
            return 1
    rows = {
        "open": (statistics.median(opens), statistics.median(scans)),
        "edit": (statistics.median(edits), statistics.median(analyses)),
    }
    print(f"model file: {text.count(chr(10)):,} lines, {scanned} findings; median of {args.repeat} runs "
          f"({args.edits} edits each)")
    print(f"{'':6} {'server (s)':>11} {'baseline (s)':>13} {'ratio':>7}  baseline")
    for name, (server, base) in rows.items():
        what = "portcheck scan FILE" if name == "open" else "one file's analysis, warm process"
        print(f"{name:6} {server:11.3f} {base:13.3f} {server / base:7.2f}x  {what}")
    print(f"(the server's own start, to its answer to initialize: {statistics.median(starts):.3f} s; an editor "
          "starts it once)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "lines": text.count("\n"), "findings": scanned, "starts": starts, "opens": opens, "scans": scans,
            "edits": edits, "analyses": analyses, "ratios": {name: s / b for name, (s, b) in rows.items()}},
            indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
