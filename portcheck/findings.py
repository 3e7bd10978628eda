"""The plain values that flow through portcheck: findings, fixes, errors, severities, categories."""

from __future__ import annotations

import enum
import errno
import hashlib
import os
import re
import stat
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, BinaryIO, Protocol

from portcheck.summaries import Summary

if TYPE_CHECKING:
    from portcheck.traced import TraceResult


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


class Category(enum.StrEnum):
    """The fixed vocabulary every rule belongs to one of; reports group and count by it. The one list: the catalog's
    files, the code families and the static packages are derived from it."""

    CUDA_API = "cuda-api"
    CUDA_LIBRARY = "cuda-library"
    DYNAMIC_SHAPE = "dynamic-shape"
    UNSUPPORTED_OP = "unsupported-op"
    DTYPE = "dtype"
    CUSTOM_ATTENTION = "custom-attention"
    HOST_SYNC = "host-sync"
    TRAINING = "training"
    DISTRIBUTED = "distributed"
    COMPILE = "compile"
    MEMORY = "memory"
    # Not one of the ten porting categories: the home of rules about portcheck's own comments (PC9xx).
    SUPPRESSION = "suppression"

    @property
    def family(self) -> str:
        """The hundreds digit of its codes (`--select PC2` selects a family): CONTRIBUTING.md, rule codes."""
        return _FAMILY[self]


_FAMILY = {
    Category.CUDA_API: "1", Category.DYNAMIC_SHAPE: "2", Category.UNSUPPORTED_OP: "3", Category.DTYPE: "3",
    Category.CUSTOM_ATTENTION: "4", Category.CUDA_LIBRARY: "5", Category.TRAINING: "6", Category.DISTRIBUTED: "6",
    Category.HOST_SYNC: "7", Category.COMPILE: "7", Category.MEMORY: "8", Category.SUPPRESSION: "9",
}
CATEGORIES = tuple(category.value for category in Category)


class Applicability(enum.StrEnum):
    """Whether a fix keeps the meaning on Neuron (`--fix`) or changes numerics or structure (`--unsafe-fixes`)."""

    SAFE = "safe"
    UNSAFE = "unsafe"


class Rated(Protocol):
    """What a finding takes from its rule's catalog entry (portcheck.knowledge.RuleInfo)."""

    @property
    def code(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def severity(self) -> Severity: ...


@dataclass(frozen=True)
class Edit:
    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
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
    stem: str = ""  # the fingerprint without the occurrence number: what identical findings of a file share
    # A condition only the project's call graph can settle (portcheck.static.semantic.graph): "forward" = a
    # finding only where a module's forward reaches the code, "device" = where a forward or a training step does,
    # "step" = where a training step does and no forward does.
    # Settled before any report; never in the output.
    requires: str = ""
    # Where the code runs, as the call graph settles it (RUNS); "" where no graph was built. Never in the output
    # formats; the report page splits the device step from the code around it by it.
    runs: str = ""
    # The value the finding is about outlives its function (stored on the object, registered, returned): set-up code
    # that makes it still hands it to the step. Never in the output formats.
    kept: bool = False
    # The parameter whose default (`device="cuda"`) the finding's value is: where every call in the project passes
    # that parameter, the default never applies. Marked "=" where the finding is the default itself (it sits in the
    # signature): then a call that passes on its caller's own parameter passes it too (what that caller's default
    # is, is the caller's finding). Never in the output formats.
    default_of: str = ""
    # The parameters the finding's value is made of, and nothing else: where every call in the project passes host
    # values (`.cpu()` copies, numpy) for them, the code works on the host there. Never in the output formats.
    host_if: tuple[str, ...] = ()
    # The parameter the finding's code runs only with: it sits in `if <param> is not None:` (or `if <param>:`) and
    # the parameter defaults to None or False. Where no call in the project passes it, that branch never runs.
    # Marked "!": the parameter whose absence it runs with (`if size is None:`); where every call passes it, that
    # branch never runs. Never in the output formats.
    unless_passed: str = ""

    @classmethod
    def of(cls, rule: Rated, message: str, path: str, line: int, column: int, end_line: int, end_column: int, *,
           severity: Severity | None = None, evidence: tuple[str, ...] = ("static",),
           fix: Fix | None = None) -> Finding:
        """The one way to word a finding of a rule: its code, name and category from the catalog, and its severity
        unless this occurrence's differs."""
        return cls(rule.code, rule.name, rule.category, severity or rule.severity, message, path, line, column,
                   end_line, end_column, evidence, fix)

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)


