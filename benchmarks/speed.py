"""How fast portcheck's static pass is, side by side with its peers, in one run on the same files.

The files are every ``transformers/models/**/modeling_*.py`` of a pinned transformers release (5.24.0 by default,
fetched once into ``benchmarks/.cache/``; ``--corpus DIR`` for any other directory), copied to a scratch
directory so that nothing here writes into the cached corpus. Each measurement is one child process; the
script records its wall time, CPU time (user + system, its workers included) and peak resident memory (the
largest single process: the parent or one worker, as GNU time reports it):

- portcheck cold (empty cache), with the default rules and with ``--select ALL``; portcheck warm (nothing
  changed); portcheck after one file changed;
- the floor and the ceilings: bare ``libcst.parse_module`` of every file on ``--jobs`` processes and on one,
  stdlib ``ast.parse`` on one, ``ruff check --select ALL``;
- the peers: TorchFix 0.7.0 (``torchfix -j N``) and Fixit 2.2.1 (``fixit lint``), each installed with pip into
  its own virtual environment under ``benchmarks/.cache/venvs/`` on first use (both pin libcst/click versions
  that clash with portcheck's), and ruff 0.17.6 the same way;
- single-file latency as pre-commit runs it (``portcheck scan --force-exclude FILE``; by default on BERT's
  modeling file and on the corpus's largest, ``--single`` to choose), cold and cached, median of ``--repeat``
  runs, interpreter start included; and the import time of what that command loads (``python -X importtime``).

Children run with Python's bytecode cache on, as users' tools do, after one untimed warm-up run.

It prints a table with each row's ratio to portcheck cold and the issue's targets, and writes everything to
``--results`` (``benchmarks/results/speed.json`` by default). A peer that cannot be installed or fails is a row
that says why; the rest still runs. ``--skip torchfix,fixit`` leaves out the slow peers (about 18 minutes of
the run on 2 cores).

    python benchmarks/speed.py
    python benchmarks/speed.py --skip torchfix,fixit --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import asdict, dataclass, field
from pathlib import Path

from corpus import DEFAULT_CACHE, DEFAULT_VERSION, Fail, main_of, modeling_files, py_files

HERE = Path(__file__).resolve().parent
PEERS = {  # venv name -> (pip requirements, the command's executable in that venv)
    "torchfix": (["torchfix==0.7.0"], "torchfix"),
    "fixit": (["fixit==2.2.1"], "fixit"),
    "ruff": (["ruff==0.17.6"], "ruff"),
}
TARGETS = {  # the targets: row -> (what it is compared with, the largest ratio allowed)
    "portcheck cold": ("libcst parse, N processes", 1.5),
    "portcheck warm": ("portcheck cold", 0.05),
}
# As users run tools: Python writes and reuses bytecode (a sandbox may have turned that off).
_ENVIRONMENT = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PORTCHECK_CACHE_DIR")}
SINGLE_FILE_LIMIT = 0.6  # seconds, interpreter start included
MEMORY_LIMIT = 300  # MB per process

_PARSE = """
import sys, ast
from concurrent.futures import ProcessPoolExecutor
def libcst_parse(path):
    import libcst
    with open(path, "rb") as handle:
        libcst.parse_module(handle.read())
def ast_parse(path):
    with open(path, "rb") as handle:
        ast.parse(handle.read())
kind, jobs, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
function = libcst_parse if kind == "libcst" else ast_parse
if jobs > 1:
    with ProcessPoolExecutor(jobs) as pool:
        list(pool.map(function, files, chunksize=4))
else:
    for f in files:
        function(f)
