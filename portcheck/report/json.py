"""JSON schema 1: the stable interface for bots and scripts; and JSON Lines."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, TextIO

from portcheck import __version__
from portcheck.escape import unicode_only
from portcheck.findings import Finding, ScanResult

SCHEMA_VERSION = 1


def finding_dict(f: Finding) -> dict[str, Any]:
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": f.fix.applicability,
            "title": f.fix.title,
            "edits": [
                {"line": e.line, "column": e.column, "end_line": e.end_line, "end_column": e.end_column,
                 "content": e.content}
                for e in f.fix.edits
            ],
        }
    return {
        "code": f.code, "name": f.name, "category": f.category, "severity": f.severity.label,
        "message": f.message, "path": f.path, "line": f.line, "column": f.column,
        "end_line": f.end_line, "end_column": f.end_column, "evidence": list(f.evidence),
        "fix": fix, "fingerprint": f.fingerprint,
    }


def report_dict(result: ScanResult) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "portcheck_version": __version__,
        "target": {"chip": result.target.chip, "stack": result.target.stack, "sdk": result.target.sdk},
        "findings": [finding_dict(f) for f in result.findings],
        "errors": [{"path": e.path, "message": e.message, "line": e.line} for e in result.errors],
        "summary": {
            "files": result.files,
            "findings": len(result.findings),
            "by_category": dict(sorted(Counter(f.category for f in result.findings).items())),
            "by_severity": dict(sorted(Counter(f.severity.label for f in result.findings).items())),
        },
    }
    if result.baselined:  # --baseline: how many known findings were left out
        report["summary"]["baselined"] = result.baselined
    if result.left_out:  # what the walk passed over (excluded, tests, build output, ...), and why
        report["left_out"] = [{"path": item.path, "reason": item.reason, "detail": item.detail}
                              for item in result.left_out]
    if result.trace is not None:
        # `portcheck trace`: what was captured and how, every op with its Neuron status, the shape probe.
        report.update(result.trace.to_json())
    return report


def write_statistics_json(result: ScanResult, stream: TextIO) -> None:
    """`--statistics --format json`: the counts `--statistics` prints, by code, category and severity; no finding."""
    by_code = Counter(f.code for f in result.findings)
    statistics = {
        "schema_version": SCHEMA_VERSION,
        "portcheck_version": __version__,
        "target": {"chip": result.target.chip, "stack": result.target.stack, "sdk": result.target.sdk},
        "statistics": {
            "files": result.files,
            "files_with_findings": len({f.path for f in result.findings}),
            "errors": len(result.errors),
            "findings": len(result.findings),
            "by_code": [{"code": code, "name": name, "count": by_code[code]} for code, name in
                        sorted({(f.code, f.name) for f in result.findings}, key=lambda c: (-by_code[c[0]], c[0]))],
            "by_category": dict(sorted(Counter(f.category for f in result.findings).items())),
            "by_severity": dict(sorted(Counter(f.severity.label for f in result.findings).items())),
        },
    }
    json.dump(statistics, stream, indent=2, ensure_ascii=False)
    stream.write("\n")


def write_json(result: ScanResult, stream: TextIO) -> None:
    json.dump(unicode_only(report_dict(result)), stream, indent=2, ensure_ascii=False)
    stream.write("\n")


def write_json_lines(result: ScanResult, stream: TextIO) -> None:
    """One finding object (schema 1's shape) a line; files that could not be analysed as
    `{"error": {...}}` lines, so a consumer can tell the two apart by their keys."""
    for f in result.findings:
        stream.write(json.dumps(unicode_only(finding_dict(f)), ensure_ascii=False) + "\n")
    for e in result.errors:
        stream.write(json.dumps(unicode_only({"error": {"path": e.path, "message": e.message, "line": e.line}}),
                                ensure_ascii=False) + "\n")
