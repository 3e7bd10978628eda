"""The nodes that hold a node, in the statement being visited: read from one map of parents per statement, built
the first time a check asks (a fix, a message), so that asking for each of a statement's thousands of findings costs
the depth of each, not the statement's size."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import blocks
from portcheck.static.values import contains
from portcheck.static.walk import STATEMENTS, parents_of


def ancestors(ctx: Context, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes holding `node` on the lines of the statement being visited, outermost (the statement) first; []
    when `node` is not on them. Of a chain (`a and b and c`, `a + b + c`) only the link holding `node` and the
    outermost link are there."""
    return holders(ctx, ctx.statements[-1], node) if ctx.statements else []


def holders(ctx: Context, statement: cst.CSTNode, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes holding `node` on the lines of `statement` (any statement of the file, not only the one being
    visited), outermost (the statement) first, as `ancestors` reads them; [] when `node` is not on them."""
    parents = ctx.memo("parents", statement, lambda: parents_of(statement))
    found: list[cst.CSTNode] = []
    current = parents.get(id(node))
    while current is not None:
        found.append(current)
        current = parents.get(id(current))
    if found and found[-1] is not statement:
        return []
    found.reverse()
    return found




def _direct_statements(tree: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(tree, cst.IndentedBlock):
        return list(tree.body)
    if isinstance(tree, cst.SimpleStatementSuite):
        return []
    if isinstance(tree, (cst.Else, cst.Finally)):
        return _direct_statements(tree.body)
    return [s for block in blocks(tree) for s in block]


def holds(ctx: Context, tree: cst.CSTNode | None, inner: cst.CSTNode) -> bool:
    """`contains(tree, inner)` for what the checks ask while a statement is visited, in the time of a lookup: `inner`
    a statement of the chain being visited, directly in the block `tree` (the statements of each block read once),
    or a node on the current statement's lines (up its ancestors). Anything else is searched."""
    if tree is None:
        return False
    if tree is inner:
        return True
    if type(inner) in STATEMENTS and inner in ctx.chains:
        return id(inner) in ctx.memo("direct-statements", tree, lambda: {id(s) for s in _direct_statements(tree)})
    path = ancestors(ctx, inner)
    if path:
        return any(node is tree for node in path)
    return contains(tree, inner)


def taken_ifs(ctx: Context) -> list[tuple[cst.If, cst.CSTNode]]:
    """Each `if` (or `elif`) whose body, not its `else`, holds the statement being visited, outermost first, with its
    statement on the way there: the tests that hold wherever this code runs."""
    chain = ctx.statements
    return [(s, chain[i + 1]) for i, s in enumerate(chain[:-1])
            if isinstance(s, cst.If) and chain[i + 1] in s.body.body]


__all__ = ["ancestors", "holders", "holds", "taken_ifs"]
