"""torch.cuda references (PC105, PC107, PC108, PC111): every use of `torch.cuda` and `torch.backends.cudnn` /
`torch.backends.cuda`, judged once per attribute chain.

What a `torch.cuda` API does without CUDA, and so its rule (PC104-PC108, or PC111 for the rest), is data:
rules/cuda_api.toml. `torch.cuda.amp` is left to the training rules (PC601, PC602).
"""

from __future__ import annotations

import re

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import CudaApi
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.codegen import spelling
from portcheck.static.cuda_api.apis import api_entry
from portcheck.static.cuda_api.devices import TOKENS, cuda_device
from portcheck.static.cuda_api.ignored import BACKENDS, CudaSilentCall, CudnnSetting, removal, setting_fix
from portcheck.static.cuda_api.placement import CudaDeviceArgument, CudaDeviceObject, CudaTensorPlacement
from portcheck.static.cuda_api.probes import (
    CudaAvailabilityProbe,
    only_logs,
    probe_expressions,
    probe_in,
    probe_note,
    probe_steps,
    report_guarded,
)
from portcheck.static.cuda_api.statements import find_call
from portcheck.static.cuda_api.uses import attribute_read, mocked, named_only, silent_note, tool_message
from portcheck.static.syntax import dotted_name


@rule
class CudaDeviceCall(Rule):
    """## What it does
    Finds `torch.cuda` calls that need a CUDA device and raise without one: `synchronize`, `set_device`,
    `current_device`, `torch.cuda.device(...)`, `get_device_name` / `_properties` / `_capability`, RNG state,
    `mem_get_info`, `reset_peak_memory_stats`, `memory_summary` and the like. Under a CUDA probe
    (`if torch.cuda.is_available():`) the call is not reached on Neuron until the probe is ported: info.

    ## Example
    ```python
    torch.cuda.set_device(local_rank)
    torch.cuda.synchronize()
    ```

    ## Use instead
    ```python
    torch.accelerator.set_device_index(local_rank)
    torch.accelerator.synchronize()
    ```

    ## Fix safety
    A call with a drop-in replacement (rules/cuda_api.toml: the same positional arguments, the same meaning)
    gets it, with the file's alias of torch: on native `synchronize`, `set_device`, `current_device`,
    `mem_get_info` and the memory-statistics resets become their `torch.accelerator` counterparts; on xla
    `synchronize()` becomes `xm.wait_device_ops()` (adding `import torch_xla.core.xla_model as xm` unless the
    file imports it). Safe, except `torch.cuda.device(i)` → `torch.accelerator.device_index(i)` (an index
    only) and `initial_seed()` → `torch.initial_seed()` (the CPU generator's): unsafe. Calls with keyword
    arguments or a CUDA device argument, and the rest of the API, have no fix.
    """

    code = "PC105"
    FIXABLE = True
    INVALID = (
        "import torch\ntorch.cuda.synchronize()",
        "import torch as th\nth.cuda.set_device(rank)",
        "from torch.cuda import synchronize as sync\nsync()",
        "import torch\nwith torch.cuda.device(1):\n    pass",
    )
    VALID = (
        "import torch\ntorch.accelerator.synchronize()",
        "stream.synchronize()",
        "from torch.cuda import synchronize\nclass A:\n    def synchronize(self):\n        pass",
    )


@rule
class CudaStreamEvent(Rule):
    """## What it does
    Finds CUDA streams and events: `torch.cuda.Stream`, `Event`, `stream(...)` contexts, `current_stream`,
    `default_stream`, `set_stream`.

    ## Example
    ```python
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = f(x)
    ```

    ## Use instead
    On the native stack (Neuron 2.33+), `torch.neuron.Stream()` / `torch.neuron.Event()`; on xla, drop the
    stream: the Neuron compiler schedules the whole graph.

    ## Fix safety
    No automatic fix: whether the stream is still wanted on Neuron is the author's call.
    """

    code = "PC107"
    INVALID = (
        "import torch\ns = torch.cuda.Stream()",
        "import torch\nwith torch.cuda.stream(s):\n    pass",
        "import torch\nstart = torch.cuda.Event(enable_timing=True)",
    )
    VALID = ("s = make_stream()\ns.synchronize()",)


@rule
class CudaGraph(Rule):
    """## What it does
    Finds CUDA-graph capture: `torch.cuda.CUDAGraph`, `torch.cuda.graph`, `make_graphed_callables`.

    ## Example
    ```python
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(static_in)
    ```

    ## Use instead
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    No automatic fix: removing a capture changes the program's structure.
    """

    code = "PC108"
    INVALID = (
        "import torch\ng = torch.cuda.CUDAGraph()",
        "from torch.cuda import graphs\ng = graphs.make_graphed_callables(m, (x,))",
    )
    VALID = ("g = Graph()",)


