"""Child side: the user's source line behind a graph node or an exception — the innermost frame that is
not torch's (or portcheck's) own code."""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import torch

from portcheck.traced import Place

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
_LIBRARY_DIRS = (str(Path(torch.__file__).resolve().parent), str(Path(__file__).resolve().parent.parent))


def _is_user(file: str) -> bool:
    if file.startswith("<") or not file.endswith(".py"):
        return False
    resolved = str(Path(file).resolve())
    return not resolved.startswith(_LIBRARY_DIRS)


def node_place(node: torch.fx.Node) -> Place | None:
    """From `node.meta["stack_trace"]` (export and dynamo record it), the innermost user frame."""
    text = node.meta.get("stack_trace") or ""
    frames = [(m["file"], int(m["line"]), m["function"]) for m in _FRAME.finditer(text)]
    for file, line, function in reversed(frames):
        if _is_user(file):
            return Place(str(Path(file).resolve()), line, function)
    return None


def frames_place(frames: list[traceback.FrameSummary]) -> Place | None:
    for frame in reversed(frames):
        if frame.filename and _is_user(frame.filename) and frame.lineno:
            return Place(str(Path(frame.filename).resolve()), frame.lineno, frame.name)
    return None


def exception_place(exc: BaseException) -> Place | None:
    return frames_place(traceback.extract_tb(exc.__traceback__))


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = next((line.strip() for line in text if line.strip()), "")
    if len(first) > 240:
        first = first[:237] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
