"""GitHub Actions workflow commands: one `::error` / `::warning` / `::notice` line a finding, which GitHub turns
into annotations on the files; a closing notice when there are more than a step shows."""

from __future__ import annotations

from collections import Counter
from typing import TextIO

from portcheck.findings import ScanResult, Severity

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
# A step shows 10 error, 10 warning and 10 notice annotations (actions/toolkit docs/problem-matchers.md,
# "Limitations"); the rest stay in the log only.
SHOWN_PER_KIND = 10


def write_github(result: ScanResult, stream: TextIO) -> None:
    findings = sorted(result.findings, key=lambda f: (-f.severity, f.sort_key))
    counts = Counter(COMMANDS[f.severity] for f in findings)
    counts["error"] += len(result.errors)
    over = {kind: n for kind, n in counts.items() if n > SHOWN_PER_KIND}
    if over:  # first, so it is among the annotations a step shows
        hidden = ", ".join(f"{n - SHOWN_PER_KIND} of {n} {kind}s" for kind, n in sorted(over.items()))
        text = (f"GitHub shows {SHOWN_PER_KIND} annotations of each kind a step: {hidden} are only in this log "
                "(upload --format sarif to code scanning for all of them)")
        stream.write(f"::warning title=portcheck::{_data(text)}\n")
    for f in findings:
        one_line = f.end_line == f.line  # GitHub takes columns only for an annotation on one line
        properties = {"file": f.path, "line": f.line, "col": f.column if one_line else None,
                      "endLine": f.end_line, "endColumn": f.end_column if one_line else None,
                      "title": f"{f.code} {f.name}"}
        text = ",".join(f"{k}={_property(str(v))}" for k, v in properties.items() if v is not None)
        stream.write(f"::{COMMANDS[f.severity]} {text}::{_data(f.message)}\n")
    for e in result.errors:
        where = f"file={_property(e.path)}" + (f",line={e.line}" if e.line else "")
        stream.write(f"::error {where},title=portcheck could not analyse this file::{_data(e.message)}\n")


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
