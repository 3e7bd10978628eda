"""The static pass's results kept between runs, so a file that has not changed is not parsed again.

There is one entry per file and set of effective settings: `<dir>/v1/<key>.json`, where the key hashes the
file's path as reported, the target, the enabled codes, and the version of everything a result depends on
(portcheck, its rules data and analysis code, libcst, Python). The entry holds the sha256 of the bytes that
were analysed and the result. It is used only when the bytes on disk hash the same; otherwise the file is
analysed and the entry replaced, so the cache holds one entry per file and never grows with edits.

Runs may share a cache: an entry is written beside its place and renamed into it, so a reader sees a whole
entry or none. An entry that cannot be read or does not have the shape expected is a miss and is rewritten.
Entries are JSON, not pickle: a cache directory can come from anywhere (a checkout, a CI cache restore) and
reading one must never run code.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from portcheck import __version__
from portcheck.atomic import replace_file
from portcheck.errors import UserError
from portcheck.findings import (
    Applicability,
    Edit,
    FileError,
    FileResult,
    FileTooLarge,
    Finding,
    Fix,
    Severity,
    read_bounded,
)
from portcheck.knowledge import rules_dir

LAYOUT = "v1"
DEFAULT_DIR = ".portcheck_cache"
ENVIRONMENT = "PORTCHECK_CACHE_DIR"
ENTRY_LIMIT = 64 * 2**20  # far above any real entry (a file's findings)

_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def code_version() -> str:
    """A hash of what a static result depends on besides the file: versions, rules data and analysis code."""
    digest = hashlib.sha256()
    digest.update(f"{__version__}\0{sys.version_info[:2]}\0".encode())
    # libcst's version without importing it (a fifth of a second): its generated _version.py.
    spec = importlib.util.find_spec("libcst")
    libcst_version = Path(spec.origin).parent / "_version.py" if spec and spec.origin else None
    sources = [libcst_version] if libcst_version else []
    sources += sorted(rules_dir().rglob("*.toml"))
    sources += sorted((_PACKAGE / "static").glob("*.py"))
    sources += [_PACKAGE / "findings.py", *sorted((_PACKAGE / "knowledge").glob("*.py"))]
    for source in sources:
        try:
            digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
        except OSError:
            digest.update(source.name.encode() + b"\0?\0")
    return digest.hexdigest()


class Cache:
    """Look-ups and stores for one run. Any trouble with the directory turns the cache off for the run, with
    one warning line, and the scan goes on."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.entries = directory / LAYOUT
        self.hits = 0
        self.problem: str | None = None
        self._salt = code_version()

    def key(self, path: str, chip: str, stack: str, enabled: frozenset[str], sdk: str = "") -> str:
        text = "\0".join((self._salt, path, chip, stack, ",".join(sorted(enabled)), sdk))
        return hashlib.sha256(text.encode(errors="surrogateescape")).hexdigest()[:40]

    def get(self, key: str, content: str, path: str) -> FileResult | None:
        """The result cached for `path` with this content; None for a miss, a damaged entry, or one whose findings
        belong to another file (a forged entry must not make a report quote some other file's lines)."""
        try:
            # a bounded read of a regular file: an entry that is a FIFO or a link to /dev/zero is a miss, not a hang
            entry = json.loads(read_bounded(str(self.entries / f"{key}.json"), ENTRY_LIMIT))
            if entry["content"] != content:
                return None
            result = _result(entry["result"])
            paths = {result.path, *(f.path for f in (*result.findings, *result.suppressed)),
                     *(e.path for e in result.errors)}
            if paths != {path}:
                return None
        except FileNotFoundError:
            return None
        except (OSError, FileTooLarge, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
            return None  # a damaged entry: analysed again and rewritten
        self.hits += 1
        return result

    def put(self, key: str, content: str, result: FileResult) -> None:
        if self.problem is not None:
            return
        data = json.dumps({"content": content, "result": _plain(result)}, separators=(",", ":")).encode()
        try:
            self._prepare()
            replace_file(self.entries / f"{key}.json", data, 0o644, durable=False)
        except OSError as exc:
            self.problem = f"cannot write the cache in {self.directory}: {exc.strerror or exc}; continuing without it"

    def _prepare(self) -> None:
        if self.entries.is_dir():
            return
        self.entries.mkdir(parents=True, exist_ok=True)
        # Like other tools' caches: git ignores it, and backup tools know it can be skipped.
        for name, text in ((".gitignore", "# created by portcheck\n*\n"),
                           ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n"
                                            "# This file is a cache directory tag created by portcheck.\n")):
            marker = self.directory / name
            if not marker.exists():
                replace_file(marker, text.encode(), 0o644, durable=False)


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class CacheRefused(Exception):
    """The default cache directory is not one portcheck may write to: the scan goes on without a cache."""


