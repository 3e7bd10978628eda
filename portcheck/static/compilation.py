"""compile (PC71x): `torch.compile` settings made for GPUs, TorchScript, and XLA/Neuron APIs that were removed.

TorchNeuron native compiles with `torch.compile(backend="neuron")`, a TorchDynamo backend without Inductor and
without CUDA graphs; PyTorch NeuronX (the XLA stack) does not support `torch.compile` at all. Env vars and
functions the Neuron/XLA releases deprecated or removed (`XLA_USE_BF16`, `torch_neuronx.nki_jit`,
`xm.xrt_world_size`) are reported where they are set, imported or called; strings and comments stay quiet.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.codegen import (
    imports_module,
    keyword_arg,
    literal_like,
    new_literal,
    rewritten,
    spelling,
    with_arg,
    without,
)
from portcheck.static.rule import (
    Context,
    FixPlan,
    Replace,
    Rule,
    check,
    keyword,
    positional,
    rule,
    string_value,
)
from portcheck.static.syntax import dotted_name
from portcheck.static.values import catches_import_error

COMPILE_CODES = ("PC711", "PC712", "PC713", "PC714", "PC715")
COMPILE_TOKENS = ("compile", "optimize")
API_CODES = ("PC718", "PC719")
API_TOKENS = ("nki_jit", "xrt_world_size", "pjrt", "get_ordinal", "get_local_ordinal")
ENV_VARS = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16")


_COMPILE = "torch.compile"
_DYNAMO_OPTIMIZE = "torch._dynamo.optimize"
_JIT_SCRIPT = "torch.jit.script"
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
_ENV_SETTERS = frozenset({"os.putenv", "os.environ.setdefault"})

# Removed or deprecated XLA / Neuron APIs: qualified name -> (severity or None for the rule's, replacement,
# what happened). Sources: SDK:archive/appnotes/torch-neuronx/introducing-pytorch-2-x.rst and -2-9.rst;
# SDK:about-neuron/announcements/neuron2.x/announce-no-support-nki-jit-torch.rst; aws-neuron/neuronx-distributed#53.
_NKI = {
    "torch_neuronx.nki_jit": (None, "is no longer supported since Neuron 2.24"),
    "torch_neuronx.xla_impl.ops.nki_jit": (
        Severity.WARNING,
        "is the deprecated path behind `torch_neuronx.nki_jit`, which Neuron 2.24 stopped supporting (it prints a "
        "deprecation warning)"),
}
_XLA = {
    "torch_xla.core.xla_model.xrt_world_size": (None, "`torch_xla.runtime.world_size()`",
                                                "was removed in torch-xla 2.7"),
    "torch_xla.experimental.pjrt": (None, "`torch_xla.runtime`", "was removed in torch-xla 2.5"),
    "torch_xla.runtime.using_pjrt": (None, "nothing (PJRT is the only runtime)", "was removed in torch-xla 2.5"),
    "torch_xla.core.xla_model.get_ordinal": (Severity.INFO, "`torch_xla.runtime.global_ordinal()`",
                                             "is deprecated (a warning when used)"),
    "torch_xla.core.xla_model.get_local_ordinal": (Severity.INFO, "`torch_xla.runtime.local_ordinal()`",
                                                   "is deprecated (a warning when used)"),
}


_API_LAST = frozenset(api.rsplit(".", 1)[1] for api in (*_NKI, *_XLA))


def _one_line(ctx: Context, node: cst.CSTNode) -> str:
    text = " ".join(ctx.source(node).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _text(ctx: Context, node: cst.BaseExpression) -> str | None:
    """A string literal, or a local name bound once to one."""
    value = string_value(node)
    if value is not None:
        return value
    bound = ctx.constant(node)
    return string_value(bound[1]) if bound is not None else None


# ---- torch.compile ----------------------------------------------------------------------------------------------


def _judge_compile(ctx: Context, node: cst.CSTNode, call: cst.Call | None, qualname: str) -> None:
    shown = "torch.compile" if qualname == _COMPILE else "torch._dynamo.optimize"
    if ctx.stack == "xla":
        ctx.report("PC713", node, f"`{_one_line(ctx, node)}`: PyTorch NeuronX (the XLA stack) does not support "
                   f"`{shown}`; remove it: trace for inference with `torch_neuronx.trace(model, example_inputs)`, "
                   "and train through the lazy XLA graph with `xm.mark_step()` (or target TorchNeuron native on trn2)")
        return
    backend = None
    if call is not None:
        backend = keyword(call, "backend") or (positional(call, 0) if qualname == _DYNAMO_OPTIMIZE else None)
    if backend is None and not (call is not None and any(arg.star for arg in call.args)):  # `**kwargs` may hold it
        ctx.report("PC711", node, f"`{_one_line(ctx, node)}` names no backend, so it defaults to TorchInductor; "
                   "TorchNeuron selects its own backend only for a model already on the Neuron device, and its "
                   "porting checklist asks for it explicitly: pass `backend=\"neuron\"`", Severity.INFO,
                   _add_backend(ctx, node, call))
    elif backend is not None:
        _judge_backend(ctx, backend, call)
    if call is None:
        return
    mode = keyword(call, "mode")
    if mode is not None and _text(ctx, mode.value) in _CUDA_MODES:
        ctx.report("PC712", mode, f"`mode={ctx.source(mode.value)}` asks for CUDA graphs / GPU autotuning; the "
                   "Neuron backend supports only the default mode (others log a warning and do nothing): remove it",
                   fix=_drop(ctx, call, call.with_changes(args=without(call.args, [mode])),
                             f"Remove `mode={ctx.source(mode.value)}`"))
    options = keyword(call, "options")
    if options is not None and isinstance(options.value, cst.Dict):
        inductor = [element for element in options.value.elements if _inductor_option(element)]
        if inductor:
            key = string_value(inductor[0].key)  # type: ignore[union-attr, arg-type]
            if len(inductor) == len(options.value.elements):
                new = call.with_changes(args=without(call.args, [options]))
            else:
                elements = without(options.value.elements, inductor)
                new = call.with_changes(args=[arg.with_changes(value=options.value.with_changes(elements=elements))
                                              if arg is options else arg for arg in call.args])
            ctx.report("PC712", inductor[0], f"the Inductor option `{key}` (CUDA graphs / GPU kernel tuning) is "
                       "not read by the Neuron backend, which does not use Inductor: remove it",
                       fix=_drop(ctx, call, new, "Remove the Inductor options"))
    dynamic = keyword(call, "dynamic")
    if dynamic is not None and dotted_name(dynamic.value) == "True":
        # Same results, compiled for static shapes: the Neuron backend has no other kind.
        fix = FixPlan("Use `dynamic=False`", True, (Replace(dynamic.value, "False"),))
        ctx.report("PC715", dynamic, "`dynamic=True` is rejected by the Neuron `torch.compile` backend, which has "
                   "no dynamic shapes (each new shape recompiles): drop it, or pass `dynamic=False`, and pad or "
                   "bucket the inputs", fix=fix)


def _inductor_option(element: cst.BaseDictElement) -> bool:
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
    value = _text(ctx, backend.value)
    if value is None or value == "neuron" or value in _PORTABLE_BACKENDS:
        return  # a callable or a variable: cannot tell
    if value == "neuronx":
        # The backend a user meant, spelled as a few Neuron pages do: safe, at the literal or at its binding.
        bound = ctx.constant(backend.value)
        literal = backend.value if bound is None else bound[1]
        code = literal_like(literal, "neuron")  # type: ignore[arg-type]
        fix = None if code is None else FixPlan('Use backend "neuron"', True, (Replace(literal, code),))
        ctx.report("PC714", backend, "`backend=\"neuronx\"` is a doubtful spelling (a few old Neuron pages use it); "
                   "TorchNeuron registers its TorchDynamo backend as `backend=\"neuron\"`", fix=fix)
        return
    reason = _BACKEND_REASON.get(value, "not a Neuron backend")
    code = literal_like(backend.value, "neuron")
    fix = None
    if code is not None:
        # Inductor and CUDA graphs compile the same graph with the same numerics; a backend with options of its
        # own (TensorRT precisions), an XLA backend or one registered by the project may mean more: unsafe.
        safe = value in ("inductor", "cudagraphs") and (call is None or keyword(call, "options") is None)
        fix = FixPlan('Use backend "neuron"', safe, (Replace(backend.value, code),))
    ctx.report("PC711", backend, f"`backend=\"{value}\"` selects {reason}; TorchNeuron compiles through "
               "`backend=\"neuron\"` (TorchDynamo, then StableHLO and neuronx-cc)", fix=fix)


@check(cst.Call, codes=COMPILE_CODES, tokens=COMPILE_TOKENS)
def check_compile_call(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    qualname = ctx.qualname(node.func)
    if qualname in (_COMPILE, _DYNAMO_OPTIMIZE):
        _judge_compile(ctx, node, node, qualname)  # type: ignore[arg-type]


@check(cst.Decorator, codes=(*COMPILE_CODES, "PC716"), tokens=("compile", "script"))
def check_bare_decorator(node: cst.CSTNode, ctx: Context) -> None:
    """`@torch.compile` and `@torch.jit.script` without a call (with one, the Call check sees them)."""
    assert isinstance(node, cst.Decorator)
    if isinstance(node.decorator, cst.Call):
        return
    qualname = ctx.qualname(node.decorator)
    if qualname == _COMPILE:
        _judge_compile(ctx, node.decorator, None, qualname)
    elif qualname == _JIT_SCRIPT:
        _report_script(ctx, node.decorator)


# ---- TorchScript -------------------------------------------------------------------------------------------------


def _uses_neuron_bucketing(ctx: Context) -> bool:
    """torch_neuronx's bucketing takes a `torch.jit.script`-ed bucket kernel: scripting is required there."""
    code = ctx.text
    return "torch_neuronx" in code and ("BucketModelConfig" in code or "bucket_model_trace" in code)


