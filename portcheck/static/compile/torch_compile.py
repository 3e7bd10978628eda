"""`torch.compile` written for GPUs: no backend or a GPU backend, CUDA-graph modes and Inductor options,
`dynamic=True`, and any `torch.compile` on the XLA stack (PC711-PC715)."""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.codegen import keyword_arg, literal_like, new_literal, rewritten, with_arg, without
from portcheck.static.compile.text import bound_string, one_line
from portcheck.static.syntax import dotted_name, keyword, positional, string_value


@rule
class CompileBackend(Rule):
    """## What it does
    On the TorchNeuron native stack, finds `torch.compile` (call or decorator) and `torch._dynamo.optimize` whose
    backend is not Neuron's: `backend="inductor"`, `"cudagraphs"`, `"tensorrt"`, `"openxla"` or any other
    string (warning), or no backend at all (info: the default is Inductor). `backend="neuron"`, the debug
    backends `"eager"` / `"aot_eager"`, and backends given as variables or callables stay quiet.

    ## Example
    ```python
    model = torch.compile(model, backend="inductor")
    ```

    ## Use instead
    ```python
    model = torch.compile(model, backend="neuron", fullgraph=True)
    ```

    ## Fix safety
    Where no backend is named the fix adds `backend="neuron"` (before the first keyword argument; a bare
    `@torch.compile` becomes `@torch.compile(backend="neuron")`): safe, porting asks for the Neuron backend.
    A literal backend becomes `"neuron"`: safe for `"inductor"` and `"cudagraphs"` without `options=` (the same
    graph, the same numerics), unsafe for other backends (TensorRT's precisions, an XLA backend, one the project
    registers) and next to `options=`. Backends given as variables or through `**kwargs` get no fix.
    """

    code = "PC711"
    FIXABLE = True
    INVALID = (
        "import torch\nm = torch.compile(m, backend='inductor')",
        "import torch\nm = torch.compile(m)",
        "import torch\n@torch.compile\ndef f(x):\n    return x",
        "from torch import compile as c\nm = c(m, backend='cudagraphs')",
        "import torch._dynamo\nf = torch._dynamo.optimize('inductor')(f)",
    )
    VALID = (
        "import torch\nm = torch.compile(m, backend='neuron')",
        "import torch\nm = torch.compile(m, backend=args.backend)",
        "import re\np = re.compile('x')",
        "import torch\nm = torch.compile(m, backend='aot_eager')",
        "import torch\n@torch.compile(backend='neuron', fullgraph=True)\ndef f(x):\n    return x",
    )


@rule
class CompileCudaMode(Rule):
    """## What it does
    On the TorchNeuron native stack, finds `torch.compile(..., mode="reduce-overhead" | "max-autotune" |
    "max-autotune-no-cudagraphs")` and `options=` dicts holding Inductor keys (`"triton.cudagraphs"`,
    `"max_autotune"`, ...). These ask for CUDA graphs or GPU kernel autotuning; the Neuron backend runs the
    default mode only, so they do nothing there.

    ## Example
    ```python
    model = torch.compile(model, backend="neuron", mode="max-autotune")
    ```

    ## Use instead
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    Safe fix: removes the `mode=` argument, or the Inductor keys of `options=` (the whole argument when no other
    key is left). The Neuron backend ignores them, so nothing it runs changes.
    """

    code = "PC712"
    FIXABLE = True
    INVALID = (
        "import torch\nm = torch.compile(m, backend='neuron', mode='reduce-overhead')",
        "import torch\nm = torch.compile(m, backend='neuron', options={'triton.cudagraphs': True})",
        "import torch\n@torch.compile(backend='neuron', mode='max-autotune-no-cudagraphs')\ndef f(x):\n    return x",
    )
    VALID = (
        "import torch\nm = torch.compile(m, backend='neuron', mode='default')",
        "import torch\nm = torch.compile(m, backend='neuron', options={'neuron.something': 1})",
        "import torch\nm = torch.compile(m, backend='neuron', mode=args.mode)",
    )


