"""Reviewdog Diagnostic Format (rdjson): the findings as reviewdog's DiagnosticResult, fixes as suggestions
(`reviewdog -f=rdjson`)."""

from __future__ import annotations

import json
from typing import TextIO

from portcheck.findings import Edit, ScanResult, Severity

SEVERITIES = {Severity.ERROR: "ERROR", Severity.WARNING: "WARNING", Severity.INFO: "INFO"}


def rdjson(result: ScanResult) -> dict:
    diagnostics = []
    for f in result.findings:
        diagnostic = {
            "message": f.message,
            "location": {"path": f.path, "range": {"start": {"line": f.line, "column": f.column},
                                                   "end": {"line": f.end_line, "column": f.end_column}}},
            "severity": SEVERITIES[f.severity],
            "source": {"name": "portcheck"},
            "code": {"value": f.code},
            "original_output": f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}",
        }
        if f.fix is not None and f.fix.applicability == "safe":
            diagnostic["suggestions"] = [_suggestion(e) for e in f.fix.edits]
        diagnostics.append(diagnostic)
    for e in result.errors:
        diagnostics.append({"message": e.message, "severity": "ERROR", "source": {"name": "portcheck"},
                            "location": {"path": e.path, "range": {"start": {"line": e.line or 1}}}})
    return {"source": {"name": "portcheck", "url": "https://pypi.org/project/portcheck/"}, "severity": "WARNING",
            "diagnostics": diagnostics}


def write_rdjson(result: ScanResult, stream: TextIO) -> None:
    json.dump(rdjson(result), stream, indent=2, ensure_ascii=False)
    stream.write("\n")


def _suggestion(edit: Edit) -> dict:
    return {"range": {"start": {"line": edit.line, "column": edit.column},
                      "end": {"line": edit.end_line, "column": edit.end_column}}, "text": edit.content}
