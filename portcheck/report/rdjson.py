"""Reviewdog Diagnostic Format (rdjson): the findings as reviewdog's DiagnosticResult, fixes as suggestions
(`reviewdog -f=rdjson`). Its columns count UTF-8 bytes (reviewdog/reviewdog proto/rdf: Position.column), where
portcheck's count characters: positions are converted with the file's lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

from portcheck.escape import unicode_only
from portcheck.findings import ScanResult, Severity
from portcheck.report.review import fixed_lines

SEVERITIES = {Severity.ERROR: "ERROR", Severity.WARNING: "WARNING", Severity.INFO: "INFO"}


def rdjson(result: ScanResult, lines_for: Callable[[str], list[str]] = lambda path: []) -> dict[str, Any]:
    diagnostics: list[dict[str, Any]] = []
    for f in result.findings:
        lines = lines_for(f.path)
        diagnostic: dict[str, Any] = {
            "message": f.message,
            "location": {"path": f.path, "range": _range(lines, f.line, f.column, f.end_line, f.end_column)},
            "severity": SEVERITIES[f.severity],
            "source": {"name": "portcheck"},
            "code": {"value": f.code},
            "original_output": f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}",
        }
        fixed = fixed_lines(f, lines)
        if fixed is not None:  # one suggestion over the finding's whole lines, as reviewdog wants it
            diagnostic["suggestions"] = [{"range": {"start": {"line": f.line, "column": 1},
                                                    "end": {"line": f.end_line + 1, "column": 1}},
                                          "text": fixed + "\n" if fixed else ""}]
        diagnostics.append(diagnostic)
    for e in result.errors:
        diagnostics.append({"message": e.message, "severity": "ERROR", "source": {"name": "portcheck"},
                            "location": {"path": e.path, "range": {"start": {"line": e.line or 1}}}})
    return {"source": {"name": "portcheck", "url": "https://pypi.org/project/portcheck/"}, "severity": "WARNING",
            "diagnostics": diagnostics}


def write_rdjson(result: ScanResult, stream: TextIO, lines_for: Callable[[str], list[str]]) -> None:
    json.dump(unicode_only(rdjson(result, lines_for)), stream, indent=2, ensure_ascii=False)
    stream.write("\n")


def _range(lines: list[str], line: int, column: int, end_line: int, end_column: int) -> dict[str, dict[str, int]]:
    return {"start": {"line": line, "column": _byte_column(lines, line, column)},
            "end": {"line": end_line, "column": _byte_column(lines, end_line, end_column)}}


def _byte_column(lines: list[str], line: int, column: int) -> int:
    if 0 < line <= len(lines):
        return len(lines[line - 1][: column - 1].encode("utf-8")) + 1
    return column
