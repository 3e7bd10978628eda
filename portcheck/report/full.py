"""The full report: each finding with its code frame, a caret under the range, the reason on Neuron,
where that reason is written down, and the fix when one is offered. Rendered with rich."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from portcheck.escape import printable
from portcheck.findings import ScanResult, Severity
from portcheck.knowledge import load
from portcheck.report.concise import evidence_label, summary_line, terminal_path
from portcheck.report.links import source_links

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.INFO: "bold cyan"}


def _source(source: str, color: bool) -> Text:
    """The rule's sources; on a terminal, each that names a published page is a hyperlink to it (OSC 8)."""
    text = Text("  source: ", "dim")
    for index, link in enumerate(source_links(source)):
        if index:
            text.append("; ", "dim")
        text.append(link.text, f"dim link {link.url}" if color and link.url else "dim")
    return text


def write_full(result: ScanResult, stream: TextIO, *, color: bool, lines_for: Callable[[str], list[str]]) -> None:
    console = Console(file=stream, color_system="auto" if color else None, force_terminal=color,
                      no_color=not color, highlight=False, soft_wrap=True)
    rules = load().rules
    for f in result.findings:
        console.print(Text.assemble((f"{printable(terminal_path(f.path))}:{f.line}:{f.column}: ", "bold"),
                                    (f.code, _STYLE[f.severity]), f" [{f.severity.label}] {f.name}",
                                    (f" {evidence_label(result, f)}".rstrip(), "dim")))
        console.print(f"  {escape(printable(f.message))}")
        lines = lines_for(f.path)
        if 0 < f.line <= len(lines):
            gutter = len(str(f.end_line)) + 1
            for number in range(max(1, f.line - 1), min(len(lines), f.end_line) + 1):
                code = printable(lines[number - 1].rstrip("\r\n"))
                console.print(Text.assemble((f"{number:>{gutter}} | ", "dim"), code))
                if number == f.line:
                    end = f.end_column if f.end_line == f.line else len(lines[number - 1].rstrip("\r\n")) + 1
                    caret = " " * (f.column - 1) + "^" * max(1, end - f.column)
                    console.print(Text.assemble(" " * gutter + " | ", (caret, _STYLE[f.severity])))
        info = rules.get(f.code)
        if info is not None:
            console.print(Text.assemble(("  on Neuron: ", "bold"), info.neuron))
            console.print(_source(info.source, color))
        if f.fix is not None:
            console.print(Text.assemble(("  fix", "bold green"), f" ({f.fix.applicability}): {f.fix.title}"))
        console.print()
    for e in result.errors:
        where = f"{e.path}:{e.line}" if e.line else e.path
        console.print(Text.assemble((f"{printable(where)}: ", "bold"), ("error", "bold red"),
                                    f": {printable(e.message)}"))
    console.print(summary_line(result))
