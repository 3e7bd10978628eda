"""One file's analysis: bytes -> source -> libcst tree -> one batched traversal -> findings.

`analyse_file` is a pure function of its arguments and of the names beside the file on disk (check.LOCATION), so
files can be analysed in any order, in parallel, and cached. Positions are computed only for files that produced a
finding or hold a suppression comment.
"""

from __future__ import annotations

import ast
import functools
import gc
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import cast

import libcst as cst
from libcst.metadata import CodeRange

from portcheck.findings import (
    Applicability,
    Edit,
    FileError,
    FileJob,
    FileResult,
    FileTooLarge,
    Finding,
    Fix,
    python_lines,
)
from portcheck.knowledge import load
from portcheck.rules import registry
from portcheck.static import manifests
from portcheck.static.branches import float64_branch, for_old_torch, training_branch
from portcheck.static.check import CHECKS, LOCATION, Check, Context, FixPlan, Hit
from portcheck.static.chunks import CHUNKED_ABOVE, analyse_large
from portcheck.static.compile.environments import analyse_manifest
from portcheck.static.gated_tests import CudaGatedTests
from portcheck.static.names import function_scope
from portcheck.static.nesting import (
    MAX_CONCATENATED,
    MAX_FLAT_LINKS,
    flat_chain_depth,
    link_count,
    longest_concatenation,
    on_parse_stack,
    operator_count,
)
from portcheck.static.positions import Positions
from portcheck.static.semantic.graph import apply
from portcheck.static.semantic.summary import summarise
from portcheck.static.source import SourceError, decode
from portcheck.static.suppression import apply_suppressions, file_result, might_hold_suppression, parse_comment
from portcheck.static.walk import STATEMENTS, walk
from portcheck.summaries import Summary

registry()  # importing the rule modules registers their checks

# Node type -> the check functions to run on it.
_Table = dict[type[cst.CSTNode], tuple[Callable[[cst.CSTNode, Context], bool | None], ...]]
# A comment, and the statements around it (outermost first).
_Comments = list[tuple[cst.Comment, tuple[cst.CSTNode, ...]]]



@functools.cache
def _plan(enabled: frozenset[str]) -> tuple[Check, ...]:
    """For one set of enabled codes, once per process: the checks that may report one of them."""
    return tuple(c for c in CHECKS if c.codes & enabled)


def _table(checks: tuple[Check, ...], text: str) -> _Table:
    """Node type -> the check functions to run on it, for the checks whose tokens this file holds: a file that
    never says `autocast` runs no autocast check on its 70,000 names."""
    present: dict[str, bool] = {}
    active = []
    for c in checks:
        for token in c.tokens:
            found = present.get(token)
            if found is None:
                # `import apex`, `from apex`, `"apex`...: one search for the word they share rules most out.
                core = _core(token)
                found = present.get(core)
                if found is None:
                    found = present[core] = core in text
                if found and core != token:
                    found = token in text
                present[token] = found
            if found:
                active.append(c)
                break
    return _dispatch(tuple(active))


@functools.cache
def _core(token: str) -> str:
    """The longest word in a token (`apex` in `import apex`), or the token itself."""
    return max(re.findall(r"\w+", token), key=len, default=token)


@functools.lru_cache(maxsize=256)
def _dispatch(checks: tuple[Check, ...]) -> _Table:
    table: dict[type[cst.CSTNode], list[Callable[[cst.CSTNode, Context], bool | None]]] = defaultdict(list)
    for c in checks:
        for kind in c.node_types:
            table[kind].append(c.fn)
    return {kind: tuple(fns) for kind, fns in table.items()}


def _traverse(module: cst.Module, ctx: Context, table: _Table, comments: _Comments | None) -> None:
    """The one batched traversal: every enabled check on the nodes it registered for, with the statement,
    function and loop stacks kept for them. With `comments`, also collect the comments (and where they are)."""
    statements, scopes, functions, loops, chains = ctx.statements, ctx.scopes, ctx.functions, ctx.loops, ctx.chains
    get = table.get

    def enter(node: cst.CSTNode) -> bool:
        kind = type(node)
        # `kind is`, not isinstance (this runs on every node): mypy does not narrow `node` by it, hence the casts.
        if kind is cst.Comment:
            assert comments is not None  # the walk visits comments only when they are collected
            comments.append((cast(cst.Comment, node), tuple(statements)))
            return False
        if kind in STATEMENTS:
            statements.append(node)
            chains[node] = tuple(statements)
            if kind is cst.FunctionDef:
                function = cast(cst.FunctionDef, node)
                scopes.append(function_scope(function))
                functions.append(function)
            elif kind is cst.For or kind is cst.While:
                loops.append(cast("cst.For | cst.While", node))
        descend = True
        for fn in get(kind, ()):
            if fn(node, ctx) is False:
                descend = False
        return descend

    def leave(node: cst.CSTNode) -> None:
        kind = type(node)
        if kind in STATEMENTS:
            statements.pop()
            if kind is cst.FunctionDef:
                scopes.pop()
                functions.pop()
            elif kind is cst.For or kind is cst.While:
                loops.pop()

    only = frozenset(table) | STATEMENTS | {cst.Comment}
    walk(module, enter, leave, comments=comments is not None, only=only)


