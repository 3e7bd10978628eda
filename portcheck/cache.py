"""The static pass's results kept between runs, so a file that has not changed is not parsed again.

There is one entry per file and set of effective settings: `<dir>/v1/<key>.json`, where the key hashes the
file's path as reported, the target, the enabled codes, and the version of everything a result depends on
(portcheck, its rules data and analysis code, libcst, Python). The entry holds the sha256 of the bytes that
were analysed and the result. It is used only when the bytes on disk hash the same; otherwise the file is
analysed and the entry replaced, so the cache holds one entry per file and never grows with edits.

Runs may share a cache: an entry is written beside its place and renamed into it, so a reader sees a whole
entry or none. An entry that cannot be read or does not have the shape expected is a miss and is rewritten.
Entries are JSON, not pickle: a cache directory can come from anywhere (a checkout, a CI cache restore) and
reading one must never run code; every entry is checked like any untrusted input (shape, the file it names,
positions inside the file). The default directory is trusted only when portcheck made it on this machine, as
this user: it holds `ORIGIN`, an HMAC of the directory's identity (device, inode, owner) under a key kept in
this user's own cache directory. One that came with the repository (committed, unpacked) lacks it and is not
used at all: a forged entry there would report a file clean. A directory named with --cache-dir or
$PORTCHECK_CACHE_DIR is the user's choice and trusted as such.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import importlib.util
import json
import os
import secrets
import stat
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
from portcheck.summaries import Summary

LAYOUT = "v1"
DEFAULT_DIR = ".portcheck_cache"
ENVIRONMENT = "PORTCHECK_CACHE_DIR"
ENTRY_LIMIT = 64 * 2**20  # far above any real entry (a file's findings)
ORIGIN = "ORIGIN"  # in the directory: proof that portcheck made it here (see the module's docstring)

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
    sources += sorted((_PACKAGE / "static").rglob("*.py"))  # the rule packages and the semantic model too
    sources += [_PACKAGE / "findings.py", _PACKAGE / "summaries.py", *sorted((_PACKAGE / "knowledge").glob("*.py"))]
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

    def get(self, key: str, content: str, path: str, size: int | None = None) -> FileResult | None:
        """The result cached for `path` with this content; None for a miss, a damaged entry, one whose findings
        belong to another file (a forged entry must not make a report quote some other file's lines), or one with a
        position outside a file of `size` bytes (a column of 6e9 would make a code frame of gigabytes)."""
        if self.problem is not None:
            return None
        if self.entries.is_symlink():
            self.problem = (f"{self.entries} is a symlink, which portcheck does not follow: continuing without the "
                            "cache")
            return None
        try:
            # a bounded read of a regular file: an entry that is a FIFO or a link to /dev/zero is a miss, not a hang
            entry = json.loads(read_bounded(str(self.entries / f"{key}.json"), ENTRY_LIMIT))
            if entry["content"] != content:
                return None
            result = _result(entry["result"])
            paths = {result.path, *(f.path for f in (*result.findings, *result.suppressed)),
                     *(e.path for e in result.errors)}
            if paths != {path} or (size is not None and not _inside(result, size)):
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
        if self.entries.is_symlink():  # a link committed in a directory the user named: never written through
            raise OSError(f"{self.entries} is a symlink, which portcheck does not follow")
        if self.entries.is_dir():
            return
        made = not self.directory.exists()
        self.entries.mkdir(parents=True, exist_ok=True)
        if made:
            replace_file(self.directory / ORIGIN, origin_mark(self.directory).encode(), 0o644, durable=False)
        # Like other tools' caches: git ignores it, and backup tools know it can be skipped.
        for name, text in ((".gitignore", "# created by portcheck\n*\n"),
                           ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n"
                                            "# This file is a cache directory tag created by portcheck.\n")):
            marker = self.directory / name
            if not marker.exists():
                replace_file(marker, text.encode(), 0o644, durable=False)


def _inside(result: FileResult, size: int) -> bool:
    """Every position of the result could be in a file of `size` bytes (lines and columns from 1 to size + 1)."""
    limit = size + 1
    for f in (*result.findings, *result.suppressed):
        if not (1 <= f.line <= f.end_line <= limit and 0 <= f.column <= limit and 0 <= f.end_column <= limit):
            return False
        edits = f.fix.edits if f.fix is not None else ()
        if not all(1 <= e.line <= e.end_line <= limit and 0 <= e.column <= limit and 0 <= e.end_column <= limit
                   and len(e.content) <= 16 * limit for e in edits):
            return False
    return all(e.line is None or 0 <= e.line <= limit for e in result.errors)


def _machine_key() -> bytes:
    """A random key made once per user and machine, in the user's own cache directory (never in a project), that
    a repository cannot know; b"" where there is no such place (the marks then tie a directory to its inode)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    place = Path(base) / "portcheck" / "machine-key"
    try:
        place.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            descriptor = os.open(place, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(secrets.token_hex(32))
        descriptor = os.open(place, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                return b""
            return handle.read(256).strip()
    except OSError:
        return b""


def origin_mark(directory: Path) -> str:
    """What `ORIGIN` says in a cache directory portcheck made here: the directory's identity under the key."""
    info = os.stat(directory)
    identity = f"portcheck-cache\0{os.getuid()}\0{info.st_dev}\0{info.st_ino}\0{info.st_uid}".encode()
    return hmac.new(_machine_key(), identity, hashlib.sha256).hexdigest()


def made_here(directory: Path) -> bool:
    """The directory holds the mark portcheck writes when it makes a cache directory on this machine."""
    try:
        mark = read_bounded(str(directory / ORIGIN), 1024).decode("ascii", errors="replace").strip()
        return hmac.compare_digest(mark, origin_mark(directory))
    except (OSError, FileTooLarge):
        return False


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
        if os.path.lexists(default) and not made_here(default):  # it came with the repository: forged entries
            raise CacheRefused(f"{default} was not made by portcheck on this machine (it came with the files?), so "
                               f"its entries are not trusted: continuing without the cache (remove it, or name a "
                               f"cache with --cache-dir or ${ENVIRONMENT})")
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
        "summary": None if result.summary is None else result.summary.plain(),
    }


def _plain_finding(f: Finding) -> list[Any]:
    fix = None
    if f.fix is not None:
        fix = [f.fix.applicability, f.fix.title,
               [[e.line, e.column, e.end_line, e.end_column, e.content] for e in f.fix.edits]]
    return [f.code, f.name, f.category, int(f.severity), f.message, f.path, f.line, f.column, f.end_line,
            f.end_column, list(f.evidence), fix, f.fingerprint, f.stem, f.requires, f.runs, f.kept,
            f.default_of, list(f.host_if), f.unless_passed]


def _result(plain: dict[str, Any]) -> FileResult:
    return FileResult(
        path=str(plain["path"]),
        findings=tuple(_finding(f) for f in plain["findings"]),
        suppressed=tuple(_finding(f) for f in plain["suppressed"]),
        errors=tuple(FileError(str(p), str(m), None if line is None else int(line))
                     for p, m, line in plain["errors"]),
        summary=None if plain.get("summary") is None else Summary.from_plain(plain["summary"]),
    )


def _finding(plain: list[Any]) -> Finding:
    (code, name, category, severity, message, path, line, column, end_line, end_column, evidence, fix,
     fingerprint, stem, requires, runs, kept, default_of, host_if, unless_passed) = plain
    made_fix = None
    if fix is not None:
        applicability, title, edits = fix
        made_fix = Fix(Applicability(str(applicability)), str(title),
                       tuple(Edit(int(a), int(b), int(c), int(d), str(e)) for a, b, c, d, e in edits))
    return Finding(
        code=str(code), name=str(name), category=str(category), severity=Severity(int(severity)),
        message=str(message), path=str(path), line=int(line), column=int(column), end_line=int(end_line),
        end_column=int(end_column), evidence=tuple(str(e) for e in evidence), fix=made_fix,
        fingerprint=str(fingerprint), stem=str(stem), requires=str(requires), runs=str(runs), kept=bool(kept),
        default_of=str(default_of), host_if=tuple(map(str, host_if)), unless_passed=str(unless_passed),
    )
