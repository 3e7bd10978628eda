"""Reports: the same ScanResult rendered for people (concise, full) or for programs (json, json-lines)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from portcheck.findings import ScanResult


def render(result: ScanResult, output_format: str, stream: TextIO, *, color: bool, statistics: bool,
           lines_for: Callable[[str], list[str]]) -> None:
    if output_format == "json":
        from portcheck.report.json import write_json

        write_json(result, stream)
    elif output_format == "json-lines":
        from portcheck.report.json import write_json_lines

        write_json_lines(result, stream)
    elif output_format == "sarif":
        from portcheck.report.sarif import write_sarif

        write_sarif(result, stream)
    elif output_format == "github":
        from portcheck.report.github import write_github

        write_github(result, stream)
    elif output_format == "rdjson":
        from portcheck.report.rdjson import write_rdjson

        write_rdjson(result, stream, lines_for)
    elif output_format == "full" and not statistics:
        from portcheck.report.full import write_full

        write_full(result, stream, color=color, lines_for=lines_for)
    else:
        from portcheck.report.concise import write_concise, write_statistics

        (write_statistics if statistics else write_concise)(result, stream, color=color)


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Write beside the destination and rename into place: a reader sees the old file or the whole new one,
    never half of one. A failure is one line (ConfigError), and no temporary file is left."""
    import os
    import tempfile

    from portcheck.config import ConfigError

    temporary = None
    try:
        directory = path.parent if str(path.parent) else Path(".")
        directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException as exc:
        if temporary:
            Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
