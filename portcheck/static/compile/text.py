"""Source text as the compile rules quote and compare it: a node shown on one line, and a string given literally
or through a name bound once to one."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import string_value


def one_line(ctx: Context, node: cst.CSTNode) -> str:
    """`node`'s source with its whitespace collapsed, cut to 60 characters."""
    text = " ".join(ctx.source(node).split())
    return text if len(text) <= 60 else text[:57] + "..."


def bound_string(ctx: Context, node: cst.BaseExpression) -> str | None:
    """A string literal, or a local name bound once to one."""
    value = string_value(node)
    if value is not None:
        return value
    bound = ctx.constant(node)
    return string_value(bound[1]) if bound is not None else None
