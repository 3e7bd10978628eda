"""A call of a project function that returns its argument's value in Python (PC701): `torch_item(loss)` with
`def torch_item(x): return x if isinstance(x, Number) else x.item()`, `to_list(ids)`. The read happens inside the
helper, but the call is where a tensor is handed to it, and where the fix goes: reported at the call, kept where
the project's call graph finds that every function the name may be reads its parameter's data
(summary.READS); the call graph drops the read inside such a helper when it is a module's function (not a method
or a function nested in another, whose calls are not read here), which its calls now speak for."""

from __future__ import annotations

import builtins

import libcst as cst

from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.shape_from_data import project_helper
from portcheck.static.host_sync.place import quiet_calls, read_place
from portcheck.static.host_sync.reads import HostValueRead, report_read
from portcheck.static.host_sync.sizes import bound_to_a_size
from portcheck.static.semantic.summary import READS
from portcheck.static.syntax import last_name
from portcheck.summaries import Summary

_BUILTINS = frozenset(dir(builtins))
_NOT_PROJECT = ("torch", "numpy", "math")  # modules whose functions are no project helper


# Every call may be one: the token every call holds
@check(cst.Call, rules=(HostValueRead,), tokens=("(",))
def check_reading_helper(node: cst.Call, ctx: Context) -> None:
    func = node.func
    name = last_name(func)
    if not node.args or not name[:1].islower() or not ctx.functions:
        return  # a function (not a class), by its name or its module's (`util.torch_item`): not a method
    if (isinstance(func, cst.Name) and name in _BUILTINS) or id(node) in ctx.skip or not _may_read(ctx, func):
        return
    if isinstance(func, cst.Name) and any(f.name.value == name for f in ctx.functions):
        return  # the helper calling itself on a part of what it was handed (a list's items): its callers speak
    helper = project_helper(ctx, node)
    if helper is None or id(node) in quiet_calls(ctx) or _local(ctx, helper):
        return
    place = read_place(ctx, node)
    if place is None or bound_to_a_size(ctx):
        return
    report_read(ctx, HostValueRead, node, place, through=helper)


def _may_read(ctx: Context, func: cst.BaseExpression) -> bool:
    """`func` may name a helper that reads its argument: a function of this file that does (its summary says so),
    or a name the file imports or a function of a module it imports (not torch's, numpy's or math's), which the
    call graph settles. A function of this file that does not, and a name bound otherwise, cannot."""
    summary = ctx.summary
    if summary is None:
        return False  # a file analysed in parts: no summary, no call graph
    if isinstance(func, cst.Attribute):
        root = func.value
        while isinstance(root, cst.Attribute):
            root = root.value
        imported = ctx.qualname(root) if isinstance(root, cst.Name) else None  # a local of that name is no import
        return imported is not None and not imported.startswith(_NOT_PROJECT)
    reading = ctx.memo("reading-functions", ctx.module, lambda: _own_functions(summary))
    own = reading.get(func.value) if isinstance(func, cst.Name) else None
    if own is not None or not isinstance(func, cst.Name):
        return bool(own)
    # `from .torch_tools import to_numpy`: the summary's import aliases keep a relative import's dots
    relative = ctx.memo("relative-imports", ctx.module, lambda: frozenset(
        name for name, target in summary.exports if target.startswith(".")))
    return func.value in ctx.names.aliases or func.value in relative


def _own_functions(summary: Summary) -> dict[str, bool]:
    return {f.name: READS in f.roles for f in summary.functions if "." not in f.name}


def _local(ctx: Context, name: str) -> bool:
    """`name` is a function defined in one of the functions around the call: its own read is reported where it is
    (inside `forward` when `forward` defines it), not again at each call."""
    return any(isinstance(statement, cst.FunctionDef) and statement.name.value == name
               for function in ctx.functions for statement in function.body.body)


__all__ = ["check_reading_helper"]
