"""NCCL: process groups, DDP and collective settings written for NVIDIA's library (PC604-PC606)."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.attribute_defaults import attribute_default
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.codegen import imports_module, literal_like, new_literal
from portcheck.static.distributed.bindings import falls_back_to_nccl
from portcheck.static.distributed.passed_defaults import caller_defaults
from portcheck.static.syntax import call_name, keyword, positional, string_value
from portcheck.summaries import SAME_FILE


@rule
class NcclBackend(Rule):
    """## What it does
    Finds process groups asking for NCCL: `init_process_group("nccl")`, `backend="nccl"`,
    `backend=dist.Backend.NCCL`, device maps such as `"cpu:gloo,cuda:nccl"`, the same through a name bound
    in the file (`BACKEND = "nccl"`), in `new_group` / `new_subgroups`, command-line `--dist-backend`
    options whose default is `"nccl"`, a name whose branches bind only vendor backends and fall back to
    `"nccl"` (`if xpu: backend = "xccl" else: backend = "nccl"`, which a Neuron host reaches), a settings field
    or attribute named `backend` set to `"nccl"` (`backend: str = "nccl"` or `= field(default="nccl")` in a
    dataclass, `args.dist_backend = "nccl"`). A backend chosen at run time with a CPU fallback (`"nccl" if cuda else
    "gloo"`, or branches binding `"gloo"`) or read from elsewhere (`args.backend`) stays quiet.

    ## Example
    ```python
    dist.init_process_group(backend="nccl")
    ```

    ## Use instead
    ```python
    dist.init_process_group(backend="neuron")      # TorchNeuron native
    import torch_xla.distributed.xla_backend       # PyTorch/XLA
    dist.init_process_group("xla")
    ```

    ## Fix safety
    The fix writes the stack's backend: `"neuron"` on TorchNeuron native; on PyTorch/XLA `"xla"` plus
    `import torch_xla.distributed.xla_backend`, added once and not where the file already imports it. Safe for a
    literal `"nccl"` (its quotes kept), `Backend.NCCL` and an option's default; unsafe at the binding of a name
    set to `"nccl"` (its other uses see the new value too) and for an option whose `choices=` list the old
    backends. Device maps (`"cpu:gloo,cuda:nccl"`), backends chosen at run time or in branches, and settings
    fields get no fix.
    """

    code = "PC604"
    FIXABLE = True
    INVALID = (
        "import torch.distributed as dist\ndist.init_process_group('nccl')",
        "import torch\ntorch.distributed.init_process_group(backend='nccl', init_method='env://')",
        "from torch import distributed as dist\ndist.init_process_group(backend=dist.Backend.NCCL)",
        "import torch.distributed as dist\nBACKEND = 'nccl'\ndist.init_process_group(BACKEND)",
        "import torch.distributed as dist\ng = dist.new_group(ranks, backend='nccl')",
        "import torch.distributed as dist\ndist.init_process_group('cpu:gloo,cuda:nccl')",
        "parser.add_argument('--dist-backend', default='nccl', type=str)",
        "import torch.distributed as dist\nif xpu:\n    backend = 'xccl'\nelse:\n    backend = 'nccl'\n"
        "dist.init_process_group(backend=backend)",
        "from dataclasses import dataclass\n@dataclass\nclass GroupKwargs:\n    backend: str = 'nccl'",
        "args.dist_backend = 'nccl'",
        "from dataclasses import dataclass, field\n@dataclass\nclass Config:\n"
        "    distributed_backend: str = field(default='nccl', metadata={'help': 'backend'})",
    )
    VALID = (
        "import torch.distributed as dist\ndist.init_process_group('gloo')",
        "import torch.distributed as dist\ndist.init_process_group(backend='neuron')",
        "import torch.distributed as dist\ndist.init_process_group(backend=args.backend)",
        "import torch.distributed as dist\ndist.init_process_group('nccl' if cuda else 'gloo')",
        "# dist.init_process_group('nccl')\nmsg = 'use nccl on GPUs'",
        "parser.add_argument('--tokenizer', default='nccl')",
        "import torch.distributed as dist\nif cuda:\n    backend = 'nccl'\nelse:\n    backend = 'gloo'\n"
        "dist.init_process_group(backend=backend)",
        "class Kwargs:\n    tokenizer: str = 'nccl'",
        "from dataclasses import field\nclass Config:\n    backend: str = field(default='gloo')",
    )


@rule
class DdpDeviceIds(Rule):
    """## What it does
    On the PyTorch/XLA stack, finds `DistributedDataParallel(model, device_ids=[...])` and `output_device=`,
    through any import alias (`from torch.nn.parallel import DistributedDataParallel as DDP`). TorchNeuron
    native runs standard DDP, so the rule is off there; `torch_neuronx.DataParallel(model, device_ids=...)`,
    Neuron's own inference API, is not DDP and stays quiet. Ids computed at run time (`device_ids=ids` where
    `ids` is set in branches or returned by a call, as Lightning and accelerate do, None off GPUs) are info.

    ## Example
    ```python
    model = DDP(model, device_ids=[local_rank])
    ```

    ## Use instead
    ```python
    import torch_xla.distributed.xla_backend
    dist.init_process_group("xla")
    model = model.to(torch_xla.device())   # no DDP wrapper
    ...
    xm.optimizer_step(optimizer)            # all-reduces the gradients, then steps
    ```

    ## Fix safety
    No automatic fix: the documented conversion removes the wrapper and replaces `optimizer.step()` with
    `xm.optimizer_step(optimizer)`; removing the wrapper alone would stop the gradient all-reduce.
    """

    code = "PC605"
    message = ("`DistributedDataParallel(..., {shown})` pins each replica to a GPU index; Neuron's PyTorch/XLA guide "
               "converts DDP scripts by removing the DDP wrapper: keep the model on `torch_xla.device()`, use "
               "`init_process_group(\"xla\")`, and replace `optimizer.step()` with `xm.optimizer_step(optimizer)`, "
               "which all-reduces the gradients")
    TARGET = ("trn2", "xla")
    INVALID = (
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, device_ids=[rank])",
        "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[0], output_device=0)",
        "import torch.nn.parallel as par\nm = par.DistributedDataParallel(m, [rank])",
    )
    VALID = (
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m)",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, device_ids=None)",
        "import torch_neuronx\nm = torch_neuronx.DataParallel(traced, device_ids=[0, 1])",
    )


@rule
class NcclEnvironment(Rule):
    """## What it does
    Finds `NCCL_*` and `TORCH_NCCL_*` environment variables set from code: `os.environ[...] = `,
    `os.environ.setdefault`, `os.environ.update(...)`, `os.putenv`. `NCCL_DEBUG`, `NCCL_DEBUG_SUBSYS` and
    `NCCL_COMM_ID` stay quiet: Neuron's own troubleshooting guide and runtime use them.
    Reading a variable is never reported.

    ## Example
    ```python
    os.environ["NCCL_P2P_DISABLE"] = "1"
    os.environ["NCCL_SOCKET_IFNAME"] = "eth0"
    ```

    ## Use instead
    ```python
    os.environ["NEURON_RT_ROOT_COMM_ID"] = f"{master_addr}:{port}"   # multi-node collectives
    # EFA (multi-node): FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC606"
    INVALID = (
        "import os\nos.environ['NCCL_P2P_DISABLE'] = '1'",
        "import os\nos.environ.setdefault('NCCL_SOCKET_IFNAME', 'eth0')",
        "from os import environ\nenviron['TORCH_NCCL_ASYNC_ERROR_HANDLING'] = '1'",
        "import os\nos.environ.update({'NCCL_IB_DISABLE': '1'})",
        "import os\nos.putenv('NCCL_ALGO', 'Ring')",
    )
    VALID = (
        "import os\nos.environ['NCCL_DEBUG'] = 'WARN'",
        "import os\nlevel = os.environ.get('NCCL_P2P_DISABLE')",
        "import os\nos.environ['NEURON_RT_ROOT_COMM_ID'] = 'localhost:48620'",
        "env = {}\nenv['NCCL_P2P_DISABLE'] = '1'",
    )


NCCL_TOKENS = ("nccl", "NCCL")
DDP_TOKENS = ("DistributedDataParallel",)  # any spelling of the call imports or names the class
ENV_TOKENS = ("NCCL_",)

# function -> index of `backend` when passed positionally
_GROUP_FUNCTIONS = {
    "torch.distributed.init_process_group": 0,
    "torch.distributed.distributed_c10d.init_process_group": 0,
    "torch.distributed.new_group": 2,
    "torch.distributed.distributed_c10d.new_group": 2,
    "torch.distributed.new_subgroups": 3,
    "torch.distributed.distributed_c10d.new_subgroups": 3,
}
_NCCL_ENUM = frozenset({"torch.distributed.Backend.NCCL", "torch.distributed.distributed_c10d.Backend.NCCL"})
_DDP = frozenset({"torch.nn.parallel.DistributedDataParallel",
                  "torch.nn.parallel.distributed.DistributedDataParallel"})
_ENV_SETTERS = frozenset({"os.putenv", "os.environ.setdefault"})
# Read by Neuron's collectives too: its troubleshooting guide turns on "Neuron NCCL debug" with the first two,
# and the runtime's bootstrap reports errors about NCCL_COMM_ID (SDK:neuron-runtime/nrt-troubleshoot.rst).
_NEURON_READS = frozenset({"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_COMM_ID"})


def _names_nccl(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> str | None:
    """How to show `node` if it asks for the NCCL backend: `"nccl"`, `"cpu:gloo,cuda:nccl"`,
    `dist.Backend.NCCL`, or a name bound to one of them (`BACKEND (= "nccl")`)."""
    text = string_value(node)
    if text is not None:
        parts = [part.split(":")[-1].strip().lower() for part in text.split(",")]
        return ctx.source(node) if "nccl" in parts else None
    if (ctx.qualname(node) or "") in _NCCL_ENUM:
        return ctx.source(node)
    bound = ctx.constant(node) or attribute_default(ctx, node)
    if bound is not None and depth < 2:
        shown = _names_nccl(ctx, bound[1], depth + 1)
        return f"{bound[0]} (= {shown})" if shown else None
    return None


def _backend_advice(ctx: Context) -> str:
    if ctx.stack == "native":
        return 'use `init_process_group(backend="neuron")`'
    return 'add `import torch_xla.distributed.xla_backend` and use `init_process_group("xla")`'


_XLA_BACKEND = "torch_xla.distributed.xla_backend"


def _backend_fix(ctx: Context, node: cst.BaseExpression, near: cst.Call, safe: bool) -> FixPlan | None:
    """The stack's backend in place of `"nccl"` or `Backend.NCCL` (KNOWLEDGE.md §3.4, §3.5), with the import that
    registers the "xla" backend. At a name bound to "nccl" the binding changes, which its other uses also see:
    unsafe. A device map (`"cpu:gloo,cuda:nccl"`) gets no fix."""
    backend = "neuron" if ctx.stack == "native" else "xla"
    if ctx.qualname(node) in _NCCL_ENUM:
        code: str | None = new_literal(backend, near)
        target: cst.CSTNode = node
    else:
        bound = ctx.constant(node)
        if bound is not None:
            node, safe = bound[1], False
            if ctx.qualname(node) in _NCCL_ENUM:
                return None
        if (string_value(node) or "").strip().lower() != "nccl":
            return None
        code, target = literal_like(node, backend), node
    if code is None:
        return None
    imports = () if backend == "neuron" or imports_module(ctx, _XLA_BACKEND) else (f"import {_XLA_BACKEND}",)
    return FixPlan(f'Use the "{backend}" backend', safe, (Replace(target, code),), imports)


@check(cst.AnnAssign, cst.Assign, rules=(NcclBackend,), tokens=NCCL_TOKENS)
def check_backend_setting(node: cst.AnnAssign | cst.Assign, ctx: Context) -> None:
    """`backend: str = "nccl"` in a class body (a dataclass of process-group settings) and
    `args.dist_backend = "nccl"`: the backend a process group is later built with. A field's declared default
    counts as its value (`backend: str = field(default="nccl")`, pydantic's `Field("nccl")`)."""
    value = _declared_default(ctx, node.value) if node.value is not None else None
    if value is None or (string_value(value) or "").strip().lower() != "nccl":
        return
    targets = [node.target] if isinstance(node, cst.AnnAssign) else [t.target for t in node.targets]
    in_class = len(ctx.statements) > 1 and isinstance(ctx.statements[-2], cst.ClassDef)
    for target in targets:
        field = (target.value if isinstance(target, cst.Name) and in_class
                 else target.attr.value if isinstance(target, cst.Attribute) else "")
        if field.lower().endswith("backend"):
            ctx.report(NcclBackend, value, f"`{field}` is set to {ctx.source(value)}, NVIDIA's NCCL, for "
                       "the process group built from it, which a Neuron host's torch lacks; "
                       f"{_backend_advice(ctx)}")
            return


# What declares a settings field with its default: dataclasses', attrs' and pydantic's field functions.
_FIELDS = frozenset({"dataclasses.field", "attr.ib", "attr.attrib", "attr.field", "attrs.field", "pydantic.Field",
                     "pydantic.fields.Field"})


def _declared_default(ctx: Context, value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The value itself, or the default a field function declares (`field(default="nccl", metadata=...)`,
    `Field("nccl")`); None for a field without one."""
    if not isinstance(value, cst.Call) or ctx.qualname(value.func) not in _FIELDS:
        return value
    default = keyword(value, "default")
    if default is None and ctx.qualname(value.func) in ("pydantic.Field", "pydantic.fields.Field"):
        default = positional(value, 0)
    return None if default is None else default.value


@check(cst.Call, rules=(NcclBackend,), tokens=NCCL_TOKENS)
def check_nccl_backend(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname is not None and qualname in _GROUP_FUNCTIONS:
        arg = keyword(node, "backend") or positional(node, _GROUP_FUNCTIONS[qualname])
        shown = _names_nccl(ctx, arg.value) if arg is not None else None
        if arg is not None and not shown and falls_back_to_nccl(ctx, arg.value):
            ctx.report(NcclBackend, arg, f"`{qualname.rsplit('.', 1)[-1]}` with backend `{ctx.source(arg.value)}`, "
                       "bound to \"nccl\" unless another vendor's device is found, asks for NVIDIA's NCCL on a "
                       f"Neuron host, whose torch lacks it; {_backend_advice(ctx)}")
            return
        if arg is not None and not shown and isinstance(arg.value, cst.Name):
            passed = [(value, caller) for value, caller in caller_defaults(ctx, arg.value) if _names_nccl(ctx, value)]
            reported = ctx.memo("nccl-passed", ctx.module, set)  # a default handed to two functions: one finding
            for value, caller in passed:  # `def init_dist(launcher, backend="nccl")` hands it on to this function
                if id(value) not in reported:
                    reported.add(id(value))
                    ctx.report(NcclBackend, value, f"`{caller}` hands {ctx.source(value)} to `{arg.value.value}` "
                               f"of `{ctx.functions[0].name.value}`, whose `{qualname.rsplit('.', 1)[-1]}` asks for "
                               f"NVIDIA's NCCL with it, which a Neuron host's torch lacks; {_backend_advice(ctx)}",
                               requires=SAME_FILE)
            if passed:
                return
        if arg is not None and shown:
            function = qualname.rsplit(".", 1)[-1]
            ctx.report(NcclBackend, arg, f"`{function}` with backend {shown} asks for NVIDIA's NCCL, which a Neuron "
                       "host's torch lacks (\"Distributed package doesn't have NCCL built in\"); "
                       f"{_backend_advice(ctx)}", fix=_backend_fix(ctx, arg.value, node, True))
        return
    if call_name(node) == "add_argument":
        default = keyword(node, "default")
        flags = [string_value(a.value) or "" for a in node.args if a.keyword is None]
        shown = _names_nccl(ctx, default.value) if default is not None else None
        if default is not None and shown and any("backend" in flag for flag in flags):
            backend = '"neuron"' if ctx.stack == "native" else '"xla"'
            # With `choices=` listing the GPU backends, the new default is not among them: unsafe.
            fix = _backend_fix(ctx, default.value, node, keyword(node, "choices") is None)
            ctx.report(NcclBackend, default, f"the distributed backend option defaults to {shown}, NVIDIA's NCCL, "
                       f"which a Neuron host's torch lacks; default to {backend}", fix=fix)


@check(cst.Call, rules=(DdpDeviceIds,), tokens=DDP_TOKENS)
def check_ddp_device_ids(node: cst.Call, ctx: Context) -> None:
    if ctx.qualname(node.func) not in _DDP:
        return
    for name, index in (("device_ids", 1), ("output_device", 2)):
        arg = keyword(node, name) or positional(node, index)
        if arg is not None and not (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
            shown = f"{name}={' '.join(ctx.source(arg.value).split())}"
            if _chosen_at_run_time(ctx, arg.value):
                # Lightning's and accelerate's DDP paths compute the ids, None off CUDA, and take other
                # strategies on XLA devices: advice, not a blocker.
                ctx.report(DdpDeviceIds, arg, DdpDeviceIds.format(shown=shown) + " (here the ids are computed at "
                           "run time and may be None off GPUs; check the path this code takes on Neuron)",
                           severity=Severity.INFO)
            else:
                ctx.report(DdpDeviceIds, arg, shown=shown)
            return


def _chosen_at_run_time(ctx: Context, value: cst.BaseExpression) -> bool:
    """`device_ids=ids` with `ids` not bound once to a list literal (computed, or set in branches)."""
    if not isinstance(value, cst.Name):
        return isinstance(value, cst.Call)
    bound = ctx.constant(value)
    return bound is None or not isinstance(bound[1], (cst.List, cst.Tuple))


# ---- NCCL_* environment variables -------------------------------------------------------------------------


def _env_message(name: str) -> str:
    if name.startswith("TORCH_NCCL_"):
        return (f"`{name}` is read only by PyTorch's NCCL process group, which Neuron does not use (its backends "
                "are \"neuron\" on TorchNeuron native and \"xla\" on PyTorch/XLA); remove it")
    return (f"`{name}` tunes NVIDIA's NCCL; Neuron's docs set no NCCL_* variable besides NCCL_DEBUG and "
            "NCCL_DEBUG_SUBSYS, so do not count on it: Neuron collectives bootstrap from `NEURON_RT_ROOT_COMM_ID` "
            "(rank 0's host:port) and reach EFA with `FI_PROVIDER=efa` and `FI_EFA_USE_DEVICE_RDMA=1`")


def _nccl_variable(name: str | None) -> str | None:
    if name is None or name in _NEURON_READS:
        return None
    return name if name.startswith(("NCCL_", "TORCH_NCCL_")) else None


@check(cst.AssignTarget, rules=(NcclEnvironment,), tokens=ENV_TOKENS)
def check_env_assignment(node: cst.AssignTarget, ctx: Context) -> None:
    target = node.target
    if not isinstance(target, cst.Subscript) or ctx.qualname(target.value) != "os.environ":
        return
    key = target.slice[0].slice if len(target.slice) == 1 else None
    name = _nccl_variable(string_value(key.value)) if isinstance(key, cst.Index) else None
    if name:
        ctx.report(NcclEnvironment, target, _env_message(name))


@check(cst.Call, rules=(NcclEnvironment,), tokens=ENV_TOKENS)
def check_env_call(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname in _ENV_SETTERS:
        arg = positional(node, 0)
        name = _nccl_variable(string_value(arg.value)) if arg else None
        if name:
            ctx.report(NcclEnvironment, node, _env_message(name))
    elif qualname == "os.environ.update":
        for arg in node.args:
            if arg.keyword is not None:
                names = [_nccl_variable(arg.keyword.value)]
            elif isinstance(arg.value, cst.Dict):
                names = [_nccl_variable(string_value(e.key)) for e in arg.value.elements
                         if isinstance(e, cst.DictElement)]
            else:
                continue
            for name in names:
                if name:
                    ctx.report(NcclEnvironment, arg, _env_message(name))
