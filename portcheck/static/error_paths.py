"""Error paths: code in an `if` block that ends by failing (`raise`, `assert False`, `torch._assert(False, ...)`)
only words the error, so dynamic-shape and host-sync rules stay quiet there."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import dotted_name, positional


def error_path(ctx: Context) -> bool:
    """The current statement sits in an `if` block that ends by failing: `raise`, `assert False`,
    `torch._assert(False, ...)`: it only words the error."""
    for statement in reversed(ctx.statements[:-1]):
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(statement, cst.If) and isinstance(statement.body, cst.IndentedBlock):
            # only simple statements ending in the failure: a block that does work and returns is no error path
            lines = [line for line in statement.body.body if isinstance(line, cst.SimpleStatementLine)]
            if (lines and len(lines) == len(statement.body.body) and _fails(ctx, lines[-1])
                    and _contains_current(statement.body, ctx)
                    and not any(isinstance(small, cst.Return) for line in lines for small in line.body)):
                return True
    return False


def _contains_current(block: cst.IndentedBlock, ctx: Context) -> bool:
    return any(stmt in ctx.statements for stmt in block.body)


def _fails(ctx: Context, statement: cst.BaseStatement) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    small = statement.body[-1]
    if isinstance(small, cst.Raise):
        return True
    if isinstance(small, cst.Assert):
        return dotted_name(small.test) == "False"
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        first = positional(call, 0)
        return (ctx.qualname(call.func) == "torch._assert" and first is not None
                and dotted_name(first.value) == "False")
    return False


__all__ = ["error_path"]
