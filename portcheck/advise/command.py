"""`portcheck advise`: the model's shape (numbers, a trace, or both), the plan, its findings, the report and
the bring-up script."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from portcheck.advise.model import from_trace, with_numbers
from portcheck.advise.plan import AdviseOptions, Plan, PlanError, make_plan
from portcheck.config import ConfigError, Settings
from portcheck.findings import Finding, ScanResult, Target, fingerprinted
from portcheck.knowledge import load
from portcheck.report import write_atomically


def advise(args: argparse.Namespace, settings: Settings, numbers: dict, raw: dict | None, request,
           cwd: Path) -> int:
    try:
        shape = with_numbers(from_trace(raw) if raw else None, numbers)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from None
    if not shape.params:
        raise ConfigError("the model has no parameters to size: give --params")
    options = AdviseOptions(settings.chip, settings.stack, args.task, args.batch, args.seq_len or 0, args.dtype,
                            args.tp or 0, args.prefer, args.lnc or 0)
    try:
        plan = make_plan(shape, options)
    except PlanError as exc:
        raise ConfigError(str(exc)) from None

    findings = _trace_findings(raw, settings, cwd) if raw else []
    findings += _plan_findings(plan, settings, raw, cwd)
    result = ScanResult(Target(settings.chip, settings.stack), files=0, findings=findings)

    if args.emit_script:
        from portcheck.advise.script import bringup_script

        odd = [f"{i['name']} ({i['unsupported']})" for i in shape.inputs if "unsupported" in i]
        if odd:
            raise ConfigError(f"--emit-script: the script cannot recreate the input(s) {', '.join(odd)}; give the "
                              "model tensors and plain values (numbers, strings, booleans, None)")

        write_atomically(Path(args.emit_script), bringup_script(plan, request, cwd), mode=0o755)
    if args.output:
        write_atomically(Path(args.output), _render(plan, result, args.format, color=False))
    else:
        sys.stdout.write(_render(plan, result, args.format, color=sys.stdout.isatty() and not os.environ.get(
            "NO_COLOR")))
    if args.emit_script and args.format != "json":
        sys.stderr.write(f"bring-up script: {args.emit_script}\n")
    if args.exit_zero:
        return 0
    return 1 if any(f.severity >= settings.fail_level for f in findings) else 0


def _render(plan: Plan, result: ScanResult, output_format: str, color: bool) -> str:
    import io

    from portcheck.report.advise import write_plan

    buffer = io.StringIO()
    write_plan(plan, result, output_format, buffer, color=color)
    return buffer.getvalue()


def _trace_findings(raw: dict, settings: Settings, cwd: Path) -> list[Finding]:
    from portcheck.dynamic.report import build_report

    return build_report(raw, settings, cwd, static=False).findings


def _plan_findings(plan: Plan, settings: Settings, raw: dict | None, cwd: Path) -> list[Finding]:
    """PC8xx findings anchor at the model: its --hf-config file or build callable, or nowhere for numbers."""
    from portcheck.dynamic.report import display_path

    place = ((raw or {}).get("model") or {}).get("build_place") or {}
    path = display_path(place["file"], cwd) if place.get("file") else ""
    line = int(place.get("line") or 1) if path else 0
    rules = load().rules
    out = []
    for item in plan.findings:
        info = rules[item["code"]]
        if item["code"] not in settings.enabled:
            continue
        out.append(Finding(info.code, info.name, info.category, info.severity, item["message"], path, line,
                           1 if path else 0, line, 1 if path else 0, evidence=("plan",)))
    return fingerprinted(out, [], path)