def analyse_file(job: FileJob) -> FileResult:
    try:
        data = job.read()
    except OSError as exc:
        return FileResult(job.path, errors=(FileError(job.path, f"cannot read: {exc.strerror or exc}"),))
    except FileTooLarge as exc:
        return FileResult(job.path, errors=(FileError(job.path, str(exc)),))
    collecting = gc.isenabled()
    # A parse allocates a million small objects and frees them by reference counting (a libcst tree has no
    # cycles): the cyclic collector would only walk them again and again, a fifth of a scan's time.
    gc.disable()
    placed = LOCATION.set(job.location or "")  # where the file is on disk, for what sits beside it
    try:
        text = manifests.decode(data) if manifests.kind(job.path) else decode(data).text
        return _analysed(text, job.path, job.chip, job.stack, job.enabled, job.sdk)
    except Exception as exc:  # a bug of ours must not stop the scan of the other files
        return failed(job.path, exc)
    finally:
        LOCATION.reset(placed)
        if collecting:
            gc.enable()


def failed(path: str, exc: Exception) -> FileResult:
    """The one error entry for a file whose analysis or fix raised: every file operation (scan, fix, diff,
    review, stdin) ends a failure here, so one file never stops the others."""
    if isinstance(exc, SourceError):
        return FileResult(path, errors=(FileError(path, exc.message, exc.line),))
    if isinstance(exc, RecursionError):
        return FileResult(path, errors=(FileError(path, "too deeply nested to analyse (recursion limit)"),))
    if isinstance(exc, MemoryError):
        return FileResult(path, errors=(FileError(path, "out of memory while analysing it"),))
    return FileResult(path, errors=(FileError(path, f"internal error: {type(exc).__name__}: {exc}"),))


def parse(text: str) -> cst.Module:
    """`libcst.parse_module` without re-validating each node the parser has just built from valid source.

    Every node's `__post_init__` runs libcst's `_validate`, which only refuses trees that code could have
    assembled by hand wrongly (a parse of valid text never is one; libcst's own note on `__post_init__` says
    as much). Skipping it takes a seventh off the parse. Construction is restored afterwards, so the nodes fixes
    build are validated as usual.
    """
    with _validation_off():
        return cst.parse_module(text)


@contextmanager
def _validation_off() -> Iterator[None]:
    base = cst.CSTNode
    saved = base.__dict__["__post_init__"]
    base.__post_init__ = _no_validation  # type: ignore[method-assign]  # swapped for the parse on purpose
    try:
        yield
    finally:
        base.__post_init__ = saved  # type: ignore[method-assign]  # libcst's own, restored


def _no_validation(self: cst.CSTNode) -> None:
    return None


def analyse_text(text: str, path: str, chip: str, stack: str, enabled: frozenset[str], sdk: str = "") -> FileResult:
    """One file on its own: its findings with the file's own call graph applied (a project's scan applies the
    whole project's graph instead, to what `analyse_file` returns)."""
    return apply([_analysed(text, path, chip, stack, enabled, sdk)])[0][0]


def _analysed(text: str, path: str, chip: str, stack: str, enabled: frozenset[str], sdk: str = "") -> FileResult:
    if manifests.kind(path) is not None:  # requirements*.txt, pyproject.toml, environment.yml
        return analyse_manifest(text, path, chip, stack, enabled)
    if len(text) > CHUNKED_ABOVE:  # memory bounded by a group of statements, not the file
        return analyse_large(text, path, lambda part: _analyse_python(part, path, chip, stack, enabled, sdk))
    return _analyse_python(text, path, chip, stack, enabled, sdk)