@rule
class CompileOnXla(Rule):
    """## What it does
    On the PyTorch/XLA stack (torch-neuronx <= 2.9: inf2, trn1, trn2 with `--stack xla`), finds every
    `torch.compile` (call or decorator) and `torch._dynamo.optimize`: PyTorch NeuronX does not support them.
    Two kinds are info, not what the port runs: in a file that asks `is_compile_supported(device)` (False for
    XLA devices), and, on a chip that does not train, a compile in an FSDP / DDP / DeepSpeed preparation.

    ## Example
    ```python
    model = torch.compile(model)
    ```

    ## Use instead
    ```python
    traced = torch_neuronx.trace(model, example_inputs)   # inference
    # training: run the eager model on torch_xla.device() and end each step with xm.mark_step()
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC713"
    message = ("`{call}`: PyTorch NeuronX (the XLA stack) does not support `{function}`; remove it: trace for "
               "inference with `torch_neuronx.trace(model, example_inputs)`, and train through the lazy XLA graph "
               "with `xm.mark_step()` (or target TorchNeuron native on trn2)")
    TARGET = ("inf2", "xla")
    INVALID = (
        "import torch\nm = torch.compile(m)",
        "import torch\nm = torch.compile(m, backend='openxla')",
        "import torch\n@torch.compile\ndef f(x):\n    return x",
    )
    VALID = (
        "import torch_neuronx\nm = torch_neuronx.trace(m, x)",
        "import re\np = re.compile('x')",
        "# torch.compile(model) is not used here\nx = 'torch.compile'",
    )


@rule
class CompileBackendNeuronx(Rule):
    """## What it does
    On the TorchNeuron native stack, finds `torch.compile(..., backend="neuronx")` (also through a local name
    bound to the string). A few Neuron pages spell it so, but the backend is registered as `"neuron"`.

    ## Example
    ```python
    model = torch.compile(model, backend="neuronx")
    ```

    ## Use instead
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    Safe fix: `"neuronx"` becomes `"neuron"`, quotes kept, at the literal or at the binding of the name holding it.
    """

    code = "PC714"
    message = ("`backend=\"neuronx\"` is a doubtful spelling (a few old Neuron pages use it); TorchNeuron registers "
               "its TorchDynamo backend as `backend=\"neuron\"`")
    fix_title = 'Use backend "neuron"'
    FIXABLE = True
    INVALID = (
        "import torch\nm = torch.compile(m, backend='neuronx')",
        "import torch\nB = 'neuronx'\nm = torch.compile(m, backend=B)",
    )
    VALID = ("import torch\nm = torch.compile(m, backend='neuron')", "x = 'backend=neuronx'")


@rule
class CompileDynamic(Rule):
    """## What it does
    On the TorchNeuron native stack, finds `torch.compile(..., dynamic=True)`. The Neuron backend rejects it:
    there are no dynamic shapes, and each new input shape recompiles.

    ## Example
    ```python
    model = torch.compile(model, backend="neuron", dynamic=True)
    ```

    ## Use instead
    ```python
    model = torch.compile(model, backend="neuron")   # and pad or bucket inputs to a few fixed shapes
    ```

    ## Fix safety
    Safe fix: `dynamic=True` becomes `dynamic=False`. The results are the same; the Neuron backend compiles
    static shapes either way (each new shape recompiles), and no longer rejects the call.
    """

    code = "PC715"
    message = ("`dynamic=True` is rejected by the Neuron `torch.compile` backend, which has no dynamic shapes (each "
               "new shape recompiles): drop it, or pass `dynamic=False`, and pad or bucket the inputs")
    fix_title = "Use `dynamic=False`"
    FIXABLE = True
    INVALID = ("import torch\nm = torch.compile(m, backend='neuron', dynamic=True)",)
    VALID = (
        "import torch\nm = torch.compile(m, backend='neuron', dynamic=False)",
        "import torch\nm = torch.compile(m, backend='neuron', dynamic=None)",
    )


COMPILE_TOKENS = ("compile", "optimize")

_COMPILE = "torch.compile"
_DYNAMO_OPTIMIZE = "torch._dynamo.optimize"
# Backends that run anywhere torch runs (for debugging): not a porting problem.
_PORTABLE_BACKENDS = frozenset({"eager", "aot_eager", "aot_eager_decomp_partition"})
_BACKEND_REASON = {
    "inductor": "TorchInductor, the code generator used on GPUs; the Neuron backend does not use Inductor",
    "cudagraphs": "CUDA graphs, which Neuron has no equivalent of",
    "tensorrt": "NVIDIA TensorRT",
    "torch_tensorrt": "NVIDIA TensorRT",
    "openxla": "PyTorch/XLA's backend; TorchNeuron native is not XLA-based",
    "openxla_eval": "PyTorch/XLA's backend; TorchNeuron native is not XLA-based",
}
_CUDA_MODES = frozenset({"reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"})
_INDUCTOR_OPTIONS = frozenset({"max_autotune", "max_autotune_pointwise", "max_autotune_gemm", "epilogue_fusion",
                               "shape_padding", "coordinate_descent_tuning"})


def _judge_compile(ctx: Context, node: cst.CSTNode, call: cst.Call | None, qualname: str) -> None:
    shown = "torch.compile" if qualname == _COMPILE else "torch._dynamo.optimize"
    if ctx.stack == "xla":
        why = _compile_on_xla_not_taken(ctx)
        if why is None:
            ctx.report(CompileOnXla, node, call=one_line(ctx, node), function=shown)
        else:
            ctx.report(CompileOnXla, node, f"`{one_line(ctx, node)}`: {why}, so a port to PyTorch NeuronX (the XLA "
                       f"stack, which does not support `{shown}`) does not reach it", severity=Severity.INFO)
        return
    backend = None
    if call is not None:
        backend = keyword(call, "backend") or (positional(call, 0) if qualname == _DYNAMO_OPTIMIZE else None)
    if backend is None and not (call is not None and any(arg.star for arg in call.args)):  # `**kwargs` may hold it
        ctx.report(CompileBackend, node, f"`{one_line(ctx, node)}` names no backend, so it defaults to "
                   "TorchInductor; TorchNeuron selects its own backend only for a model already on the Neuron "
                   "device, and its porting checklist asks for it explicitly: pass `backend=\"neuron\"`",
                   severity=Severity.INFO, fix=_add_backend(ctx, node, call))
    elif backend is None and call is not None and _may_lack_backend(ctx, call):
        spread = next(ctx.source(arg.value) for arg in call.args if arg.star)
        ctx.report(CompileBackend, node, f"`{one_line(ctx, node)}` names no backend unless `{spread}` holds one; "
                   "without it, it defaults to TorchInductor, and TorchNeuron's porting checklist asks for "
                   "`backend=\"neuron\"` explicitly", severity=Severity.INFO)
    elif backend is not None:
        _judge_backend(ctx, backend, call)
    if call is None:
        return
    mode = keyword(call, "mode")
    if mode is not None and bound_string(ctx, mode.value) in _CUDA_MODES:
        ctx.report(CompileCudaMode, mode, f"`mode={ctx.source(mode.value)}` asks for CUDA graphs / GPU autotuning; "
                   "the Neuron backend supports only the default mode (others log a warning and do nothing): "
                   "remove it", fix=_drop(ctx, call, call.with_changes(args=without(call.args, [mode])),
                                          f"Remove `mode={ctx.source(mode.value)}`"))
    options = keyword(call, "options")
    if options is not None and isinstance(options.value, cst.Dict):
        inductor = [element for element in options.value.elements if _inductor_option(element)]
        if inductor:
            key = string_value(inductor[0].key)
            if len(inductor) == len(options.value.elements):
                new = call.with_changes(args=without(call.args, [options]))
            else:
                elements = without(options.value.elements, inductor)
                new = call.with_changes(args=[arg.with_changes(value=options.value.with_changes(elements=elements))
                                              if arg is options else arg for arg in call.args])
            ctx.report(CompileCudaMode, inductor[0], f"the Inductor option `{key}` (CUDA graphs / GPU kernel "
                       "tuning) is not read by the Neuron backend, which does not use Inductor: remove it",
                       fix=_drop(ctx, call, new, "Remove the Inductor options"))
    dynamic = keyword(call, "dynamic")
    if dynamic is not None and dotted_name(dynamic.value) == "True":
        # Same results, compiled for static shapes: the Neuron backend has no other kind.
        fix = FixPlan(CompileDynamic.fix_title, True, (Replace(dynamic.value, "False"),))
        ctx.report(CompileDynamic, dynamic, fix=fix)


def _may_lack_backend(ctx: Context, call: cst.Call) -> bool:
    """`torch.compile(m, **kwargs)`: the keywords may name no backend. A dict literal the name is bound to says
    whether they do (`{"backend": "neuron"}` does); `*args` alone (no keywords spread) names none either."""
    for arg in call.args:
        if arg.star == "**":
            bound = ctx.constant(arg.value)
            if bound is None or not isinstance(bound[1], cst.Dict):
                return True
            if any(isinstance(e, cst.DictElement) and string_value(e.key) == "backend" for e in bound[1].elements):
                return False
            if any(isinstance(e, cst.StarredDictElement) for e in bound[1].elements):
                return True
    return True


_SHARDED_TRAINING = ("fsdp", "ddp", "deepspeed")


def _compile_on_xla_not_taken(ctx: Context) -> str | None:
    """Why this `torch.compile` is not what the port runs on the XLA stack, or None. A file that asks
    `is_compile_supported(device)` (torchvision's ops) compiles only for devices Dynamo supports, which XLA
    devices are not; and on a chip that does not train, a compile in an FSDP / DDP / DeepSpeed preparation
    belongs to training, which PC607 reports."""
    if "is_compile_supported(" in ctx.text:
        return "this file compiles only where `is_compile_supported(device)` holds, which is False for XLA devices"
    function = ctx.functions[-1].name.value if ctx.functions else ""
    if any(word in function.lower() for word in _SHARDED_TRAINING) and ctx.inference_only:
        return (f"in `{function}`, a sharded-training preparation; training itself does not run on {ctx.chip}, "
                "which PC607 reports")
    return None


def _inductor_option(element: cst.BaseDictElement) -> TypeGuard[cst.DictElement]:
    key = string_value(element.key) if isinstance(element, cst.DictElement) else None
    return key is not None and (key.startswith("triton.") or key in _INDUCTOR_OPTIONS)


def _drop(ctx: Context, call: cst.Call, new: cst.Call, title: str) -> FixPlan | None:
    """Remove what the Neuron backend ignores (it runs the default mode and reads no Inductor option): safe."""
    code = rewritten(ctx, call, new)
    return None if code is None else FixPlan(title, True, (Replace(call, code),))


def _add_backend(ctx: Context, node: cst.CSTNode, call: cst.Call | None) -> FixPlan | None:
    """`backend="neuron"` where none is named: before the first keyword argument, else after the positional ones.
    Safe: porting asks for the Neuron backend, and the checklist says to name it."""
    title = 'Pass `backend="neuron"`'
    if call is None:  # a bare `@torch.compile`
        return FixPlan(title, True, (Replace(node, f'{ctx.source(node)}(backend="neuron")'),))
    index = next((i for i, arg in enumerate(call.args) if arg.keyword is not None), len(call.args))
    code = rewritten(ctx, call, with_arg(call, index, keyword_arg("backend", new_literal("neuron", call))))
    return None if code is None else FixPlan(title, True, (Replace(call, code),))


def _judge_backend(ctx: Context, backend: cst.Arg, call: cst.Call | None) -> None:
    value = bound_string(ctx, backend.value)
    if value is None or value == "neuron" or value in _PORTABLE_BACKENDS:
        return  # a callable or a variable: cannot tell
    if value == "neuronx":
        # The backend a user meant, spelled as a few Neuron pages do: safe, at the literal or at its binding.
        bound = ctx.constant(backend.value)
        literal = backend.value if bound is None else bound[1]
        code = literal_like(literal, "neuron")
        fix = None if code is None else FixPlan(CompileBackendNeuronx.fix_title, True, (Replace(literal, code),))
        ctx.report(CompileBackendNeuronx, backend, fix=fix)
        return
    reason = _BACKEND_REASON.get(value, "not a Neuron backend")
    code = literal_like(backend.value, "neuron")
    fix = None
    if code is not None:
        # Inductor and CUDA graphs compile the same graph with the same numerics; a backend with options of its
        # own (TensorRT precisions), an XLA backend or one registered by the project may mean more: unsafe.
        safe = value in ("inductor", "cudagraphs") and (call is None or keyword(call, "options") is None)
        fix = FixPlan('Use backend "neuron"', safe, (Replace(backend.value, code),))
    message = (f"`backend=\"{value}\"` selects {reason}; TorchNeuron compiles through `backend=\"neuron\"` "
               "(TorchDynamo, then StableHLO and neuronx-cc)")
    default = ctx.parameter_default(backend.value)
    if default is None:
        ctx.report(CompileBackend, backend, message, fix=fix)
    elif id(default) not in (reported := ctx.memo("compile-defaults-reported", ctx.module, set)):
        reported.add(id(default))  # at the parameter's default, where it is written and its fix goes: once
        ctx.report(CompileBackend, default, f"{message} (the default of `{ctx.source(backend.value)}`, which "
                   f"`{one_line(ctx, call or backend)}` uses)", fix=fix)


_RULES = (CompileBackend, CompileCudaMode, CompileOnXla, CompileBackendNeuronx, CompileDynamic)


@check(cst.Call, rules=_RULES, tokens=COMPILE_TOKENS)
def check_compile_call(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname in (_COMPILE, _DYNAMO_OPTIMIZE):
        _judge_compile(ctx, node, node, qualname)


@check(cst.Decorator, rules=_RULES, tokens=("compile",))
def check_bare_decorator(node: cst.Decorator, ctx: Context) -> None:
    """`@torch.compile` without a call (with one, the Call check sees it)."""
    if not isinstance(node.decorator, cst.Call) and ctx.qualname(node.decorator) == _COMPILE:
        _judge_compile(ctx, node.decorator, None, _COMPILE)
