"""`portcheck trace` on every tiny model config in fixtures/models/hf (and the diffusers UNet build file), for
trn2 and inf2, each in its own process, one table row per model and target:

    capture method, graph nodes, wall seconds, peak RSS (the process tree's largest member, via wait4),
    findings by severity, and the ops whose status on that target is "unknown".

The full-size configs there (hidden size over 1024: llama-2-7b, bert-base, ...) are left out: they trace on the
meta device and say little about inputs. Usage:

    python benchmarks/trace_models.py [--portcheck DIR] [--target trn2 --target inf2] [MODEL ...]
    python benchmarks/trace_models.py --families [--findings-out FILE] [NAME ...]

--portcheck runs another checkout's portcheck (e.g. main's, for a before/after) against this checkout's fixtures.
--families traces the thirty families of benchmarks/trace_families.py instead (transformers' own config classes,
written to a temporary directory), with the table: model, target, rc, capture, nodes, wall, RSS, findings;
--findings-out writes every warning and error finding (model, target, code, message, source line) for a judge.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "fixtures" / "models" / "hf"
BUILD_FILES = {"unet2d_condition": HF / "unet2d_condition" / "build.py"}  # models without a transformers config
TINY = 1024  # the largest hidden size counted as tiny


def models() -> dict[str, list[str]]:
    """Each tiny model's name and how `portcheck trace` is pointed at it."""
    found: dict[str, list[str]] = {}
    for config in sorted(HF.glob("*/config.json")):
        name = config.parent.name
        if name in BUILD_FILES:
            continue
        data = json.loads(config.read_text(encoding="utf-8"))
        width = max((v for k, v in data.items() if k in ("hidden_size", "d_model", "n_embd") and isinstance(v, int)),
                    default=0)
        if width <= TINY:
            found[name] = ["--hf-config", str(config.parent)]
    for name, path in BUILD_FILES.items():
        if path.is_file():
            found[name] = [f"{path}:build"]
    return found


def _findings(report: dict[str, object], scratch: Path) -> list[dict[str, object]]:
    """The warning and error findings, each with the text of its source line."""
    out = []
    for finding in report.get("findings") or ():
        assert isinstance(finding, dict)
        if finding.get("severity") not in ("warning", "error"):
            continue
        path = Path(str(finding.get("path", "")))
        path = path if path.is_absolute() else scratch / path
        try:
            line = path.read_text(encoding="utf-8").splitlines()[int(finding.get("line", 1)) - 1].strip()
        except (OSError, IndexError, ValueError):
            line = ""
        out.append({**finding, "source_line": line})
    return out


def run(portcheck: Path, where: list[str], target: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="trace-models-") as scratch:
        out = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "portcheck", "trace", *where, "--target", target, "--format", "json",
                   "--isolated", "--output", str(out)]
        env = {**os.environ, "PYTHONPATH": str(portcheck)}
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=scratch, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        stderr = process.stderr.read().decode(errors="replace").strip() if process.stderr else ""
        report = json.loads(out.read_text(encoding="utf-8")) if out.is_file() and out.stat().st_size else {}
        findings = _findings(report, Path(scratch))
    return {"exit": code, "wall": wall, "rss": usage.ru_maxrss / 1024, "report": report,
            "stderr": stderr.splitlines()[-1] if stderr else "", "findings": findings}


def family_row(name: str, target: str, outcome: dict[str, object], note: str) -> str:
    report = outcome["report"]
    assert isinstance(report, dict)
    graph = report.get("graph") or {}
    severities = (report.get("summary") or {}).get("by_severity") or {}
    found = ", ".join(f"{severities[s]} {s}" for s in ("error", "warning", "info") if severities.get(s)) or "none"
    codes = sorted({str(f.get("code")) for f in report.get("findings") or () if f.get("severity") != "info"})
    error = str(outcome["stderr"])[:120] if outcome["exit"] == 2 else ""
    return (f"| {name}{' (' + note + ')' if note else ''} | {target} | {outcome['exit']} | "
            f"{graph.get('method') or 'none'} | {graph.get('nodes', 0)} | {outcome['wall']:.1f} | "
            f"{outcome['rss']:.0f} | {found}{': ' + ' '.join(codes) if codes else ''}{'; ' + error if error else ''} |")


