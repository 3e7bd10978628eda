"""Whether a value a dtype rule reports outlives the function that makes it (Finding.kept).

Set-up code (a constructor, a cached function, a lazy initialisation) that makes float64 data only to compute
something once and narrow it costs the step nothing: the float64 value never reaches the device. What it stores on
the object or registers as a buffer or parameter, as it is, does reach the step; what a set-up helper returns goes
back to the constructor that called it. The call graph reads
this flag where it puts a finding in set-up code (`portcheck.static.semantic.graph`).
"""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors, holders
from portcheck.static.check import Context
from portcheck.static.syntax import call_name, item_root, keyword, parameters, positional
from portcheck.static.values import dtype_of
from portcheck.static.walk import visit

# Methods whose result no longer holds the wide dtype: a narrower tensor, a Python number or list, a numpy array.
_NARROWING = frozenset({"float", "half", "bfloat16", "int", "long", "short", "bool", "item", "tolist", "numpy"})
_WIDE = frozenset({"torch.float64", "torch.double", "torch.complex128", "torch.cdouble"})
# Calls that keep their argument on the object as it is.
_KEEPING = frozenset({"register_buffer", "register_parameter", "Parameter", "Buffer"})
_TO_PYTHON = frozenset({"int", "float", "bool", "len", "str", "round", "repr", "print"})
_MAX_NAMES = 16  # local names followed per finding (`w = ...; v = w * 2; self.register_buffer("v", v)`)
# What takes complex data back to real numbers: its parts, its magnitude and phase, its real view.
_TO_REAL = frozenset({"torch.view_as_real", "torch.real", "torch.imag", "torch.abs", "torch.angle"})
_REAL_PARTS = frozenset({"real", "imag"})
_REAL_METHODS = frozenset({"abs", "angle"})


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


def _cast_by_call(ctx: Context, call: cst.Call, child: cst.CSTNode) -> bool:
    """`child` is the data a call converts to the dtype its `dtype=` names, one that is not wide (a dtype a caller
    passes, `x.dtype`, `torch.float32`): `f(w, dtype=dtype)` returns `w` in that dtype, as `torch.as_tensor` and a
    project's own `to(x, dtype=...)` helper do."""
    dtype = keyword(call, "dtype")
    first = positional(call, 0)
    if dtype is None or first is None or (first is not child and first.value is not child):
        return False
    named = dtype_of(ctx, dtype.value)
    return named not in _WIDE if named is not None else not isinstance(dtype.value, (cst.Integer, cst.SimpleString))


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


def _keeps(ctx: Context, node: cst.CSTNode, path: list[cst.CSTNode], moves: bool = False,
           complex_: bool = False) -> bool | None:
    """Read up from `node` through `path` (its holders, statement first): True where the value is kept as it is
    (with `moves`, or moved to a device), False where it is narrowed first (with `complex_`, complex data also
    where it is taken back to real numbers: `.real`, `.abs()`, `torch.view_as_real(...)`), None where the
    expression ends without either."""
    for holder, child in zip(reversed(path), reversed([*path[1:], node]), strict=True):
        if isinstance(holder, cst.Attribute) and holder.value is child:
            if complex_ and holder.attr.value in _REAL_PARTS:
                return False
            parent = path[path.index(holder) - 1] if path.index(holder) > 0 else None
            if isinstance(parent, cst.Call) and parent.func is holder and (
                    _narrowing(ctx, parent) or (complex_ and call_name(parent) in _REAL_METHODS)):
                return False
            if moves and isinstance(parent, cst.Call) and parent.func is holder and _moving(ctx, parent):
                return True
        if isinstance(holder, cst.Call) and holder.func is not child:
            if complex_ and ctx.qualname(holder.func) in _TO_REAL:
                return False  # `torch.view_as_real(z)`: a real view of it
            if call_name(holder) in _KEEPING:
                return True
            if _cast_by_call(ctx, holder, child):
                return False  # `to(w, dtype=dtype)`, `torch.as_tensor(w, dtype=torch.float32)`: made in that dtype
            if isinstance(holder.func, cst.Name) and holder.func.value in _TO_PYTHON:
                return False  # `int(m.sum())`: a Python number
    return None


