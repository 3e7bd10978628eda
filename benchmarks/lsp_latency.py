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


Sample = tuple[float, float]  # (wall seconds, CPU seconds of the processes doing the work)


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command's name (Linux; [] elsewhere, or when it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _cpus(pid: int) -> dict[int, float]:
    """CPU seconds so far, user and system, of the server and of each process it started (its analysis
    process does the work since the server analyses texts in one)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in [str(pid)] + [e for e in os.listdir("/proc") if e.isdigit() and e != str(pid)]:
        fields = _stat(int(entry))
        if fields and (entry == str(pid) or fields[1] == str(pid)):
            found[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def _cpu_since(pid: int, before: dict[int, float]) -> float:
    """The CPU seconds the server and its processes took since `before` (NaN where /proc is not there)."""
    now = _cpus(pid)
    if not now:
        return float("nan")
    return sum(seconds - before.get(process, 0.0) for process, seconds in now.items())


def _server_run(text: str, edits: int) -> tuple[float, Sample, list[Sample], int]:
    """A fresh server and cache: seconds from its start to the answer to `initialize`; from didOpen to the
    diagnostics, then for each edit (wall, and the CPU of the server and its analysis process meanwhile); the
    findings' count."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        path = root / "model.py"
        path.write_text(text)
        env = {**os.environ, "PORTCHECK_CACHE_DIR": str(root / ".cache")}
        start = time.perf_counter()
        client = Client(root, env)
        started = time.perf_counter() - start
        pid, uri = client.process.pid, path.as_uri()
        start, cpu = time.perf_counter(), _cpus(pid)
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                "text": text}})
        found = client.diagnostics(uri, 1)
        opened = (time.perf_counter() - start, _cpu_since(pid, cpu))
        time.sleep(1.0)  # the folder's reading after the first publish: not part of an edit
        samples = []
        for version in range(2, edits + 2):
            edited = text + f"\nEDITED_{version} = {version}\n"
            start, cpu = time.perf_counter(), _cpus(pid)
            client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                     "contentChanges": [{"text": edited}]})
            client.diagnostics(uri, version)
            samples.append((time.perf_counter() - start, _cpu_since(pid, cpu)))
        client.close()
        return started, opened, samples, len(found)


def _scan_run(text: str) -> tuple[Sample, int]:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "model.py").write_text(text)
        env = {**os.environ, "PORTCHECK_CACHE_DIR": str(root / ".cache")}
        before = os.times()
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "portcheck", "scan", "--format", "json", "model.py"], cwd=root,
                              env=env, capture_output=True, text=True)
        took = time.perf_counter() - start
        after = os.times()
        cpu = after.children_user - before.children_user + after.children_system - before.children_system
        return (took, cpu), len(json.loads(done.stdout)["findings"])


ANALYSIS = """\
import json, statistics, sys, time
from pathlib import Path
from portcheck.config import resolve
from portcheck.static.scan import analysed_files
settings = resolve([], Path.cwd(), None)
text = Path(sys.argv[1]).read_text()
analysed_files([settings.job("model.py", Path("model.py"), text.encode())])  # warm: the engine imported
samples = []
for n in range(int(sys.argv[2])):
    data = (text + f"\\nEDITED_{n} = {n}\\n").encode()
    start, cpu = time.perf_counter(), time.process_time()
    analysed_files([settings.job("model.py", Path("model.py"), data)])
    samples.append((time.perf_counter() - start, time.process_time() - cpu))
print(json.dumps(samples))
"""


def _analysis_run(text: str, edits: int) -> list[Sample]:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "model.py"
        path.write_text(text)
        done = subprocess.run([sys.executable, "-c", ANALYSIS, str(path), str(edits)], cwd=scratch,
                              capture_output=True, text=True, check=True)
        return [(wall, cpu) for wall, cpu in json.loads(done.stdout)]


def _median(samples: list[Sample], index: int) -> float:
    return statistics.median(sample[index] for sample in samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=4000, help="lines of the model file (default 4000)")
    parser.add_argument("--repeat", type=int, default=3, help="fresh servers and scans to take the median of")
    parser.add_argument("--edits", type=int, default=5, help="edits per server (and analyses) to time")
    parser.add_argument("--json", metavar="OUT", help="also write the measurements here")
    args = parser.parse_args()
    text = model_file(args.lines)
    starts: list[float] = []
    opens: list[Sample] = []
    edits: list[Sample] = []
    scans: list[Sample] = []
    analyses: list[Sample] = []
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
    rows = {"open": (opens, scans, "portcheck scan FILE"),
            "edit": (edits, analyses, "one file's analysis, warm process")}
    print(f"model file: {text.count(chr(10)):,} lines, {scanned} findings; median of {args.repeat} runs "
          f"({args.edits} edits each); wall seconds, and CPU seconds of the processes doing the work")
    print(f"{'':6} {'server':>8} {'baseline':>9} {'ratio':>7}   {'server CPU':>10} {'baseline CPU':>12} {'ratio':>7}"
          "  baseline")
    ratios = {}
    for name, (server, base, what) in rows.items():
        wall, cpu = _median(server, 0) / _median(base, 0), _median(server, 1) / _median(base, 1)
        ratios[name] = {"wall": wall, "cpu": cpu}
        print(f"{name:6} {_median(server, 0):8.3f} {_median(base, 0):9.3f} {wall:6.2f}x   {_median(server, 1):10.3f} "
              f"{_median(base, 1):12.3f} {cpu:6.2f}x  {what}")
    print(f"(the server's own start, to its answer to initialize: {statistics.median(starts):.3f} s; an editor "
          "starts it once)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "lines": text.count("\n"), "findings": scanned, "starts": starts, "opens": opens, "scans": scans,
            "edits": edits, "analyses": analyses, "ratios": ratios}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
