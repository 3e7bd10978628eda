"""`portcheck advise --target trn2,trn3`: every target's plan as `advise` prints it, then the plans side by side
and which the data favours. JSON: {"plans": [each plan's report], "comparison": ...}."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, TextIO

from portcheck import __version__
from portcheck.findings import ScanResult
from portcheck.report.advise import plan_report, write_plan
from portcheck.report.json import SCHEMA_VERSION

if TYPE_CHECKING:
    from portcheck.advise.compare import Comparison, Side
    from portcheck.advise.values import Plan


def write_comparison(plans: list[tuple[Plan, ScanResult]], comparison: Comparison, output_format: str,
                     stream: TextIO, color: bool) -> None:
    if output_format == "json":
        json.dump({"schema_version": SCHEMA_VERSION, "portcheck_version": __version__,
                   "plans": [plan_report(plan, result) for plan, result in plans],
                   "comparison": comparison.to_json()}, stream, indent=2, ensure_ascii=False)
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
    for side in comparison.sides:
        table.add_column(side.chip)
    for name, cell in _ROWS:
        table.add_row(name, *(escape(cell(side)) for side in comparison.sides))
    console.print(table)
    verdict = f"the data favours {comparison.favours}: " if comparison.favours else ""
    console.print(f"[bold]{escape(verdict + comparison.why)}[/bold]", soft_wrap=True)


def _memory(side: Side) -> str:
    if side.per_core_gib is None or side.budget_gib is None:
        return "-"
    return f"{side.per_core_gib:.2f} of {side.budget_gib:g}"


def _cost(side: Side) -> str:
    return f"${side.usd_per_hour:,.2f}" if side.usd_per_hour is not None else "no published price"


_ROWS = (
    ("fits", lambda s: "yes" if s.fits else "no documented shape"),
    ("instance", lambda s: f"{s.instances} × {s.instance}" if s.instance else "-"),
    ("tp × dp", lambda s: f"{s.tp} × {s.dp}" if s.tp else "-"),
    ("cores / chips", lambda s: f"{s.cores} / {s.chips}" if s.cores else "-"),
    ("GiB per core", _memory),
    ("cost per hour", _cost),
)
