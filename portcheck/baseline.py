"""Baselines: the findings a codebase already has, recorded by fingerprint, so CI fails only on new ones. A
fingerprint comes from the code, the path and the flagged text, not the line, so edits above a finding keep it
baselined. Identical findings of one file share a stem: a recorded one covers the current twin nearest to the
line it was recorded at, so a copy added above an old finding is the one reported."""

from __future__ import annotations

import bisect
import codecs
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from portcheck import __version__
from portcheck.atomic import write_text
from portcheck.config import ConfigError
from portcheck.findings import FileTooLarge, Finding, ScanResult, open_regular

KIND = "portcheck-baseline"
BASELINE_LIMIT = 256 * 2**20  # bytes: a baseline of a million findings is about 150 MiB


def write_baseline(path: Path, findings: list[Finding]) -> None:
    entries = [{"fingerprint": f.fingerprint, "stem": f.stem, "code": f.code, "path": f.path, "line": f.line}
               for f in sorted(findings, key=lambda f: f.sort_key)]
    document = {"kind": KIND, "version": 1, "portcheck_version": __version__, "findings": entries}
    write_text(path, json.dumps(document, indent=1) + "\n")


def read_baseline(path: Path, stems: set[str]) -> dict[str, list[int]]:
    """Stem -> the lines its findings were recorded at, for the stems of `stems` (the current findings'): the
    file is read an entry at a time and the rest is checked and dropped, so memory follows the findings, not the
    baseline."""
    known: dict[str, list[int]] = defaultdict(list)
    for stem, line, _, _ in _read(path):
        if stem in stems:
            known[stem].append(line)
    return known


def _read(path: Path) -> Iterator[tuple[str, int, str, str]]:
    """Each finding of the baseline as (stem, line, code, path), checked; ConfigError (one line) if the file is
    not a baseline. The code and path strings are shared between entries that repeat them."""
    shared: dict[str, str] = {}
    try:
        with open_regular(str(path), BASELINE_LIMIT) as handle:
            stream = _Stream(handle)
            header: dict[str, Any] = {}
            count = 0
            for key, value in stream.members():
                if key != "findings":
                    header[key] = value
                    continue
                for entry in stream.elements():
                    count += 1
                    checked = _entry(entry, count, path)
                    if checked is not None:
                        stem, line, code, where = checked
                        yield stem, line, shared.setdefault(code, code), shared.setdefault(where, where)
                header["findings"] = []
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such baseline file (make one with --write-baseline)") from None
    except FileTooLarge:
        raise ConfigError(f"{path}: not a portcheck baseline (over {BASELINE_LIMIT // 2**20} MiB)") from None
    except RecursionError:
        raise ConfigError(f"{path}: not a portcheck baseline (nested too deeply)") from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError, JSONDecodeError, an integer of 5,000 digits
        raise ConfigError(f"{path}: not a portcheck baseline ({exc})") from None
    if header.get("kind") != KIND or not isinstance(header.get("findings"), list):
        raise ConfigError(f"{path}: not a portcheck baseline (write one with --write-baseline)")


def _entry(entry: Any, number: int, path: Path) -> tuple[str, int, str, str] | None:
    if not isinstance(entry, dict) or not entry.get("stem"):
        return None
    line = entry.get("line") or 0
    if not isinstance(entry["stem"], str) or not isinstance(line, int) or isinstance(line, bool) or line < 0:
        raise ConfigError(f"{path}: finding {number} of the baseline is malformed (its stem must be a string "
                          "and its line a number)")
    return entry["stem"], line, str(entry.get("code", "")), str(entry.get("path", ""))


