"""One file's analysis: bytes -> source -> libcst tree -> one batched traversal -> findings.

`analyse_file` is a pure function of its arguments so files can be analysed in any order, in parallel,
and cached. Positions are computed only for files that produced a finding or hold a suppression comment.
"""

from __future__ import annotations

import ast
import functools
from collections import Counter, defaultdict
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from portcheck.findings import Edit, FileError, FileResult, Finding, Fix, fingerprinted
from portcheck.knowledge import load
from portcheck.static import (  # noqa: F401  (importing a family module registers its checks)
    attention,
    compilation,
    cuda_api,
    distributed,
    dynamic_shape,
    host_sync,
    libraries,
    ops,
    training,
)
from portcheck.static.names import function_scope
from portcheck.static.rule import CHECKS, RULES, Context, FixPlan, Hit
from portcheck.static.source import SourceError, decode
from portcheck.static.suppress import Suppression, might_hold_suppression, parse_comment

UNUSED_SUPPRESSION = "PC900"

_STATEMENTS = (
    cst.SimpleStatementLine, cst.If, cst.For, cst.While, cst.With, cst.Try, cst.TryStar,
    cst.FunctionDef, cst.ClassDef, cst.Match,
)


@dataclass(frozen=True)
class FileJob:
    """Everything analyse_file needs about one file; picklable for a process pool."""

    path: str  # as shown in reports (relative to the working directory)
    chip: str
    stack: str
    enabled: frozenset[str]
    data: bytes | None = None  # None: read from `location`
    location: str | None = None


@functools.cache
def _plan(enabled: frozenset[str]) -> tuple[dict[type, tuple], tuple[str, ...]]:
    """For one set of enabled codes, once per process: node type -> check functions, and the tokens
    without which no enabled check can fire."""
    table: dict[type, list] = defaultdict(list)
    tokens: dict[str, None] = {}
    for c in CHECKS:
        if c.codes & enabled:
            for kind in c.node_types:
                table[kind].append(c.fn)
            tokens.update(dict.fromkeys(c.tokens))
    return {kind: tuple(fns) for kind, fns in table.items()}, tuple(tokens)


class _Traversal(cst.CSTVisitor):
    def __init__(self, ctx: Context, table: dict[type, tuple], comments: list[cst.Comment]) -> None:
        self.ctx = ctx
        self.table = table
        self.comments = comments

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        if kind is cst.Comment:
            self.comments.append(node)  # type: ignore[arg-type]
            return False
        if kind in _STATEMENTS:
            self.ctx.statements.append(node)
            if kind is cst.FunctionDef:
                self.ctx.scopes.append(function_scope(node))  # type: ignore[arg-type]
                self.ctx.functions.append(node)  # type: ignore[arg-type]
            elif kind is cst.For or kind is cst.While:
                self.ctx.loops.append(node)
        descend = True
        for fn in self.table.get(kind, ()):
            if fn(node, self.ctx) is False:
                descend = False
        return descend

    def on_leave(self, original_node: cst.CSTNode) -> None:
        kind = type(original_node)
        if kind in _STATEMENTS:
            self.ctx.statements.pop()
            if kind is cst.FunctionDef:
                self.ctx.scopes.pop()
                self.ctx.functions.pop()
            elif kind is cst.For or kind is cst.While:
                self.ctx.loops.pop()


def analyse_file(job: FileJob) -> FileResult:
    try:
        if job.data is None:
            with open(job.location or job.path, "rb") as handle:
                data = handle.read()
        else:
            data = job.data
    except OSError as exc:
        return FileResult(job.path, errors=(FileError(job.path, f"cannot read: {exc.strerror or exc}"),))
    try:
        source = decode(data)
        return analyse_text(source.text, job.path, job.chip, job.stack, job.enabled)
    except SourceError as exc:
        return FileResult(job.path, errors=(FileError(job.path, exc.message, exc.line),))
    except RecursionError:
        return FileResult(job.path, errors=(FileError(job.path, "too deeply nested to analyse (recursion limit)"),))
    except Exception as exc:  # a bug of ours must not stop the scan of the other files
        return FileResult(job.path, errors=(FileError(job.path, f"internal error: {type(exc).__name__}: {exc}"),))


def analyse_text(text: str, path: str, chip: str, stack: str, enabled: frozenset[str]) -> FileResult:
    # Python's own parser first: its messages and lines are the ones users know, it is a tenth of libcst's
    # cost, and it refuses what would crash libcst's native parser (thousands of nested brackets segfault it).
    try:
        compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return FileResult(path, errors=(FileError(path, f"syntax error: {exc.msg}", exc.lineno),))
    except RecursionError:
        return FileResult(path, errors=(FileError(path, "too deeply nested to analyse (Python's parser gave up)"),))
    except (ValueError, MemoryError) as exc:
        return FileResult(path, errors=(FileError(path, f"cannot parse: {exc}"),))
    table, tokens = _plan(enabled)
    if not might_hold_suppression(text) and not any(token in text for token in tokens):
        return FileResult(path)  # nothing here can fire
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        message = " ".join(exc.message.split())
        return FileResult(path, errors=(FileError(path, f"syntax error: {message}", exc.raw_line),))

    ctx = Context(module, chip, stack, enabled, text)
    comments: list[cst.Comment] = []
    module.visit(_Traversal(ctx, table, comments))

    suppressing = [c for c in comments if might_hold_suppression(c.value)]
    if not ctx.hits and not suppressing:
        return FileResult(path)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    findings = [_finding(hit, path, ctx, positions) for hit in ctx.hits]
    suppressions = []
    for comment in suppressing:
        where = positions[comment]
        suppressions.extend(
            parse_comment(comment.value, where.start.line, where.start.column + 1, where.end.column + 1))
    findings, suppressed = _apply_suppressions(findings, ctx.hits, positions, suppressions, enabled, path)
    # one numbering for both, so a silenced finding never shares a fingerprint with a live twin
    silenced = Counter((f.sort_key, f.message) for f in suppressed)
    kept, quiet = [], []
    for f in fingerprinted([*findings, *suppressed], ctx.text.splitlines(), path):
        key = (f.sort_key, f.message)
        if silenced[key]:
            silenced[key] -= 1
            quiet.append(f)
        else:
            kept.append(f)
    return FileResult(path, findings=tuple(kept), suppressed=tuple(quiet))


