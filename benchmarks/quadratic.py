"""Files whose findings crowd together cost what the same findings spread out cost (issue 32).

Each case is a pair of generated inputs with the same number of findings: one where they crowd into one place
(one statement, one block of top-level statements, one long requirements file) and one where they are spread over
separate lines, functions or files. Each input is scanned in a child process (`portcheck scan --isolated
--no-cache -j 1`, interpreter start included), and the script prints the two wall times and their ratio; the
issue's bar is a ratio under 2. Before issue 32 the crowded forms were quadratic: 3,000 `.cuda()` calls as the
arguments of one call took 53 s (3 s on separate lines), 16,000 top-level findings 72 s and a 40,000-line
requirements file 89 s; `--format full` and rdjson read the file again for every finding. Matching 16,000
identical findings against their baseline compared each recorded line with every free twin (150 s more); a
5,000-term `if` test of `.cuda()` calls took over 300 s (its polarity read again for each finding) and an `or`
chain of probes and `.cuda()` calls 159 s (each finding's ancestors read up the whole chain). Issue 30's reading of
fallbacks for a parameter defaulting to None listed the statement's nodes again for each finding: 1,500 `.cuda()`
arguments in such a function took 58 s.

    python benchmarks/quadratic.py            # the issue's sizes, about 3 minutes on 2 cores
    python benchmarks/quadratic.py --scale 0.25
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

Files = dict[str, str]


def _one_call(n: int) -> Files:
    return {"args.py": "import torch\n\nf(" + ", ".join(["x.cuda()"] * n) + ")\n"}


def _optional_parameter(n: int) -> Files:
    return {"optional.py": "import torch\n\n\ndef g(x, d=None):\n    return f(" + ", ".join(["x.cuda()"] * n) + ")\n"}


def _separate_lines(n: int) -> Files:
    return {"lines.py": "import torch\n\n" + "".join(f"x{i}.cuda()\n" for i in range(n))}


def _top_level(n: int) -> Files:
    return {"top.py": "import torch\n\n" + "torch.zeros(1).cuda()\n" * n}


def _in_functions(n: int, per: int = 100) -> Files:
    body = "".join(f"\n\ndef f{k}():\n" + "    torch.zeros(1).cuda()\n" * per for k in range(n // per))
    return {"functions.py": "import torch\n" + body}


def _if_test(n: int) -> Files:
    return {"guard.py": "import torch\n\n\ndef f():\n    if " + " and ".join(f"x{i}.cuda()" for i in range(n))
            + ":\n        pass\n"}


def _probe_chain(n: int) -> Files:
    return {"probes.py": "import torch\n\nok = " + " or ".join(
        f"x{i}.cuda()" if i % 2 else "torch.cuda.is_available()" for i in range(n)) + "\n"}


def _probe_lines(n: int) -> Files:
    return {"probes.py": "import torch\n\n" + "".join(
        f"ok{i} = x{i}.cuda()\n" if i % 2 else f"ok{i} = torch.cuda.is_available()\n" for i in range(n))}


def _long_requirements(n: int) -> Files:
    return {"requirements.txt": "torch==2.1.2\n" * n}


def _many_requirements(n: int, per: int = 1000) -> Files:
    return {f"requirements/part{k}.txt": "torch==2.1.2\n" * per for k in range(n // per)}


# name, findings, crowded, spread, extra arguments
CASES: list[tuple[str, int, Callable[[int], Files], Callable[[int], Files], tuple[str, ...]]] = [
    ("`.cuda()` as arguments of one call", 3000, _one_call, _separate_lines, ()),
    # each finding asks whether it is the fallback of an expression for `d` (`d or ...`)
    ("the same, in a function with a parameter defaulting to None", 3000, _optional_parameter, _separate_lines, ()),
    ("top-level findings", 16000, _top_level, _in_functions, ()),
    ("`.cuda()` terms of one `if` test", 5000, _if_test, _separate_lines, ()),
    ("probes and `.cuda()` in one `or` chain", 5000, _probe_chain, _probe_lines, ()),
    ("requirements lines", 40000, _long_requirements, _many_requirements, ()),
    ("requirements lines, --format full", 40000, _long_requirements, _many_requirements, ("--format", "full")),
    ("requirements lines, --format rdjson", 40000, _long_requirements, _many_requirements, ("--format", "rdjson")),
    # identical findings share a stem: 16,000 of one stem, or 160 stems of 100, matched against their baseline
    ("identical findings, --baseline", 16000, _top_level, _in_functions, ("--baseline", "base.json")),
]


def _timed(files: Files, extra: tuple[str, ...]) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="portcheck-quadratic-") as scratch:
        root = Path(scratch)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        scan = [sys.executable, "-m", "portcheck", "scan", "--isolated", "--no-cache", "-j", "1"]
        if "--baseline" in extra:  # recorded first, not timed
            subprocess.run([*scan, "--write-baseline", extra[extra.index("--baseline") + 1], "."], cwd=root,
                           capture_output=True, check=True)
        start = time.perf_counter()
        done = subprocess.run([*scan, "--format", "json-lines", *extra, "."], cwd=root, capture_output=True)
        elapsed = time.perf_counter() - start
        if done.returncode not in (0, 1):
            raise SystemExit(f"scan failed: {done.stderr.decode(errors='replace')[-2000:]}")
        found = done.stdout.count(b'"code"') if not extra else -1
        return elapsed, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every case's size (default 1)")
    parser.add_argument("--only", default="", help="run only the cases whose name holds this text")
    args = parser.parse_args()
    print("| case | findings | crowded (s) | spread (s) | ratio |")
    print("|---|---:|---:|---:|---:|")
    worst = 0.0
    for name, size, crowded, spread, extra in CASES:
        if args.only not in name:
            continue
        n = max(1000, int(size * args.scale)) // 1000 * 1000
        crowded_time, crowded_found = _timed(crowded(n), extra)
        spread_time, spread_found = _timed(spread(n), extra)
        if crowded_found != spread_found:
            raise SystemExit(f"{name}: {crowded_found} findings crowded, {spread_found} spread")
        ratio = crowded_time / spread_time
        worst = max(worst, ratio)
        print(f"| {name} | {n:,} | {crowded_time:.2f} | {spread_time:.2f} | {ratio:.2f} |", flush=True)
    print(f"\nworst ratio: {worst:.2f} (the bar: under 2)")


if __name__ == "__main__":
    main()