@dataclass(frozen=True)
class FileError:
    """A file portcheck could not analyse: one line saying why, and where."""

    path: str
    message: str
    line: int | None = None


# What one file tells the rest of the project (portcheck.static.semantic.summary reads it, the call graph in
# portcheck.static.semantic.graph uses it).
@dataclass(frozen=True)
class FileResult:
    path: str
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()
    suppressed: tuple[Finding, ...] = ()  # silenced by a suppression comment (SARIF reports them as such)
    summary: Summary | None = None  # None: not read (a file that failed, a dependency file, a large file)


# libcst holds a parsed file in several hundred times its size (a 3 MB generated file took 2.5 GB and half a
# minute): larger files are reported, not analysed, so that one of them cannot exhaust a machine's memory.
# `max-file-size` in the configuration changes it.
DEFAULT_MAX_FILE_BYTES = 32 * 2**20  # files over 1 MB are analysed a group of statements at a time


@dataclass(frozen=True)
class FileJob:
    """Everything analyse_file needs about one file; picklable for a process pool."""

    path: str  # as shown in reports (relative to the working directory)
    chip: str
    stack: str
    enabled: frozenset[str]
    data: bytes | None = None  # None: read from `location`
    location: str | None = None
    max_bytes: int = DEFAULT_MAX_FILE_BYTES  # larger files are an error entry, not analysed
    sdk: str = ""  # the Neuron SDK release whose facts apply ("": the newest the data knows)
    unreadable: str = ""  # a directory the walk could not list: why (reported as an error entry, never read)

    def read(self) -> bytes:
        """The file's bytes: those given, else the file's (an OSError says why not; FileTooLarge, a file over
        `max_bytes`, which is never read whole)."""
        if self.unreadable:
            raise OSError(self.unreadable)
        data = self.data if self.data is not None else read_bounded(self.location or self.path, self.max_bytes)
        if len(data) > self.max_bytes:
            raise FileTooLarge(len(data), self.max_bytes)
        return data


def open_regular(path: str, limit: int) -> BinaryIO:
    """A regular file opened for reading, refused (OSError, FileTooLarge) before any read when it is a directory,
    a FIFO (which would wait for a writer), a device (a symlink to `/dev/zero` never ends) or over `limit` bytes:
    the type and size come from the open descriptor."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    handle = open(descriptor, "rb", closefd=True)  # noqa: SIM115 -- handed to the caller, closed here on refusal
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "a directory") if stat.S_ISDIR(info.st_mode) else OSError(
                errno.EINVAL, "not a regular file (a FIFO, device or socket)")
        if info.st_size > limit:
            raise FileTooLarge(info.st_size, limit)
    except BaseException:
        handle.close()
        raise
    return handle


def read_bounded(path: str, limit: int) -> bytes:
    """A regular file's bytes, at most `limit` of them (FileTooLarge past that). The type and size come from the
    open descriptor, so a FIFO named `x.py` (which would wait for a writer), a symlink to `/dev/zero` (which never
    ends) or a sparse 4 GiB file is refused before anything is read; an OSError says why."""
    with open_regular(path, limit) as handle:
        info = os.fstat(handle.fileno())
        # read what fstat says is there (read(n) allocates n bytes first: a limit of 10 GB was a MemoryError on
        # every file), then, if the file grew meanwhile, the rest in pieces up to the limit
        wanted = info.st_size + 1
        pieces = [handle.read(wanted)]
        total = len(pieces[0])
        while total == wanted and total <= limit and (piece := handle.read(min(2**20, limit + 1 - total))):
            pieces.append(piece)
            total += len(piece)
            wanted = total
        return b"".join(pieces)


def python_lines(text: str) -> list[str]:
    """The lines as Python counts them: split at \n, \r\n and \r only. `str.splitlines` also splits at a form
    feed, \x1c-\x1e, \x85 and U+2028/U+2029, which Python's tokenizer keeps inside a line, so line numbers from
    the parser would point at the wrong text (suggestions, code frames, fingerprints)."""
    lines = _PYTHON_NEWLINE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


_PYTHON_NEWLINE = re.compile(r"\r\n|\r|\n")


class FileTooLarge(Exception):
    """A file over the size limit: reported, not analysed."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"too large to analyse: {size / 2**20:.1f} MB, over the {limit / 2**20:g} MB limit; raise max-file-size "
            "to analyse it")


