"""cuda-api (PC1xx): code that assumes an NVIDIA GPU — device placement, `torch.cuda`, cuDNN flags.

The checks here resolve names through the file's imports, so `import torch as th; th.cuda.synchronize()`,
`from torch import cuda` and `from torch.cuda import synchronize as sync` are all the same call, while
strings, comments, `args.cuda` and `torch.cuda.is_bf16_supported = lambda: True` (the stub Neuron's own
docs recommend) stay quiet. Code that only runs where CUDA is present (`if torch.cuda.is_available(): ...`,
`x.cuda() if torch.cuda.is_available() else x`) cannot raise on Neuron: it is reported as info, next to the
probe that guards it.
"""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import CudaApi, load
from portcheck.static.rule import (
    Context,
    Rule,
    call_name,
    check,
    keyword,
    positional,
    rule,
    string_prefix,
    string_value,
)
from portcheck.static.values import contains

TOKENS = ("cuda", "CUDA", "cudnn")
REFERENCE_CODES = ("PC104", "PC105", "PC106", "PC107", "PC108", "PC109", "PC111")
_SUBMODULES = ("memory.", "random.", "graphs.", "streams.")
_BACKENDS = ("torch.backends.cudnn", "torch.backends.cuda")
_ENV_SETTERS = {"os.putenv", "os.environ.setdefault"}


def _device(ctx: Context) -> str:
    return load().stacks[ctx.stack].device


def _stack_hint(ctx: Context) -> str:
    return " (import torch_xla)" if ctx.stack == "xla" else ""


def _one_line(code: str) -> str:
    return " ".join(code.split())


def _is_cuda_text(text: str) -> bool:
    return text == "cuda" or text.startswith("cuda:")


def cuda_device(ctx: Context, node: cst.BaseExpression) -> str | None:
    """How to describe `node` if it names a CUDA device: `"cuda:0"`, `f"cuda:{…}"`, or `DEVICE (= "cuda")`."""
    prefix = string_prefix(node)
    if prefix is not None:
        return ctx.source(node) if _is_cuda_text(prefix) else None
    bound = ctx.constant(node)
    if bound is not None:
        name, value = bound
        prefix = string_prefix(value)
        if prefix is not None and _is_cuda_text(prefix):
            return f"{name} (= {ctx.source(value)})"
    return None


def _api_entry(rest: str) -> CudaApi | None:
    apis = load().cuda_api
    if rest in apis:
        return apis[rest]
    for sub in _SUBMODULES:
        if rest.startswith(sub) and rest[len(sub):] in apis:
            return apis[rest[len(sub):]]
    return None


_BEHAVIOUR = {
    "raises": "raises on a host without CUDA, which every Neuron instance is",
    "returns-false": "is False on a Neuron instance, so the code takes its non-GPU path",
    "returns-zero": "reads 0 / empty on a Neuron instance",
    "ignored": "silently does nothing without a CUDA device",
}

_NO_EQUIVALENT = {
    "PC107": "Neuron documents no stream or event API; remove explicit stream handling",
    "PC108": "Neuron has no CUDA-graph equivalent; drop the capture and compile the model instead",
}


def _api_message(qualname: str, api: CudaApi | None, stack: str) -> tuple[str, str]:
    if api is None:
        return "PC111", (
            f"`{qualname}` is NVIDIA-only; port it to the {stack} stack's device API "
            "(nothing under torch.cuda has a Neuron meaning)"
        )
    replacement = api.replacement(stack)
    if replacement:
        advice = f"use `{replacement}`"
    elif stack == "xla" and api.xla_note:
        advice = api.xla_note
    else:
        advice = _NO_EQUIVALENT.get(api.code, f"the {stack} stack documents no equivalent; remove it or guard it")
    return api.code, f"`{qualname}` {_BEHAVIOUR[api.behaviour]}; {advice}"


# ---- code reached only where CUDA is present ---------------------------------------------------------------
#
# `if torch.cuda.is_available(): torch.cuda.synchronize()` cannot raise on Neuron: the probe is False there, so
# the body never runs. The probe itself is reported (PC104 / PC106); what it guards is reported as info with a
# note, since it raises as soon as the probe is ported to `torch.accelerator`.

_RAISING = frozenset({"PC101", "PC102", "PC103", "PC105", "PC107", "PC108", "PC111"})
_GUARDED = _RAISING | {"PC106"}  # PC106 does nothing without CUDA: under a probe it is not even reached
_POSITIVE = (cst.GreaterThan, cst.GreaterThanEqual, cst.NotEqual)


