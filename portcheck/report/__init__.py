"""Reports: the same ScanResult rendered for people (concise, full) or for programs (json, json-lines)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from portcheck.findings import ScanResult


def render(result: ScanResult, output_format: str, stream: TextIO, *, color: bool, statistics: bool,
           lines_for: Callable[[str], list[str]]) -> None:
    if output_format == "json":
        from portcheck.report.json import write_json, write_statistics_json

        (write_statistics_json if statistics else write_json)(result, stream)
    elif output_format == "json-lines":
        from portcheck.report.json import write_json_lines

        write_json_lines(result, stream)
    elif output_format == "sarif":
        from portcheck.report.sarif import write_sarif

        write_sarif(result, stream)
    elif output_format == "github":
        from portcheck.report.github import write_github

        write_github(result, stream)
    elif output_format == "rdjson":
        from portcheck.report.rdjson import write_rdjson

        write_rdjson(result, stream, lines_for)
    elif output_format == "full" and not statistics:
        from portcheck.report.full import write_full

        write_full(result, stream, color=color, lines_for=lines_for)
    else:
        from portcheck.report.concise import write_concise, write_statistics

        (write_statistics if statistics else write_concise)(result, stream, color=color)
