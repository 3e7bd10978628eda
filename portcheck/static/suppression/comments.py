"""Suppression comments: `# noqa: PC101`, `# portcheck: ignore[PC101]`, file-level `# portcheck: noqa`.

A line suppression covers every line of the statement the finding is in (for a compound statement,
its header), so a `# noqa` at the end of a call spread over five lines works. Blanket `# noqa` (no codes)
is honoured but never called unused: it may belong to flake8 or ruff. Codes that are not portcheck's
(`# noqa: E501`) are ignored the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FILE = re.compile(r"#\s*portcheck:\s*noqa(?::\s*(?P<codes>[^#]*))?", re.IGNORECASE)
_IGNORE = re.compile(r"#\s*portcheck:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
_SPLIT = re.compile(r"[\s,]+")

TOKENS = ("noqa", "NOQA", "portcheck")


@dataclass
class Suppression:
    line: int
    column: int
    end_column: int
    codes: frozenset[str] | None  # None: every code
    ours: bool  # written for portcheck, so an unused one is reported
    file_level: bool
    used: set[str] = field(default_factory=set)

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes


def _codes(text: str | None) -> frozenset[str]:
    return frozenset(c.upper() for c in _SPLIT.split(text or "") if c)


def parse_comment(text: str, line: int, column: int, end_column: int) -> list[Suppression]:
    """The suppressions one comment holds (a comment may carry several directives)."""
    found = []
    for match in _FILE.finditer(text):
        codes = _codes(match.group("codes"))
        found.append(Suppression(line, column, end_column, codes or None, True, True))
    for match in _IGNORE.finditer(text):
        codes = _codes(match.group("codes"))
        found.append(Suppression(line, column, end_column, codes or None, True, False))
    for match in _NOQA.finditer(text):
        if match.group("codes") is None:
            found.append(Suppression(line, column, end_column, None, False, False))
            continue
        ours = frozenset(c for c in _codes(match.group("codes")) if c.startswith("PC"))
        if ours:
            found.append(Suppression(line, column, end_column, ours, True, False))
    return found


def holds_file_suppression(text: str) -> bool:
    """Whether a line holds a file-level `# portcheck: noqa`."""
    return "portcheck" in text.lower() and _FILE.search(text) is not None


def might_hold_suppression(text: str) -> bool:
    return any(token in text for token in TOKENS)