def _report_script(ctx: Context, node: cst.CSTNode) -> None:
    if ctx.memo("compile-bucketing", ctx.module, lambda: _uses_neuron_bucketing(ctx)):
        return
    if ctx.stack == "xla":
        advice = ("`torch_neuronx.trace` records the eager model through torch-xla and freezes its control flow, "
                  "so scripting keeps no branch in the Neuron graph; drop it and trace the eager module")
    else:
        advice = "TorchNeuron compiles with `torch.compile(backend=\"neuron\")`; drop the scripting"
    ctx.report("PC716", node, f"`{_one_line(ctx, node)}`: TorchScript is deprecated in PyTorch; {advice}")


@check(cst.Call, codes=("PC716",), tokens=("script",))
def check_script_call(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    if ctx.qualname(node.func) == _JIT_SCRIPT:
        _report_script(ctx, node)


# ---- XLA_USE_BF16 / XLA_DOWNCAST_BF16 -----------------------------------------------------------------------------


def _bf16_message(ctx: Context, name: str) -> str:
    if ctx.stack == "xla":
        advice = ("cast with `model.to(torch.bfloat16)` (plus `NEURON_RT_STOCHASTIC_ROUNDING_EN=1` for full-BF16 "
                  "training) or use `torch.autocast(\"xla\", dtype=torch.bfloat16)`")
    else:
        advice = ("TorchNeuron native is not XLA-based: cast with `model.to(torch.bfloat16)` or use "
                  "`torch.autocast(device_type=\"neuron\", dtype=torch.bfloat16)`")
    return (f"`{name}` is deprecated since torch-neuronx 2.5 (a warning when set; to be removed) and overrides the "
            f"per-operator precision of autocast; {advice}")


def _disables(ctx: Context, value: cst.BaseExpression | None) -> bool:
    return value is not None and _text(ctx, value) in ("0", "")


@check(cst.Assign, codes=("PC717",), tokens=ENV_VARS)
def check_env_assignment(node: cst.CSTNode, ctx: Context) -> None:
    """`os.environ["XLA_USE_BF16"] = "1"`."""
    assert isinstance(node, cst.Assign)
    for target in node.targets:
        name = _environ_key(ctx, target.target)
        if name is not None and not _disables(ctx, node.value):
            ctx.report("PC717", target.target, _bf16_message(ctx, name))


def _environ_key(ctx: Context, target: cst.BaseExpression) -> str | None:
    if not isinstance(target, cst.Subscript) or ctx.qualname(target.value) != "os.environ" or len(target.slice) != 1:
        return None
    index = target.slice[0].slice
    key = string_value(index.value) if isinstance(index, cst.Index) else None
    return key if key in ENV_VARS else None


@check(cst.Call, codes=("PC717",), tokens=ENV_VARS)
def check_env_call(node: cst.CSTNode, ctx: Context) -> None:
    """`os.environ.setdefault("XLA_USE_BF16", "1")`, `os.putenv(...)`, `os.environ.update({...})`."""
    assert isinstance(node, cst.Call)
    qualname = ctx.qualname(node.func)
    if qualname in _ENV_SETTERS:
        key, value = positional(node, 0), positional(node, 1)
        name = string_value(key.value) if key is not None else None
        if name in ENV_VARS and not _disables(ctx, value.value if value is not None else None):
            ctx.report("PC717", node, _bf16_message(ctx, name))  # type: ignore[arg-type]
    elif qualname == "os.environ.update":
        for key, value, where in _update_items(node):
            if key in ENV_VARS and not _disables(ctx, value):
                ctx.report("PC717", where, _bf16_message(ctx, key))


def _update_items(node: cst.Call) -> Iterator[tuple[str | None, cst.BaseExpression, cst.CSTNode]]:
    for arg in node.args:
        if arg.keyword is not None:
            yield arg.keyword.value, arg.value, arg
        elif isinstance(arg.value, cst.Dict):
            for element in arg.value.elements:
                if isinstance(element, cst.DictElement):
                    yield string_value(element.key), element.value, element


# ---- removed NKI / XLA APIs ----------------------------------------------------------------------------------------


def _match(qualname: str) -> tuple[str, str] | None:
    """(code, api) when `qualname` is, or is inside, a removed or deprecated API."""
    for table, code in ((_NKI, "PC718"), (_XLA, "PC719")):
        for api in table:
            if qualname == api or qualname.startswith(api + "."):
                return code, api
    return None


def _api_message(ctx: Context, code: str, api: str, shown: str) -> tuple[str, Severity | None]:
    if code == "PC718":
        severity, what = _NKI[api]
        return (f"`{shown}`: `{api}` {what}; call the `@nki.jit` kernel directly (with `@nki_op` registration on "
                "TorchNeuron native)"), severity
    severity, replacement, what = _XLA[api]
    return f"`{shown}`: `{api}` {what}; use {replacement}", severity


def _has_fallback(ctx: Context) -> bool:
    """Inside `try:` with an `except AttributeError` / `ImportError` fallback (a version shim)."""
    for stmt in reversed(ctx.statements):
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            if catches_import_error(stmt):
                return True
            for handler in stmt.handlers:
                kinds = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
                for kind in kinds:
                    expr = kind.value if isinstance(kind, cst.Element) else kind
                    if expr is not None and dotted_name(expr) == "AttributeError":  # type: ignore[arg-type]
                        return True
    return False


def _judged(ctx: Context) -> set[int]:
    return ctx.memo("compile-api-judged", ctx.module, set)  # type: ignore[return-value]


def _report_api(ctx: Context, node: cst.CSTNode, qualname: str, fix: FixPlan | None = None) -> None:
    found = _match(qualname)
    if found is None or _has_fallback(ctx):
        return
    code, api = found
    message, severity = _api_message(ctx, code, api, _one_line(ctx, node))
    ctx.report(code, node, message, severity, fix)


# The documented successors in torch_xla.runtime (KNOWLEDGE.md §3.4), each called without arguments like the
# removed function (whose optional `defval` the successors lack: a call passing one gets no fix).
_RUNTIME_SUCCESSORS = {
    "torch_xla.core.xla_model.xrt_world_size": "world_size",
    "torch_xla.core.xla_model.get_ordinal": "global_ordinal",
    "torch_xla.core.xla_model.get_local_ordinal": "local_ordinal",
}
_PJRT = "torch_xla.experimental.pjrt"
_RUNTIME = "torch_xla.runtime"


def _argless_calls(ctx: Context) -> dict[int, cst.Call]:
    """The calls without arguments seen so far, by the id of what they call."""
    return ctx.memo("argless-calls", ctx.module, dict)  # type: ignore[return-value]


@check(cst.Call, codes=API_CODES, tokens=API_TOKENS)
def note_argless_call(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    if not node.args:
        _argless_calls(ctx)[id(node.func)] = node


def _api_fix(ctx: Context, node: cst.Attribute, qualname: str) -> FixPlan | None:
    """The fix of a removed or deprecated torch-xla API named by the attribute chain `node`."""
    call = _argless_calls(ctx).get(id(node))
    if qualname in _RUNTIME_SUCCESSORS and call is not None:
        # Same value under PJRT, the only runtime since torch-xla 2.5: safe.
        runtime, imports = spelling(ctx, _RUNTIME)
        successor = f"{runtime}.{_RUNTIME_SUCCESSORS[qualname]}"
        return FixPlan(f"Use `{successor}()`", True, (Replace(node, successor),), imports)
    if qualname == "torch_xla.runtime.using_pjrt" and call is not None:
        # PJRT is the only runtime, so the removed probe would answer True: safe.
        return FixPlan("Replace with `True` (PJRT is the only runtime)", True, (Replace(call, "True"),))
    if qualname.startswith(_PJRT + "."):
        inner: cst.BaseExpression = node
        while isinstance(inner, cst.Attribute) and ctx.qualname(inner) != _PJRT:
            inner = inner.value
        if not (isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Attribute)
                and ctx.qualname(inner.value.value) == "torch_xla"):
            return None
        imports = () if imports_module(ctx, _RUNTIME) or imports_module(ctx, _PJRT) else (f"import {_RUNTIME}",)
        return FixPlan(f"Use `{_RUNTIME}`", False, (Replace(inner, f"{ctx.source(inner.value.value)}.runtime"),),
                       imports)
    return None


def _pjrt_import_fix(node: cst.Import | cst.ImportFrom, alias: cst.ImportAlias | None) -> FixPlan | None:
    """`torch_xla.experimental.pjrt` imported → `torch_xla.runtime`, its documented replacement. Unsafe: some of
    its functions (`run_multiprocess`, `rendezvous`, ...) did not move there."""
    title = f"Import `{_RUNTIME}` instead"
    if isinstance(node, cst.Import):
        return None if alias is None else FixPlan(title, False, (Replace(alias.name, _RUNTIME),))
    module = dotted_name(node.module) if node.module is not None else None
    if module == _PJRT:  # from torch_xla.experimental.pjrt import world_size
        return FixPlan(title, False, (Replace(node.module, _RUNTIME),))  # type: ignore[arg-type]
    if module == "torch_xla.experimental" and alias is not None and len(node.names) == 1:  # type: ignore[arg-type]
        local = alias.asname.name.value if isinstance(getattr(alias.asname, "name", None), cst.Name) else "pjrt"
        return FixPlan(title, False, (Replace(node, f"from torch_xla import runtime as {local}"),))
    return None


@check(cst.Attribute, codes=API_CODES, tokens=API_TOKENS)
def check_api_reference(node: cst.CSTNode, ctx: Context) -> None:
    """`xm.xrt_world_size()`, `torch_neuronx.nki_jit(...)`: judged once per attribute chain, where the chain
    itself names the API (a name imported from the API was reported at its import)."""
    assert isinstance(node, cst.Attribute)
    judged = _judged(ctx)
    if id(node) in judged:
        return
    inner: cst.BaseExpression = node.value
    segments = {node.attr.value}
    while isinstance(inner, cst.Attribute):
        judged.add(id(inner))
        segments.add(inner.attr.value)
        inner = inner.value
    if not segments & _API_LAST:
        return  # the API's own name is not in this chain (a name imported from it was judged at the import)
    qualname = ctx.qualname(node)
    head = ctx.qualname(inner) if isinstance(inner, cst.Name) else None
    if qualname is None or (head is not None and _match(head) is not None):
        return
    _report_api(ctx, node, qualname, _api_fix(ctx, node, qualname))


@check(cst.Import, cst.ImportFrom, codes=API_CODES, tokens=API_TOKENS)
def check_api_import(node: cst.CSTNode, ctx: Context) -> bool:
    """`from torch_neuronx import nki_jit`, `import torch_xla.experimental.pjrt as pjrt`: the import fails."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is not None:
                _report_api(ctx, node, name, _pjrt_import_fix(node, alias) if name == _PJRT else None)
    elif not node.relative and node.module is not None and not isinstance(node.names, cst.ImportStar):
        module = dotted_name(node.module)
        if module is not None:
            if _match(module) is not None:
                _report_api(ctx, node, module, _pjrt_import_fix(node, None) if module == _PJRT else None)
            else:
                for alias in node.names:
                    name = dotted_name(alias.name)
                    if name is not None:
                        fix = _pjrt_import_fix(node, alias) if f"{module}.{name}" == _PJRT else None
                        _report_api(ctx, node, f"{module}.{name}", fix)
    return False


# ---- rules ----------------------------------------------------------------------------------------------------------


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
    FIXABLE = True
    INVALID = ("import torch\nm = torch.compile(m, backend='neuron', dynamic=True)",)
    VALID = (
        "import torch\nm = torch.compile(m, backend='neuron', dynamic=False)",
        "import torch\nm = torch.compile(m, backend='neuron', dynamic=None)",
    )


@rule
class TorchJitScript(Rule):
    """## What it does
    Finds `torch.jit.script(...)` and `@torch.jit.script`. TorchScript is deprecated in PyTorch, and neither
    Neuron stack compiles through it: the XLA stack's `torch_neuronx.trace` records the eager model with torch-xla
    (freezing control flow, so scripting keeps no branch), and TorchNeuron native compiles with `torch.compile`.
    `torch.jit.load` / `save` / `trace` / `ignore` / `is_tracing` / `is_scripting` / `script_if_tracing` stay
    quiet (a `torch_neuronx.trace` result is a ScriptModule), and so does scripting in a file that uses
    torch_neuronx's bucketing, whose bucket kernel must be scripted. Advice (info).

    ## Example
    ```python
    @torch.jit.script
    def gelu(x):
        return x * 0.5 * (1.0 + torch.erf(x / 1.41421))
    ```

    ## Use instead
    ```python
    def gelu(x):
        return x * 0.5 * (1.0 + torch.erf(x / 1.41421))
    ```

    ## Fix safety
    No automatic fix: code that receives the scripted function or module may rely on what eager code lacks
    (`.save()`, `.graph`, `.code`).
    """

    code = "PC716"
    INVALID = (
        "import torch\n@torch.jit.script\ndef f(x):\n    return x",
        "import torch\nm = torch.jit.script(model)",
        "from torch import jit\nm = jit.script(model)",
    )
    VALID = (
        "import torch\nm = torch.jit.load('model.pt')",
        "import torch\n@torch.jit.ignore\ndef f(x):\n    return x",
        "import torch\nif torch.jit.is_scripting():\n    pass",
        "import torch\n@torch.jit.script_if_tracing\ndef f(x):\n    return x",
        "import torch, torch_neuronx\nk = torch.jit.script(kernel)\n"
        "cfg = torch_neuronx.BucketModelConfig(lambda: k)",
    )


@rule
class XlaBf16EnvVar(Rule):
    """## What it does
    Finds code that sets `XLA_USE_BF16` or `XLA_DOWNCAST_BF16`: `os.environ[...] = "1"`,
    `os.environ.setdefault(...)`, `os.putenv(...)`, `os.environ.update(...)`. Reading them and setting them to
    `"0"` stay quiet.

    ## Example
    ```python
    os.environ["XLA_USE_BF16"] = "1"
    ```

    ## Use instead
    ```python
    os.environ["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1"
    model.to(torch.bfloat16)
    ```

    ## Fix safety
    No automatic fix: the replacement (`model.to(torch.bfloat16)` with `NEURON_RT_STOCHASTIC_ROUNDING_EN=1`, or
    autocast around the forward pass) goes where the model is built and run, not where the variable is set.
    """

    code = "PC717"
    TARGET = ("trn1", "xla")
    INVALID = (
        "import os\nos.environ['XLA_USE_BF16'] = '1'",
        "import os\nos.environ.setdefault('XLA_DOWNCAST_BF16', '1')",
        "from os import environ\nenviron.update({'XLA_USE_BF16': '1'})",
    )
    VALID = (
        "import os\nflag = os.environ.get('XLA_USE_BF16')",
        "import os\nos.environ['XLA_USE_BF16'] = '0'",
        "# set XLA_USE_BF16=1 in the shell\nx = 'XLA_USE_BF16'",
    )


@rule
class NkiJitRemoved(Rule):
    """## What it does
    Finds `torch_neuronx.nki_jit` (an error: unsupported since Neuron 2.24) and its implementation path
    `torch_neuronx.xla_impl.ops.nki_jit` (a warning: deprecated), imported or called. A use inside
    `try:` with an `except ImportError` / `AttributeError` fallback stays quiet.

    ## Example
    ```python
    from torch_neuronx import nki_jit
    attention = nki_jit()(flash_fwd)
    ```

    ## Use instead
    ```python
    from neuronxcc import nki
    attention = nki.jit(flash_fwd)   # call the @nki.jit kernel directly
    ```

    ## Fix safety
    No automatic fix: the replacement is the kernel itself, decorated with `@nki.jit` and called directly, which
    depends on how the kernel is written and on the NKI namespace of the SDK in use (`neuronxcc.nki` or `nki`).
    """

    code = "PC718"
    INVALID = (
        "from torch_neuronx import nki_jit",
        "import torch_neuronx\nk = torch_neuronx.nki_jit()(kernel)",
        "from torch_neuronx.xla_impl.ops import nki_jit",
    )
    VALID = (
        "from neuronxcc import nki\nk = nki.jit(kernel)",
        "try:\n    from torch_neuronx import nki_jit\nexcept ImportError:\n    nki_jit = None",
        "x = 'torch_neuronx.nki_jit'",
    )


@rule
class RemovedXlaApi(Rule):
    """## What it does
    On the PyTorch/XLA stack, finds torch-xla APIs that were removed (`xm.xrt_world_size` in 2.7,
    `torch_xla.experimental.pjrt` and `torch_xla.runtime.using_pjrt` in 2.5: errors) or deprecated
    (`xm.get_ordinal`, `xm.get_local_ordinal`: info), imported or used. Uses inside `try:` with an
    `except AttributeError` / `ImportError` fallback stay quiet.

    ## Example
    ```python
    world = xm.xrt_world_size()
    ```

    ## Use instead
    ```python
    import torch_xla.runtime as xr
    world = xr.world_size()
    ```

    ## Fix safety
    Safe fixes: `xm.xrt_world_size()` becomes `torch_xla.runtime.world_size()`, `xm.get_ordinal()`
    `global_ordinal()` and `xm.get_local_ordinal()` `local_ordinal()` (written with the file's alias of
    `torch_xla.runtime`, or adding `import torch_xla.runtime`); `xr.using_pjrt()` becomes `True`, PJRT being
    the only runtime. Calls passing the old `defval` argument get no fix. Unsafe: `torch_xla.experimental.pjrt`
    becomes `torch_xla.runtime` in imports and attribute chains, since the docs name the module that replaces it,
    not a function-for-function mapping.
    """

    code = "PC719"
    FIXABLE = True
    TARGET = ("trn1", "xla")
    INVALID = (
        "import torch_xla.core.xla_model as xm\nn = xm.xrt_world_size()",
        "from torch_xla.experimental import pjrt",
        "import torch_xla.runtime as xr\nif xr.using_pjrt():\n    pass",
        "import torch_xla.core.xla_model as xm\nr = xm.get_ordinal()",
    )
    VALID = (
        "import torch_xla.runtime as xr\nn = xr.world_size()",
        "import torch_xla.core.xla_model as xm\ntry:\n    n = xm.xrt_world_size()\nexcept AttributeError:\n"
        "    n = 1",
        "x = 'xm.xrt_world_size()'",
    )
