"""SARIF 2.1.0 for code scanning (GitHub, Azure DevOps, IDEs): every rule with its documentation, every finding
with its region, fingerprint and fix, suppressed findings as suppressions, one run per target."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from portcheck import __version__
from portcheck.escape import unicode_only
from portcheck.findings import Edit, Finding, ScanResult, Severity
from portcheck.knowledge import load
from portcheck.report.links import first_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
FINGERPRINT = "portcheck/v1"  # line-independent: code, path and the flagged text


def sarif_log(result: ScanResult, cwd: Path | None = None) -> dict[str, Any]:
    from portcheck.report.ruledoc import rule_doc

    rules = sorted(load().rules.values(), key=lambda r: r.code)
    index = {r.code: i for i, r in enumerate(rules)}
    driver = {
        "name": "portcheck",
        "version": __version__,
        "semanticVersion": __version__,
        "informationUri": "https://pypi.org/project/portcheck/",
        "rules": [{
            "id": r.code,
            "name": _pascal(r.name),
            "shortDescription": {"text": r.summary.replace("`", "")},
            "fullDescription": {"text": r.neuron.replace("`", "")},
            "help": {"text": rule_doc(r), "markdown": rule_doc(r)},
            **({"helpUri": url} if (url := first_url(r.source)) else {}),
            "defaultConfiguration": {"level": LEVELS[r.severity], "enabled": r.default},
            "properties": {"category": r.category, "tags": ["neuron", r.category], "source": r.source},
        } for r in rules],
    }
    target = f"{result.target.chip}-{result.target.stack}"
    run = {
        "tool": {"driver": driver},
        "automationDetails": {"id": f"portcheck/{target}/"},
        "originalUriBaseIds": {"SRCROOT": {"uri": (cwd or Path.cwd()).resolve().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_result(f, index) for f in result.findings]
                   + [_result(f, index, suppressed=True) for f in result.suppressed],
        "invocations": [{
            "executionSuccessful": True,
            "toolExecutionNotifications": [
                {"level": "error", "message": {"text": e.message},
                 "locations": [{"physicalLocation": _place(e.path, e.line or 1, 1, e.line or 1, 0)}]}
                for e in result.errors],
        }],
        "properties": {"target": {"chip": result.target.chip, "stack": result.target.stack,
                                   "sdk": result.target.sdk}},
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def write_sarif(result: ScanResult, stream: TextIO) -> None:
    json.dump(unicode_only(sarif_log(result)), stream, indent=2, ensure_ascii=False)
    stream.write("\n")


def _result(f: Finding, index: dict[str, int], suppressed: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": index[f.code],
        "level": LEVELS[f.severity],
        "message": {"text": f"{f.code} {f.name}: {f.message}"},
        "locations": [{"physicalLocation": _place(f.path, f.line, f.column, f.end_line, f.end_column)}],
        "partialFingerprints": {FINGERPRINT: f.fingerprint},
        "properties": {"category": f.category, "evidence": list(f.evidence)},
    }
    if f.fix is not None:
        out["fixes"] = [{
            "description": {"text": f"{f.fix.title} ({f.fix.applicability} fix)"},
            "artifactChanges": [{"artifactLocation": _artifact(f.path),
                                 "replacements": [_replacement(e) for e in f.fix.edits]}],
        }]
    if suppressed:
        out["suppressions"] = [{"kind": "inSource", "justification": "a portcheck / noqa comment"}]
    return out


def _place(path: str, line: int, column: int, end_line: int, end_column: int) -> dict[str, Any]:
    region = {"startLine": max(line, 1)}
    if column:
        region["startColumn"] = column
    if end_line:
        region["endLine"] = max(end_line, region["startLine"])
    if end_column and (end_line > line or end_column > column):
        region["endColumn"] = end_column
    return {"artifactLocation": _artifact(path), "region": region}


def _artifact(path: str) -> dict[str, str]:
    location = {"uri": quote(os.fsencode(Path(path).as_posix()))}  # a name that is not UTF-8: its bytes
    if not Path(path).is_absolute():
        location["uriBaseId"] = "SRCROOT"
    return location


def _replacement(edit: Edit) -> dict[str, Any]:
    """An edit as SARIF's deleted region (empty for an insertion) and inserted text."""
    region = {"startLine": edit.line, "startColumn": edit.column, "endLine": edit.end_line,
              "endColumn": edit.end_column}
    return {"deletedRegion": region, "insertedContent": {"text": edit.content}}


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))
