"""CUDA autocast (PC601): `torch.cuda.amp.autocast`, `torch.autocast("cuda")` and CUDA's `custom_fwd` /
`custom_bwd`, as calls, decorators and values; autocast to fp16 on another device is PC603, reported here too."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.branches import nvidia_integration
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.codegen import keyword_arg, literal_like, new_literal, rewritten, spelling, with_arg
from portcheck.static.cuda_api import cuda_device
from portcheck.static.syntax import dotted_name, keyword, positional, string_value
from portcheck.static.training.autocast_ops import computes
from portcheck.static.training.fp16 import Fp16MixedPrecision
from portcheck.static.training.quoting import one_line
from portcheck.static.values import and_operands, dtype_of


@rule
class CudaAutocast(Rule):
    """## What it does
    Finds CUDA autocast in every spelling: `torch.cuda.amp.autocast()` (as a context manager, a decorator or
    a value such as `amp_autocast = torch.cuda.amp.autocast`), `torch.autocast("cuda")`,
    `torch.autocast(device_type="cuda")`, `torch.amp.autocast("cuda")`, `from torch.cuda.amp import autocast`,
    a device type bound to `"cuda"` in the same file, and `torch.cuda.amp.custom_fwd` / `custom_bwd`.
    `torch.autocast("cuda", enabled=False)`, which forces fp32 in a region, is reported as info: it does no
    harm on Neuron, but stops protecting the region once the outer autocast targets Neuron.
    Autocast on a device only known at run time (`device_type=x.device.type`) stays quiet, and so does the
    fallback autocast of a function or class that imports NVIDIA Transformer Engine (an FP8 plugin chosen only on
    NVIDIA GPUs).

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(batch)
    ```

    ## Use instead
    ```python
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):  # TorchNeuron native
        loss = model(batch)
    # PyTorch/XLA: NEURON_CC_FLAGS="--auto-cast=none" and torch.autocast("xla", dtype=torch.bfloat16)
    ```

    ## Fix safety
    The fix moves autocast to the target's device in bf16: `torch.cuda.amp.autocast(...)` becomes
    `torch.autocast(device_type="neuron", dtype=torch.bfloat16, ...)` (`torch.autocast("xla", ...)` on
    PyTorch/XLA), keeping `enabled=` and `cache_enabled=`; in `torch.autocast("cuda", ...)` only the device
    literal changes (its quotes kept), with `dtype=torch.bfloat16` added where no dtype was given.
    `torch.cuda.amp.custom_fwd` / `custom_bwd` become `torch.amp.custom_fwd(device_type="neuron")`. It is safe
    where no dtype or bf16 was asked for (BF16 is Neuron's mixed-precision type, and without CUDA the region ran
    in fp32 anyway), for `enabled=False` regions and for a dtype chosen at run time (kept as written); unsafe
    where fp16 becomes bf16 (fewer mantissa bits). A device named by a variable, `**kwargs`, and CUDA autocast
    used as a value get no fix. On PyTorch/XLA, set `NEURON_CC_FLAGS="--auto-cast=none"` yourself.
    """

    code = "PC601"
    FIXABLE = True
    INVALID = (
        "import torch\nwith torch.cuda.amp.autocast():\n    y = m(x)",
        "import torch\nwith torch.autocast('cuda', dtype=torch.float16):\n    y = m(x)",
        "import torch\nwith torch.autocast(device_type='cuda'):\n    y = m(x)",
        "import torch\nwith torch.amp.autocast('cuda'):\n    y = m(x)",
        "from torch.cuda.amp import autocast\n@autocast()\ndef forward(x):\n    return x",
        "from torch.cuda import amp\nwith amp.autocast(enabled=True):\n    pass",
        "import torch\ndef main():\n    amp_autocast = torch.cuda.amp.autocast\n    with amp_autocast():\n        pass",
        "import torch\nDEVICE = 'cuda'\nwith torch.autocast(DEVICE):\n    pass",
        "import torch\nwith torch.autocast('cuda', enabled=False):\n    pass",
        "from torch.cuda.amp import custom_fwd\n@custom_fwd(cast_inputs=torch.float32)\ndef f(ctx, x):\n    return x",
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    @torch.cuda.amp.custom_bwd\n"
        "    def backward(ctx, g):\n        return g",
    )
    VALID = (
        "import torch\nwith torch.autocast(device_type='neuron', dtype=torch.bfloat16):\n    pass",
        "import torch\nwith torch.autocast('xla', dtype=torch.bfloat16):\n    pass",
        "import torch\nwith torch.autocast(device_type=x.device.type, enabled=False):\n    pass",
        "import torch\nwith torch.cpu.amp.autocast():\n    pass",
        "from torch.cuda.amp import autocast  # imported, never used",
        "# with torch.cuda.amp.autocast():\nx = 'torch.autocast(\"cuda\")'",
        "def f(autocast=None):\n    return autocast",
        "import torch\ndef forward_context():\n    fallback = torch.autocast(device_type='cuda')\n"
        "    import transformer_engine.pytorch as te\n    return te.fp8_autocast(enabled=True), fallback",
    )


AUTOCAST_TOKENS = ("autocast", "custom_fwd", "custom_bwd")  # `partial(torch.autocast, ...)` too

_CUDA_AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
_CUDA_CUSTOM = frozenset({
    "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd",
    "torch.cuda.amp.autocast_mode.custom_fwd", "torch.cuda.amp.autocast_mode.custom_bwd",
})
_CUSTOM = frozenset({"torch.amp.custom_fwd", "torch.amp.custom_bwd",
                     "torch.amp.autocast_mode.custom_fwd", "torch.amp.autocast_mode.custom_bwd"})
_FP16 = frozenset({"torch.float16", "torch.half"})


def _autocast_advice(ctx: Context, enabled: str = "dtype=torch.bfloat16") -> str:
    if ctx.stack == "native":
        return f'`torch.autocast(device_type="neuron", {enabled})`'
    return f'`torch.autocast("xla", {enabled})`'


def _disabled(enabled: cst.Arg | None) -> bool:
    """An `enabled=False` argument: the region stays in fp32."""
    return enabled is not None and dotted_name(enabled.value) == "False"


def _judged(ctx: Context) -> set[int]:
    """Nodes an earlier check of this family already decided about (a call's callee, an attribute's name)."""
    return ctx.memo("training-judged", ctx.module, set)


def _autocast_call(ctx: Context, node: cst.Call, qualname: str) -> tuple[bool, cst.Arg | None, cst.Arg | None]:
    """For an autocast call: (is it CUDA autocast, its dtype argument, its enabled argument)."""
    if qualname in _CUDA_AUTOCAST:  # autocast(enabled=True, dtype=torch.float16, cache_enabled=True)
        return True, keyword(node, "dtype") or positional(node, 1), keyword(node, "enabled") or positional(node, 0)
    device = keyword(node, "device_type") or positional(node, 0)  # autocast(device_type, dtype, enabled, ...)
    is_cuda = device is not None and cuda_device(ctx, device.value) is not None
    return is_cuda, keyword(node, "dtype") or positional(node, 1), keyword(node, "enabled") or positional(node, 2)


def _cuda_autocast_message(ctx: Context, shown: str, dtype: cst.Arg | None) -> str:
    fp16 = dtype is None or dtype_of(ctx, dtype.value) in _FP16
    why = ("CUDA autocast, which disables itself without a CUDA device (and whenever torch_xla is imported), so "
           "the region silently runs in fp32")
    advice = f"use {_autocast_advice(ctx)}"
    if ctx.stack == "xla":
        advice += ' around the forward pass with `NEURON_CC_FLAGS="--auto-cast=none"`'
    if fp16:
        advice += " (bf16, not fp16: BF16 needs no loss scaling)"
    return f"`{shown}` is {why}; {advice}"


def _custom_message(ctx: Context, shown: str, qualname: str) -> str:
    target = '"neuron"' if ctx.stack == "native" else '"xla"'
    name = qualname.rsplit(".", 1)[-1]
    return (f"`{shown}` applies CUDA autocast rules, which are off on Neuron; use "
            f"`torch.amp.{name}(device_type={target})`")


def _device(ctx: Context) -> str:
    return "neuron" if ctx.stack == "native" else "xla"


def _autocast_title(ctx: Context, dtype: bool) -> str:
    return f'Autocast on "{_device(ctx)}"' + (" in bfloat16" if dtype else "")


# `torch.cuda.amp.autocast(enabled, dtype, cache_enabled)`: its positional parameters, named for torch.autocast
_CUDA_AUTOCAST_PARAMETERS = ("enabled", "dtype", "cache_enabled")


def _autocast_fix(ctx: Context, node: cst.Call, call: cst.Call, qualname: str, dtype: cst.Arg | None,
                  enabled: cst.Arg | None) -> FixPlan | None:
    """CUDA autocast → the stack's (KNOWLEDGE.md §3.4, §3.5), in bf16. Safe where no dtype or bf16 was asked for
    (BF16 is Neuron's mixed-precision type and the region ran in fp32 there, autocast being off); unsafe where
    fp16 becomes bf16 (fewer mantissa bits). `enabled=False` regions and dtypes chosen at run time keep theirs."""
    if any(arg.star for arg in call.args):
        return None
    off = _disabled(enabled)
    fp16 = not off and dtype is not None and dtype_of(ctx, dtype.value) in _FP16
    add_dtype = not off and dtype is None
    torch, imports = spelling(ctx, "torch")
    if not (fp16 or add_dtype or qualname in _CUDA_AUTOCAST):
        imports = ()
    bf16 = f"{torch}.bfloat16"
    title = _autocast_title(ctx, fp16 or add_dtype)
    if qualname in _CUDA_AUTOCAST:  # a new callee and device: the call is written anew, its arguments kept
        if call is not node:
            return None  # `partial(torch.cuda.amp.autocast, ...)`
        if len(node.args) > len(_CUDA_AUTOCAST_PARAMETERS):
            return None
        args = []
        for index, arg in enumerate(node.args):
            if arg.keyword is None:
                arg = arg.with_changes(keyword=cst.Name(_CUDA_AUTOCAST_PARAMETERS[index]), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            if fp16 and arg.keyword is not None and arg.keyword.value == "dtype":
                arg = arg.with_changes(value=cst.parse_expression(bf16))
            args.append(arg)
        new = node.with_changes(func=cst.parse_expression(f"{torch}.autocast"), args=args)
        device = new_literal(_device(ctx), node)
        first = keyword_arg("device_type", device) if ctx.stack == "native" else cst.Arg(cst.parse_expression(device))
        new = with_arg(new, 0, first)
        if add_dtype:
            new = with_arg(new, 1, keyword_arg("dtype", bf16))
        code = rewritten(ctx, node, new)
        return None if code is None else FixPlan(title, not fp16, (Replace(node, code),), imports)
    device_arg = keyword(call, "device_type") or positional(call, 0)
    literal = literal_like(device_arg.value, _device(ctx)) if device_arg is not None else None
    if device_arg is None or literal is None:
        return None  # a device named by a variable: fixed where it is bound, if anywhere
    replacements = [Replace(device_arg.value, f"{literal}, dtype={bf16}" if add_dtype else literal)]
    if fp16:
        assert dtype is not None  # fp16: the dtype argument asked for it
        replacements.append(Replace(dtype.value, bf16))
    return FixPlan(title, not fp16, tuple(replacements), imports)


def _custom_fix(ctx: Context, node: cst.CSTNode, qualname: str) -> FixPlan | None:
    """`torch.cuda.amp.custom_fwd` → `torch.amp.custom_fwd(device_type=<stack>)`: the same autocast rules, for
    the device the model runs on: safe."""
    name = qualname.rsplit(".", 1)[-1]
    device = new_literal(_device(ctx), node if isinstance(node, cst.Call) else None)
    title = f"Use `torch.amp.{name}(device_type={device})`"
    if not isinstance(node, cst.Call):  # a bare `@torch.cuda.amp.custom_fwd`
        if id(node) not in _decorators(ctx):
            return None
        torch, imports = spelling(ctx, "torch")
        return FixPlan(title, True, (Replace(node, f"{torch}.amp.{name}(device_type={device})"),), imports)
    if qualname in _CUSTOM:
        arg = keyword(node, "device_type")
        literal = literal_like(arg.value, _device(ctx)) if arg is not None else None
        return None if arg is None or literal is None else FixPlan(title, True, (Replace(arg.value, literal),))
    if any(arg.star for arg in node.args):
        return None
    torch, imports = spelling(ctx, "torch")
    index = next((i for i, arg in enumerate(node.args) if arg.keyword is not None), len(node.args))
    new = with_arg(node.with_changes(func=cst.parse_expression(f"{torch}.amp.{name}")), index,
                   keyword_arg("device_type", device))
    code = rewritten(ctx, node, new)
    return None if code is None else FixPlan(title, True, (Replace(node, code),), imports)


def _decorators(ctx: Context) -> set[int]:
    return ctx.memo("training-decorators", ctx.module, set)


@check(cst.Decorator, rules=(CudaAutocast,), tokens=AUTOCAST_TOKENS)
def note_decorator(node: cst.Decorator, ctx: Context) -> None:
    _decorators(ctx).add(id(node.decorator))


@check(cst.Call, rules=(CudaAutocast, Fp16MixedPrecision), tokens=AUTOCAST_TOKENS)
def check_autocast_call(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname is None:
        return
    if qualname in _CUDA_CUSTOM or qualname in _CUSTOM:
        _judged(ctx).add(id(node.func))
        device = keyword(node, "device_type")
        if qualname in _CUSTOM and (device is None or cuda_device(ctx, device.value) is None):
            return
        message = _custom_message(ctx, one_line(ctx.source(node)), qualname)
        decorated = ctx.statements[-1] if ctx.statements else None
        if isinstance(decorated, cst.FunctionDef) and any(d.decorator is node for d in decorated.decorators) and \
                not computes(ctx, decorated):
            ctx.report(CudaAutocast, node, f"{message} (`{decorated.name.value}` only moves and reshapes data, which "
                       "autocast never recasts: the device type changes nothing here)", Severity.INFO,
                       _custom_fix(ctx, node, qualname))
            return
        ctx.report(CudaAutocast, node, message, fix=_custom_fix(ctx, node, qualname))
        return
    call = node
    if qualname == "functools.partial" and node.args and node.args[0].keyword is None:
        # `partial(torch.autocast, device_type="cuda", dtype=...)`: judge the arguments it binds
        first = node.args[0].value
        qualname = ctx.qualname(first) or ""
        call = node.with_changes(func=first, args=node.args[1:])
        _judged(ctx).add(id(first))
    if qualname not in _CUDA_AUTOCAST and qualname not in _AUTOCAST:
        return
    _judged(ctx).add(id(node.func))
    is_cuda, dtype, enabled = _autocast_call(ctx, call, qualname)
    shown = one_line(ctx.source(node))
    if _never_entered(ctx, node):
        ctx.report(CudaAutocast if is_cuda else Fp16MixedPrecision, node, f"`{shown}` is made but never entered: "
                   "`with a and b:` enters only `b` (`and` gives its last operand), so no autocast region exists here, "
                   "on a GPU or on Neuron", Severity.INFO)
        return
    if is_cuda:
        if nvidia_integration(ctx):
            return  # the fallback autocast of a Transformer Engine plugin, chosen only on NVIDIA GPUs
        fix = _autocast_fix(ctx, node, call, qualname, dtype, enabled)
        if _disabled(enabled):
            ctx.report(CudaAutocast, node, f"`{shown}` keeps this region in fp32 only under CUDA autocast; once the "
                       "outer autocast targets Neuron it no longer does; write "
                       f"{_autocast_advice(ctx, 'enabled=False')}", Severity.INFO, fix)
        else:
            ctx.report(CudaAutocast, node, _cuda_autocast_message(ctx, shown, dtype), fix=fix)
        return
    device = keyword(call, "device_type") or positional(call, 0)
    if device is not None and string_value(device.value) == "cpu":
        return  # CPU autocast runs on the host, not on the NeuronCore
    if dtype is not None and dtype_of(ctx, dtype.value) in _FP16 and not _disabled(enabled):
        torch, imports = spelling(ctx, "torch")
        fix = FixPlan("Use `dtype=torch.bfloat16`", False, (Replace(dtype.value, f"{torch}.bfloat16"),), imports)
        ctx.report(Fp16MixedPrecision, node, f"`{shown}` autocasts to fp16; Neuron's documented mixed precision is "
                   "BF16 (FP32's range, no loss scaling needed); use `dtype=torch.bfloat16`", fix=fix)


def _never_entered(ctx: Context, node: cst.Call) -> bool:
    """`with torch.cuda.amp.autocast() and ema.average_parameters():`: an operand of a `with` item's `and` chain
    other than the last, which the `with` never enters."""
    statement = ctx.statements[-1] if ctx.statements else None
    items = statement.items if isinstance(statement, cst.With) else ()
    return any(operand is node for item in items for operand in and_operands(item.item)[:-1])


@check(cst.Attribute, cst.Name, rules=(CudaAutocast,), tokens=AUTOCAST_TOKENS)
def check_autocast_reference(node: cst.Attribute | cst.Name, ctx: Context) -> None:
    """`amp_autocast = torch.cuda.amp.autocast` or `partial(autocast, ...)`: CUDA autocast used as a value."""
    judged = _judged(ctx)
    if isinstance(node, cst.Attribute):
        judged.add(id(node.attr))
    if id(node) in judged:
        return
    if isinstance(node, cst.Name) and any(node.value in scope.bound for scope in ctx.scopes):
        return  # a local name (a parameter, say) that shadows the import
    qualname = ctx.qualname(node)
    if qualname not in _CUDA_AUTOCAST and qualname not in _CUDA_CUSTOM:
        return
    statement = ctx.statements[-1] if ctx.statements else None
    if isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body):
        return  # importing it is not using it
    judged.add(id(node))
    if qualname in _CUDA_CUSTOM:
        ctx.report(CudaAutocast, node, _custom_message(ctx, qualname, qualname), fix=_custom_fix(ctx, node, qualname))
        return
    ctx.report(CudaAutocast, node, f"`{qualname}` is CUDA autocast, which disables itself without a CUDA device (and "
               f"whenever torch_xla is imported), so the region silently runs in fp32; use {_autocast_advice(ctx)}")


@check(cst.Param, cst.Arg, cst.FunctionDef, cst.ClassDef, cst.AsName, rules=(CudaAutocast,), tokens=AUTOCAST_TOKENS)
def skip_binding_names(node: cst.Param | cst.Arg | cst.FunctionDef | cst.ClassDef | cst.AsName,
                       ctx: Context) -> None:
    """Parameter, keyword and definition names are not references to an imported `autocast`."""
    name = node.keyword if isinstance(node, cst.Arg) else node.name
    if isinstance(name, cst.Name):
        _judged(ctx).add(id(name))