@rule
class CudaApiOther(Rule):
    """## What it does
    Finds every other use of `torch.cuda`: legacy tensor types (`torch.cuda.FloatTensor`), `torch.cuda.nvtx`,
    and the module passed around as a value. (`torch.cuda.amp` is PC601 / PC602.)

    ## Example
    ```python
    x = torch.cuda.FloatTensor(8)
    ```

    ## Use instead
    ```python
    x = torch.empty(8, dtype=torch.float32, device="neuron")
    ```

    ## Fix safety
    No automatic fix: these uses have no documented one-to-one replacement.
    """

    code = "PC111"
    INVALID = (
        "import torch\nx = torch.cuda.FloatTensor(8)",
        "import torch\ntorch.cuda.nvtx.range_push('step')",
        "import torch\nmod = getattr(torch, 'cuda', torch.cuda)",
    )
    VALID = ("import torch\nx = torch.empty(8)",)


# The rules a `torch.cuda` API falls under (cuda_api.toml's `code`), and those a reference may be reported as.
_API_RULES = {r.code: r for r in (CudaAvailabilityProbe, CudaDeviceCall, CudaSilentCall, CudaStreamEvent, CudaGraph,
                                  CudaApiOther)}
_REFERENCE_RULES = (*_API_RULES.values(), CudnnSetting)
# What is judged by the probe around it (probes.report_guarded), and the probe's own fix, which rewrites what
# `x if torch.cuda.is_available() else y` decides: the rules that need each such expression noted.
_PROBED = (CudaTensorPlacement, CudaDeviceObject, CudaDeviceArgument, *_API_RULES.values())

_BEHAVIOUR = {
    "raises": "raises on a host without CUDA, which every Neuron instance is",
    "returns-false": "is False on a Neuron instance, so the code takes its non-GPU path",
    "returns-zero": "reads 0 / empty on a Neuron instance",
    "ignored": "silently does nothing without a CUDA device",
}

_NO_EQUIVALENT = {
    CudaStreamEvent: "Neuron documents no stream or event API; remove explicit stream handling",
    CudaGraph: "Neuron has no CUDA-graph equivalent; drop the capture and compile the model instead",
}


def _api_message(qualname: str, api: CudaApi | None, stack: str, read: str | None = None,
                 sdk: str = "") -> tuple[type[Rule], str]:
    """The rule and message of a torch.cuda API; `read`: the attribute the code reads from the call's result."""
    if api is None:
        return CudaApiOther, (
            f"`{qualname}` is NVIDIA-only; port it to the {stack} stack's device API "
            "(nothing under torch.cuda has a Neuron meaning)"
        )
    found = _API_RULES[api.code]
    replacement = api.replacement(stack, sdk)
    code, _, note = replacement.partition(" (")  # "True (every NeuronCore supports BF16)": code, then why
    if replacement and read is not None and code.endswith("current_accelerator()"):
        advice = (f"`{code}` names the device but has no `.{read}`; the {stack} stack documents no drop-in for "
                  "this property")
    elif replacement:
        advice = f"use `{code}` ({note}" if note else f"use `{code}`"
    elif stack == "xla" and api.xla_note:
        advice = api.xla_note
    elif api.later(stack, sdk):
        advice = (f"`{api.native.partition(' (')[0]}` replaces it on the native stack from Neuron {api.native_since} "
                  f"(these are Neuron {sdk}'s facts, which document no equivalent)")
    elif found is CudaStreamEvent and stack == "native" and (stream := api_entry("Stream")) is not None \
            and stream.replacement(stack, sdk):
        advice = (f"the native stack's `torch.neuron` has `Stream` and `Event` (Neuron {stream.native_since}+) but "
                  "documents no counterpart of this one; remove explicit stream handling")
    else:
        advice = _NO_EQUIVALENT.get(found, f"the {stack} stack documents no equivalent; remove it or guard it")
    return found, f"`{qualname}` {_BEHAVIOUR[api.behaviour]}; {advice}"


