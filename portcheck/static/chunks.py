"""Large files (generated protobuf `_pb2` modules, exported graphs, vendored code) analysed a group of top-level
statements at a time, so memory stays bounded by the group rather than the file: Python's own parser needs about
200 times a file's size, libcst several hundred times.

The top-level statements are found with the tokenizer, which streams. Each group is analysed as a module of its
own: the file's top-level imports that lie outside the group come first (so qualified names resolve as in the whole
file), then the group's lines as they are. Findings are mapped back to the file's lines; columns never change.
File-level suppressions (`# portcheck: noqa`) go with every group, and one is unused only when it is unused in all.
Fingerprints are computed once, over the whole file. A file analysed in groups has no summary for the project's
call graph (portcheck.static.semantic): its findings stand as the groups give them. tests/test_hostile_input.py
checks the findings equal a whole-file analysis on real modules.
"""

from __future__ import annotations

import gc
import io
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from portcheck.findings import FileError, FileResult, Finding, Fix, python_lines
from portcheck.rules import registry
from portcheck.static.suppression import UnusedSuppression, file_result
from portcheck.static.suppression.comments import holds_file_suppression

CHUNKED_ABOVE = 2**20  # characters: a file this large is analysed in groups of statements
GROUP_SIZE = 128 * 2**10  # characters a group aims at (one statement larger than this is a group alone)
COLLECT_AFTER = 128 * 2**10  # characters analysed between two runs of the garbage collector
_CLAUSES = frozenset({"else", "elif", "except", "finally"})  # continue the compound statement before them

Analyse = Callable[[str], FileResult]


@dataclass
class Statement:
    start: int  # its first line (a decorator's, for a decorated definition)
    end: int  # its last line
    first: str  # its first token
    string: bool = False  # it starts with a string (a docstring, when it is the first statement)
    compound: bool = False
    header_end: int = 0  # a compound statement's header (`def f(...):`) ends on this line
    assigns: bool = False  # `NAME = …`, `NAME: T = …`, `A, B = …`
    defines: bool = False  # a def or class inside it


def top_level_statements(text: str) -> list[Statement]:
    """The module's top-level statements, from the tokenizer (tokenize.TokenError or SyntaxError if it fails)."""
    statements: list[Statement] = []
    current: Statement | None = None
    level = 0
    ended = False  # the current statement's logical line ended: the next top-level token starts another
    second = False  # the next significant token is the statement's second
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        kind = token.type
        if kind == tokenize.INDENT:
            level += 1
            if level == 1 and current is not None:
                current.compound, ended = True, False
            continue
        if kind == tokenize.DEDENT:
            level -= 1
            if level == 0 and current is not None:
                ended = True
            continue
        if kind in (tokenize.NL, tokenize.COMMENT, tokenize.ENCODING, tokenize.ENDMARKER):
            continue
        if kind == tokenize.NEWLINE:
            if level == 0 and current is not None:
                ended = current.first != "@"  # a decorator's line: its definition follows
                if not current.compound:
                    current.header_end = token.start[0]
            continue
        if level == 0 and (current is None or ended):
            if current is not None and token.string in _CLAUSES and current.compound:
                ended = False  # `else:` after an `if` block: the same statement
            else:
                if current is not None:
                    statements.append(current)
                current = Statement(token.start[0], token.end[0], token.string, kind == tokenize.STRING)
                ended, second = False, True
                continue
        if current is not None:
            if second:
                current.assigns = current.first.isidentifier() and token.string in ("=", ":", ",")
                second = False
            if level > 0 and token.string in ("def", "class"):
                current.defines = True
            current.end = max(current.end, token.end[0])
    if current is not None:
        statements.append(current)
    return statements


def _groups(statements: list[Statement], line_sizes: list[int]) -> Iterator[tuple[int, int]]:
    """Consecutive line ranges covering the file, each starting at a statement, of about GROUP_SIZE each."""
    start, size = 1, 0
    for index, statement in enumerate(statements):
        following = statements[index + 1].start if index + 1 < len(statements) else len(line_sizes) + 1
        size += sum(line_sizes[statement.start - 1 : following - 1])
        if size >= GROUP_SIZE and following <= len(line_sizes):
            yield start, following - 1
            start, size = following, 0
    if start <= len(line_sizes):
        yield start, len(line_sizes)