"""


@dataclass
class Row:
    name: str
    command: str
    wall: float | None = None
    cpu: float | None = None
    peak_mb: float | None = None
    exit_code: int | None = None
    note: str = ""
    runs: list[float] = field(default_factory=list)


def measure(name: str, command: list[str], cwd: Path, env: dict | None = None, ok: tuple[int, ...] = (0, 1)) -> Row:
    """One child process: wall, CPU of it and its children, peak RSS of the largest one."""
    row = Row(name, " ".join(command))
    started = time.perf_counter()
    try:
        process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   env={**_ENVIRONMENT, **(env or {})})
    except OSError as exc:
        row.note = f"cannot run: {exc}"
        return row
    _, status, usage = os.wait4(process.pid, 0)
    row.wall = time.perf_counter() - started
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.stderr:
        process.stderr.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    row.exit_code = process.returncode
    row.cpu = usage.ru_utime + usage.ru_stime
    row.peak_mb = usage.ru_maxrss / 1024
    if row.exit_code not in ok:
        last = [line for line in stderr.splitlines() if line.strip()][-1:] or ["no message"]
        row.note = f"exit code {row.exit_code}: {last[0][:160]}"
    row.runs = [row.wall]
    print(f"  {name}: {row.wall:.2f} s wall, {row.cpu:.1f} s CPU, {row.peak_mb:.0f} MB"
          + (f" ({row.note})" if row.note else ""), file=sys.stderr)
    return row


def peer(name: str, venvs: Path) -> Path:
    """The executable of a pinned peer in its own virtual environment, installed on first use."""
    requirements, executable = PEERS[name]
    home = venvs / name
    binary = home / "bin" / executable
    stamp = home / ".requirements"
    if binary.is_file() and stamp.is_file() and stamp.read_text() == " ".join(requirements):
        return binary
    print(f"installing {' '.join(requirements)} into {home} ...", file=sys.stderr)
    shutil.rmtree(home, ignore_errors=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(home)
    done = subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                           "-q", *requirements], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not binary.is_file():
        lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        raise Fail(f"pip install {' '.join(requirements)} failed: {(lines or ['no output'])[-1]}")
    stamp.write_text(" ".join(requirements))
    return binary


def _median(rows: list[Row]) -> Row:
    """One row for repeated runs: the median wall and CPU, the largest peak, every run's wall kept."""
    walls = [r.wall for r in rows if r.wall is not None]
    cpus = [r.cpu for r in rows if r.cpu is not None]
    merged = Row(rows[0].name, rows[0].command, exit_code=rows[-1].exit_code,
                 note="; ".join(sorted({r.note for r in rows if r.note})), runs=walls)
    merged.wall = statistics.median(walls) if walls else None
    merged.cpu = statistics.median(cpus) if cpus else None
    merged.peak_mb = max((r.peak_mb or 0) for r in rows)
    return merged


def _default_singles(corpus: Path, files: list[Path]) -> list[Path]:
    """BERT's modeling file (1,374 lines in 5.24.0, a large one: the median is about 900) and the largest."""
    bert = [p for p in files if p.name == "modeling_bert.py"]
    largest = max(files, key=lambda p: p.stat().st_size)
    return [*bert, largest] if bert and bert[0] != largest else [largest]


def portcheck_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "portcheck", "scan", "--isolated", "--no-respect-gitignore", "--exit-zero",
            "--format", "json", "-o", os.devnull, *args]


