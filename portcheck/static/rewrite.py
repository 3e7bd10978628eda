"""Applying fixes: edits into text, repeated until nothing more applies, checked, and written atomically.

A file is rewritten only when the result compiles; the write goes to a temporary file beside it and is
renamed into place (mode, encoding, BOM and line endings kept), and only if the file on disk still holds
the bytes that were read. Fixing twice equals fixing once: the loop stops when an analysis of the fixed
text offers no applicable fix.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from portcheck.atomic import replace_keeping, writer_elsewhere
from portcheck.errors import UserError
from portcheck.findings import Edit, FileError, FileResult, FileTooLarge, Finding
from portcheck.static.chunks import CHUNKED_ABOVE
from portcheck.static.engine import FileJob, analyse_text, failed
from portcheck.static.source import decode

MAX_PASSES = 10
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


@dataclass
class FixOutcome:
    """One file after fixing: what remains, how many findings were fixed, the new text (None: unchanged)."""

    result: FileResult
    first: FileResult | None = None  # the analysis of the text as read
    fixed: list[Finding] = field(default_factory=list)
    original: str = ""
    text: str | None = None


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability == "safe" or unsafe)


def apply_edits(text: str, findings: list[Finding], unsafe: bool) -> tuple[str, list[Finding]]:
    """Apply the fixes of `findings` that do not overlap an earlier one; return the text and those applied."""
    starts = [0]
    for match in _LINE.finditer(text):
        starts.append(match.end())

    def offset(line: int, column: int) -> int:
        return min(starts[min(line, len(starts)) - 1] + column - 1, len(text))

    chosen: list[tuple[int, int, str]] = []
    applied: list[Finding] = []
    inserted: set[tuple[int, str]] = set()
    for finding in sorted((f for f in findings if applicable(f, unsafe)), key=lambda f: f.sort_key):
        spans = []
        assert finding.fix is not None  # applicable(): it has one
        for edit in finding.fix.edits:
            spans.append((offset(edit.line, edit.column), offset(edit.end_line, edit.end_column), edit.content))
        fresh = [span for span in spans if span not in chosen]  # an edit another fix makes too is shared
        if any(_overlaps(span, taken) for span in fresh if span[0] != span[1] for taken in chosen):
            continue  # the next pass sees it again, on the text this pass produced
        for span in fresh:
            if span[0] == span[1] and (span[0], span[2]) in inserted:
                continue  # the same import added by another fix
            if span[0] == span[1]:
                inserted.add((span[0], span[2]))
            chosen.append(span)
        applied.append(finding)
    out = text
    for start, end, content in sorted(chosen, key=lambda s: (s[0], s[1]), reverse=True):
        out = out[:start] + content + out[end:]
    return out, applied


def _overlaps(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    if b[0] == b[1]:
        return a[0] < b[0] < a[1]
    return a[0] < b[1] and b[0] < a[1]


def fix_text(text: str, job: FileJob, unsafe: bool) -> FixOutcome:
    result = analyse_text(text, job.path, job.chip, job.stack, job.enabled, job.sdk)
    outcome = FixOutcome(result, first=result, original=text)
    if len(text) > CHUNKED_ABOVE and any(applicable(f, unsafe) for f in result.findings):
        # Checking a fixed file compiles needs Python's parser over all of it: gigabytes for a generated module.
        error = FileError(job.path, f"not fixed: {len(text) / 2**20:.1f} MB is over the {CHUNKED_ABOVE // 2**20} MB "
                                    "up to which fixes are applied (its findings are reported)")
        outcome.result = FileResult(job.path, result.findings, (error,))
        return outcome
    current = text
    for _ in range(MAX_PASSES):
        if result.errors or not any(applicable(f, unsafe) for f in result.findings):
            break
        candidate, applied = apply_edits(current, list(result.findings), unsafe)
        if candidate == current or not applied:
            break
        problem = _breaks(candidate, job.path)
        if problem is not None:
            # Fixes that are right alone can clash together (two deletions emptying one block): apply them one
            # at a time and keep each that leaves the file compiling.
            candidate, applied = _one_at_a_time(current, result.findings, unsafe, job.path)
            if not applied:
                codes = ", ".join(sorted({f.code for f in result.findings if applicable(f, unsafe)}))
                error = FileError(job.path, f"a fix would have broken the file ({problem}); nothing was written: "
                                            f"please report this (fixes tried: {codes})")
                outcome.result = FileResult(job.path, result.findings, (error,))
                return outcome
        outcome.fixed.extend(applied)
        current = candidate
        result = analyse_text(current, job.path, job.chip, job.stack, job.enabled, job.sdk)
    if current != text:
        tidy = tidy_leftovers(text, current)
        if tidy != current and _breaks(tidy, job.path) is None:
            current = tidy
        pruned = drop_imports_made_unused(text, current)
        if pruned != current and _breaks(pruned, job.path) is None:
            current = pruned
            result = analyse_text(current, job.path, job.chip, job.stack, job.enabled, job.sdk)
    outcome.result = result
    outcome.text = current if current != text else None
    return outcome


def _used_names(module: ast.Module) -> set[str]:
    """Names read anywhere outside import statements, plus the strings of `__all__`."""
    used: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            used.update(e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant) and
                        isinstance(e.value, str))
    return used


# Calls that do the same when repeated: a fix that turns `torch.cuda.manual_seed_all(s)` into
# `torch.manual_seed(s)` next to an existing `torch.manual_seed(s)` leaves a duplicate that can go.
_IDEMPOTENT_CALLS = ("manual_seed", "manual_seed_all", "seed", "empty_cache", "synchronize")
_PURE_PROBES = ("is_available", "device_count")
# Imported for what importing them registers (the XLA device, Neuron's backends): never dropped.
_REGISTERING = ("torch_xla", "torch_neuronx", "torch_neuron")


def _pure(test: ast.expr) -> bool:
    """A test without side effects: names, attributes, literals, comparisons, and availability probes."""
    for node in ast.walk(test):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if node.args or node.keywords or name not in _PURE_PROBES:
                return False
        elif isinstance(node, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda)):
            return False
    return True


def _repeatable(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    return isinstance(func, ast.Attribute) and func.attr in _IDEMPOTENT_CALLS


def _elif(parent: ast.AST, stmt: ast.stmt) -> bool:
    """`stmt` is the `elif` of `parent`: its lines are part of the `if` statement, not a block of their own."""
    return (isinstance(parent, ast.If) and isinstance(stmt, ast.If) and parent.orelse == [stmt]
            and stmt.col_offset == parent.col_offset)


def _empty_if(stmt: ast.stmt) -> bool:
    """`if <pure test>: pass`, with at most `elif <pure test>: pass` and `else: pass` after it."""
    if not (isinstance(stmt, ast.If) and _pure(stmt.test) and all(isinstance(s, ast.Pass) for s in stmt.body)):
        return False
    if len(stmt.orelse) == 1 and _elif(stmt, stmt.orelse[0]):
        return _empty_if(stmt.orelse[0])
    return all(isinstance(s, ast.Pass) for s in stmt.orelse)


def _leftovers(module: ast.Module) -> list[tuple[str, ast.stmt, bool]]:
    """(kind and text, statement, alone in its block) for each `if <pure test>: pass` (with at most an `else: pass`
    or `elif <pure test>: pass`), and each
    repeatable call equal to the statement before it."""
    found: list[tuple[str, ast.stmt, bool]] = []
    for node in ast.walk(module):
        for attr in ("body", "orelse", "finalbody"):
            block = getattr(node, attr, None)
            if not (isinstance(block, list) and block and isinstance(block[0], ast.stmt)):
                continue
            for index, stmt in enumerate(block):
                if _empty_if(stmt) and not (attr == "orelse" and _elif(node, stmt)):
                    found.append((f"if {ast.unparse(stmt.test)}", stmt, len(block) == 1))
                elif index and _repeatable(stmt) and ast.dump(stmt) == ast.dump(block[index - 1]):
                    found.append((f"twice {ast.unparse(stmt)}", stmt, False))
    return found


def tidy_leftovers(before: str, after: str) -> str:
    """Remove what the fixes left behind and `before` did not have: an `if <test without side effects>: pass`
    (a block left holding only it keeps a `pass`), and a repeated idempotent call (`torch.manual_seed(s)` twice in
    a row). Lines holding a comment, or shared with other statements, are kept."""
    try:
        old, new = ast.parse(before), ast.parse(after)
    except SyntaxError:
        return after
    existing = {kind for kind, _, _ in _leftovers(old)}
    lines = after.splitlines(keepends=True)
    cuts: list[tuple[int, int, str]] = []
    for kind, stmt, alone in _leftovers(new):
        end = stmt.end_lineno or stmt.lineno
        text = lines[stmt.lineno - 1: end]
        if kind in existing or any("#" in line or ";" in line for line in text):
            continue
        if any(start <= stmt.lineno <= stop for start, stop, _ in cuts):
            continue
        indent = text[0][: len(text[0]) - len(text[0].lstrip())]
        newline = text[-1][len(text[-1].rstrip("\r\n")):] or "\n"
        cuts.append((stmt.lineno, end, f"{indent}pass{newline}" if alone else ""))
    for start, stop, content in sorted(cuts, reverse=True):
        lines[start - 1: stop] = [content] if content else []
    return "".join(lines)


def drop_imports_made_unused(before: str, after: str) -> str:
    """Remove the top-level imports that the fixes left unused: a name used in `before` and nowhere in `after`
    (string annotations, `__all__`, `globals()` and star imports keep every import, since use cannot be ruled
    out). Only whole `from x import a, b` lines whose every name went unused are removed, and `import x` /
    `import x as y` of an undotted module or `import torch.x as y`; a dotted `import x.y` and the modules importing
    registers (`torch_xla`, `torch_neuronx`) stay."""
    try:
        old, new = ast.parse(before), ast.parse(after)
    except SyntaxError:
        return after
    if "globals()" in after or "import *" in after or "__getattr__" in after:
        return after
    was_used, now_used = _used_names(old), _used_names(new)
    lines = after.splitlines(keepends=True)
    doomed: list[tuple[int, int]] = []
    for stmt in new.body:
        if isinstance(stmt, ast.Import):
            # `import x.y` may be there for what importing it registers (a backend): kept, except an aliased torch
            # submodule (`import torch.backends.cudnn as cudnn`), which registers nothing torch has not already
            aliased_torch = all(alias.asname and alias.name.startswith("torch.") for alias in stmt.names)
            plain = len(stmt.names) == 1 and "." not in stmt.names[0].name and stmt.names[0].name not in _REGISTERING
            if not (aliased_torch or plain) or stmt.end_lineno is None:
                continue
        elif not isinstance(stmt, ast.ImportFrom) or stmt.end_lineno is None:
            continue
        names = [(alias.asname or alias.name).split(".")[0] for alias in stmt.names]
        if names and all(n in was_used and n not in now_used for n in names):
            line = lines[stmt.lineno - 1]
            if stmt.lineno == stmt.end_lineno and line.strip().startswith(("import ", "from ")) and ";" not in line:
                doomed.append((stmt.lineno, stmt.end_lineno))
    for start, end in reversed(doomed):
        del lines[start - 1 : end]
    return "".join(lines)


def unified_diff(path: str, before: str, after: str) -> str:
    """The unified diff `--diff` prints for one file (`a/path` -> `b/path`)."""
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))


def _breaks(text: str, path: str) -> str | None:
    """Why `text` would not be a valid Python file, or None."""
    try:
        ast.parse(text)
        compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return str(exc)
    return None


def _one_at_a_time(text: str, findings: Iterable[Finding], unsafe: bool, path: str) -> tuple[str, list[Finding]]:
    kept: list[Finding] = []
    current = text
    for finding in sorted((f for f in findings if applicable(f, unsafe)), key=lambda f: f.sort_key):
        if kept:
            break  # positions of the rest refer to the text before this fix: the next pass re-analyses
        candidate, applied = apply_edits(current, [finding], unsafe)
        if applied and candidate != current and _breaks(candidate, path) is None:
            current, kept = candidate, applied
    return current, kept


def fix_file(job: FileJob, unsafe: bool) -> tuple[FixOutcome, bytes | None, str]:
    """Read and fix one file (nothing written): the outcome, the bytes read and their encoding."""
    try:
        data = job.read()
    except OSError as exc:
        error = FileError(job.path, f"cannot read: {exc.strerror or exc}")
        return FixOutcome(FileResult(job.path, errors=(error,))), None, ""
    except FileTooLarge as exc:
        return FixOutcome(FileResult(job.path, errors=(FileError(job.path, str(exc)),))), None, ""
    try:
        source = decode(data)
        return fix_text(source.text, job, unsafe), data, source.encoding
    except Exception as exc:  # RecursionError, MemoryError, a bug: this file's error entry, the others go on
        return FixOutcome(failed(job.path, exc)), None, ""


def replace_if_unchanged(location: Path, text: str, encoding: str, expected: bytes) -> str | None:
    """Replace the file's content with `text`; None on success, else why it was not written."""
    try:
        with open(location, "rb") as handle:
            if handle.read() != expected:
                return "changed on disk since it was read; not fixed, run again"
        data = text.encode(encoding)
    except (OSError, UnicodeEncodeError) as exc:
        return f"cannot write: {getattr(exc, 'strerror', None) or exc}"
    writer = writer_elsewhere(location)
    if writer is not None:
        return f"not fixed: process {writer} has it open for writing (what it writes next would be lost); run again"
    try:
        replace_keeping(location, data)  # through a symlink, the target; mode, owner and xattrs kept
    except OSError as exc:
        return f"cannot write: {exc.strerror or exc}"
    except UserError as exc:
        return f"not fixed: {exc}"
    return None


__all__ = [
    "Edit", "FixOutcome", "applicable", "apply_edits", "fix_file", "fix_text", "replace_if_unchanged", "unified_diff",
]