def _import_line(module: cst.Module, positions) -> int:
    """The line a new import goes on: after the last top-level import, else after the docstring and
    `from __future__` imports, else the first line."""
    line = 1
    for index, stmt in enumerate(module.body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            break
        small = stmt.body[0]
        docstring = index == 0 and isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)
        if docstring or isinstance(small, (cst.Import, cst.ImportFrom)):
            line = positions[stmt].end.line + 1
        else:
            break
    else:
        return line
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], (cst.Import, cst.ImportFrom)):
            line = max(line, positions[stmt].end.line + 1)
    return line


def _fix(plan: FixPlan, ctx: Context, positions) -> Fix:
    edits = []
    for step in plan.replacements:
        where = positions[step.node]
        if step.whole_lines:
            edits.append(Edit(where.start.line, 1, where.end.line + 1, 1, step.content))
        else:
            edits.append(Edit(where.start.line, where.start.column + 1, where.end.line, where.end.column + 1,
                              step.content))
    if plan.imports:
        line = ctx.memo("import-line", ctx.module, lambda: _import_line(ctx.module, positions))
        newline = ctx.module.default_newline
        edits.append(Edit(line, 1, line, 1, "".join(f"{imp}{newline}" for imp in plan.imports)))  # type: ignore[arg-type]
    return Fix("safe" if plan.safe else "unsafe", plan.title, tuple(sorted(edits, key=lambda e: (e.line, e.column))))


def _finding(hit: Hit, path: str, ctx: Context, positions) -> Finding:
    info = load().rules[hit.code]
    where = positions[hit.node]
    return Finding(
        code=info.code,
        name=info.name,
        category=info.category,
        severity=hit.severity or info.severity,
        message=hit.message,
        path=path,
        line=where.start.line,
        column=where.start.column + 1,
        end_line=where.end.line,
        end_column=where.end.column + 1,
        fix=_fix(hit.fix, ctx, positions) if hit.fix is not None else None,
    )


def _statement_lines(hit: Hit, finding: Finding, positions) -> tuple[int, int]:
    first, last = finding.line, finding.end_line
    statement = hit.statement
    if statement is not None:
        where = positions[statement]
        first = min(first, where.start.line)
        if isinstance(statement, cst.SimpleStatementLine):
            last = max(last, where.end.line)
        else:
            body = getattr(statement, "body", None)
            has_body = isinstance(body, cst.CSTNode) and body in positions
            header_end = positions[body].start.line if has_body else where.start.line
            last = max(last, header_end)
    return first, last


def _apply_suppressions(findings, hits, positions, suppressions: list[Suppression], enabled,
                        path) -> tuple[list[Finding], list[Finding]]:
    """The findings kept, and those a suppression comment silenced."""
    file_level = [s for s in suppressions if s.file_level]
    by_line: dict[int, list[Suppression]] = defaultdict(list)
    for s in suppressions:
        if not s.file_level:
            by_line[s.line].append(s)
    kept, silenced = [], []
    for finding, hit in zip(findings, hits, strict=True):
        first, last = _statement_lines(hit, finding, positions)
        suppressed = False
        for s in file_level + [s for line in range(first, last + 1) for s in by_line.get(line, ())]:
            if s.covers(finding.code):
                s.used.add(finding.code)
                suppressed = True
        (silenced if suppressed else kept).append(finding)
    if UNUSED_SUPPRESSION in enabled:
        kept.extend(_unused(suppressions, enabled, path))
    return kept, silenced


def _unused(suppressions: list[Suppression], enabled: frozenset[str], path: str) -> list[Finding]:
    rules = load().rules
    info = rules[UNUSED_SUPPRESSION]
    out = []
    for s in suppressions:
        if not s.ours:
            continue
        if s.codes is None:
            problems = [] if s.used else ["it suppresses nothing"]
        else:
            unknown = sorted(c for c in s.codes if c not in rules)
            unused = sorted(c for c in s.codes if c in rules and c in enabled and c not in s.used)
            problems = [f"no {c} finding here" for c in unused] + [f"{c} is not a portcheck rule" for c in unknown]
        if problems:
            kind = "file-level suppression" if s.file_level else "suppression"
            out.append(Finding(
                code=info.code, name=info.name, category=info.category, severity=info.severity,
                message=f"unused {kind}: {'; '.join(problems)}; remove it",
                path=path, line=s.line, column=s.column, end_line=s.line, end_column=s.end_column,
            ))
    return out


# RULES is re-exported: importing the engine is what registers every rule class.
__all__ = ["RULES", "FileJob", "analyse_file", "analyse_text"]
