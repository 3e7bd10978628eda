"""A host read that becomes a size (`n = t.sum().item()`, then `torch.arange(n)`) is part of the dynamic shape it
makes: dynamic_shape reports it (PC209), and host_sync stays quiet."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.dynamic_shape import SIZE_FACTORIES, SIZE_METHODS
from portcheck.static.dynamic_shape.shape_from_data import ShapeFromData, data_read, fixed_length
from portcheck.static.syntax import call_name
from portcheck.static.walk import visit


def _size_names(ctx: Context, scope: cst.CSTNode) -> frozenset[str]:
    """Names passed as sizes in this function (`torch.zeros(n)`, `range(n)`, `x.view(*shape)`): PC209 reports a
    host read bound to one of them as part of the dynamic shape it makes."""
    found: set[str] = set()

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            qualname = ctx.qualname(call.func)
            name = call_name(call)
            if qualname in SIZE_FACTORIES:
                args = [a for a in call.args if a.keyword is None]
                args = args[1:2] if qualname == "torch.split" else args
            elif qualname == "torch.nn.functional.interpolate":
                args = []  # only its `size=`
            elif (isinstance(call.func, cst.Name) and name == "range") or (
                    isinstance(call.func, cst.Attribute) and qualname is None and name in SIZE_METHODS):
                args = list(call.args)
            else:
                return
            size = next((a for a in call.args if a.keyword is not None and a.keyword.value == "size"), None)
            values = [a.value for a in args] + ([size.value] if size is not None else [])
            for value in values:  # `torch.zeros(n)`, `torch.zeros(size=(4, n))`
                elements = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
                found.update(v.value for v in (value, *(e.value for e in elements)) if isinstance(v, cst.Name))

        def visit_Slice(self, node: cst.Slice) -> None:  # `x[:, :n]`, not `x[n : n + k]` (k long: no shape)
            if not fixed_length(ctx, node):
                found.update(b.value for b in (node.lower, node.upper) if isinstance(b, cst.Name))

    visit(scope, Finder())
    return frozenset(found)


def bound_to_a_size(ctx: Context) -> bool:
    """`n = t.sum().item()` later used as `torch.arange(n)`: PC209's finding, not ours. Only a read PC209 takes for
    one (`int(self.ptr)` of a buffer is not, so it stays a host read here)."""
    if ShapeFromData.code not in ctx.enabled or not ctx.statements:
        return False
    statement = ctx.statements[-1]
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return False
    target = assign.targets[0].target
    if not isinstance(target, cst.Name):
        return False
    bound = ctx.constant(target)
    if bound is None or bound[1] is not assign.value:
        return False
    scope = ctx.functions[-1] if ctx.functions else ctx.module
    sizes = ctx.memo("host-sync-sizes", scope, lambda: _size_names(ctx, scope))
    return target.value in sizes and data_read(ctx, assign.value) is not None