def _cuda_probe(ctx: Context, node: cst.BaseExpression) -> bool:
    """`torch.cuda.is_available()`, `torch.cuda.device_count() > 1`, `len(torch.cuda.default_generators) > 0`:
    true only where CUDA is present (an API that reads False or 0 without it, tested for truth)."""
    if isinstance(node, cst.Comparison):
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, _POSITIVE):
            return False
        node = node.left
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len" and node.args:
            node = node.args[0].value
    if isinstance(node, cst.Call):
        node = node.func
    qualname = ctx.qualname(node)
    if qualname is None or not qualname.startswith("torch.cuda."):
        return False
    api = _api_entry(qualname[len("torch.cuda."):])
    return api is not None and api.behaviour in ("returns-false", "returns-zero")


def _probe_in(ctx: Context, test: cst.BaseExpression) -> bool:
    """The test holds only where CUDA is present: a probe, alone or in an `and` chain."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _probe_in(ctx, test.left) or _probe_in(ctx, test.right)
    return _cuda_probe(ctx, test)


def _cuda_only(ctx: Context, node: cst.CSTNode) -> str | None:
    """The probe that keeps `node` from running on Neuron: it sits in the body of `if torch.cuda.is_available():`
    (or of `x if torch.cuda.is_available() else y`)."""
    for index, stmt in enumerate(ctx.statements):
        if isinstance(stmt, cst.If) and _probe_in(ctx, stmt.test):
            inner = ctx.statements[index + 1] if index + 1 < len(ctx.statements) else node
            if contains(stmt.body, inner):
                return _one_line(ctx.source(stmt.test))
    for body, test in _probe_expressions(ctx):
        if contains(body, node):
            return _one_line(ctx.source(test))
    return None


def _probe_expressions(ctx: Context) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(body, test) of each `body if <cuda probe> else other` met so far in the current statement."""
    if not ctx.statements:
        return []
    return ctx.memo("cuda-probe-ifexp", ctx.statements[-1], list)  # type: ignore[return-value]


_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "warning_once", "info_once"})


def _logs(ctx: Context, small: cst.BaseSmallStatement) -> bool:
    """`logger.warning(...)`, `logging.info(...)`, `warnings.warn(...)`, `print(...)` as a statement."""
    if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
        return False
    func = small.value.func
    if isinstance(func, cst.Name):
        return func.value == "print" and "print" not in ctx.names.aliases
    if not isinstance(func, cst.Attribute) or func.attr.value not in _LOG_METHODS:
        return False
    if ctx.qualname(func) == "warnings.warn":
        return True
    receiver = func.value.attr.value if isinstance(func.value, cst.Attribute) else getattr(func.value, "value", "")
    return isinstance(receiver, str) and "log" in receiver.lower()


def _only_logs(ctx: Context, node: cst.CSTNode) -> bool:
    """`node` is in the test of an `if` (without `else`) whose body only logs: the probe decides a message."""
    stmt = ctx.statements[-1] if ctx.statements else None
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or not contains(stmt.test, node):
        return False
    if isinstance(stmt.body, cst.SimpleStatementSuite):
        smalls = list(stmt.body.body)
    elif all(isinstance(line, cst.SimpleStatementLine) for line in stmt.body.body):
        smalls = [small for line in stmt.body.body for small in line.body]  # type: ignore[union-attr]
    else:
        return False
    return bool(smalls) and all(_logs(ctx, small) for small in smalls)


@check(cst.IfExp, codes=_GUARDED, tokens=TOKENS)
def note_probe_expression(node: cst.CSTNode, ctx: Context) -> None:
    """Remember `x if torch.cuda.is_available() else y` so that `x` is judged as reached only with CUDA."""
    assert isinstance(node, cst.IfExp)
    if _probe_in(ctx, node.test):
        _probe_expressions(ctx).append((node.body, node.test))


def _report(ctx: Context, code: str, node: cst.CSTNode, message: str) -> None:
    probe = _cuda_only(ctx, node) if code in _GUARDED else None
    if probe is None:
        ctx.report(code, node, message)
        return
    then = ": it raises once that probe is ported" if code in _RAISING else ""
    ctx.report(code, node, f"{message} (reached only where CUDA is present, under `{probe}`{then})", Severity.INFO)


