"""portcheck's values in the protocol's terms: a finding or a file error as a diagnostic, a fix as text edits, a
`# noqa` comment as an edit. portcheck counts lines and columns from 1 in code points; the protocol from 0 in the
position encoding agreed with the client (UTF-16 unless it offers another), which the workspace's codec converts
to, so a line holding an emoji still gets the right range."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import PositionCodec

from portcheck.findings import Applicability, Edit, FileError, Finding, Severity
from portcheck.knowledge import load
from portcheck.report.links import first_url

SOURCE = "portcheck"
SEVERITIES = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning,
              Severity.INFO: types.DiagnosticSeverity.Information}


def text_range(lines: Sequence[str], codec: PositionCodec, line: int, column: int, end_line: int,
               end_column: int) -> types.Range:
    """portcheck's 1-based lines and columns (the end column exclusive) as a protocol range, clamped to the text."""
    def at(row: int, col: int) -> types.Position:
        row = min(max(row - 1, 0), len(lines))
        return types.Position(row, max(col - 1, 0))

    return codec.range_to_client_units(list(lines), types.Range(at(line, column), at(max(end_line, line),
                                                                                      end_column)))


def rule_url(code: str) -> str | None:
    """The page a rule's diagnostics link to: the first published place its source names, as SARIF's helpUri."""
    info = load().rules.get(code)
    return first_url(info.source) if info is not None else None


def diagnostic(finding: Finding, lines: Sequence[str], codec: PositionCodec, source: str = SOURCE) -> types.Diagnostic:
    url = rule_url(finding.code)
    return types.Diagnostic(
        range=text_range(lines, codec, finding.line, finding.column, finding.end_line, finding.end_column),
        message=finding.message, severity=SEVERITIES[finding.severity], code=finding.code, source=source,
        code_description=types.CodeDescription(href=url) if url else None,
        data={"fixable": finding.fix is not None})


def error_diagnostic(error: FileError, lines: Sequence[str], codec: PositionCodec) -> types.Diagnostic:
    """A file portcheck could not analyse (a syntax error, a crash in a check, a file over the size limit): one
    diagnostic over the line it names, else the first."""
    line = error.line or 1
    width = len(lines[line - 1]) if 0 < line <= len(lines) else 0
    return types.Diagnostic(range=text_range(lines, codec, line, 1, line, width + 1), message=error.message,
                            severity=types.DiagnosticSeverity.Error, source=SOURCE)


def text_edits(edits: Sequence[Edit], lines: Sequence[str], codec: PositionCodec) -> list[types.TextEdit]:
    return [types.TextEdit(text_range(lines, codec, e.line, e.column, e.end_line, e.end_column), e.content)
            for e in edits]


def fix_label(finding: Finding) -> tuple[str, bool]:
    """A fix's title, marked when it is unsafe, and whether it may be the preferred action (only a safe one)."""
    assert finding.fix is not None
    safe = finding.fix.applicability == Applicability.SAFE
    title = finding.fix.title or f"Fix {finding.code}"
    return (f"{title} ({finding.code})" if safe else f"{title} ({finding.code}, unsafe: check the result)"), safe


_NOQA = re.compile(r"#\s*noqa:\s*[A-Za-z]+[0-9]+(?:\s*,\s*[A-Za-z]+[0-9]+)*", re.IGNORECASE)


def noqa_edit(finding: Finding, lines: Sequence[str], codec: PositionCodec,
              python: bool = True) -> types.TextEdit | None:
    """The edit that adds `# noqa: CODE` to the finding's statement: to the code list of a `# noqa:` already on
    its last line, else at the end of the first of its lines that ends outside a string (a comment put inside a
    triple-quoted string would be text, not a comment). In a dependency file, on the finding's own line (what its
    suppressions cover). None when no line can take one."""
    if not python:
        if not 0 < finding.line <= len(lines):
            return None
        text = lines[finding.line - 1]
        match = _NOQA.search(text)
        end, content = ((match.end(), f", {finding.code}") if match
                        else (len(text.rstrip()), f"  # noqa: {finding.code}"))
        return types.TextEdit(text_range(lines, codec, finding.line, end + 1, finding.line, end + 1), content)
    tokens = _tokens(lines)
    if not tokens:
        return None
    for line in dict.fromkeys((finding.end_line, finding.line)):
        row = line - 1
        if not 0 <= row < len(lines) or any(t.type == tokenize.STRING and t.start[0] <= line < t.end[0]
                                            for t in tokens):
            continue
        text = lines[row]
        comment = next((t.start[1] for t in tokens if t.type == tokenize.COMMENT and t.start[0] == line), None)
        match = _NOQA.search(text, comment) if comment is not None else None
        end, content = ((match.end(), f", {finding.code}") if match
                        else (len(text.rstrip()), f"  # noqa: {finding.code}"))
        return types.TextEdit(text_range(lines, codec, line, end + 1, line, end + 1), content)
    return None


def _tokens(lines: Sequence[str]) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return []
