"""What `--fix`, `--diff` and `--fix-only` say besides the findings: each fix applied (`--show-fixes`) and the
summary line, `N fixed, M remaining`."""

from __future__ import annotations

from typing import TextIO

from portcheck.findings import Applicability, ScanResult


def write_fixed(result: ScanResult, stream: TextIO, verb: str = "fixed") -> None:
    """--show-fixes: one line a fix applied (or, with --diff, that would be)."""
    for f in result.fixed:
        stream.write(f"{verb} {f.path}:{f.line}:{f.column}: {f.code} {f.fix.title if f.fix else ''}\n")


def write_fix_summary(result: ScanResult, show_fixes: bool, stream: TextIO) -> None:
    """After the findings of a `--fix` run: what was fixed, what remains, and how many an unsafe fix would take."""
    if show_fixes:
        write_fixed(result, stream)
    fixable = sum(1 for f in result.findings if f.fix is not None and f.fix.applicability == Applicability.UNSAFE)
    line = f"{len(result.fixed)} fixed, {len(result.findings)} remaining"
    if fixable:
        line += f" ({fixable} with an unsafe fix: --unsafe-fixes)"
    stream.write(line + ".\n")


def write_fix_report(result: ScanResult, stream: TextIO, show_fixes: bool, diff: bool) -> None:
    """--diff (beside the diff) and --fix-only: the files that failed, the fixes if asked, and a summary; no finding
    list."""
    for e in result.errors:
        stream.write(f"{e.path}{f':{e.line}' if e.line else ''}: error: {e.message}\n")
    if show_fixes:
        write_fixed(result, stream, "would fix" if diff else "fixed")
    stream.write(f"{len(result.fixed)} {'to fix' if diff else 'fixed'}, {len(result.findings)} remaining.\n")