def import_time(single: Path, cwd: Path) -> dict:
    """What `portcheck scan FILE` imports and how long that takes, from `python -X importtime`."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "portcheck", "scan", "--isolated", "--no-cache",
                           "--exit-zero", str(single)], cwd=cwd, capture_output=True, text=True, check=False)
    rows = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            rows.append((match.group(4), int(match.group(2)), len(match.group(3))))
    top = [(name, cumulative) for name, cumulative, depth in rows if depth == 1]
    modules = {name for name, _, _ in rows}
    return {
        "total_ms": round(sum(c for _, c in top) / 1000, 1),
        "largest_ms": {name: round(c / 1000, 1) for name, c in sorted(top, key=lambda t: -t[1])[:6]},
        "imports_torch": any(m == "torch" or m.startswith("torch.") for m in modules),
        "imports_rich": any(m == "rich" or m.startswith("rich.") for m in modules),
        "modules": len(modules),
    }


def run(args: argparse.Namespace) -> int:
    jobs = args.jobs or os.cpu_count() or 1
    source = args.corpus.resolve() if args.corpus else modeling_files(args.cache_dir, args.transformers_version)
    if not source.is_dir():
        raise Fail(f"--corpus {source}: not a directory")
    skip = {s.strip() for s in (args.skip or "").split(",") if s.strip()}
    unknown = skip - {"torchfix", "fixit", "ruff", "select-all"}
    if unknown:
        raise Fail(f"--skip {','.join(sorted(unknown))}: expected some of torchfix, fixit, ruff, select-all")
    scratch = Path(tempfile.mkdtemp(prefix="portcheck-speed-"))
    try:
        corpus = scratch / "corpus"
        shutil.copytree(source, corpus)
        files = py_files(corpus)
        if not files:
            raise Fail(f"{source}: no .py files")
        lines = sum(p.read_bytes().count(b"\n") for p in files)
        singles = [corpus / name for name in args.single] if args.single else _default_singles(corpus, files)
        for single in singles:
            if not single.is_file():
                raise Fail(f"--single {single.relative_to(corpus)}: no such file in the corpus")
        single_info = {str(p.relative_to(corpus)): p.read_bytes().count(b"\n") for p in singles}
        relative = [str(p.relative_to(corpus)) for p in files]
        print(f"corpus: {len(files)} files, {lines} lines, copied to {corpus}; {jobs} processes", file=sys.stderr)
        cache = scratch / "cache"
        rows: list[Row] = []
        # Untimed: the first run after an install writes the bytecode every later run reads.
        subprocess.run(portcheck_command("--no-cache", str(singles[0].relative_to(corpus))), cwd=corpus,
                       env=_ENVIRONMENT, capture_output=True, check=False)

        # The headline pair alternates for --rounds rounds: this kind of machine drifts by a quarter within
        # minutes, so each row is the median and the ratio is taken round by round too.
        script = scratch / "parse.py"
        script.write_text(_PARSE)
        colds, parses = [], []
        for _ in range(args.rounds):
            shutil.rmtree(cache, ignore_errors=True)
            colds.append(measure("portcheck cold", portcheck_command("-j", str(jobs), "--cache-dir", str(cache),
                                                                       "."), corpus))
            parses.append(measure("libcst parse, N processes",
                                  [sys.executable, str(script), "libcst", str(jobs), *relative], corpus, ok=(0,)))
        rows.append(_median(colds))
        rows.append(_median(parses))
        paired = [c.wall / p.wall for c, p in zip(colds, parses, strict=True) if c.wall and p.wall]
        rows.append(measure("portcheck warm", portcheck_command("-j", str(jobs), "--cache-dir", str(cache), "."),
                            corpus))
        changed = singles[-1]
        changed.write_bytes(changed.read_bytes() + b"\n# changed by benchmarks/speed.py\n")
        rows.append(measure("portcheck, one file changed",
                            portcheck_command("-j", str(jobs), "--cache-dir", str(cache), "."), corpus))
        if "select-all" not in skip:
            rows.append(measure("portcheck cold, --select ALL",
                                portcheck_command("-j", str(jobs), "--no-cache", "--select", "ALL", "."), corpus))
        rows.append(measure("libcst parse, 1 process", [sys.executable, str(script), "libcst", "1", *relative],
                            corpus, ok=(0,)))
        rows.append(measure("ast.parse, 1 process", [sys.executable, str(script), "ast", "1", *relative], corpus,
                            ok=(0,)))
        venvs = args.cache_dir / "venvs"
        for name, build in (
            ("ruff", lambda exe: [str(exe), "check", "--isolated", "--no-cache", "--select", "ALL", "--exit-zero",
                                  "--output-format", "concise", "."]),
            ("torchfix", lambda exe: [str(exe), "-j", str(jobs), "."]),
            ("fixit", lambda exe: [str(exe), "lint", "."]),
        ):
            label = {"ruff": "ruff check --select ALL (ceiling)", "torchfix": "TorchFix 0.7.0",
                     "fixit": "Fixit 2.2.1 (default rules)"}[name]
            if name in skip:
                continue
            try:
                executable = peer(name, venvs)
            except Fail as exc:
                rows.append(Row(label, name, note=str(exc)))
                print(f"  {label}: {exc}", file=sys.stderr)
                continue
            rows.append(measure(label, build(executable), corpus))

        single_rows = []
        for single in singles:
            name = single.relative_to(corpus)
            for label, extra in ((f"single file {name.name}, cold", ["--no-cache"]),
                                 (f"single file {name.name}, cached", ["--cache-dir", str(cache)])):
                command = [sys.executable, "-m", "portcheck", "scan", "--force-exclude", "--exit-zero", *extra,
                           str(name)]
                single_rows.append(_median([measure(label, command, corpus) for _ in range(args.repeat)]))
        start = measure("python -c pass", [sys.executable, "-c", "pass"], corpus, ok=(0,))
        imports = import_time(singles[0], corpus)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    by_name = {r.name: r for r in rows + single_rows}
    cold = by_name["portcheck cold"].wall
    ratios = {r.name: round(r.wall / cold, 3) for r in rows if r.wall and cold}
    checks = []
    if paired:
        checks.append({"target": "portcheck cold / libcst parse, N processes, round by round (median) <= 1.5",
                       "ratio": round(statistics.median(paired), 3), "rounds": [round(r, 3) for r in paired],
                       "met": statistics.median(paired) <= 1.5})
    for name, (base, limit) in TARGETS.items():
        value, reference = by_name[name].wall, by_name[base].wall
        if value and reference:
            checks.append({"target": f"{name} / {base} <= {limit}", "ratio": round(value / reference, 3),
                           "met": value / reference <= limit})
    for row in single_rows:
        if row.name.endswith(", cold"):
            checks.append({"target": f"{row.name} <= {SINGLE_FILE_LIMIT} s", "seconds": row.wall,
                           "met": bool(row.wall and row.wall <= SINGLE_FILE_LIMIT)})
    peak = max((by_name[n].peak_mb or 0) for n in by_name if n.startswith("portcheck"))
    checks.append({"target": f"portcheck peak memory per process <= {MEMORY_LIMIT} MB", "mb": round(peak, 1),
                   "met": peak <= MEMORY_LIMIT})
    for name in ("TorchFix 0.7.0", "Fixit 2.2.1 (default rules)"):
        if name in by_name and by_name[name].wall and cold:
            checks.append({"target": f"{name} / portcheck cold >= 10", "ratio": round(by_name[name].wall / cold, 1),
                           "met": by_name[name].wall / cold >= 10})

    results = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": {"cores": os.cpu_count(), "jobs": jobs, "python": platform.python_version(),
                    "platform": platform.platform()},
        "corpus": {"source": str(source), "files": len(files), "lines": lines,
                   "transformers_version": None if args.corpus else args.transformers_version,
                   "single_files": single_info},
        "rows": [asdict(r) for r in rows + single_rows + [start]],
        "ratios_to_portcheck_cold": ratios,
        "imports": imports,
        "targets": checks,
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=2) + "\n")
    print_table(results)
    print(f"\nwritten to {args.results}")
    return 0


def print_table(results: dict) -> None:
    corpus = results["corpus"]
    print(f"\n{corpus['files']} files, {corpus['lines']:,} lines; {results['machine']['jobs']} processes on "
          f"{results['machine']['cores']} cores; Python {results['machine']['python']}\n")
    print(f"{'measurement':42} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'x cold':>7}  note")
    ratios = results["ratios_to_portcheck_cold"]
    for row in results["rows"]:
        wall = f"{row['wall']:.2f}" if row["wall"] is not None else "-"
        cpu = f"{row['cpu']:.1f}" if row["cpu"] is not None else "-"
        peak = f"{row['peak_mb']:.0f}" if row["peak_mb"] is not None else "-"
        ratio = f"{ratios[row['name']]:.2f}" if row["name"] in ratios else ""
        note = row["note"] or (f"median of {len(row['runs'])}" if len(row["runs"]) > 1 else "")
        print(f"{row['name']:42} {wall:>8} {cpu:>8} {peak:>8} {ratio:>7}  {note}")
    imports = results["imports"]
    print(f"\nimports of `portcheck scan FILE`: {imports['total_ms']} ms, {imports['modules']} modules; torch "
          f"{'imported' if imports['imports_torch'] else 'not imported'}, rich "
          f"{'imported' if imports['imports_rich'] else 'not imported'}; largest: "
          + ", ".join(f"{k} {v} ms" for k, v in imports["largest_ms"].items()))
    print("\ntargets:")
    for check in results["targets"]:
        value = check.get("ratio", check.get("seconds", check.get("mb")))
        print(f"  {'met    ' if check['met'] else 'MISSED '} {check['target']}: {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, metavar="DIR", help="time these .py files instead of transformers'")
    parser.add_argument("--transformers-version", default=DEFAULT_VERSION, metavar="VERSION")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, metavar="DIR",
                        help="where the corpus and the peers' venvs are kept (default benchmarks/.cache/)")
    parser.add_argument("--jobs", "-j", type=int, metavar="N", help="processes for the parallel rows (default: cores)")
    parser.add_argument("--skip", metavar="NAMES", help="leave out some of: torchfix, fixit, ruff, select-all")
    parser.add_argument("--single", action="append", metavar="FILE",
                        help="a single-file latency subject, relative to the corpus (repeatable; default: "
                             "modeling_bert.py and the largest file)")
    parser.add_argument("--repeat", type=int, default=5, metavar="N", help="single-file runs (default 5)")
    parser.add_argument("--rounds", type=int, default=3, metavar="N",
                        help="alternating runs of portcheck cold and the libcst parse (default 3)")
    parser.add_argument("--results", type=Path, default=HERE / "results" / "speed.json", metavar="FILE")
    return main_of("speed.py", run, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
