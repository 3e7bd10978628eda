"""Check portcheck's fixes on real files: fixed copies still compile, a rescan no longer shows what was fixed,
and the diff touches only the lines of fixed findings plus added imports (and removed imports the fixes made
unused).

Each file given (or each ``.py`` under a directory given) is copied into a temporary directory and, for each
``--target chip:stack`` (default ``trn2:native`` and ``inf2:xla``), run through::

    portcheck scan --isolated --format json FILE                     # before
    portcheck scan --isolated --fix --unsafe-fixes FILE              # the fix
    portcheck scan --isolated --format json FILE                     # after

The originals are never written. Prints one row per file and target: findings before, findings with a fix,
fixed, remaining, whether the result compiles, and whether every changed line was a fixed finding's line or
an added import. ``--json OUT`` writes the rows. Exit 0 when every row passes, 1 otherwise, 2 on bad input.

``--ecosystem`` runs the same checks over every project of ``benchmarks/ecosystem.py`` (its extracted sources under
``--cache-dir``, copied to a temporary directory; the cache is never written), a whole project per portcheck run,
and also checks that a second ``--fix --unsafe-fixes`` pass changes nothing (idempotence) and that the fixes leave
nothing behind: a statement repeated on the next line, `if True:`, an `if ...:` whose body is only `pass`, an
import the fix made unused, or a rewritten call whose result is thrown away (`x.to(...)` as a statement). Only
files the fixes changed get a row.

    python benchmarks/fix_check.py fixtures/examples/
    python benchmarks/fix_check.py benchmarks/.cache/transformers-5.24.0/transformers/models/llama/modeling_llama.py
    python benchmarks/fix_check.py --ecosystem        # about 6 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fix_leftovers import stray_lines

DEFAULT_TARGETS = ("trn2:native", "inf2:xla")


def _portcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "portcheck", "scan", "--isolated", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def _findings(name: str, chip: str, stack: str, cwd: Path) -> list[dict]:
    done = _portcheck("--format", "json", "--exit-zero", "--target", chip, "--stack", stack, name, cwd=cwd)
    if done.returncode != 0:
        raise SystemExit(f"fix_check: portcheck failed on {name}: {done.stderr.strip()}")
    return json.loads(done.stdout)["findings"]


def _allowed_lines(findings: list[dict]) -> set[int]:
    lines: set[int] = set()
    for f in findings:
        if f["fix"] is None:
            continue
        lines.update(range(f["line"], f["end_line"] + 1))
        for edit in f["fix"]["edits"]:
            lines.update(range(edit["line"], max(edit["end_line"], edit["line"]) + 1))
    return lines


def check_file(source: Path, chip: str, stack: str, work: Path) -> dict:
    copy = work / source.name
    shutil.copyfile(source, copy)
    before_text = copy.read_text(encoding="utf-8")
    before = _findings(copy.name, chip, stack, work)
    _portcheck("--fix", "--unsafe-fixes", "--target", chip, "--stack", stack, copy.name, cwd=work)
    after_text = copy.read_text(encoding="utf-8")
    after = _findings(copy.name, chip, stack, work)
    try:
        compile(after_text, str(copy), "exec", dont_inherit=True)
        compiles = True
    except SyntaxError:
        compiles = False
    stray, _ = stray_lines(before_text, after_text, _allowed_lines(before))
    fixable = sum(1 for f in before if f["fix"] is not None)
    return {
        "file": str(source), "target": f"{chip}:{stack}", "before": len(before), "fixable": fixable,
        "fixed": len(before) - len(after), "remaining": len(after), "compiles": compiles,
        "only_fixed_lines": not stray, "stray_lines": stray[:10],
        "remaining_fixable": sum(1 for f in after if f["fix"] is not None),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="files or directories of .py files")
    parser.add_argument("--target", action="append", metavar="CHIP:STACK", help="repeatable (default: both)")
    parser.add_argument("--json", metavar="OUT", help="write the rows as JSON")
    parser.add_argument("--ecosystem", action="store_true",
                        help="check every project of benchmarks/ecosystem.py (extracted under --cache-dir)")
    parser.add_argument("--cache-dir", type=Path, default=Path(__file__).resolve().parent / ".cache",
                        help="the ecosystem cache (default benchmarks/.cache)")
    args = parser.parse_args(argv)
    if args.ecosystem:
        from fix_leftovers import check_ecosystem

        return check_ecosystem(args.cache_dir, args.target or list(DEFAULT_TARGETS), args.json,
                               lambda *a, cwd: _portcheck(*a, cwd=cwd), _allowed_lines)
    if not args.paths:
        parser.error("give files or directories, or --ecosystem")
    files: list[Path] = []
    for given in args.paths:
        path = Path(given)
        if path.is_dir():
            files += sorted(path.rglob("*.py"))
        elif path.is_file():
            files.append(path)
        else:
            print(f"fix_check: {given}: no such file or directory", file=sys.stderr)
            return 2
    rows = []
    for target in args.target or DEFAULT_TARGETS:
        chip, _, stack = target.partition(":")
        for source in files:
            with tempfile.TemporaryDirectory() as work:
                rows.append(check_file(source, chip, stack, Path(work)))
    header = f"{'file':<60} {'target':<12} {'before':>6} {'fixable':>7} {'fixed':>5} {'left':>5}  compiles  lines"
    print(header)
    for row in rows:
        print(f"{row['file'][-60:]:<60} {row['target']:<12} {row['before']:>6} {row['fixable']:>7} "
              f"{row['fixed']:>5} {row['remaining']:>5}  {'yes' if row['compiles'] else 'NO':<8}  "
              f"{'ok' if row['only_fixed_lines'] else 'STRAY ' + str(row['stray_lines'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    ok = all(r["compiles"] and r["only_fixed_lines"] and r["remaining_fixable"] == 0 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
