"""`path:line:col: PC101 message`, one finding a line, then a one-line summary; and --statistics."""

from __future__ import annotations

import os
import sysconfig
from collections import Counter
from pathlib import PurePath
from typing import TextIO

from portcheck.escape import printable
from portcheck.findings import Finding, ScanResult, Severity

_BOLD, _RED, _YELLOW, _CYAN, _DIM, _RESET = "\x1b[1m", "\x1b[31m", "\x1b[33m", "\x1b[36m", "\x1b[2m", "\x1b[0m"
_SEVERITY_COLOR = {Severity.ERROR: _RED, Severity.WARNING: _YELLOW, Severity.INFO: _CYAN}


def summary_line(result: ScanResult) -> str:
    baselined = f" {result.baselined} baselined finding{'s' if result.baselined != 1 else ''} not shown." \
        if result.baselined else ""
    baselined += left_out_line(result)
    if not result.findings and not result.errors:
        return f"All checks passed ({result.files} file{'s' if result.files != 1 else ''} scanned).{baselined}"
    counts = Counter(f.severity for f in result.findings)
    parts = [f"{counts[s]} {s.label}{'s' if counts[s] != 1 else ''}" for s in sorted(counts, reverse=True)]
    text = f"Found {len(result.findings)} finding{'s' if len(result.findings) != 1 else ''}"
    if parts:
        text += f" ({', '.join(parts)})"
    affected = len({f.path for f in result.findings})
    # "in 12 of 303 files": how many files the findings are in, not only how many were scanned
    of = f"{affected} of " if 0 < affected < result.files else ""
    text += f" in {of}{result.files} file{'s' if result.files != 1 else ''}"
    if result.errors:
        text += f"; {len(result.errors)} file{'s' if len(result.errors) != 1 else ''} could not be analysed"
    target = result.target
    sdk = f", Neuron SDK {target.sdk}" if target.sdk else ""
    return f"{text}. Target: {target.chip} ({target.stack} stack{sdk}).{baselined}"


def left_out_line(result: ScanResult) -> str:
    """" N files left out (3 tests, 1 excluded): --show-files lists them." (a folder counts as one), or ""."""
    if not result.left_out:
        return ""
    reasons = Counter(item.reason for item in result.left_out)
    count = len(result.left_out)
    said = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items(), key=lambda r: (-r[1], r[0])))
    return f" {count} file{'s' if count != 1 else ''} left out ({said}): --show-files lists them."


def terminal_path(path: str) -> str:
    """A path as terminal lines show it, never absolute: an installed package's file relative to its
    site-packages (`transformers/models/llama/modeling_llama.py`), the standard library's relative to it, any other
    relative to the working directory. (Machine formats keep the path the result holds.)"""
    pure = PurePath(path)
    parts = pure.parts
    for marker in ("site-packages", "dist-packages"):  # a venv inside the project gives relative ones too
        if marker in parts:
            return PurePath(*parts[len(parts) - parts[::-1].index(marker):]).as_posix()
    if not pure.is_absolute():
        return path
    for key in ("stdlib", "platstdlib"):
        root = sysconfig.get_paths().get(key)
        if root and pure.is_relative_to(root):
            return pure.relative_to(root).as_posix()
    try:
        return PurePath(os.path.relpath(path)).as_posix()
    except ValueError:  # another drive (Windows)
        return path


def evidence_label(result: ScanResult, f: Finding) -> str:
    """In a trace report, which pass saw the finding: `[static]`, `[traced]` or `[static+traced]`; in a scan's,
    nothing (every finding there is static)."""
    return f"[{'+'.join(f.evidence)}] " if result.trace is not None else ""


def write_concise(result: ScanResult, stream: TextIO, *, color: bool) -> None:
    for f in result.findings:
        path, label, message = printable(terminal_path(f.path)), evidence_label(result, f), printable(f.message)
        if color:
            dim = f"{_DIM}{label}{_RESET}" if label else ""
            stream.write(f"{_BOLD}{path}{_RESET}:{f.line}:{f.column}: "
                         f"{_SEVERITY_COLOR[f.severity]}{_BOLD}{f.code} {f.severity.label}{_RESET}: {dim}{message}\n")
        else:
            stream.write(f"{path}:{f.line}:{f.column}: {f.code} {f.severity.label}: {label}{message}\n")
    for e in result.errors:
        where = f"{e.path}:{e.line}" if e.line else e.path
        stream.write(f"{printable(where)}: error: {printable(e.message)}\n")
    stream.write(summary_line(result) + "\n")


def write_statistics(result: ScanResult, stream: TextIO, *, color: bool) -> None:
    by_code = Counter((f.code, f.name) for f in result.findings)
    by_category = Counter(f.category for f in result.findings)
    # One column width for both tables: a category counts at least as many findings as any of its codes.
    width = max((len(str(n)) for n in (*by_code.values(), *by_category.values())), default=1)
    for (code, name), n in sorted(by_code.items(), key=lambda item: (-item[1], item[0])):
        stream.write(f"{n:>{width}}  {code}  {name}\n")
    if by_category:
        stream.write("\n")
    for category, n in sorted(by_category.items(), key=lambda item: (-item[1], item[0])):
        stream.write(f"{n:>{width}}  {category}\n")
    if result.errors:
        stream.write(f"\n{len(result.errors)} file(s) could not be analysed\n")
    stream.write(summary_line(result) + "\n")