@dataclass(frozen=True)
class Target:
    chip: str
    stack: str
    sdk: str = ""  # the Neuron SDK release whose facts applied


@dataclass(frozen=True)
class LeftOut:
    """A file or folder a scan did not read, and why: `scan --show-files`, the summary line, the report's "not
    scanned". A folder's path ends in "/" (what it holds was not walked, so not counted)."""

    path: str  # as reports name it: relative to the working directory
    reason: str  # one of LEFT_OUT_REASONS
    detail: str = ""  # the exclude pattern that matched, the size over the limit


# Where a finding's code runs: reached from a module's forward ("model") or a training step ("step"); only from
# the data pipeline ("host"); on a path only CUDA or another vendor takes ("not-neuron"); at a module's top level
# ("module"); in a function none of those reach ("other": set-up, scripts, utilities).
RUNS = ("model", "step", "host", "not-neuron", "module", "other")
DEVICE_STEP = frozenset({"model", "step"})
LEFT_OUT_REASONS = ("excluded", "build output", "tests", "ignored by git", "over the size limit",
                    "symlink out of the tree")


@dataclass
class ScanResult:
    target: Target
    files: int = 0
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)  # with --fix / --diff: what the fixes took care of
    fixing: bool = False  # a --fix / --diff run: the summary says what was fixed
    diff: str = ""  # with --diff: the unified diff of every file a fix would change
    trace: TraceResult | None = None  # `portcheck trace`: graph, ops, shapes and model facts for the reports
    suppressed: list[Finding] = field(default_factory=list)
    baselined: int = 0  # findings left out because the baseline file holds them
    warnings: list[str] = field(default_factory=list)  # one line each, for stderr (.gitignore not applied, ...)
    left_out: list[LeftOut] = field(default_factory=list)  # what the walk passed over, and why


_SPACE = re.compile(r"\s+")
_SCOPE = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+(\w+)")


class _Scopes:
    """The dotted names of the functions and classes around a line, by indentation: the nearest `def`/`class` line
    above with less indentation, then the nearest above that with less again, and so on. Read downward once for
    lines asked in order (a finding's), with a stack of the headers still open: linear in the file."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.read = 0  # lines read so far
        self.open: list[tuple[int, str]] = []  # (indentation, name), indentation strictly increasing

    def at(self, line: int) -> str:
        if not 0 < line <= len(self.lines):
            return ""
        if line - 1 < self.read:  # asked out of order: start again
            self.read, self.open = 0, []
        while self.read < line - 1:
            match = _SCOPE.match(self.lines[self.read])
            if match:
                indent = len(match.group(1))
                while self.open and self.open[-1][0] >= indent:
                    self.open.pop()
                self.open.append((indent, match.group(2)))
            self.read += 1
        text = self.lines[line - 1]
        indent = len(text) - len(text.lstrip())
        return ".".join(name for depth, name in self.open if depth < indent)


def fingerprinted(findings: list[Finding], lines: list[str], path: str) -> list[Finding]:
    """A fingerprint from the code, the path, the enclosing functions and classes and the flagged text (not its
    line), so moving code keeps it; `lines` are the file's. The static and the traced findings of a file get
    theirs the same way."""
    seen: dict[tuple[str, str, str], int] = defaultdict(int)
    out = []
    scopes = _Scopes(lines)
    for f in sorted(findings, key=lambda f: f.sort_key):
        snippet = "\n".join(lines[f.line - 1 : f.end_line])
        if f.line == f.end_line:
            snippet = snippet[f.column - 1 : f.end_column - 1]
        snippet = _SPACE.sub(" ", snippet).strip()
        scope = scopes.at(f.line)
        key = (f.code, scope, snippet)
        stem = f"{f.code}\0{path}\0{scope}\0{snippet}"
        digest = hashlib.sha256(f"{stem}\0{seen[key]}".encode(errors="surrogateescape")).hexdigest()[:16]
        seen[key] += 1
        stem_digest = hashlib.sha256(stem.encode(errors="surrogateescape")).hexdigest()[:16]
        out.append(replace(f, fingerprint=digest, stem=stem_digest))
    return out