def _judge_reference(ctx: Context, node: cst.Attribute | cst.Name, qualname: str) -> None:
    if qualname == "torch.cuda.amp" or qualname.startswith("torch.cuda.amp."):
        return  # autocast and GradScaler are training rules (PC601, PC602): see training.py
    if qualname == "torch.cuda" or qualname.startswith("torch.cuda."):
        if qualname == "torch.cuda" and mocked(ctx, node):
            return  # a test's stub of torch.cuda, as `torch.cuda.is_bf16_supported = lambda: True` is
        api = api_entry(qualname[len("torch.cuda."):])
        found, message = _api_message(qualname, api, ctx.stack, attribute_read(ctx, node), ctx.sdk)
        fix = _api_fix(ctx, node, api) if api is not None and found.code in ctx.enabled else None
        if found is CudaAvailabilityProbe:  # a probe is not judged by the probes around it
            note = "here it only decides whether a message is logged" if only_logs(ctx, node) else probe_note(ctx, node)
            if note:
                ctx.report(found, node, f"{message} ({note})", Severity.INFO, fix)
            else:
                ctx.report(found, node, message, fix=fix)
            return
        if found is CudaApiOther and (tool := tool_message(ctx, node, qualname)):
            report_guarded(ctx, found, node, tool, raises=False, severity=Severity.INFO)
            return
        if found is CudaApiOther and (note := named_only(ctx, node, qualname)):
            ctx.report(found, node, f"{message} ({note})", Severity.INFO)
            return
        if found is CudaDeviceCall and _names_a_placed_index(ctx, node):
            return  # `torch.device("cuda", torch.cuda.current_device())`: one problem, the CUDA device's finding
        severity = None
        if found is CudaSilentCall and (note := silent_note(ctx, qualname)):
            message, severity = f"{message} ({note})", Severity.INFO
        # Without CUDA a silent call does nothing, so it does not raise once a probe around it is ported.
        report_guarded(ctx, found, node, message, fix, raises=found is not CudaSilentCall, severity=severity)
    elif any(qualname == b or qualname.startswith(b + ".") for b in BACKENDS):
        if find_call(ctx, node, lambda c: c.func is node) is not None:
            message = f"`{qualname}(...)` configures NVIDIA kernels only; on Neuron it is ignored (harmless); remove it"
        else:
            message = (f"`{qualname}` reads a cuDNN/CUDA-backend flag, which only NVIDIA kernels use; on Neuron it "
                       "means nothing (harmless)")
        ctx.report(CudnnSetting, node, message)


def _names_a_placed_index(ctx: Context, node: cst.Attribute | cst.Name) -> bool:
    """`torch.cuda.current_device()` given as the index of a CUDA device that is reported itself:
    `torch.device("cuda", <it>)` (PC102) or `.cuda(<it>)` (PC101)."""
    call = find_call(ctx, node, lambda c: c.func is node)
    if call is None:
        return False
    outer = find_call(ctx, call, lambda c: any(a.value is call for a in c.args))
    if outer is None:
        return False
    if isinstance(outer.func, cst.Attribute) and outer.func.attr.value == "cuda" and ctx.qualname(outer.func) is None:
        return True
    first = outer.args[0].value if outer.args and outer.args[0].keyword is None else None
    return ctx.qualname(outer.func) == "torch.device" and first is not None and cuda_device(ctx, first) is not None


def _skip_chain(ctx: Context, node: cst.BaseExpression) -> None:
    if isinstance(node, (cst.Attribute, cst.Name)):
        ctx.skip.add(id(node))


@check(cst.IfExp, rules=_PROBED, tokens=TOKENS)
def note_probe_expression(node: cst.IfExp, ctx: Context) -> None:
    """Remember `x if torch.cuda.is_available() else y` so that `x` is judged as reached only with CUDA (and the
    probe's fix sees what it decides)."""
    if probe_in(ctx, node.test):
        probe_expressions(ctx).append(node)


@check(cst.Attribute, cst.Name, rules=_REFERENCE_RULES, tokens=TOKENS)
def check_reference(node: cst.Attribute | cst.Name, ctx: Context) -> None:
    """A `torch.cuda.*` / `torch.backends.cudnn.*` reference in load position, judged once per chain."""
    if isinstance(node, cst.Attribute):
        ctx.skip.add(id(node.attr))
        inner = id(node) in ctx.skip
        _skip_chain(ctx, node.value)
        if inner:
            return
        qualname = ctx.qualname(node)
    else:
        if id(node) in ctx.skip:
            return
        qualname = ctx.qualname(node)  # a parameter or local of the same name is not the import
    if qualname is not None:
        _judge_reference(ctx, node, qualname)


@check(cst.Arg, cst.Param, cst.FunctionDef, cst.ClassDef, cst.AsName, rules=_REFERENCE_RULES, tokens=TOKENS)
def skip_binding_names(node: cst.Arg | cst.Param | cst.FunctionDef | cst.ClassDef | cst.AsName,
                       ctx: Context) -> None:
    """Keywords, parameters and definition names are not references to what an import bound."""
    name = getattr(node, "keyword", None) if isinstance(node, cst.Arg) else getattr(node, "name", None)
    if isinstance(name, cst.Name):
        ctx.skip.add(id(name))


