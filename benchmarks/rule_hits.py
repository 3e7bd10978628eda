"""Count portcheck rule hits on a real corpus and sample hits so a human can judge them.

By default the corpus is every ``transformers/models/**/modeling_*.py`` of a pinned Hugging Face
transformers release (5.24.0; ``--transformers-version`` to change). The wheel is fetched with
``python -m pip download transformers==VERSION --no-deps --only-binary=:all:`` into a cache directory
(``benchmarks/.cache/`` by default, ``--cache-dir`` to change) and only those files are extracted to
``CACHE/transformers-VERSION/``. The cache is just a cache: delete it at will, it is rebuilt on the next run,
and neither the download nor the extraction is repeated while it is there. ``--corpus DIR`` scans the
``.py`` files under DIR instead.

For each ``--target chip:stack`` (default ``trn2:native`` and ``inf2:xla``) the script runs, as a child
process::

    portcheck scan --isolated --select ALL --format json --exit-zero --no-respect-gitignore \\
        --target CHIP --stack STACK .

in the corpus directory (``--select ALL`` also enables the rules that are off by default) and prints a table
per target: code, name, severity(s), findings, files with a finding; then total files, total findings,
errors and the wall time of the scan. ``--sample N`` prints N findings per rule, chosen at random with a fixed
``--seed``, each with its message and source lines line-1..line+1; ``--code PCxxx`` limits the sampling to
those codes. ``--json OUT`` writes the counts (and samples) as JSON.

Standard library only; exit code 0 on success, 2 on any error (one line on stderr).

    python benchmarks/rule_hits.py --sample 1
    python benchmarks/rule_hits.py --corpus ~/src/my-model --target trn2:xla --json hits.json
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from corpus import DEFAULT_CACHE, DEFAULT_VERSION, Fail, download, extract, main_of, py_files

DEFAULT_TARGETS = ("trn2:native", "inf2:xla")
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


# ---- scanning -----------------------------------------------------------------------------------


def _portcheck() -> list[str]:
    script = Path(sys.executable).parent / "portcheck"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "portcheck"]


def _parse_target(text: str) -> tuple[str, str]:
    chip, sep, stack = text.partition(":")
    if not sep or not chip or not stack:
        raise Fail(f"--target {text!r}: expected chip:stack, e.g. trn2:native or inf2:xla")
    return chip, stack


def _scan(corpus: Path, chip: str, stack: str) -> tuple[dict, float]:
    command = [*_portcheck(), "scan", "--isolated", "--select", "ALL", "--format", "json", "--exit-zero",
               "--no-respect-gitignore", "--no-cache", "--target", chip, "--stack", stack, "."]
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=corpus, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise Fail(f"cannot run portcheck ({command[0]}): {exc}") from None
    elapsed = time.perf_counter() - started
    message = " ".join(proc.stderr.split()) or f"exit code {proc.returncode}, no message"
    if proc.returncode != 0:
        raise Fail(f"portcheck scan --target {chip} --stack {stack} failed: {message}")
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise Fail(f"portcheck scan --target {chip} --stack {stack} did not print JSON: {message}") from None
    return report, elapsed


def _tally(findings: list[dict]) -> list[dict]:
    rules: dict[str, dict] = {}
    files: dict[str, set[str]] = defaultdict(set)
    for f in findings:
        row = rules.setdefault(f["code"], {"code": f["code"], "name": f.get("name", ""), "severities": set(),
                                           "findings": 0, "files": 0})
        row["severities"].add(f.get("severity", "?"))
        row["findings"] += 1
        files[f["code"]].add(f["path"])
    for code, row in rules.items():
        row["files"] = len(files[code])
        row["severities"] = sorted(row["severities"], key=lambda s: (SEVERITY_ORDER.get(s, 9), s))
    return [rules[c] for c in sorted(rules)]


def _source(corpus: Path, path: str, line: int, cache: dict[str, list[str]]) -> list[tuple[int, str]]:
    if path not in cache:
        try:
            cache[path] = (corpus / path).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            cache[path] = []
    lines = cache[path]
    return [(n, lines[n - 1]) for n in range(max(1, line - 1), min(len(lines), line + 1) + 1)]


def _samples(findings: list[dict], corpus: Path, count: int, seed: int, codes: set[str], label: str) -> list[dict]:
    by_code: dict[str, list[dict]] = defaultdict(list)
    for f in findings:
        if not codes or f["code"] in codes:
            by_code[f["code"]].append(f)
    texts: dict[str, list[str]] = {}
    picked = []
    for code in sorted(by_code):
        pool = sorted(by_code[code], key=lambda f: (f["path"], f["line"], f.get("column", 0)))
        rng = random.Random(f"{seed}:{label}:{code}")  # a str seed is hashed deterministically
        for f in sorted(rng.sample(pool, min(count, len(pool))), key=lambda f: (f["path"], f["line"])):
            picked.append({"code": code, "path": f["path"], "line": f["line"], "column": f.get("column"),
                           "severity": f.get("severity"), "message": f.get("message", ""),
                           "source": [{"line": n, "text": t} for n, t in _source(corpus, f["path"], f["line"], texts)]})
    return picked


# ---- output -------------------------------------------------------------------------------------


def _print_table(label: str, result: dict) -> None:
    print(f"\n== {label} ==")
    rows = [(r["code"], r["name"], "/".join(r["severities"]), str(r["findings"]), str(r["files"]))
            for r in result["rules"]]
    header = ("code", "name", "severity", "findings", "files")
    widths = [max(len(x) for x in column) for column in zip(header, *rows, strict=False)]
    right = {3, 4}

    def line(cells):
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in pairs)

    print(line(header))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))
    if not rows:
        print("(no findings)")
    print(f"files scanned: {result['files']}  findings: {result['findings']}  "
          f"files with a finding: {result['files_with_findings']}  errors: {result['errors']}  "
          f"wall time: {result['wall_seconds']:.2f}s")
    for e in result["error_details"][:5]:
        print(f"  error: {e.get('path')}:{e.get('line') or ''} {e.get('message')}")


def _print_samples(label: str, samples: list[dict]) -> None:
    if not samples:
        return
    print(f"\n-- samples, {label} --")
    for s in samples:
        print(f"\n[{s['code']}] {s['path']}:{s['line']}  ({s['severity']})")
        print(f"  {s['message']}")
        for src in s["source"]:
            marker = ">" if src["line"] == s["line"] else " "
            print(f"  {marker}{src['line']:6d} | {src['text']}")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Count portcheck rule hits on a corpus (default: the "
                                     "modeling_*.py files of a pinned transformers release).")
    parser.add_argument("--transformers-version", default=DEFAULT_VERSION, metavar="VERSION",
                        help=f"transformers release to download (default {DEFAULT_VERSION})")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, metavar="DIR",
                        help="where the wheel and the extracted files are kept (default benchmarks/.cache/)")
    parser.add_argument("--corpus", type=Path, metavar="DIR", help="scan the .py files under DIR instead")
    parser.add_argument("--target", action="append", metavar="CHIP:STACK",
                        help=f"repeatable (default: {' and '.join(DEFAULT_TARGETS)})")
    parser.add_argument("--sample", type=int, default=0, metavar="N", help="print N random findings per rule")
    parser.add_argument("--seed", type=int, default=0, help="seed for --sample (default 0)")
    parser.add_argument("--code", action="append", default=[], metavar="PCxxx", help="sample only these codes")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the counts (and samples) as JSON")
    args = parser.parse_args(argv)
    if args.sample < 0:
        parser.error("--sample must be >= 0")
    return args


def run(args: argparse.Namespace) -> int:
    targets = [_parse_target(t) for t in (args.target or DEFAULT_TARGETS)]
    if args.corpus is not None:
        corpus = args.corpus.expanduser().resolve()
        if not corpus.is_dir():
            raise Fail(f"--corpus {args.corpus}: not a directory")
        source = {"corpus": str(corpus)}
    else:
        cache = args.cache_dir.expanduser().resolve()
        wheel = download(cache, args.transformers_version)
        corpus = extract(wheel, cache / f"transformers-{args.transformers_version}")
        source = {"transformers_version": args.transformers_version, "wheel": wheel.name, "corpus": str(corpus)}
    corpus_files = py_files(corpus)
    if not corpus_files:
        raise Fail(f"{corpus}: the corpus is empty (no .py files)")
    print(f"corpus: {corpus} ({len(corpus_files)} .py files)")

    codes = {c.strip().upper() for c in args.code if c.strip()}
    results = []
    for chip, stack in targets:
        label = f"{chip}:{stack}"
        report, elapsed = _scan(corpus, chip, stack)
        findings = report.get("findings", [])
        errors = report.get("errors", [])
        files = report.get("summary", {}).get("files", len(corpus_files))
        result = {"target": chip, "stack": stack, "files": files, "findings": len(findings),
                  "files_with_findings": len({f["path"] for f in findings}), "errors": len(errors),
                  "wall_seconds": round(elapsed, 3), "rules": _tally(findings), "error_details": errors}
        if args.sample:
            result["samples"] = _samples(findings, corpus, args.sample, args.seed, codes, label)
        _print_table(label, result)
        if files != len(corpus_files):
            print(f"note: portcheck scanned {files} files, the corpus has {len(corpus_files)} .py files")
        _print_samples(label, result.get("samples", []))
        results.append(result)

    if args.json is not None:
        payload = {**source, "portcheck": " ".join(_portcheck()), "sample": args.sample, "seed": args.seed,
                   "codes": sorted(codes), "targets": results}
        try:
            args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise Fail(f"--json {args.json}: cannot write: {exc.strerror or exc}") from None
        print(f"\nwrote {args.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return main_of("rule_hits", run, _arguments(argv))


if __name__ == "__main__":
    sys.exit(main())