def families(args: argparse.Namespace) -> None:
    from trace_families import FAMILIES, write_configs  # beside this script

    chosen = args.models or list(FAMILIES)
    unknown = [m for m in chosen if m not in FAMILIES]
    if unknown:
        raise SystemExit(f"no family named {', '.join(unknown)}; choose from {', '.join(FAMILIES)}")
    lines = []
    with tempfile.TemporaryDirectory(prefix="trace-families-") as configs:
        notes = write_configs(Path(configs), chosen)
        print("| model | target | rc | capture | nodes | wall s | peak RSS MiB | findings |")
        print("|---|---|---:|---|---:|---:|---:|---|")
        for name in chosen:
            for target in args.target or ["trn2", "inf2"]:
                outcome = run(args.portcheck.resolve(), ["--hf-config", str(Path(configs) / name)], target)
                print(family_row(name, target, outcome, notes.get(name, "")), flush=True)
                for finding in outcome["findings"]:  # type: ignore[union-attr]
                    lines.append(f"{name}\t{target}\t{finding['code']}\t{finding['severity']}\t"
                                 f"{finding['message']}\t{finding['path']}:{finding['line']}\t"
                                 f"{finding['source_line']}")
                if args.findings_out:
                    Path(args.findings_out).write_text("model\ttarget\tcode\tseverity\tmessage\tplace\tsource line\n"
                                                       + "".join(line + "\n" for line in lines), encoding="utf-8")


def row(name: str, target: str, outcome: dict[str, object]) -> str:
    report = outcome["report"]
    assert isinstance(report, dict)
    graph = report.get("graph") or {}
    severities = (report.get("summary") or {}).get("by_severity") or {}
    found = ", ".join(f"{severities[s]} {s}" for s in ("error", "warning", "info") if severities.get(s)) or "none"
    unknown = [op["op"] for op in report.get("ops") or () if op.get("status", {}).get(target) == "unknown"]
    errors = "; ".join(str(e.get("message", e)) for e in report.get("errors") or ()) or str(outcome["stderr"])
    method = graph.get("method") or "none"
    shapes = report.get("shapes") or {}
    probe = "ok" if shapes.get("ok") else ("failed" if shapes else "-")
    return (f"| {name} | {target} | {method} | {graph.get('nodes', 0)} | {probe} | {outcome['wall']:.1f} | "
            f"{outcome['rss']:.0f} | {found} | {len(unknown)} | {outcome['exit']} | {errors[:160]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="model names (default: every tiny one)")
    parser.add_argument("--portcheck", type=Path, default=ROOT, help="the checkout whose portcheck runs")
    parser.add_argument("--target", action="append", choices=("trn2", "inf2"))
    parser.add_argument("--families", action="store_true", help="trace benchmarks/trace_families.py's thirty")
    parser.add_argument("--findings-out", metavar="FILE", help="with --families: the warning/error findings, TSV")
    args = parser.parse_args()
    if args.families:
        families(args)
        return
    every = models()
    chosen = args.models or list(every)
    unknown = [m for m in chosen if m not in every]
    if unknown:
        raise SystemExit(f"no tiny model named {', '.join(unknown)}; choose from {', '.join(every)}")
    print("| model | target | capture | nodes | shape probe | wall s | peak RSS MiB | findings | unknown ops | exit | "
          "error |")
    print("|---|---|---|---:|---|---:|---:|---|---:|---:|---|")
    for name in chosen:
        for target in args.target or ["trn2", "inf2"]:
            print(row(name, target, run(args.portcheck.resolve(), every[name], target)), flush=True)


if __name__ == "__main__":
    main()
