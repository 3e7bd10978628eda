"""`portcheck advise`'s output for one target (report/advise.py's plan) or several (`--target trn2,trn3`): every
target's plan as `advise` prints it, then the plans side by side and which the data favours. JSON for several:
{"plans": [each plan's report], "comparison": ...}."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any, TextIO

from portcheck import __version__
from portcheck.findings import ScanResult
from portcheck.report.advise import plan_report, write_plan
from portcheck.report.json import SCHEMA_VERSION

if TYPE_CHECKING:
    from portcheck.advise.values import Plan


def write_plans(plans: list[tuple[Plan, ScanResult]], comparison: dict[str, Any] | None, output_format: str,
                stream: TextIO, color: bool) -> None:
    if comparison is None:
        (plan, result), = plans
        write_plan(plan, result, output_format, stream, color=color)
        return
    if output_format == "json":
        json.dump({"schema_version": SCHEMA_VERSION, "portcheck_version": __version__,
                   "plans": [plan_report(plan, result) for plan, result in plans],
                   "comparison": comparison}, stream, indent=2, ensure_ascii=False)
        stream.write("\n")
        return
    for plan, result in plans:
        buffer = io.StringIO()
        write_plan(plan, result, output_format, buffer, color)
        stream.write(buffer.getvalue() + "\n")
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=stream, force_terminal=color, no_color=not color, width=120, highlight=False)
    table = Table(show_header=True, header_style="bold", expand=False, title="side by side")
    table.add_column("")
    sides = comparison["targets"]
    for side in sides:
        table.add_column(side["chip"])
    for name, cell in _ROWS:
        table.add_row(name, *(escape(cell(side)) for side in sides))
    console.print(table)
    verdict = f"the data favours {comparison['favours']}: " if comparison["favours"] else ""
    console.print(f"[bold]{escape(verdict + comparison['why'])}[/bold]", soft_wrap=True)


def _memory(side: dict[str, Any]) -> str:
    if side["per_core_gib"] is None or side["budget_per_core_gib"] is None:
        return "-"
    return f"{side['per_core_gib']:.2f} of {side['budget_per_core_gib']:g}"


def _instance(side: dict[str, Any]) -> str:
    return f"{side['instance_count']} × {side['instance']}" if side["instance"] else "-"


def _cost(side: dict[str, Any]) -> str:
    return f"${side['usd_per_hour']:,.2f}" if side["usd_per_hour"] is not None else "no published price"


_ROWS = (
    ("fits", lambda s: "yes" if s["fits"] else "no documented shape"),
    ("instance", _instance),
    ("tp × dp", lambda s: f"{s['tp_degree']} × {s['dp']}" if s["tp_degree"] else "-"),
    ("cores / chips", lambda s: f"{s['cores']} / {s['chips']}" if s["cores"] else "-"),
    ("GiB per core", _memory),
    ("cost per hour", _cost),
)