def _analyse_python(text: str, path: str, chip: str, stack: str, enabled: frozenset[str], sdk: str) -> FileResult:
    # Python's own parser first: its messages and lines are the ones users know, it is a tenth of libcst's
    # cost, and it refuses what would crash libcst's native parser (thousands of nested brackets segfault it).
    try:
        tree = compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        assert isinstance(tree, ast.Module)  # what compile() makes of mode "exec" with PyCF_ONLY_AST
    except SyntaxError as exc:
        return FileResult(path, errors=(FileError(path, f"syntax error: {exc.msg}", exc.lineno),))
    except RecursionError:
        return FileResult(path, errors=(FileError(path, "too deeply nested to analyse (Python's parser gave up)"),))
    except MemoryError:
        return FileResult(path, errors=(FileError(path, "too deeply nested to analyse (Python's parser ran out of "
                                                        "memory)"),))
    except ValueError as exc:
        return FileResult(path, errors=(FileError(path, f"cannot parse: {str(exc) or type(exc).__name__}"),))
    summary = summarise(tree, text)
    links, line = flat_chain_depth(tree, text)
    if links > MAX_FLAT_LINKS:
        return FileResult(path, errors=(FileError(
            path, f"too deeply nested for the parser: {links:,} chained and/or operators or dotted names in one "
                  f"expression (the limit is {MAX_FLAT_LINKS:,})", line or None),))
    table = _table(_plan(enabled), text)
    may_suppress = might_hold_suppression(text)
    if not table and not may_suppress:
        return FileResult(path, summary=summary)  # nothing here can fire
    try:
        module = on_parse_stack(lambda: parse(text))
    except cst.ParserSyntaxError as exc:
        # Python's parser took the file: what libcst refuses is libcst's limit, not a syntax error.
        count, line = longest_concatenation(text)
        if count > MAX_CONCATENATED:
            return FileResult(path, errors=(FileError(
                path, f"too many strings in one expression for the parser: {count:,} written one after another "
                      f"(libcst takes at most {MAX_CONCATENATED:,}); Python itself accepts the file", line),))
        message = " ".join(exc.message.split())
        return FileResult(path, errors=(FileError(path, f"cannot parse (Python's parser accepts it, libcst does "
                                                        f"not): {message}", exc.raw_line),))

    # the walks recurse once a link: on the parse's stack
    if links > DEEP_CHAIN or link_count(text) > DEEP_CHAIN or operator_count(text) > DEEP_OPERATORS:
        analysed = on_parse_stack(lambda: _analyse_tree(module, tree, text, path, chip, stack, enabled, sdk, table,
                                                        may_suppress, summary), recursion=DEEP_RECURSION)
    else:
        analysed = _analyse_tree(module, tree, text, path, chip, stack, enabled, sdk, table, may_suppress, summary)
    return replace(analysed, summary=summary)


DEEP_CHAIN = 1_000  # links of a chain past which the analysis runs on the parse's stack
# operators (and/or, arithmetic, dots) past which it does too: a check may recurse down a chain inside the walk that
# recurses down it (a probe looked for in an `if` test, the test's text for a message): a 400-term `if` test and an
# 800-term sum passed Python's 1,000 frames, below the 1,000 links above
DEEP_OPERATORS = 150
DEEP_RECURSION = 4 * MAX_FLAT_LINKS  # Python frames: a walk of a chain at the limit, and a walk nested in it, with room


def _analyse_tree(module: cst.Module, tree: ast.Module, text: str, path: str, chip: str, stack: str,
                  enabled: frozenset[str], sdk: str, table: _Table, may_suppress: bool,
                  summary: Summary | None = None) -> FileResult:
    ctx = Context(module, chip, stack, enabled, text, path, sdk)
    ctx.summary = summary
    comments: _Comments | None = [] if may_suppress else None
    _traverse(module, ctx, table, comments)
    if ctx.hits:
        gated = CudaGatedTests(module)
        ctx.hits = [hit for hit in ctx.hits if not gated.holds(hit.chain)]  # a CUDA-only test: skipped on Neuron
        ctx.hits = [for_old_torch(float64_branch(hit, ctx), ctx) for hit in ctx.hits]  # never run on Neuron
        ctx.hits = [training_branch(hit, ctx) for hit in ctx.hits]  # not taken in eval mode (inf2)

    suppressing = [(c, chain) for c, chain in comments or () if might_hold_suppression(c.value)]
    if not ctx.hits and not suppressing:
        return FileResult(path)
    positions = Positions(module, tree, text)
    findings = [_finding(hit, path, ctx, positions) for hit in ctx.hits]
    suppressions = []
    for comment, chain in suppressing:
        where = positions.of(comment, chain)
        suppressions.extend(
            parse_comment(comment.value, where.start.line, where.start.column + 1, where.end.column + 1))
    findings, suppressed = apply_suppressions(findings, ctx.hits, positions, suppressions, enabled, path)
    return file_result(path, findings, suppressed, python_lines(ctx.text))


