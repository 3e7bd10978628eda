"""Error paths: code in an `if` block that ends by failing (`raise`, `assert False`, `torch._assert(False, ...)`)
only words the error, so dynamic-shape and host-sync rules stay quiet there."""

from __future__ import annotations

import functools

import libcst as cst

from portcheck.static.ancestry import ancestors, holds
from portcheck.static.check import Context
from portcheck.static.syntax import dotted_name, positional
from portcheck.static.walk import visit


def error_path(ctx: Context, node: cst.CSTNode | None = None) -> bool:
    """The current statement sits in an `if` block that ends by failing: `raise`, `assert False`,
    `torch._assert(False, ...)`; or `node` is in the message of an `assert` (`assert n > 0, f"{t.item()}"`), which
    is evaluated only when the assertion fails, or in a message a check builds only on failure (`lambda: f"..."`):
    it only words the error."""
    if node is not None and (_in_assert_message(ctx, node) or _in_lazy_message(ctx, node)):
        return True
    for statement in reversed(ctx.statements[:-1]):
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(statement, cst.If) and isinstance(statement.body, cst.IndentedBlock):
            # a block ending in the failure that nothing in it leaves early (`return`, `break`, `continue`): what
            # it holds, nested tests of the error's kind included, only prepares the error
            block = statement.body
            if (block.body and _fails(ctx, block.body[-1]) and _contains_current(block, ctx)
                    and not ctx.memo("leaves-early", block, functools.partial(_leaves, block))):
                return True
    return False


def _in_assert_message(ctx: Context, node: cst.CSTNode) -> bool:
    statement = ctx.statements[-1] if ctx.statements else None
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    messages = [small.msg for small in statement.body if isinstance(small, cst.Assert) and small.msg is not None]
    return bool(messages) and any(holds(ctx, message, node) for message in messages)


_TEXT = (cst.FormattedString, cst.SimpleString, cst.ConcatenatedString)


def _in_lazy_message(ctx: Context, node: cst.CSTNode) -> bool:
    """`node` is in a message built only when asked for: a lambda of no parameters that makes a string
    (`torch._check(ok, lambda: f"got {t.item()}")`), which a check calls only to word its failure."""
    return any(isinstance(holder, cst.Lambda) and _no_parameters(holder.params) and isinstance(holder.body, _TEXT)
               for holder in ancestors(ctx, node))


def _no_parameters(params: cst.Parameters) -> bool:
    return not (params.params or params.posonly_params or params.kwonly_params or params.star_kwarg
                or isinstance(params.star_arg, cst.Param))


def _leaves(block: cst.IndentedBlock) -> bool:
    """Something in the block ends it another way than failing: `return`, `break`, `continue`, `yield`."""
    found = False

    class Finder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            if isinstance(node, (cst.Return, cst.Break, cst.Continue, cst.Yield)):
                found = True
            return not found and not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda))

    visit(block, Finder())
    return found


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
