"""Writing files without replacing what must not be replaced.

`replace_file` puts new bytes at a path whole: written beside it, flushed, renamed into place, so a reader sees
the old file or the whole new one and no temporary file is left behind, whatever goes wrong. `write_text`
(reports, plans, scripts, baselines) and `replace_keeping` (`--fix`) decide first what the path is:

- a new path: created with the umask's mode, like any other program's output;
- a regular file: replaced whole, keeping its mode, owner and extended attributes; refused where a shell's `>`
  would not write (a 0444 file, another user's 0644 file); another user's file this user may write is written
  in place (`-o`), as a shell would, or not fixed (`--fix`), since replacing it would change its owner;
- a symlink to a regular file: refused, never written through (a committed link may point anywhere);
- a terminal, `/dev/null`, a pipe or a FIFO (`-o /dev/stdout`, `-o >(gzip > x)`): written in place, as a shell
  redirection would, never replaced by a regular file; `/dev/stdout`, `/dev/stderr` and `/dev/fd/N` are the
  open descriptors themselves;
- anything else (a directory, a block device, a socket, a symlink to nothing) is refused with one line.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import stat
import sys
import tempfile
import time
from pathlib import Path

from portcheck.errors import UserError
from portcheck.escape import printable

_DESCRIPTOR = re.compile(r"/(?:dev/fd|proc/self/fd)/(\d+)")


class WouldChangeOwner(UserError):
    """Replacing the file would give it another owner or group (only root may give a file away)."""


def replace_file(path: Path, data: bytes, mode: int, durable: bool = True,
                 owner: tuple[int, int] | None = None, attributes_from: Path | None = None) -> None:
    """Put `data` at `path` with permission bits `mode` (and `owner`, and the extended attributes of
    `attributes_from`, where allowed); an OSError says why not. `durable=False` skips the flush to disk, for
    files a crash may lose (a cache entry) but must never leave half-written."""
    directory = path.parent if str(path.parent) else Path(".")
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            if owner is not None:
                try:  # only root may give a file away, or a group this user is not in
                    os.fchown(handle.fileno(), *owner)
                except PermissionError:
                    raise WouldChangeOwner("replacing it would change its owner or group") from None
            if attributes_from is not None:
                _copy_attributes(attributes_from, handle.fileno())
            os.fchmod(handle.fileno(), mode)  # after fchown, which clears set-id bits
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def writer_elsewhere(path: Path) -> int | None:
    """A process other than this one that holds `path` open for writing (its pid), where the system says so
    (Linux's /proc; elsewhere None). Replacing the file would cut such a writer off: what it appends after the
    rename goes to the old, unlinked file and is lost. (A snapshot of the system's writers, at most 5 s old.)"""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return _writers(int(time.monotonic() // 5)).get((info.st_dev, info.st_ino))


@functools.lru_cache(maxsize=1)
def _writers(period: int) -> dict[tuple[int, int], int]:
    """(device, inode) -> the pid of a process holding it open for writing, for every process this user can see."""
    found: dict[tuple[int, int], int] = {}
    try:
        processes = os.listdir("/proc")
    except OSError:
        return found
    me = str(os.getpid())
    for pid in processes:
        if not pid.isdigit() or pid == me:
            continue
        try:
            descriptors = os.listdir(f"/proc/{pid}/fdinfo")
        except OSError:
            continue
        for fd in descriptors:
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as handle:
                    flags = next((line for line in handle.read(4096).splitlines() if line.startswith(b"flags:")), b"")
                if not flags or int(flags.split()[1], 8) & (os.O_WRONLY | os.O_RDWR) == 0:
                    continue
                target = os.stat(f"/proc/{pid}/fd/{fd}")
            except (OSError, ValueError, IndexError):
                continue
            if stat.S_ISREG(target.st_mode):
                found.setdefault((target.st_dev, target.st_ino), int(pid))
    return found


def _copy_attributes(source: Path, descriptor: int) -> None:
    if not hasattr(os, "listxattr"):
        return
    with contextlib.suppress(OSError):
        for name in os.listxattr(source):
            with contextlib.suppress(OSError):
                os.setxattr(descriptor, name, os.getxattr(source, name))


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def replace_keeping(path: Path, data: bytes, durable: bool = True) -> None:
    """Replace an existing regular file's content whole, keeping mode, owner and extended attributes. Refused (a
    UserError, or an OSError) where a shell's `>` would not write or where replacing would change what the file
    is: a symlink (never written through: a committed link may point anywhere), a file with other hard links (a
    rename would split them), a file this user may not write (a 0444 file, another user's 0644 file), a file whose
    owner or group could not be kept (WouldChangeOwner)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise UserError(f"it is a symlink (to {printable(os.readlink(path))}), which portcheck never writes through")
    if not stat.S_ISREG(info.st_mode):
        raise UserError("not a regular file")
    if info.st_nlink > 1:
        raise UserError(f"it has {info.st_nlink} hard links, which replacing it would split")
    if not _writable(path):
        raise UserError("permission denied: this user may not write it")
    if os.geteuid() != 0 and info.st_uid != os.geteuid():
        raise WouldChangeOwner(f"it belongs to another user (uid {info.st_uid}), which replacing it would change")
    replace_file(path, data, stat.S_IMODE(info.st_mode), durable, owner=(info.st_uid, info.st_gid),
                 attributes_from=path)


def _writable(path: Path) -> bool:
    if os.access in os.supports_effective_ids:
        return os.access(path, os.W_OK, effective_ids=True)
    return os.access(path, os.W_OK)


def write_text(path: Path, text: str, executable: bool = False) -> None:
    """Write a report, plan, script or baseline whole (see the module's docstring for what `path` may be); a
    failure is one line (UserError)."""
    data = text.encode("utf-8", "backslashreplace")  # a file name's undecodable bytes, as escapes
    try:
        _write(path, data, executable)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.ENXIO:
            reason = "no process is reading that FIFO"
        raise UserError(f"cannot write {path}: {reason}") from None
    except UserError as exc:
        raise UserError(f"cannot write {path}: {exc}") from None


def _write(path: Path, data: bytes, executable: bool) -> None:
    descriptor = _DESCRIPTOR.fullmatch(os.path.abspath(path))
    named = {"/dev/stdout": 1, "/dev/stderr": 2}.get(os.path.abspath(path))
    if descriptor or named is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        _write_all(named if named is not None else int(descriptor.group(1)) if descriptor else 1, data)
        return
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UserError("it is a symlink to a file that does not exist") from None
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, data, (0o777 if executable else 0o666) & ~_umask())
        return
    kind = info.st_mode
    if stat.S_ISDIR(kind):
        raise UserError("it is a directory")
    if stat.S_ISCHR(kind) or stat.S_ISFIFO(kind):
        _write_in_place(path, data)
    elif not stat.S_ISREG(kind):
        raise UserError("not a regular file, a terminal, a device like /dev/null or a pipe")
    elif info.st_nlink > 1:
        _write_in_place(path, data, truncate=True)  # replacing it would split its hard links
    else:
        try:
            replace_keeping(path, data)
        except WouldChangeOwner:
            _write_in_place(path, data, truncate=True)  # as a shell's `>` would: the owner stays


def _write_in_place(path: Path, data: bytes, truncate: bool = False) -> None:
    # O_NONBLOCK: opening a FIFO nobody reads fails at once (ENXIO) instead of waiting for ever.
    descriptor = os.open(path, os.O_WRONLY | os.O_NONBLOCK | (os.O_TRUNC if truncate else 0))
    try:
        os.set_blocking(descriptor, True)
        _write_all(descriptor, data)
    finally:
        os.close(descriptor)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]