def _import_line(module: cst.Module, positions: Positions) -> int:
    """The line a new import goes on: after the last top-level import, else after the docstring and
    `from __future__` imports, else the first line."""
    line = 1
    for index, stmt in enumerate(module.body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            break
        small = stmt.body[0]
        docstring = index == 0 and isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)
        if docstring or isinstance(small, (cst.Import, cst.ImportFrom)):
            line = positions.of(stmt, (stmt,)).end.line + 1
        else:
            break
    else:
        return line
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], (cst.Import, cst.ImportFrom)):
            line = max(line, positions.of(stmt, (stmt,)).end.line + 1)
    return line


def _fix(plan: FixPlan, hit: Hit, ctx: Context, positions: Positions) -> Fix:
    edits = []
    for step in plan.replacements:
        where = positions.of(step.node, ctx.chains.get(step.node, hit.chain))
        if step.whole_lines:
            edits.append(Edit(where.start.line, 1, where.end.line + 1, 1, step.content))
        else:
            edits.append(Edit(where.start.line, where.start.column + 1, where.end.line, where.end.column + 1,
                              step.content))
    if plan.imports:
        line = ctx.memo("import-line", ctx.module, lambda: _import_line(ctx.module, positions))
        newline = ctx.module.default_newline
        edits.append(Edit(line, 1, line, 1, "".join(f"{imp}{newline}" for imp in plan.imports)))
    safe, title = plan.safe, plan.title
    if (safe and hit.code in _HARMLESS_UNTIL_USED and _at_import(hit.chain)
            and any(_NEURON_ONLY.search(step.content) for step in plan.replacements)):
        # `DEVICE = torch.device("neuron")`, `def f(device=torch.device("neuron"))`: evaluated when the module is
        # imported, so the module would no longer import on a machine without Neuron's torch
        safe, title = False, f"{title} (evaluated at import: the module then imports only where Neuron's torch is)"
    applicability = Applicability.SAFE if safe else Applicability.UNSAFE
    return Fix(applicability, title, tuple(sorted(edits, key=lambda e: (e.line, e.column))))


# What only names a device or a backend: harmless at import on a machine without CUDA (`torch.device("cuda")`,
# `torch.compile(m)`, `@torch.autocast("cuda")`), where its Neuron form raises. (`.cuda()` or a tensor made on
# "cuda" already raise there, as does `backend="neuronx"`: their fix changes nothing at import on such a machine.)
_HARMLESS_UNTIL_USED = frozenset({"PC102", "PC601", "PC711", "PC712"})
# The Neuron device type or compile backend, which stock torch refuses (`torch.device("neuron")`: "Expected one of
# cpu, cuda, ..."; `torch.compile(backend="neuron")`: InvalidBackend; observed with torch 2.13).
_NEURON_ONLY = re.compile(r"""["']neuron(:\d+)?["']""")


def _at_import(chain: tuple[cst.CSTNode, ...]) -> bool:
    """The node runs when the module is imported: at module level, in a class body, or in a function's header
    (a default argument, a decorator), not inside a function's body."""
    return not any(isinstance(stmt, cst.FunctionDef) for stmt in chain[:-1])


def _finding(hit: Hit, path: str, ctx: Context, positions: Positions) -> Finding:
    info = load().rules[hit.code]
    where = positions.of(hit.node, ctx.chains.get(hit.node, hit.chain))
    if hit.start is not None:  # the construct begins before the node reported (PC401's q @ kᵀ before its @ v)
        begun = positions.of(hit.start, ctx.chains.get(hit.start, hit.chain)).start
        if (begun.line, begun.column) < (where.start.line, where.start.column):
            where = CodeRange(begun, where.end)
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
        fix=_fix(hit.fix, hit, ctx, positions) if hit.fix is not None else None,
        requires=hit.requires,
        kept=hit.kept,
        default_of=hit.default_of,
        host_if=hit.host_if,
        unless_passed=hit.unless_passed,
    )


__all__ = ["FileJob", "analyse_file", "analyse_text", "failed"]