def _judge_reference(ctx: Context, node: cst.CSTNode, qualname: str) -> None:
    if qualname == "torch.cuda.amp" or qualname.startswith("torch.cuda.amp."):
        return  # autocast and GradScaler are training rules (PC601, PC602): see training.py
    if qualname == "torch.cuda" or qualname.startswith("torch.cuda."):
        code, message = _api_message(qualname, _api_entry(qualname[len("torch.cuda."):]), ctx.stack)
        if code == "PC104" and _only_logs(ctx, node):
            ctx.report(code, node, f"{message} (here it only decides whether a message is logged)", Severity.INFO)
            return
        _report(ctx, code, node, message)
    elif any(qualname == b or qualname.startswith(b + ".") for b in _BACKENDS):
        ctx.report("PC109", node,
                   f"`{qualname}` configures NVIDIA kernels only; on Neuron it is ignored; remove it")


def _skip_chain(ctx: Context, node: cst.BaseExpression) -> None:
    if isinstance(node, (cst.Attribute, cst.Name)):
        ctx.skip.add(id(node))


@check(cst.Attribute, cst.Name, codes=REFERENCE_CODES, tokens=TOKENS)
def check_reference(node: cst.CSTNode, ctx: Context) -> None:
    """A `torch.cuda.*` / `torch.backends.cudnn.*` reference in load position, judged once per chain."""
    if isinstance(node, cst.Attribute):
        ctx.skip.add(id(node.attr))
        inner = id(node) in ctx.skip
        _skip_chain(ctx, node.value)
        if inner:
            return
        qualname = ctx.qualname(node)
    else:
        assert isinstance(node, cst.Name)
        if id(node) in ctx.skip:
            return
        qualname = ctx.names.aliases.get(node.value)
    if qualname is not None:
        _judge_reference(ctx, node, qualname)


@check(cst.Arg, cst.Param, cst.FunctionDef, cst.ClassDef, cst.AsName, codes=REFERENCE_CODES, tokens=TOKENS)
def skip_binding_names(node: cst.CSTNode, ctx: Context) -> None:
    """Keywords, parameters and definition names are not references to what an import bound."""
    name = getattr(node, "keyword", None) if isinstance(node, cst.Arg) else getattr(node, "name", None)
    if isinstance(name, cst.Name):
        ctx.skip.add(id(name))


@check(cst.Import, cst.ImportFrom, cst.Annotation, codes=REFERENCE_CODES, tokens=TOKENS)
def skip_imports_and_annotations(node: cst.CSTNode, ctx: Context) -> bool:
    """Importing torch.cuda is harmless until it is used; annotations never run on the device."""
    return False


@check(cst.AssignTarget, codes=(*REFERENCE_CODES, "PC110"), tokens=TOKENS)
def check_assignment(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.AssignTarget)
    target = node.target
    if isinstance(target, cst.Subscript) and ctx.qualname(target.value) == "os.environ":
        key = target.slice[0].slice if len(target.slice) == 1 else None
        if isinstance(key, cst.Index) and string_value(key.value) == "CUDA_VISIBLE_DEVICES":
            ctx.report("PC110", target, _visible_devices_message())
        return
    qualname = ctx.qualname(target)
    if qualname is None:
        return
    if qualname.startswith("torch.cuda."):
        # Assigning to torch.cuda (e.g. `torch.cuda.is_bf16_supported = lambda: True`) is the stub
        # Neuron's docs recommend for libraries that probe CUDA: not a use of CUDA.
        _skip_chain(ctx, target)
    elif any(qualname.startswith(b + ".") for b in _BACKENDS):
        ctx.report("PC109", target,
                   f"setting `{qualname}` has no effect on Neuron (cuDNN/CUDA kernels only); remove it")
        _skip_chain(ctx, target)


def _visible_devices_message() -> str:
    return ("`CUDA_VISIBLE_DEVICES` is not read by the Neuron runtime; select NeuronCores with "
            "`NEURON_RT_VISIBLE_CORES` (e.g. \"0-3\") or `NEURON_RT_NUM_CORES`")


