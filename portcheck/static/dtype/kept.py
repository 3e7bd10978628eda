"""Whether a value a dtype rule reports outlives the function that makes it (Finding.kept).

Set-up code (a constructor, a cached function, a lazy initialisation) that makes float64 data only to compute
something once and narrow it costs the step nothing: the float64 value never reaches the device. What it stores on
the object, registers as a buffer or parameter, or returns, as it is, does reach the step. The call graph reads
this flag where it puts a finding in set-up code (`portcheck.static.semantic.graph`).
"""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors, holders
from portcheck.static.check import Context
from portcheck.static.syntax import call_name, keyword, positional
from portcheck.static.values import dtype_of
from portcheck.static.walk import visit

# Methods whose result no longer holds the wide dtype: a narrower tensor, a Python number or list, a numpy array.
_NARROWING = frozenset({"float", "half", "bfloat16", "int", "long", "short", "bool", "item", "tolist", "numpy"})
_WIDE = frozenset({"torch.float64", "torch.double", "torch.complex128", "torch.cdouble"})
# Calls that keep their argument on the object as it is.
_KEEPING = frozenset({"register_buffer", "register_parameter", "Parameter", "Buffer"})
_TO_PYTHON = frozenset({"int", "float", "bool", "len", "str", "round", "repr", "print"})
_MAX_NAMES = 16  # local names followed per finding (`w = ...; v = w * 2; self.register_buffer("v", v)`)


def _narrowing(ctx: Context, call: cst.Call) -> bool:
    """`x.float()`, `x.item()`, `x.to(torch.float32)`, `x.to(y.dtype)`, `x.type(dtype)`: the value leaves its wide
    dtype. `x.to(device)` and `x.to(torch.float64)` do not."""
    name = call_name(call)
    if name in _NARROWING and isinstance(call.func, cst.Attribute):
        return True
    if name not in ("to", "type") or not isinstance(call.func, cst.Attribute):
        return False
    arg = keyword(call, "dtype") or positional(call, 0)
    if arg is None:
        return False
    value = arg.value
    dtype = dtype_of(ctx, value)
    if dtype is not None:
        return dtype.startswith("torch.") and dtype not in _WIDE and "device" not in dtype
    # `.to(other.dtype)`, `.to(dtype=dtype)`: another tensor's or the caller's dtype, not this one's
    return (isinstance(value, cst.Attribute) and value.attr.value == "dtype") or keyword(call, "dtype") is not None


def _moving(ctx: Context, call: cst.Call) -> bool:
    """`x.cuda()`, `x.to(device)`, `x.to(other)`: the value goes to a device (not `.to(torch.float64)`, a dtype)."""
    name = call_name(call)
    if name == "cuda":
        return True
    arg = keyword(call, "device") or positional(call, 0)
    if name != "to" or arg is None:
        return False
    dtype = dtype_of(ctx, arg.value)
    return dtype is None or "device" in dtype


def _keeps(ctx: Context, node: cst.CSTNode, path: list[cst.CSTNode], moves: bool = False) -> bool | None:
    """Read up from `node` through `path` (its holders, statement first): True where the value is kept as it is
    (with `moves`, or moved to a device), False where it is narrowed first, None where the expression ends
    without either."""
    for holder, child in zip(reversed(path), reversed([*path[1:], node]), strict=True):
        if isinstance(holder, cst.Attribute) and holder.value is child:
            parent = path[path.index(holder) - 1] if path.index(holder) > 0 else None
            if isinstance(parent, cst.Call) and parent.func is holder and _narrowing(ctx, parent):
                return False
            if moves and isinstance(parent, cst.Call) and parent.func is holder and _moving(ctx, parent):
                return True
        if isinstance(holder, cst.Call) and holder.func is not child:
            if call_name(holder) in _KEEPING:
                return True
            if isinstance(holder.func, cst.Name) and holder.func.value in _TO_PYTHON:
                return False  # `int(m.sum())`: a Python number
    return None


def _stored(statement: cst.CSTNode) -> bool:
    """The statement stores its value on an object or returns it: `self.w = ...`, `table[k] = ...`, `return ...`."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        if isinstance(small, cst.Return):
            return True
        if isinstance(small, cst.Assign):
            return any(isinstance(t.target, (cst.Attribute, cst.Subscript)) for t in small.targets)
        if isinstance(small, cst.AnnAssign):
            return isinstance(small.target, (cst.Attribute, cst.Subscript))
    return False


def _bound_name(statement: cst.CSTNode) -> str | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
            [small.target] if isinstance(small, cst.AnnAssign) else [])
        if len(targets) == 1 and isinstance(targets[0], cst.Name):
            return targets[0].value
    return None


def outlives(ctx: Context, node: cst.CSTNode, moves: bool = False) -> bool:
    """The value made at `node` leaves its function as it is: stored on the object, registered as a buffer or a
    parameter, or returned, directly or through local names (with `moves`, or moved to a device: `.cuda()`,
    `.to(device)`); not where it is narrowed (`.float()`, `.to(dtype)`, `.item()`) or only used where it is made.
    Unsure cases count as kept."""
    if not ctx.statements:
        return True
    statement = ctx.statements[-1]
    path = ancestors(ctx, node)
    if not path:
        return True
    kept = _keeps(ctx, node, path, moves)
    if kept is not None:
        return kept
    if _stored(statement):
        return True
    name = _bound_name(statement)
    if name is None:
        return False  # an expression statement, a test, a loop's iterable: used where it is made
    scope = ctx.functions[-1] if ctx.functions else None
    return scope is None or _name_kept(ctx, scope, name, moves)


def _name_kept(ctx: Context, scope: cst.CSTNode, first: str, moves: bool) -> bool:
    """A local name (and the names bound from it) reaches a store, a return or a keeping call (with `moves`, or a
    move to a device) unnarrowed."""
    uses: dict[str, list[tuple[cst.Name, cst.CSTNode]]] = ctx.memo("dtype-name-uses", scope, lambda: _uses(scope))
    pending, seen = [first], {first}
    while pending and len(seen) <= _MAX_NAMES:
        for use, statement in uses.get(pending.pop(), ()):
            path = holders(ctx, statement, use)
            if not path:
                return True  # not read up: count it kept
            kept = _keeps(ctx, use, path, moves)
            if kept:
                return True
            if kept is False:
                continue
            if _stored(statement):
                return True
            bound = _bound_name(statement)
            if bound is not None and bound not in seen:
                seen.add(bound)
                pending.append(bound)
    return False


def _uses(scope: cst.CSTNode) -> dict[str, list[tuple[cst.Name, cst.CSTNode]]]:
    """Per name read in the function: (the Name node, its innermost simple statement line)."""
    found: dict[str, list[tuple[cst.Name, cst.CSTNode]]] = {}

    class Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            self.lines: list[cst.CSTNode] = []

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            self.lines.append(node)

        def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
            self.lines.pop()

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            visit(node.value, self)  # `self.w`'s `w` is no read of a local `w`
            return False

        def visit_Name(self, node: cst.Name) -> None:
            if self.lines:
                found.setdefault(node.value, []).append((node, self.lines[-1]))

    visit(scope, Finder())
    return found


__all__ = ["outlives"]
