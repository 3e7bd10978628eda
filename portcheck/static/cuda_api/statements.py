"""What a fix needs from the statement being visited: the call it holds, the assignment a target belongs to.

Searched when a fix is built (rare), so that no check runs on every call of every file.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import one_line_suites
from portcheck.static.walk import visit


class _CallFinder(cst.CSTVisitor):
    """The first call `match` accepts on the lines of one statement (not in the blocks it holds)."""

    def __init__(self, match: Callable[[cst.Call], bool]) -> None:
        super().__init__()
        self.match = match
        self.found: cst.Call | None = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is not None or isinstance(node, cst.IndentedBlock):
            return False
        if isinstance(node, cst.Call) and self.match(node):
            self.found = node
            return False
        return True


def find_call(ctx: Context, match: Callable[[cst.Call], bool]) -> cst.Call | None:
    """The first call of the statement being visited that `match` accepts."""
    if not ctx.statements:
        return None
    finder = _CallFinder(match)
    visit(ctx.statements[-1], finder)
    return finder.found


def _only_target(assign: cst.Assign, target: cst.AssignTarget) -> bool:
    return len(assign.targets) == 1 and assign.targets[0] is target


def assignment(ctx: Context, target: cst.AssignTarget) -> cst.Assign | None:
    """The single-target assignment `target` belongs to, in the statement being visited."""
    if not ctx.statements:
        return None
    stmt = ctx.statements[-1]
    lines = [stmt] if isinstance(stmt, cst.SimpleStatementLine) else one_line_suites(stmt)
    for line in lines:
        for small in line.body:
            if isinstance(small, cst.Assign) and _only_target(small, target):
                return small
    return None
