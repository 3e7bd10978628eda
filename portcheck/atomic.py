"""Replacing a file whole: write beside it, flush to disk, rename into place. A reader sees the old file or the
whole new one, never half of one, and no temporary file is left behind, whatever goes wrong."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from portcheck.errors import UserError


def replace_file(path: Path, data: bytes, mode: int, durable: bool = True) -> None:
    """Put `data` at `path` with permission bits `mode`; an OSError says why not. `durable=False` skips the
    flush to disk, for files a crash may lose (a cache entry) but must never leave half-written."""
    directory = path.parent if str(path.parent) else Path(".")
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str, mode: int = 0o644) -> None:
    """Write a report, plan, script or baseline whole; a failure is one line (UserError)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, text.encode("utf-8"), mode)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