@check(cst.Import, cst.ImportFrom, cst.Annotation, rules=_REFERENCE_RULES, tokens=TOKENS)
def skip_imports_and_annotations(node: cst.Import | cst.ImportFrom | cst.Annotation, ctx: Context) -> bool:
    """Importing torch.cuda is harmless until it is used; annotations never run on the device."""
    return False


@check(cst.AssignTarget, rules=_REFERENCE_RULES, tokens=TOKENS)
def check_assignment(node: cst.AssignTarget, ctx: Context) -> None:
    target = node.target
    qualname = ctx.qualname(target)
    if qualname is None:
        return
    if qualname.startswith("torch.cuda."):
        # Assigning to torch.cuda (e.g. `torch.cuda.is_bf16_supported = lambda: True`) is the stub
        # Neuron's docs recommend for libraries that probe CUDA: not a use of CUDA.
        _skip_chain(ctx, target)
    elif any(qualname.startswith(b + ".") for b in BACKENDS):
        # On a CUDA-only path (`if use_cuda:`) the setting never runs on Neuron: no fix there.
        report_guarded(ctx, CudnnSetting, target,
                       f"setting `{qualname}` has no effect on Neuron (cuDNN/CUDA kernels only; harmless); remove it",
                       setting_fix(ctx, node), raises=False, severity=Severity.INFO)
        _skip_chain(ctx, target)


# ---- fixes: the drop-ins rules/cuda_api.toml names -----------------------------------------------------------------

_XLA_ALIASES = {"torch_xla.core.xla_model": "xm", "torch_xla.runtime": "xr"}  # the names torch_xla's docs use


def _mentions(ctx: Context, word: str) -> bool:
    return bool(ctx.memo(f"cuda-mentions-{word}", ctx.module,
                         lambda: re.search(rf"\b{word}\b", ctx.text) is not None))


def _module_spelling(ctx: Context, module: str) -> tuple[str, tuple[str, ...]]:
    """`module` as this file can write it, and the import that takes; `xm` / `xr` for torch_xla's modules where
    the file imports them under no name and does not use that name."""
    local, imports = spelling(ctx, module)
    alias = _XLA_ALIASES.get(module)
    if imports and alias is not None and not _mentions(ctx, alias):
        return alias, (f"import {module} as {alias}",)
    return local, imports


def _callee(ctx: Context, node: cst.BaseExpression, target: str) -> tuple[str, tuple[str, ...]]:
    """`target` ("torch:accelerator.synchronize") as this file writes it: `th.accelerator.synchronize` where
    the reference was `th.cuda.synchronize`."""
    module, _, attribute = target.partition(":")
    if module == "torch":
        head = (dotted_name(node) or "").split(".")[0]
        for local in (head, "torch"):
            if ctx.names.aliases.get(local) == "torch":
                return f"{local}.{attribute}", ()
        local, imports = spelling(ctx, "torch")
    else:
        local, imports = _module_spelling(ctx, module)
    return f"{local}.{attribute}", imports


def _api_fix(ctx: Context, node: cst.BaseExpression, api: CudaApi) -> FixPlan | None:
    """A call of a torch.cuda API, rewritten as cuda_api.toml says for the stack; an uncalled reference is not."""
    spec = api.fix(ctx.stack, ctx.sdk)
    call = find_call(ctx, node, lambda c: c.func is node) if spec is not None else None
    if call is None or spec is None:
        return None
    if spec.value:
        return FixPlan(f"Replace with `{spec.value}`", spec.safe, (Replace(call, spec.value),))
    if spec.remove:
        step = removal(ctx, lambda small: isinstance(small, cst.Expr) and small.value is call)
        return None if step is None else FixPlan("Remove the call (it does nothing here)", spec.safe, (step,))
    if any(a.keyword is not None or a.star == "**" for a in call.args) or (spec.arguments == "none" and call.args):
        return None
    if any(cuda_device(ctx, a.value) for a in call.args):
        return None
    callee, imports = _callee(ctx, node, spec.call)
    steps = [Replace(node, callee)]
    if _API_RULES[api.code] is CudaAvailabilityProbe:  # what the probe decides changes with it
        more = probe_steps(ctx, call)
        if more is None:
            return None
        steps += more[0]
        imports = tuple(dict.fromkeys(imports + more[1]))
    return FixPlan(f"Use `{callee}`", spec.safe, tuple(steps), imports)
