"""What a fix needs from the statement being visited: the call it holds, the assignment a target belongs to.

Searched when a fix is built (rare), so that no check runs on every call of every file; the search costs the
node's depth, not the statement's size (portcheck/static/ancestry.py).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context
from portcheck.static.syntax import one_line_suites


def find_call(ctx: Context, node: cst.CSTNode, match: Callable[[cst.Call], bool]) -> cst.Call | None:
    """The outermost call holding `node` on the lines of the statement being visited that `match` accepts (`match`
    asks about `node`: `c.func is node`, `c.args[0].value is node`)."""
    return next((a for a in ancestors(ctx, node) if isinstance(a, cst.Call) and match(a)), None)


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
