"""Text from a scanned tree (file names, messages quoting code, code lines) made safe for the medium it is shown in:
a terminal never receives an escape sequence or a line break it did not ask for, and a markdown table cell
stays one cell of plain text."""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
from typing import Any, NoReturn

# C0 controls but the tab, DEL, C1 controls, the Unicode line and paragraph separators, and lone surrogates (the
# bytes of a file name that is not UTF-8, as Python decodes them).
_UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character, separator and undecodable byte written as an escape (`\\x1b`)."""
    return _UNPRINTABLE.sub(_escaped, text)


def markdown_text(text: str) -> str:
    """`text` as markdown on one line of a table cell: its code spans kept, no cell break, no HTML."""
    text = printable(text)
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans at all
        parts = [text.replace("`", "\\`")]
    out = []
    for index, part in enumerate(parts):
        if index % 2 == 0:
            part = part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        out.append(part.replace("|", "\\|"))
    return "`".join(out)


def markdown_code(text: str) -> str:
    """`text` as one inline code span (backticks inside it do not end the span; `|` does not end a table cell)."""
    body = printable(text).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    padding = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{padding}{body}{padding}{fence}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_only(value: Any) -> Any:
    """`value` (a JSON document: dicts, lists, strings) with each undecodable byte of a file name (a lone surrogate,
    which no UTF-8 reader takes) written as its escape (`b\\xff.py`), as the terminal shows it."""
    if isinstance(value, str):
        return _SURROGATE.sub(_escaped, value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {unicode_only(k): unicode_only(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [unicode_only(v) for v in value]
    return value


def shown_diff(diff: str, terminal: bool) -> str:
    """A diff for a terminal has the code's control characters escaped (an ESC in a string would drive the
    terminal); piped, it is the exact diff a `patch` needs."""
    return "\n".join(printable(line) for line in diff.split("\n")) if terminal else diff


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line, as every other error is (argparse prints its whole usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")


def standard_streams() -> None:
    """A closed stdout or stderr (`>&-`) writes nowhere instead of failing; text that cannot be encoded (the
    undecodable bytes of a file name) is written as escapes, never an error."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115  # lives as long as sys.stdout
        elif isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
