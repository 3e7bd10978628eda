"""PC900: a suppression comment that suppresses nothing, and how suppressions apply to a file's findings."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from portcheck.findings import FileResult, Finding, fingerprinted
from portcheck.knowledge import load
from portcheck.rules import Rule, rule
from portcheck.static.suppression.comments import Suppression

if TYPE_CHECKING:  # the engine's types; importing the rule must not import the engine
    from portcheck.static.check import Hit
    from portcheck.static.positions import Positions


@rule
class UnusedSuppression(Rule):
    """## What it does
    a `# noqa: PC…` or `# portcheck: ignore[…]` comment that suppresses nothing
    """

    code = "PC900"
    message = "unused {kind}: {problems}; remove it"


def statement_lines(hit: Hit, finding: Finding, positions: Positions) -> tuple[int, int]:
    """The lines a suppression comment may sit on to cover a finding: those of its whole statement."""
    first, last = finding.line, finding.end_line
    statement = hit.statement
    if statement is not None:
        start, end = positions.statement_lines(statement, hit.chain)
        first = min(first, start)
        last = max(last, end)
    return first, last


def apply_suppressions(findings: list[Finding], hits: list[Hit], positions: Positions, suppressions: list[Suppression],
                       enabled: frozenset[str], path: str) -> tuple[list[Finding], list[Finding]]:
    """The findings kept, and those a suppression comment silenced."""
    file_level = [s for s in suppressions if s.file_level]
    by_line: dict[int, list[Suppression]] = defaultdict(list)
    for s in suppressions:
        if not s.file_level:
            by_line[s.line].append(s)
    kept: list[Finding] = []
    silenced: list[Finding] = []
    for finding, hit in zip(findings, hits, strict=True):
        first, last = statement_lines(hit, finding, positions)
        suppressed = False
        for s in file_level + [s for line in range(first, last + 1) for s in by_line.get(line, ())]:
            if s.covers(finding.code):
                s.used.add(finding.code)
                suppressed = True
        (silenced if suppressed else kept).append(finding)
    if UnusedSuppression.code in enabled:
        kept.extend(_unused(suppressions, enabled, path))
    return kept, silenced


def apply_line_suppressions(findings: list[Finding], suppressions: list[Suppression], enabled: frozenset[str],
                            path: str) -> tuple[list[Finding], list[Finding]]:
    """The same for a file that is not Python (a requirements file): a comment covers findings on its own line."""
    kept: list[Finding] = []
    silenced: list[Finding] = []
    for finding in findings:
        covering = [s for s in suppressions if (s.file_level or s.line == finding.line) and s.covers(finding.code)]
        for s in covering:
            s.used.add(finding.code)
        (silenced if covering else kept).append(finding)
    if UnusedSuppression.code in enabled:
        kept.extend(_unused(suppressions, enabled, path))
    return kept, silenced


def file_result(path: str, kept: list[Finding], silenced: list[Finding], lines: list[str]) -> FileResult:
    """A file's findings and suppressed findings, fingerprinted in one numbering, so that a silenced finding never
    shares a fingerprint with a live twin."""
    quiet = Counter((f.sort_key, f.message) for f in silenced)
    live, suppressed = [], []
    for finding in fingerprinted([*kept, *silenced], lines, path):
        key = (finding.sort_key, finding.message)
        if quiet[key]:
            quiet[key] -= 1
            suppressed.append(finding)
        else:
            live.append(finding)
    return FileResult(path, findings=tuple(live), suppressed=tuple(suppressed))


def _unused(suppressions: list[Suppression], enabled: frozenset[str], path: str) -> list[Finding]:
    rules = load().rules
    info = UnusedSuppression.info()
    out = []
    for s in suppressions:
        if not s.ours:
            continue
        if s.codes is None:
            problems = [] if s.used else ["it suppresses nothing"]
        else:
            unknown = sorted(c for c in s.codes if c not in rules)
            unused = sorted(c for c in s.codes if c in rules and c in enabled and c not in s.used)
            problems = [f"no {c} finding here" for c in unused] + [f"{c} is not a portcheck rule" for c in unknown]
        if problems:
            kind = "file-level suppression" if s.file_level else "suppression"
            out.append(Finding(
                code=info.code, name=info.name, category=info.category, severity=info.severity,
                message=UnusedSuppression.format(kind=kind, problems="; ".join(problems)),
                path=path, line=s.line, column=s.column, end_line=s.line, end_column=s.end_column,
            ))
    return out