class _Stream:
    """A JSON document `{"key": value, ..., "findings": [entry, ...]}` read a megabyte at a time: each member's
    value and each entry is decoded on its own (at most ENTRY_LIMIT characters each), so the file is never held
    whole and memory stays what the caller keeps (a 93 MB baseline took 1 GB read whole)."""

    PIECE = 2**20
    ENTRY_LIMIT = 2**16

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.decode = codecs.getincrementaldecoder("utf-8")().decode
        self.decoder = json.JSONDecoder()
        self.text = ""
        self.at = 0
        self.ended = False

    def _more(self) -> bool:
        if self.ended:
            return False
        piece = self.handle.read(self.PIECE)
        self.ended = not piece
        self.text = self.text[self.at:] + self.decode(piece, final=self.ended)
        self.at = 0
        return True

    def _next(self) -> str:
        """The next character that is not white space, not consumed ("" at the end)."""
        while True:
            while self.at < len(self.text) and self.text[self.at] in " \t\n\r":
                self.at += 1
            if self.at < len(self.text) or not self._more():
                return self.text[self.at:self.at + 1]

    def _expect(self, characters: str) -> str:
        found = self._next()
        if not found or found not in characters:
            raise ValueError(f"expected {' or '.join(repr(c) for c in characters)} at character "
                             f"{self.handle.tell() - len(self.text) + self.at}" if found else "it ends too early")
        self.at += 1
        return found

    def _value(self) -> Any:
        self._next()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.text, self.at)
            except json.JSONDecodeError:
                if self.ended or len(self.text) - self.at > self.ENTRY_LIMIT:
                    raise
            else:
                if end < len(self.text) or self.ended:  # a number at the end of a piece may go on in the next
                    if end - self.at > self.ENTRY_LIMIT:
                        raise ValueError(f"a value of over {self.ENTRY_LIMIT:,} characters")
                    self.at = end
                    return value
            self._more()

    def members(self) -> Iterator[tuple[str, Any]]:
        """The top-level object's keys, each with its value, except `findings`, whose entries the caller reads
        with elements() before the next member."""
        self._expect("{")
        if self._next() == "}":
            self.at += 1
        else:
            while True:
                key = self._value()
                if not isinstance(key, str):
                    raise ValueError("a key that is not a string")
                self._expect(":")
                yield key, (None if key == "findings" else self._value())
                if self._expect(",}") == "}":
                    break
        if self._next():
            raise ValueError("extra data after the document")

    def elements(self) -> Iterator[Any]:
        self._expect("[")
        if self._next() == "]":
            self.at += 1
            return
        while True:
            yield self._value()
            if self._expect(",]") == "]":
                return


def _matched(findings: list[Finding], known: dict[str, list[int]]) -> tuple[set[int], list[tuple[str, int]]]:
    """Which current findings the baseline covers (by id), and the recorded (stem, line)s that cover none. Each
    recorded line, in order, takes the free finding nearest to it (the lower line on a tie, then the first found):
    a bisection in the free findings' sorted lines, so 16,000 identical findings cost no more than 16,000 others."""
    groups: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.stem].append(f)
    covered: set[int] = set()
    unmatched = []
    for stem, recorded in known.items():
        free = sorted(groups.get(stem, []), key=lambda f: f.line)  # stable: the first found first on a line
        lines = [f.line for f in free]
        for line in sorted(recorded):
            if not free:
                unmatched.append((stem, line))
                continue
            right = bisect.bisect_left(lines, line)
            left = bisect.bisect_left(lines, lines[right - 1]) if right else None  # the first of the lower line
            pick = right if left is None or (right < len(lines) and lines[right] - line < line - lines[left]) \
                else left
            covered.add(id(free.pop(pick)))
            del lines[pick]
    return covered, unmatched


def compare_with_baseline(findings: list[Finding], path: Path) -> tuple[list[Finding], list[tuple[str, str, int]]]:
    """The findings the baseline does not hold (new), and the recorded findings no longer found (fixed): each as
    (code, path, line) as it was recorded."""
    stems = {f.stem for f in findings}
    known: dict[str, list[int]] = defaultdict(list)
    recorded: dict[str, list[tuple[int, int, str, str]]] = defaultdict(list)
    fixed: list[tuple[int, str, str, int]] = []  # in the baseline's order
    for number, (stem, line, code, where) in enumerate(_read(path)):
        if stem in stems:
            known[stem].append(line)
            recorded[stem].append((number, line, code, where))
        else:
            fixed.append((number, code, where, line))  # no current finding has its stem
    covered, unmatched = _matched(findings, known)
    gone = set(unmatched)
    fixed.extend((number, code, where, line) for stem, entries in recorded.items()
                 for number, line, code, where in entries if (stem, line) in gone)
    return [f for f in findings if id(f) not in covered], [entry[1:] for entry in sorted(fixed)]


def apply_baseline(result: ScanResult, known: dict[str, list[int]]) -> None:
    """Drop the findings the baseline holds: each recorded entry covers one current finding of its stem, the
    one nearest the line it was recorded at."""
    covered, _ = _matched(result.findings, known)
    result.baselined += len(covered)
    result.findings = [f for f in result.findings if id(f) not in covered]