def analyse_large(text: str, path: str, analyse: Analyse) -> FileResult:
    """`analyse` (a whole-module analysis) applied group by group, with the findings mapped to the file."""
    lines = python_lines(text)
    try:
        statements = top_level_statements(text)
    except (tokenize.TokenError, SyntaxError) as exc:
        line = exc.args[1][0] if isinstance(exc, tokenize.TokenError) and len(exc.args) > 1 else \
            getattr(exc, "lineno", None)
        return FileResult(path, errors=(FileError(path, f"syntax error: {exc.args[0]}", line),))
    directives = [n for n, line in enumerate(lines, 1) if holds_file_suppression(line)]
    after_imports = _import_line(statements)
    kept: list[Finding] = []
    silenced: list[Finding] = []
    unused: dict[int, list[Finding]] = {n: [] for n in directives}
    groups = list(_groups(statements, [len(line) + 1 for line in lines]))
    uncollected = 0
    for start, end in groups:
        header, text_of_header = _context(statements, lines, start, end, directives)
        source = text_of_header + "".join(line + "\n" for line in lines[start - 1 : end])
        result = analyse(source)
        uncollected += len(source)
        if uncollected >= COLLECT_AFTER:  # the engine turns the collector off while it analyses: free the cycles
            gc.collect()
            uncollected = 0

        def original(line: int, header: list[int] = header, start: int = start) -> int:
            return header[line - 1] if line <= len(header) else start + line - len(header) - 1

        if result.errors:  # a syntax error the tokenizer let through: the file's only entry, as a whole parse
            error = result.errors[0]
            return FileResult(path, errors=(replace(error, path=path,
                                                    line=original(error.line) if error.line else None),))
        for finding in result.findings:
            if finding.line > len(header):
                kept.append(_moved(finding, original, len(header), after_imports))
            elif finding.code == UnusedSuppression.code and original(finding.line) in unused:
                unused[original(finding.line)].append(_moved(finding, original, len(header), after_imports))
        silenced += [_moved(f, original, len(header), after_imports) for f in result.suppressed
                     if f.line > len(header)]
    for reports in unused.values():  # a file-level suppression is unused only if no group used it
        if len(reports) == len(groups):
            kept.append(reports[0])
    kept.sort(key=lambda f: f.sort_key)
    once = {code for code, rule in registry().items() if rule.ONCE_PER_FILE}
    seen: set[str] = set()
    firsts: list[Finding] = []
    for finding in kept:  # a rule that reports a file's first occurrence: the first of all the groups'
        if finding.code in once:
            if finding.code in seen:
                continue
            seen.add(finding.code)
        firsts.append(finding)
    return file_result(path, firsts, sorted(silenced, key=lambda f: f.sort_key), lines)


HEADER_LIMIT = 32 * 2**10  # characters of context ahead of a group, imports aside
_SMALL = 400  # characters of an assignment or a definition's header taken as context
_SMALL_BLOCK = 1200  # characters of a top-level `try:` / `if` block of imports and assignments taken as context


def _context(statements: list[Statement], lines: list[str], start: int, end: int,
             directives: list[int]) -> tuple[list[int], str]:
    """What goes ahead of the group of lines start..end so that names resolve as in the whole file: the file's
    other top-level imports, small module-level assignments and `try`/`if` set-up blocks, definitions as stubs
    (`def f(...): ...`), and its file-level suppressions; in the file's order. The original line of each line of
    it, and its text."""
    chosen: list[tuple[int, list[int], str]] = []  # (first line, original lines, text)
    budget = HEADER_LIMIT
    for statement in statements:
        if start <= statement.start <= end:
            continue
        span = range(statement.start, statement.end + 1)
        size = sum(len(lines[n - 1]) + 1 for n in span)
        if statement.first in ("import", "from"):
            chosen.append((statement.start, list(span), "".join(lines[n - 1] + "\n" for n in span)))
            continue
        assignment = statement.assigns and not statement.compound and size <= _SMALL
        if assignment or (statement.first in ("try", "if") and not statement.defines and size <= _SMALL_BLOCK):
            part = list(span)
        elif statement.first in ("def", "class", "async", "@") and statement.compound:
            part = list(range(statement.start, statement.header_end + 1))
            if sum(len(lines[n - 1]) + 1 for n in part) > _SMALL:
                continue
        else:
            continue
        text = "".join(lines[n - 1] + "\n" for n in part)
        if part[-1] != statement.end:  # a definition's header: its body stands in as `...`
            text += "    ...\n"
            part.append(0)  # a line of no file
        if len(text) > budget:
            continue
        budget -= len(text)
        chosen.append((statement.start, part, text))
    for line in directives:
        if not start <= line <= end:
            chosen.append((line, [line], lines[line - 1] + "\n"))
    chosen.sort(key=lambda item: item[0])
    return [n for _, part, _ in chosen for n in part], "".join(text for _, _, text in chosen)


def _moved(finding: Finding, original: Callable[[int], int], header: int, after_imports: int) -> Finding:
    line, end_line = original(finding.line), original(finding.end_line)  # a finding's lines are all its group's
    fix = finding.fix
    if fix is not None:
        edits = []
        for edit in fix.edits:
            inserted = (edit.line, edit.column) == (edit.end_line, edit.end_column) and edit.column == 1
            if inserted and all(line.startswith(("import ", "from ")) for line in edit.content.splitlines()):
                edits.append(replace(edit, line=after_imports, end_line=after_imports))  # where the file's go
            elif original(edit.line) and original(edit.end_line):  # its lines, or the file's lines ahead of it
                whole_lines = edit.end_column == 1 and edit.end_line > edit.line  # up to the next line's start
                last = original(edit.end_line - 1) + 1 if whole_lines else original(edit.end_line)
                edits.append(replace(edit, line=original(edit.line), end_line=last))
            else:
                fix = None  # it would edit a stand-in line: not offered from here
                break
        if fix is not None:
            fix = Fix(fix.applicability, fix.title, tuple(edits))
    return replace(finding, line=line, end_line=end_line, fix=fix)


def _import_line(statements: list[Statement]) -> int:
    """Where a new import goes in the whole file (as the engine places it): after the last top-level import, else
    after the docstring and `from __future__` imports, else on the first line."""
    imports = [s.end + 1 for s in statements if s.first in ("import", "from")]
    if imports:
        return max(imports)
    first = statements[0] if statements else None
    return first.end + 1 if first is not None and first.string else 1


__all__ = ["CHUNKED_ABOVE", "analyse_large", "top_level_statements"]