def directory_for(option: str | None, disabled: bool, root: Path) -> Path | None:
    """Where the cache lives: --cache-dir, else $PORTCHECK_CACHE_DIR, else .portcheck_cache at the project
    root; None with --no-cache."""
    if disabled:
        return None
    chosen = option or os.environ.get(ENVIRONMENT) or None
    if chosen is None:
        default = root / DEFAULT_DIR
        if default.is_symlink():  # committed to the repository, it would send the cache's writes anywhere
            raise CacheRefused(f"{default} is a symlink, which portcheck does not follow: continuing without the "
                               f"cache (remove it, or give the cache's place with --cache-dir or ${ENVIRONMENT})")
        return default
    if chosen.startswith("~") and not chosen.startswith(("~/", f"~{os.sep}")) and chosen != "~":
        raise UserError(f"cache directory {chosen!r}: only your own home (~/) is expanded; give the path")
    return Path(chosen).expanduser()


# ---- FileResult <-> JSON --------------------------------------------------------------------------------

def _plain(result: FileResult) -> dict[str, Any]:
    return {
        "path": result.path,
        "findings": [_plain_finding(f) for f in result.findings],
        "suppressed": [_plain_finding(f) for f in result.suppressed],
        "errors": [[e.path, e.message, e.line] for e in result.errors],
    }


def _plain_finding(f: Finding) -> list[Any]:
    fix = None
    if f.fix is not None:
        fix = [f.fix.applicability, f.fix.title,
               [[e.line, e.column, e.end_line, e.end_column, e.content] for e in f.fix.edits]]
    return [f.code, f.name, f.category, int(f.severity), f.message, f.path, f.line, f.column, f.end_line,
            f.end_column, list(f.evidence), fix, f.fingerprint, f.stem]


def _result(plain: dict[str, Any]) -> FileResult:
    return FileResult(
        path=str(plain["path"]),
        findings=tuple(_finding(f) for f in plain["findings"]),
        suppressed=tuple(_finding(f) for f in plain["suppressed"]),
        errors=tuple(FileError(str(p), str(m), None if line is None else int(line))
                     for p, m, line in plain["errors"]),
    )


def _finding(plain: list[Any]) -> Finding:
    (code, name, category, severity, message, path, line, column, end_line, end_column, evidence, fix,
     fingerprint, stem) = plain
    made_fix = None
    if fix is not None:
        applicability, title, edits = fix
        made_fix = Fix(Applicability(str(applicability)), str(title),
                       tuple(Edit(int(a), int(b), int(c), int(d), str(e)) for a, b, c, d, e in edits))
    return Finding(
        code=str(code), name=str(name), category=str(category), severity=Severity(int(severity)),
        message=str(message), path=str(path), line=int(line), column=int(column), end_line=int(end_line),
        end_column=int(end_column), evidence=tuple(str(e) for e in evidence), fix=made_fix,
        fingerprint=str(fingerprint), stem=str(stem),
    )
