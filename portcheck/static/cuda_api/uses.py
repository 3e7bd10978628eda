"""How a `torch.cuda` reference is used, where that changes what to tell the user: an NVIDIA profiling aid, a
reflective read (`getattr(torch.cuda, ...)`), a test's stub of torch.cuda, a property read from a call's result, a
seeding call made redundant by `torch.manual_seed`."""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context
from portcheck.static.cuda_api.apis import api_entry
from portcheck.static.cuda_api.probes import data_preparation, seeded_already
from portcheck.static.cuda_api.statements import find_call
from portcheck.static.syntax import call_name, dotted_name

# NVIDIA profiling and debugging aids: opt-in tools, not the model's code (they raise or do nothing without CUDA).
_TOOLS = ("nvtx", "cudart", "profiler", "set_sync_debug_mode", "get_sync_debug_mode")
_REFLECTION = frozenset({"getattr", "hasattr"})
_MOCKS = frozenset({"setattr", "object", "patch.object"})


def tool_message(ctx: Context, node: cst.BaseExpression, qualname: str) -> str | None:
    """The message for a profiling aid, or for `torch.cuda` read reflectively (`getattr(torch.cuda, "x", None)`):
    an info, since neither is the port's work; None for the rest."""
    rest = qualname[len("torch.cuda."):]
    if rest.split(".", 1)[0] in _TOOLS:
        return (f"`{qualname}` is an NVIDIA profiling/debugging aid (NVTX, nsys, CUDA sync debugging): it raises or "
                "does nothing without CUDA; keep it out of the run on Neuron")
    call = find_call(ctx, node, lambda c: call_name(c) in _REFLECTION and bool(c.args) and c.args[0].value is node)
    if call is not None:
        return (f"`{call_name(call)}({ctx.source(node)}, ...)` reads torch.cuda reflectively: whatever it finds "
                "answers for CUDA only; check what the code does with it")
    return None


def attribute_read(ctx: Context, node: cst.BaseExpression) -> str | None:
    """`total_memory` for `torch.cuda.get_device_properties(0).total_memory`."""
    call = find_call(ctx, node, lambda c: c.func is node)
    holder = ancestors(ctx, call)[-1:] if call is not None else []
    attribute = holder[0] if holder else None
    return attribute.attr.value if isinstance(attribute, cst.Attribute) and attribute.value is call else None


def silent_note(ctx: Context, qualname: str) -> str | None:
    """Why a call that does nothing without CUDA loses nothing here, or None."""
    if qualname.rsplit(".", 1)[-1] in ("manual_seed", "manual_seed_all") and seeded_already(ctx):
        return "`torch.manual_seed` here already seeds every device"
    if data_preparation(ctx):
        return "in data preparation, which runs on the host"
    api = api_entry(qualname.removeprefix("torch.cuda."))
    return api.harmless if api is not None and api.harmless else None


def mocked(ctx: Context, node: cst.BaseExpression) -> bool:
    """`monkeypatch.setattr(torch.cuda, ...)`, `mock.patch.object(torch.cuda, ...)`: a test stubs CUDA."""
    return find_call(ctx, node, lambda c: bool(c.args) and c.args[0].value is node and (
        call_name(c) in _MOCKS or (dotted_name(c.func) or "").endswith("patch.object"))) is not None


def _only_compared(ctx: Context, node: cst.Attribute | cst.Name) -> bool:
    """`x.dtype != torch.cuda.HalfTensor`, `isinstance(t, torch.cuda.FloatTensor)`: a torch.cuda class only named
    as one side of a comparison or as `isinstance`'s type, not called."""
    chain = ancestors(ctx, node)
    parent = chain[-1] if chain else None
    if isinstance(parent, cst.Comparison) and parent.left is node:
        return True
    if isinstance(parent, cst.ComparisonTarget) and parent.comparator is node:
        return True
    call = chain[-2] if len(chain) > 1 else None
    if isinstance(parent, cst.Arg) and parent.value is node and isinstance(call, cst.Call):
        return isinstance(call.func, cst.Name) and call.func.value in ("isinstance", "issubclass") and \
            len(call.args) == 2 and call.args[1] is parent
    return False


def _only_fallback(ctx: Context, node: cst.Attribute | cst.Name) -> bool:
    """`getattr(torch, device_type, torch.cuda)`: the module of the device the code names (`torch.cpu`,
    `torch.neuron`, `torch.xpu`), with torch.cuda only as the default for a device torch has no module for. The
    device named decides; CUDA's module is not what runs (a literal `"cuda"` name excepted)."""
    chain = ancestors(ctx, node)
    if len(chain) < 2 or not isinstance(parent := chain[-1], cst.Arg) or parent.value is not node:
        return False
    call = chain[-2]
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name) or call.func.value != "getattr" or \
            len(call.args) != 3 or call.args[2] is not parent or any(a.keyword is not None for a in call.args):
        return False
    named = call.args[1].value
    return ctx.qualname(call.args[0].value) == "torch" and not (
        isinstance(named, cst.SimpleString) and "cuda" in named.value)


def named_only(ctx: Context, node: cst.Attribute | cst.Name, qualname: str) -> str:
    """Why a torch.cuda name here runs nothing on a GPU, or "": only compared or tested by `isinstance`, or only the
    default of a lookup of the device's own module."""
    if _only_compared(ctx, node):
        return ("here only compared with, or tested by `isinstance`: naming it runs nothing on a GPU, and the test is "
                "simply false on Neuron")
    if qualname == "torch.cuda" and _only_fallback(ctx, node):
        return ("here only the default of `getattr(torch, <device>, torch.cuda)`: the module of the device the code "
                "names is the one used, and torch.cuda only stands in for a device torch has no module for")
    return ""


__all__ = ["attribute_read", "mocked", "named_only", "silent_note", "tool_message"]
