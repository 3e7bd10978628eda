"""Walks of Python's `ast` the summary reads a file with: the calls and branches of an expression, and whether one
node lies within another."""

from __future__ import annotations

import ast
from collections import deque


def within(node: ast.expr, outer: ast.expr) -> bool:
    return (outer.lineno, outer.col_offset) <= (node.lineno, node.col_offset) and (
        node.end_lineno or 0, node.end_col_offset or 0) <= (outer.end_lineno or 0, outer.end_col_offset or 0)


def calls_and_branches(node: ast.AST) -> list[ast.Call | ast.IfExp | ast.BoolOp]:
    """The calls and conditional expressions in `node`, in `ast.walk`'s order; a third of a tree's nodes are
    `Load` / `Store` markers, which it never looks at."""
    found: list[ast.Call | ast.IfExp | ast.BoolOp] = []
    todo = deque([node])
    pop, push, extend = todo.popleft, todo.append, todo.extend
    while todo:
        current = pop()
        if isinstance(current, (ast.Call, ast.IfExp, ast.BoolOp)):
            found.append(current)
        for field in current._fields:
            value = getattr(current, field, None)
            if isinstance(value, list):
                extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST) and not isinstance(value, ast.expr_context):
                push(value)
    return found


__all__ = ["calls_and_branches", "within"]
