"""Fallbacks: whether a use of a CUDA-only library has one on a host without the library (then its finding is
info). Every check of the family asks, and so does custom-attention's PC402."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.check import Context
from portcheck.static.syntax import block_body, dotted_name
from portcheck.static.values import availability_probe, catches_import_error

_REQUIRES = ("require_backends", "requires_backends", "requires")


def fallback(ctx: Context, node: cst.CSTNode | None = None) -> str | None:
    """Why the current statement (or `node`, a compound statement being visited) has a fallback on a host
    without the library, or None.

    Like `values.guard`, with two differences. A `try` guards only the statements of its body (an import in
    its `except` handler is the fallback and fails on its own), and only if some handler carries on rather
    than raising again. And a function that checks availability first (`if not is_bitsandbytes_available():
    raise ImportError(...)`) counts as guarded, as one decorated `@requires_backends` does.
    """
    chain = ctx.statements
    last = len(chain) - 2 if chain and chain[-1] is node else len(chain) - 1
    for index in range(last, -1, -1):
        stmt = chain[index]
        child = chain[index + 1] if index + 1 < len(chain) else None
        if isinstance(stmt, (cst.Try, cst.TryStar)) and _in_block(stmt.body, child) and _falls_back(stmt):
            return "inside `try`/`except`"
        if isinstance(stmt, cst.If) and (probe := availability_probe(stmt.test, ctx)):
            return f"under `if {probe}`"
        if isinstance(stmt, cst.FunctionDef) and (reason := _checked_first(ctx, stmt, child) or _required(stmt)):
            return reason
    return None


def fallback_severity(reason: str | None) -> Severity | None:
    """Info where there is a fallback (`reason`), else the rule's own severity."""
    return Severity.INFO if reason else None


def _falls_back(stmt: cst.Try | cst.TryStar) -> bool:
    """The `try` catches ImportError and some handler carries on (`except ImportError: raise ImportError("pip
    install ...")` is a better message, not a fallback)."""
    return catches_import_error(stmt) and not all(_exits(handler.body, raises_only=True) for handler in stmt.handlers)


def _in_block(block: cst.BaseSuite, child: cst.CSTNode | None) -> bool:
    return any(s is child for s in block_body(block))


def _checked_first(ctx: Context, function: cst.FunctionDef, child: cst.CSTNode | None) -> str | None:
    """`if not is_x_available(): raise ...` among the statements of `function` that precede `child`."""
    for stmt in block_body(function.body):
        if stmt is child:
            return None
        if isinstance(stmt, cst.If) and _exits(stmt.body) and (probe := availability_probe(stmt.test, ctx)):
            return f"after the `{probe}` check"
    return None


def _exits(block: cst.BaseSuite, raises_only: bool = False) -> bool:
    """The block ends in `raise` (or `return`)."""
    body = block_body(block)
    last = body[-1] if body else None
    kinds = cst.Raise if raises_only else (cst.Raise, cst.Return)
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, kinds) for s in last.body)


def _required(function: cst.FunctionDef) -> str | None:
    for decorator in function.decorators:
        expr = decorator.decorator
        text = dotted_name(expr.func if isinstance(expr, cst.Call) else expr) or ""
        if text.endswith(_REQUIRES):
            return f"in a function decorated `@{text}`"
    return None


__all__ = ["fallback", "fallback_severity"]
