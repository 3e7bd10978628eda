"""An index the project's own function makes (PC204): `x[pad_mask(lengths)]`, or a name bound to one and moved to
the device (`m = compute_mask(shape); m = torch.from_numpy(m).to(x.device); y = x[m]`). Whether that function
returns a boolean mask is the call graph's to say (semantic.masks): the finding requires it (summaries.MASK_OF)."""

from __future__ import annotations

import builtins

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.reaching import reaching
from portcheck.static.syntax import call_name, dotted_name

_CONVERSIONS = frozenset({"torch.from_numpy", "torch.as_tensor", "torch.tensor", "torch.asarray"})
# Methods that keep a mask a mask: a device copy, a view.
_KEEPS = frozenset({"to", "cuda", "view", "reshape", "unsqueeze", "squeeze", "expand", "expand_as", "transpose",
                    "permute", "contiguous", "flatten", "detach", "bool"})
_LIBRARIES = ("torch.", "numpy.", "math.", "builtins.", "scipy.", "pandas.")
_BUILTINS = frozenset(dir(builtins))


def helper_mask(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> str | None:
    """The dotted name (`pad_mask`, `utils.pad_mask`, `self.make_mask`) of the project function whose result
    `node` indexes by, seen through conversions and views and a local name's bindings; None where it is none."""
    while depth < 6:
        depth += 1
        if isinstance(node, cst.Call):
            inner = _converted(ctx, node)
            if inner is not None:
                node = inner
                continue
            qualname = ctx.qualname(node.func)
            name = dotted_name(node.func)
            if name is None or (qualname or "").startswith(_LIBRARIES) or name in _BUILTINS:
                return None
            if isinstance(node.func, cst.Attribute) and qualname is None and not name.startswith("self."):
                return None  # a method of a local value: no function the graph could name
            return name
        if isinstance(node, cst.Name):
            reached = reaching(ctx, node)
            if reached is None or not reached[0]:
                bound = ctx.constant(node)
                if bound is None:
                    return None
                node = bound[1]
                continue
            values = [v for v in reached[0] if not _converts(ctx, v, node.value)]
            if not values:
                return None
            node = values[0]
            continue
        return None
    return None


def _converted(ctx: Context, call: cst.Call) -> cst.BaseExpression | None:
    """What a conversion or a view works on (`torch.from_numpy(m)`'s argument, `m.to(device)`'s receiver), or None
    where `call` is neither."""
    qualname = ctx.qualname(call.func)
    if qualname in _CONVERSIONS and call.args:
        return call.args[0].value
    if isinstance(call.func, cst.Attribute) and qualname is None and call_name(call) in _KEEPS:
        return call.func.value
    return None


def _converts(ctx: Context, value: cst.BaseExpression, name: str) -> bool:
    """`m = torch.from_numpy(m).to(device)`: the binding converts the name's earlier value."""
    inner: cst.BaseExpression | None = value
    while isinstance(inner, cst.Call):
        inner = _converted(ctx, inner)
    return isinstance(inner, cst.Name) and inner.value == name