def _stored(statement: cst.CSTNode, returned: bool = True) -> bool:
    """The statement stores its value on an object or (with `returned`) returns it: `self.w = ...`, `table[k] = ...`,
    `return ...`."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        if isinstance(small, cst.Return):
            return returned
        if isinstance(small, cst.Assign):
            return any(isinstance(t.target, (cst.Attribute, cst.Subscript)) for t in small.targets)
        if isinstance(small, cst.AnnAssign):
            return isinstance(small.target, (cst.Attribute, cst.Subscript))
    return False


def _local_store(scope: cst.CSTNode | None, statement: cst.CSTNode) -> str | None:
    """`A[0, :] = ...`, `table[k] = ...` into a local name of the function (not `self`, not a parameter, which the
    caller holds): the name whose value the statement writes into, followed like a name it binds."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1 or not isinstance(
            scope, cst.FunctionDef):
        return None
    small = statement.body[0]
    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
        [small.target] if isinstance(small, (cst.AnnAssign, cst.AugAssign)) else [])
    if len(targets) != 1 or not isinstance(targets[0], (cst.Subscript, cst.Attribute)):
        return None
    root = item_root(targets[0])
    params = scope.params
    named = {p.name.value for p in parameters(scope)}
    named |= {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}
    return None if root is None or root in named or root in ("self", "cls") else root


def _bound_name(statement: cst.CSTNode) -> str | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
            [small.target] if isinstance(small, cst.AnnAssign) else [])
        if len(targets) == 1 and isinstance(targets[0], cst.Name):
            return targets[0].value
    return None


def outlives(ctx: Context, node: cst.CSTNode, moves: bool = False, returned: bool = True,
             complex_: bool = False) -> bool:
    """The value made at `node` leaves its function as it is: stored on the object, registered as a buffer or a
    parameter, or returned, directly or through local names (with `moves`, or moved to a device: `.cuda()`,
    `.to(device)`); not where it is narrowed (`.float()`, `.to(dtype)`, `.item()`) or only used where it is made.
    Without `returned`, a value handed back to the caller does not count: set-up code's helpers return their float64
    tables to the constructor that builds the object, which narrows them or keeps them (then that store is what
    reaches the step). A complex table stays complex wherever it goes, so complex data asks with `returned`, and with
    `complex_`, which counts its real parts and real views as narrowed. Unsure cases count as kept."""
    if not ctx.statements:
        return True
    statement = ctx.statements[-1]
    path = ancestors(ctx, node)
    if not path:
        return True
    kept = _keeps(ctx, node, path, moves, complex_)
    if kept is not None:
        return kept
    scope = ctx.functions[-1] if ctx.functions else None
    name = _local_store(scope, statement)  # `A[0, :] = torch.arange(n, dtype=torch.float64)`: into a local table
    if name is None and _stored(statement, returned):
        return True
    name = name or _bound_name(statement)
    if name is None:
        return False  # an expression statement, a test, a loop's iterable: used where it is made
    return scope is None or _name_kept(ctx, scope, name, moves, returned, complex_)


def _name_kept(ctx: Context, scope: cst.CSTNode, first: str, moves: bool, returned: bool = True,
               complex_: bool = False) -> bool:
    """A local name (and the names bound from it) reaches a store, a return or a keeping call (with `moves`, or a
    move to a device) unnarrowed."""
    uses: dict[str, list[tuple[cst.Name, cst.CSTNode]]] = ctx.memo("dtype-name-uses", scope, lambda: _uses(scope))
    pending, seen = [first], {first}
    while pending and len(seen) <= _MAX_NAMES:
        for use, statement in uses.get(pending.pop(), ()):
            path = holders(ctx, statement, use)
            if not path:
                return True  # not read up: count it kept
            kept = _keeps(ctx, use, path, moves, complex_)
            if kept:
                return True
            if kept is False:
                continue
            local = _local_store(scope, statement)  # `A[i, j] = A[i - 1, j] * a`: written into a local name
            if local is None and _stored(statement, returned):
                return True
            bound = local or _bound_name(statement)
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
