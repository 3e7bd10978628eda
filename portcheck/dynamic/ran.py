"""What ran: the lines (and functions) of the model's code and its libraries' that ran while the model was traced.

Two witnesses, both in the child: a line recorder around one eager run of the model (`sys.settrace`, with a
local tracer only for the frames of files of interest, so torch's own code and the standard library run at full
speed), and the stack traces of the captured graphs' nodes (every frame). On the meta device there is no eager
run, and the stack traces are the only witness (`RanCode.source` says which). The parent reports a static finding
in a file the user does not own only where its lines ran. No torch here: the parent imports this module."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from portcheck.traced import JSON

EAGER = "eager run"
STACK_TRACES = "graph stack traces"
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


def _ranges(lines: Iterable[int]) -> list[list[int]]:
    """Sorted lines as inclusive [first, last] runs: the JSON stays small."""
    out: list[list[int]] = []
    for line in sorted(set(lines)):
        if out and line == out[-1][1] + 1:
            out[-1][1] = line
        else:
            out.append([line, line])
    return out


@dataclass(frozen=True)
class RanCode:
    """Per file (absolute, resolved): the lines that ran and the functions (qualified names) that ran."""

    source: str = ""  # EAGER (the line recorder, with the stack traces), STACK_TRACES (meta), "" (nothing known)
    lines: Mapping[str, frozenset[int]] = field(default_factory=dict)
    functions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def ran(self, file: str, first: int, last: int) -> bool:
        """Whether any line of first..last (inclusive) of `file` ran."""
        lines = self.lines.get(file, frozenset())
        return any(line in lines for line in range(first, max(first, last) + 1))

    def to_json(self) -> JSON:
        return {"source": self.source,
                "files": {file: {"lines": _ranges(lines), "functions": list(self.functions.get(file, ()))}
                          for file, lines in sorted(self.lines.items())}}

    @classmethod
    def from_json(cls, data: JSON | None) -> RanCode:
        if not data:
            return cls()
        lines, functions = {}, {}
        for file, entry in (data.get("files") or {}).items():
            lines[file] = frozenset(n for first, last in entry.get("lines") or () for n in range(first, last + 1))
            functions[file] = tuple(entry.get("functions") or ())
        return cls(data.get("source", ""), lines, functions)


def _skipped_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Never recorded, never scanned: portcheck itself and torch's package; and the standard library, except its
    site-packages (a virtual environment's "platstdlib" holds them)."""
    own = {str(Path(__file__).resolve().parent.parent)}
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if torch_file:
        own.add(str(Path(torch_file).resolve().parent))
    stdlib = {str(Path(p).resolve()) for p in (sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")) if p}
    return tuple(d + os.sep for d in own), tuple(d + os.sep for d in stdlib)


def library(path: Path) -> bool:
    """A file installed as a package (site-packages, or Debian's dist-packages)."""
    return "site-packages" in path.parts or "dist-packages" in path.parts


class Recorder:
    """Collects what ran, from the line recorder and from stack traces, into one RanCode."""

    def __init__(self) -> None:
        self._skip, self._stdlib = _skipped_dirs()
        self._resolved: dict[str, str | None] = {}  # a code object's file name -> the file to record, or None
        self.lines: dict[str, set[int]] = defaultdict(set)
        self.functions: dict[str, set[str]] = defaultdict(set)
        self.eager = False

    def _file(self, name: str) -> str | None:
        if name not in self._resolved:
            wanted = None
            if name.endswith(".py") and not name.startswith("<"):
                path = Path(name).resolve()
                resolved = str(path)
                skipped = resolved.startswith(self._skip) or (resolved.startswith(self._stdlib) and not library(path))
                wanted = None if skipped else resolved
            self._resolved[name] = wanted
        return self._resolved[name]

    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        file = self._file(code.co_filename)
        if file is None:
            return None  # no local tracer: no line events in torch's or the standard library's frames
        self.functions[file].add(getattr(code, "co_qualname", code.co_name))
        lines = self.lines[file]
        lines.add(frame.f_lineno)

        def line(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                lines.add(frame.f_lineno)
            return line

        return line

    def recording(self) -> _Recording:
        """`with recorder.recording(): model(...)` records the lines that ran in that block (this thread)."""
        self.eager = True
        return _Recording(self)

    def add_stack_trace(self, text: str) -> None:
        """A graph node's `stack_trace`: each frame's line ran."""
        for match in _FRAME.finditer(text):
            file = self._file(match["file"])
            if file is not None:
                self.lines[file].add(int(match["line"]))
                self.functions[file].add(match["function"])

    def add_graphs(self, graphs: Iterable[Any]) -> None:
        """Every node's stack trace, of every graph a capture step gave (torch.fx graphs)."""
        for graph in graphs:
            for node in graph.nodes:
                text = node.meta.get("stack_trace")
                if text:
                    self.add_stack_trace(text)

    def result(self) -> RanCode:
        return RanCode(EAGER if self.eager else STACK_TRACES,
                       {f: frozenset(lines) for f, lines in self.lines.items()},
                       {f: tuple(sorted(self.functions.get(f, ()))) for f in self.lines})


class Scope:
    """Whose files are whose. The user owns the build file and the files under the working directory (the
    project); libraries (site-packages, dist-packages, anything under the interpreter's prefixes) are not theirs.
    The static pass reads the user's files that ran whole, as `scan` would, and reports in a library's file only
    the findings on lines that ran."""

    def __init__(self, cwd: Path, own: Iterable[str]) -> None:
        self._cwd = cwd.resolve()
        self._own = {str(Path(f).resolve()) for f in own if f}
        prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
        # A prefix the project lies in (a checkout at /usr/src with Python in /usr) does not make it a library.
        self._prefixes = tuple(p for p in prefixes if not self._cwd.is_relative_to(p))

    def owned(self, file: str) -> bool:
        path = Path(file).resolve()
        if str(path) in self._own:
            return True
        if library(path):
            return False
        return path.is_relative_to(self._cwd) and not any(path.is_relative_to(p) for p in self._prefixes)

    def files(self, ran: RanCode, traced: Iterable[str]) -> list[str]:
        """The files the static pass reads (absolute): the build file and anchor, every file whose lines ran (torch,
        the standard library and portcheck are never recorded), and the user's files a traced finding points
        into. None of them depends on the target."""
        chosen = set(self._own) | set(ran.lines)
        chosen |= {str(Path(f).resolve()) for f in traced if self.owned(f)}
        return sorted(chosen)


class _Recording:
    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._previous: Any = None

    def __enter__(self) -> None:
        self._previous = sys.gettrace()
        sys.settrace(self._recorder._call)

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._previous)


__all__ = ["EAGER", "STACK_TRACES", "RanCode", "Recorder", "Scope"]
