"""The plain values that flow through portcheck: findings, fixes, errors, severities, categories."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(enum.IntEnum):
    """How bad a finding is; ordered so that `severity >= fail_level` reads naturally."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


CATEGORIES = (
    "cuda-api",
    "cuda-library",
    "dynamic-shape",
    "unsupported-op",
    "dtype",
    "custom-attention",
    "host-sync",
    "training",
    "distributed",
    "compile",
    "memory",
    # Not in DESIGN.md's table: the home of rules about portcheck's own comments (PC9xx).
    "suppression",
)


@dataclass(frozen=True)
class Edit:
    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True)
class Fix:
    applicability: str  # "safe" or "unsafe"
    title: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    category: str
    severity: Severity
    message: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    evidence: tuple[str, ...] = ("static",)
    fix: Fix | None = None
    fingerprint: str = ""

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)


@dataclass(frozen=True)
class FileError:
    """A file portcheck could not analyse: one line saying why, and where."""

    path: str
    message: str
    line: int | None = None


@dataclass(frozen=True)
class FileResult:
    path: str
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()


@dataclass(frozen=True)
class Target:
    chip: str
    stack: str


@dataclass
class ScanResult:
    target: Target
    files: int = 0
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)  # with --fix / --diff: what the fixes took care of
    fixing: bool = False  # a --fix / --diff run: the summary says what was fixed
    diff: str = ""  # with --diff: the unified diff of every file a fix would change
    trace: dict | None = None  # `portcheck trace`: graph, ops, shapes and model facts for the reports
