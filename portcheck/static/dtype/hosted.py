"""Where float64 data a dtype rule finds lives (PC303 and its kin): on the host, where the NeuronCore never sees it,
rather than on the device. A tensor made without `device=` and never moved or kept; a constant a module makes at
import; a value cast and at once moved to the host. Each gives the finding's note, which makes it info."""

from __future__ import annotations

from typing import cast

import libcst as cst

from portcheck.static.ancestry import ancestors, taken_ifs
from portcheck.static.check import Context
from portcheck.static.dtype.kept import outlives
from portcheck.static.name_reads import bound_name, reads_in_scope
from portcheck.static.scope import cpu_device, host_value
from portcheck.static.syntax import keyword, positional

# A float64 or complex tensor made without a device, or from one, and never moved to a device in its function.
ON_HOST = (" (made on the host: a tensor made without `device=` and never moved to a device, stored or returned here "
            "stays on the CPU, where this dtype costs the NeuronCore nothing)")


# A float64 tensor a module makes when it is imported, with no device: a CPU constant (a solver's coefficient table).
AT_IMPORT = (" (a constant the module makes on the CPU when it is imported: it reaches a NeuronCore only where code "
              "moves it, and in float64 only if that move keeps the dtype; cast it where it is moved, "
              "`.to(device=x.device, dtype=x.dtype)`)")


def import_constant(ctx: Context, node: cst.Call) -> bool:
    """`A = torch.tensor(table, dtype=torch.float64)` at module level (outside any function or class): a torch factory
    without `device=`, run once at import on the CPU. Code that computes with it on a device must move it there, and
    that move decides the dtype."""
    if ctx.functions or any(isinstance(s, cst.ClassDef) for s in ctx.statements):
        return False
    return ctx.qualname(node.func) in _CONSTANT_FACTORIES and keyword(node, "device") is None


# A value cast to float64 and moved to the host in the same expression: the float64 work is the host's.
_MOVED = (" (moved to the host straight after: the float64 work is the host's; casting after the move keeps the "
          "cast off the NeuronCore too)")
_TO_HOST = frozenset({"cpu", "numpy", "tolist", "item"})


def moved_to_host(ctx: Context, node: cst.Call) -> str:
    """`w.detach().to(torch.float64).cpu()`, `x.double().numpy()`: the cast's result goes to the host at once, or
    is bound to a name (`ref = ref.double()`) that every later read moves to the host (`ref.cpu()`, `ref.numpy()`)."""
    if _moves(ctx, ancestors(ctx, node), node):
        return _MOVED
    stmt = ctx.statements[-1] if ctx.statements else None
    bound = bound_name(stmt)
    if stmt is None or bound is None or bound[1] is not node:
        return ""
    found = reads_in_scope(ctx, bound[0])
    target = cast(cst.Assign, cast(cst.SimpleStatementLine, stmt).body[0]).targets[0].target
    later = found.paths[found.reads_before.get(id(target), len(found.paths)):]  # reads of this value, not earlier
    reads = [path for path in later if not any(n is stmt for n in path)]
    return _MOVED if reads and all(_moves(ctx, path[:-1], path[-1]) for path in reads) else ""


def _moves(ctx: Context, holders: list[cst.CSTNode], node: cst.CSTNode) -> bool:
    """`node` (held by `holders`, outermost first) is moved to the host: `node.cpu()`, `.numpy()`, `.to("cpu")`."""
    if len(holders) < 2 or not isinstance(method := holders[-1], cst.Attribute) or method.value is not node:
        return False
    call = holders[-2]
    if not isinstance(call, cst.Call) or call.func is not method:
        return False
    if method.attr.value in _TO_HOST:
        return True
    arg = keyword(call, "device") or positional(call, 0)
    return method.attr.value == "to" and arg is not None and cpu_device(ctx, arg.value)


def stays_on_host(ctx: Context, node: cst.Call, method: cst.Attribute | None) -> bool:
    """`w = torch.zeros(n, dtype=torch.float64)` or `torch.rand(n, generator=g).double()` outside a model's
    construction, whose value this function neither moves to a device (`.to(device)`, `.cuda()`) nor keeps (a
    buffer, an attribute, a return): a CPU tensor that stays on the CPU. CUDA code must move such a tensor before
    it meets device data, so a factory without `device=` that is never moved is host-side work."""
    made = method.value if method is not None else node
    if not isinstance(made, cst.Call) and not isinstance(made, cst.Name):
        return False
    if not host_value(ctx, made) or (method is None and keyword(node, "device") is not None):
        return False  # `host_value` (with factories) covers no `device=`, outside `__init__` and its helpers
    return not outlives(ctx, node, moves=True)


# torch factories that make a tensor of a `dtype=` from data or sizes (on the CPU, without `device=`).
_CONSTANT_FACTORIES = frozenset(f"torch.{n}" for n in (
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye"))


_FLOAT64 = frozenset({"torch.float64", "torch.double"})


def wide_already(ctx: Context) -> bool:
    """In the body of `if x.dtype == torch.float64:` (or `is`, an `elif` too): the data is float64 already, so a
    `.double()` there changes nothing (pyro's `elif terms.dtype is torch.float64: ... .double()`)."""
    for statement, _ in taken_ifs(ctx):
        test = statement.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(
                test.comparisons[0].operator, (cst.Equal, cst.Is)):
            sides = (test.left, test.comparisons[0].comparator)
            if any(isinstance(s, cst.Attribute) and s.attr.value == "dtype" for s in sides) and any(
                    ctx.qualname(s) in _FLOAT64 for s in sides):
                return True
    return False


__all__ = ["AT_IMPORT", "ON_HOST", "import_constant", "moved_to_host", "stays_on_host", "wide_already"]