@check(cst.Call, codes=("PC101", "PC102", "PC103", "PC110"), tokens=TOKENS)
def check_call(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    name = call_name(node)
    device = _device(ctx)
    if name == "cuda" and isinstance(node.func, cst.Attribute):
        if ctx.qualname(node.func) != "torch.cuda":
            _report(ctx, "PC101", node, f"`{ctx.source(node)}` moves to a CUDA device, which a Neuron instance "
                       f"does not have; use `.to({device})`{_stack_hint(ctx)}")
        return
    if name == "to" and isinstance(node.func, cst.Attribute):
        arg = keyword(node, "device") or positional(node, 0)
        where = arg and cuda_device(ctx, arg.value)
        if where:
            _report(ctx, "PC101", node, f"`.to({where})` moves to a CUDA device, which a Neuron instance does not "
                       f"have; use `.to({device})`{_stack_hint(ctx)}")
        return
    qualname = ctx.qualname(node.func)
    if qualname == "torch.device":
        arg = keyword(node, "type") or positional(node, 0)
        where = arg and cuda_device(ctx, arg.value)
        if where:
            replacement = f"torch.device({device})" if ctx.stack == "native" else device
            _report(ctx, "PC102", node, f"`{_one_line(ctx.source(node))}` names a CUDA device; tensors placed on it "
                       f"raise on Neuron; use `{replacement}`{_stack_hint(ctx)}")
        return
    if qualname in _ENV_SETTERS:
        arg = positional(node, 0)
        if arg is not None and string_value(arg.value) == "CUDA_VISIBLE_DEVICES":
            ctx.report("PC110", node, _visible_devices_message())
        return
    for kw in ("device", "map_location", "device_map"):
        arg = keyword(node, kw)
        where = arg and cuda_device(ctx, arg.value)
        if where:
            _report(ctx, "PC103", arg, f"`{kw}={where}` places on a CUDA device, which a Neuron instance does not "
                       f"have; pass `{kw}={device}`{_stack_hint(ctx)}")
    if name == "add_argument":
        default = keyword(node, "default")
        flags = [string_value(a.value) or "" for a in node.args if a.keyword is None]
        where = default and cuda_device(ctx, default.value)
        if where and any("device" in flag for flag in flags):
            _report(ctx, "PC103", default, f"the device option defaults to {where}, which a Neuron instance does "
                       f"not have; default to {device}")


@rule
class CudaTensorPlacement(Rule):
    """## What it does
    Finds `.cuda()`, `.cuda(n)`, `.to("cuda")`, `.to("cuda:0")`, `.to(device="cuda")` and `.to(DEVICE)` where
    `DEVICE` is bound to a CUDA device string in the same file.

    ## Example
    ```python
    model = Net().cuda()
    batch = batch.to("cuda:0", non_blocking=True)
    ```

    ## Use instead
    ```python
    model = Net().to("neuron")          # TorchNeuron native (trn2)
    batch = batch.to(torch_xla.device())  # PyTorch/XLA (inf2, trn1)
    ```

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC101"
    INVALID = (
        "model = model.cuda()",
        "x = x.cuda(0)",
        "x = x.to('cuda')",
        "x = x.to(device='cuda:1')",
        'DEVICE = "cuda"\ndef f(m):\n    return m.to(DEVICE)',
        "def f(m):\n    device = 'cuda'\n    return m.to(device)",
        "x = x.to(f'cuda:{rank}')",
    )
    VALID = (
        "x = x.to('cpu')",
        "if args.cuda:\n    pass",
        "x = x.to(device)",
        "def f(m, device='cuda'):\n    return m.to(device)",
        "print('move to cuda')",
    )


@rule
class CudaDeviceObject(Rule):
    """## What it does
    Finds `torch.device("cuda")`, `torch.device("cuda", 0)` and `torch.device(f"cuda:{rank}")`.

    ## Example
    ```python
    device = torch.device("cuda", local_rank)
    ```

    ## Use instead
    ```python
    device = torch.device("neuron")  # TorchNeuron native
    device = torch_xla.device()      # PyTorch/XLA
    ```

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC102"
    INVALID = (
        "import torch\nd = torch.device('cuda')",
        "import torch as th\nd = th.device('cuda', 0)",
        "from torch import device\nd = device(f'cuda:{rank}')",
    )
    VALID = (
        "import torch\nd = torch.device('cpu')",
        "d = device('cuda')",  # not torch's device: nothing imported
        "import torch\nd = torch.device('cuda' if ok else 'cpu')",
    )


@rule
class CudaDeviceArgument(Rule):
    """## What it does
    Finds `device="cuda"` passed to tensor factories and module constructors, `map_location="cuda"`,
    `device_map="cuda"`, and command-line `--device` options whose default is `"cuda"`.

    ## Example
    ```python
    mask = torch.ones(n, n, device="cuda")
    state = torch.load(path, map_location="cuda:0")
    ```

    ## Use instead
    ```python
    mask = torch.ones(n, n, device="neuron")
    state = torch.load(path, map_location="cpu")
    ```

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC103"
    INVALID = (
        "import torch\nx = torch.zeros(2, device='cuda')",
        "import torch\nlayer = torch.nn.Linear(2, 2, device='cuda:0')",
        "import torch\ns = torch.load(p, map_location='cuda')",
        "parser.add_argument('--device', default='cuda')",
    )
    VALID = (
        "import torch\nx = torch.zeros(2, device=device)",
        "parser.add_argument('--backend', default='cuda')",
        "import torch\nx = torch.zeros(2, device='cpu')",
    )


@rule
class CudaAvailabilityProbe(Rule):
    """## What it does
    Finds `torch.cuda.is_available()`, `device_count()`, `is_bf16_supported()`, `is_initialized()` and
    `get_arch_list()`. Reported as info where the probe only decides whether a message is logged
    (`if torch.cuda.device_count() > 1: logger.warning(...)`).

    ## Example
    ```python
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ```

    ## Use instead
    ```python
    device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
    ```

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC104"
    INVALID = (
        "import torch\nok = torch.cuda.is_available()",
        "from torch import cuda\nn = cuda.device_count()",
        "from torch.cuda import is_bf16_supported as bf16\nuse = bf16()",
    )
    VALID = (
        "import torch\ntorch.cuda.is_bf16_supported = lambda: True",
        "import torch\nok = torch.accelerator.is_available()",
        "ok = cuda.is_available()  # cuda is not imported from torch here",
    )


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
    No automatic fix yet.
    """

    code = "PC105"
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
class CudaSilentCall(Rule):
    """## What it does
    Finds `torch.cuda` calls that silently do nothing without CUDA: `manual_seed`, `manual_seed_all`, `seed`,
    `empty_cache`, and memory counters that read 0 (`memory_allocated`, `max_memory_reserved`, ...).

    ## Example
    ```python
    torch.cuda.manual_seed_all(seed)
    ```

    ## Use instead
    ```python
    torch.manual_seed(seed)  # seeds every device
    ```

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC106"
    INVALID = (
        "import torch\ntorch.cuda.manual_seed_all(0)",
        "import torch\ntorch.cuda.empty_cache()",
        "import torch\nused = torch.cuda.memory.memory_allocated()",
    )
    VALID = ("import torch\ntorch.manual_seed(0)",)


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
    Drop the stream: the Neuron compiler schedules the whole graph.

    ## Fix safety
    No automatic fix.
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
    No automatic fix.
    """

    code = "PC108"
    INVALID = (
        "import torch\ng = torch.cuda.CUDAGraph()",
        "from torch.cuda import graphs\ng = graphs.make_graphed_callables(m, (x,))",
    )
    VALID = ("g = Graph()",)


@rule
class CudnnSetting(Rule):
    """## What it does
    Finds `torch.backends.cudnn.*` and `torch.backends.cuda.*` settings and queries
    (`cudnn.benchmark = True`, `cudnn.deterministic`, `cuda.matmul.allow_tf32`, `cudnn.flags(...)`).

    ## Example
    ```python
    torch.backends.cudnn.benchmark = True
    ```

    ## Use instead
    Remove the setting. Precision on Neuron is chosen with neuronx-cc's `--auto-cast`.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC109"
    INVALID = (
        "import torch\ntorch.backends.cudnn.benchmark = True",
        "from torch.backends import cudnn\ncudnn.deterministic = True",
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True",
    )
    VALID = ("import torch\ntorch.backends.mkldnn.enabled = True", "cudnn_benchmark = True")


@rule
class CudaVisibleDevices(Rule):
    """## What it does
    Finds `CUDA_VISIBLE_DEVICES` set from code: `os.environ[...] = `, `os.environ.setdefault`, `os.putenv`.

    ## Example
    ```python
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
    ```

    ## Use instead
    ```python
    os.environ["NEURON_RT_VISIBLE_CORES"] = "0-1"
    ```

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC110"
    INVALID = (
        "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'",
        "from os import environ\nenviron['CUDA_VISIBLE_DEVICES'] = '0'",
        "import os\nos.environ.setdefault('CUDA_VISIBLE_DEVICES', '0')",
    )
    VALID = ("import os\nvisible = os.environ.get('CUDA_VISIBLE_DEVICES')",)


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
    No automatic fix.
    """

    code = "PC111"
    INVALID = (
        "import torch\nx = torch.cuda.FloatTensor(8)",
        "import torch\ntorch.cuda.nvtx.range_push('step')",
    )
    VALID = ("import torch\nx = torch.empty(8)",)
