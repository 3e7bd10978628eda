"""Reading a file's bytes and decoding them the way Python would (BOM, PEP 263 coding cookie)."""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    """The bytes are not Python source text; `line` points at the first bad line when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class Source:
    text: str
    encoding: str


def decode(data: bytes) -> Source:
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise SourceError("binary file: contains NUL bytes, not Python source", line)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" in str(exc):
            encoding = "utf-8"  # no cookie and not UTF-8: say which byte, below
        else:
            # detect_encoding's messages are already one line ("unknown encoding: latin-9").
            raise SourceError(f"bad encoding declaration: {exc.msg}", getattr(exc, "lineno", None) or 1) from None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SourceError(
            f"cannot decode byte {data[exc.start]:#04x} as {encoding}; "
            "declare the file's encoding with a coding cookie (PEP 263) or save it as UTF-8",
            line,
        ) from None
    except LookupError:
        raise SourceError(f"unknown encoding: {encoding}", 1) from None
    return Source(text=text, encoding=encoding)
