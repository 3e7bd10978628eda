"""Device placement (PC101-PC103): tensors, modules and options put on a CUDA device.

`.cuda()`, `.to("cuda")`, `torch.device("cuda")`, `device="cuda"`, `map_location="cuda"` and a `--device`
option defaulting to "cuda" raise on Neuron, which has no CUDA device; each fix writes the stack's device.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.codegen import literal_like, rewritten
from portcheck.static.cuda_api.devices import (
    TOKENS,
    binding_fix,
    chosen_device,
    cuda_device,
    current_device,
    device_code,
    device_text,
    first_device,
    one_line,
    placements,
    stack_device,
    stack_hint,
)
from portcheck.static.cuda_api.probes import report_guarded
from portcheck.static.cuda_api.statements import find_call
from portcheck.static.syntax import call_name, keyword, string_value


@rule
class CudaTensorPlacement(Rule):
    """## What it does
    Finds `.cuda()`, `.cuda(n)`, `.to("cuda")`, `.to("cuda:0")`, `.to(device="cuda")` and `.to(DEVICE)` where
    `DEVICE` is bound to a CUDA device string in the same file. A choice made by configuration between a CUDA
    device and another (`.to("cuda" if args.ngpu > 0 else "cpu")`) is a warning, without a fix: on Neuron it
    fails or runs on the CPU. One made by a CUDA probe is PC104's; one made by a CUDA flag (`use_cuda`) is on a
    CUDA-only path.

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
    `.cuda()` becomes `.to("neuron")` (native) or `.to(torch_xla.device())` (xla, adding `import torch_xla`),
    its other arguments kept; a CUDA device string becomes the stack's device. Both are the current device, so
    the fix is safe for `.cuda()`, `"cuda"`, and index 0 in a file that never selects a device
    (`set_device`); it is unsafe where it drops another index (`.cuda(rank)`, `"cuda:1"`, `f"cuda:{rank}"`).
    A name bound to a CUDA string (`DEVICE = "cuda"`) is fixed once at its binding, to `"neuron"` / `"xla"`
    (still a string); unsafe when the name is also read as something other than a device argument
    (`if DEVICE == "cuda":`, `print(DEVICE)`), since that then changes too.
    """

    code = "PC101"
    FIXABLE = True
    INVALID = (
        "model = model.cuda()",
        "x = x.cuda(0)",
        "x = x.to('cuda')",
        "x = x.to(device='cuda:1')",
        'DEVICE = "cuda"\ndef f(m):\n    return m.to(DEVICE)',
        "def f(m):\n    device = 'cuda'\n    return m.to(device)",
        "x = x.to(f'cuda:{rank}')",
        "def f(m, device='cuda'):\n    return m.to(device)",  # what every caller that passes no device gets
        "def f(m, args):\n    return m.to('cuda' if args.ngpu > 0 else 'cpu')",  # no Neuron choice
    )
    VALID = (
        "x = x.to('cpu')",
        "if args.cuda:\n    pass",
        "import torch\ndef f(m):\n    return m.to('cuda' if torch.cuda.is_available() else 'cpu')",  # PC104's
        "def f(m, use_cuda):\n    return m.to('cuda' if use_cuda else 'cpu')",  # a CUDA-only setting
        "x = x.to(device)",
        "def f(m, device='cuda'):\n    device = device or pick()\n    return m.to(device)",
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
    Native: the type becomes `"neuron"`; xla: the call becomes `torch_xla.device()` (adding `import torch_xla`).
    Safe for `"cuda"`; an index given beside it is dropped, which is unsafe unless it is 0 in a file that never
    selects a device. A name bound to a CUDA string is fixed at its binding, as for PC101.
    """

    code = "PC102"
    message = "`{call}` names a CUDA device; tensors placed on it raise on Neuron; use `{replacement}`{hint}"
    FIXABLE = True
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
    mask = torch.ones(n, n, device="neuron")            # TorchNeuron native
    state = torch.load(path, map_location="neuron")
    mask = torch.ones(n, n, device=torch_xla.device())  # PyTorch/XLA
    state = torch.load(path, map_location="cpu")
    ```

    ## Fix safety
    `device="cuda"` becomes the stack's device, as for PC101 (safe for `"cuda"`, unsafe where an index is
    dropped). `map_location` becomes `"neuron"` on native; on xla `"cpu"` (loading onto the host, as torch.load's
    documentation advises for checkpoints), safe only where the result goes straight into `.load_state_dict(...)`,
    which copies it onto the model's device. A `--device` option defaults to `"neuron"` / `"xla"`: unsafe, since
    how the option is used is not seen. `device_map="cuda"` has no documented replacement: no fix.
    """

    code = "PC103"
    FIXABLE = True
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


@check(cst.Call, rules=(CudaTensorPlacement, CudaDeviceObject, CudaDeviceArgument), tokens=TOKENS)
def check_placement(node: cst.Call, ctx: Context) -> None:
    device = stack_device(ctx)
    if call_name(node) == "cuda" and isinstance(node.func, cst.Attribute):
        if ctx.qualname(node.func) != "torch.cuda":
            report_guarded(ctx, CudaTensorPlacement, node, f"`{ctx.source(node)}` moves to a CUDA device, which a "
                           f"Neuron instance does not have; use `.to({device})`{stack_hint(ctx)}",
                           _cuda_method_fix(ctx, node))
        return
    for kind, arg in placements(ctx, node):
        where = cuda_device(ctx, arg.value)
        if not where and kind in ("to", "device"):
            _report_choice(ctx, node, kind, arg, device)
            continue
        default = _cuda_default(ctx, arg.value) if where else None
        if not where or (default is not None and id(default) in _reported(ctx)):
            continue
        hits = len(ctx.hits)
        if kind == "to":
            report_guarded(ctx, CudaTensorPlacement, node, f"`.to({where})` moves to a CUDA device, which a Neuron "
                           f"instance does not have; use `.to({device})`{stack_hint(ctx)}",
                           _argument_fix(ctx, arg.value))
        elif kind == "torch.device":
            if _only_type_read(ctx, node):
                continue  # `torch.device("cuda").type`: the string "cuda", for a comparison; nothing is placed
            replacement = f"torch.device({device})" if ctx.stack == "native" else device
            report_guarded(ctx, CudaDeviceObject, node, call=one_line(ctx.source(node)), replacement=replacement,
                           hint=stack_hint(ctx), fix=_device_object_fix(ctx, node, arg))
        elif kind == "default":
            text = device if ctx.stack == "native" else '"xla"'
            report_guarded(ctx, CudaDeviceArgument, arg, f"the device option defaults to {where}, which a Neuron "
                           f"instance does not have; default to {text}{stack_hint(ctx)}", _default_fix(ctx, arg.value))
        elif kind == "map_location" and ctx.stack == "xla":
            report_guarded(ctx, CudaDeviceArgument, arg, f"`map_location={where}` loads onto a CUDA device, which a "
                           "Neuron instance does not have; load onto the host with `map_location=\"cpu\"` "
                           "(`load_state_dict` copies onto the model's device)",
                           _map_location_fix(ctx, node, arg.value))
        else:
            fix = None if kind == "device_map" else _argument_fix(ctx, arg.value)
            report_guarded(ctx, CudaDeviceArgument, arg, f"`{kind}={where}` places on a CUDA device, which a Neuron "
                           f"instance does not have; pass `{kind}={device}`{stack_hint(ctx)}", fix)
        if default is not None and any(h.severity is None or h.severity > Severity.INFO for h in ctx.hits[hits:]):
            _reported(ctx).add(id(default))  # its first finding on a path Neuron runs speaks for the default
            _at_default(ctx, hits, default, arg.value)


def _cuda_default(ctx: Context, value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The CUDA default of the parameter `value` names (`def generate(..., device="cuda")`): reported once, at the
    default, for its first use found above info on a path Neuron runs (the fix, and whether every caller overrides
    it, are the default's), not at every `torch.randn(..., device=device)` of the function."""
    return ctx.parameter_default(value)


def _at_default(ctx: Context, first: int, default: cst.BaseExpression, name: cst.BaseExpression) -> None:
    """The findings from `first` on, about the parameter's CUDA default that `name` reads, moved to that default in
    the signature: where the fix goes (its binding fix rewrites it) and where the construct is written."""
    for index in range(first, len(ctx.hits)):
        hit = ctx.hits[index]
        if hit.severity is None or hit.severity > Severity.INFO:
            node = hit.node
            use = " ".join((f"{node.keyword.value}={ctx.source(node.value)}" if isinstance(node, cst.Arg)
                            and node.keyword else ctx.source(node)).split())
            use = use if len(use) <= 60 else "..." + use[-57:]  # the call's end names the use: `...).to(device)`
            written = f"={name.value}" if isinstance(name, cst.Name) else hit.default_of  # the default itself now
            ctx.hits[index] = replace(hit, node=default, default_of=written, message=f"{hit.message} (the default "
                                      f"of `{ctx.source(name)}`, which `{use}` uses)")


def _reported(ctx: Context) -> set[int]:
    return ctx.memo("cuda-defaults-reported", ctx.module, set)


def _report_choice(ctx: Context, node: cst.Call, kind: str, arg: cst.Arg, device: str) -> None:
    """`.to("cuda" if args.ngpu > 0 else "cpu")`, `device=DEVICE` bound to such a choice: configuration picks CUDA
    or the CPU, and neither is Neuron. No fix: which setting means the accelerator is the user's to say."""
    where = chosen_device(ctx, arg.value)
    if not where:
        return
    shown, rule, at = (f"`.to({where})`", CudaTensorPlacement, node) if kind == "to" else (
        f"`{kind}={where}`", CudaDeviceArgument, arg)
    report_guarded(ctx, rule, at, f"{shown} chooses between a CUDA device and the CPU, and neither is Neuron: on a "
                   f"Neuron instance it fails on CUDA or silently runs on the CPU; choose {device} for the "
                   f"accelerator{stack_hint(ctx)}", severity=Severity.WARNING)


def _only_type_read(ctx: Context, node: cst.Call) -> bool:
    """`torch.device("cuda").type`: the call's parent reads its `type`."""
    holder = ancestors(ctx, node)[-1:]
    return bool(holder) and isinstance(holder[0], cst.Attribute) and holder[0].value is node \
        and holder[0].attr.value == "type"


# ---- fixes ---------------------------------------------------------------------------------------------------------


def _argument_fix(ctx: Context, value: cst.BaseExpression) -> FixPlan | None:
    """`.to("cuda")`, `device="cuda:0"`, `.to(f"cuda:{rank}")`: the stack's device in place of the argument."""
    if isinstance(value, cst.Name):
        return binding_fix(ctx, value)
    code, imports = device_code(ctx, value)
    return FixPlan(f"Use `{code}`", current_device(ctx, value), (Replace(value, code),), imports)


def _loads_state_dict(ctx: Context, call: cst.Call) -> bool:
    """`call` is what `.load_state_dict(...)` is given."""
    return find_call(ctx, call, lambda c: call_name(c) == "load_state_dict" and any(a.value is call for a in c.args)) \
        is not None


def _map_location_fix(ctx: Context, call: cst.Call, value: cst.BaseExpression) -> FixPlan | None:
    """xla: `map_location="cpu"` in place of a CUDA string or of a name bound to one (native passes `"neuron"`, as
    for any device argument). Safe only where the result goes straight into `.load_state_dict(...)`, which
    copies it onto the model's device."""
    code = literal_like(value, "cpu") or '"cpu"'
    safe = _loads_state_dict(ctx, call)
    return FixPlan(f"Load onto the host: `map_location={code}`", safe, (Replace(value, code),))


def _default_fix(ctx: Context, value: cst.BaseExpression) -> FixPlan | None:
    """A `--device` option's default: the stack's device string; unsafe, since the option's uses are not seen."""
    if isinstance(value, cst.Name):
        return binding_fix(ctx, value)
    code, imports = device_text(ctx, value)
    return FixPlan(f"Default to {code}", False, (Replace(value, code),), imports)


def _device_object_fix(ctx: Context, node: cst.Call, arg: cst.Arg) -> FixPlan | None:
    """`torch.device("cuda")` → `torch.device("neuron")` (native) or `torch_xla.device()` (xla); an index given
    beside the type is dropped."""
    if isinstance(arg.value, cst.Name):
        return binding_fix(ctx, arg.value)
    others = [a for a in node.args if a is not arg]
    if any(a.star for a in node.args) or len(others) > 1:
        return None
    index = others[0] if others else None
    if index is not None and index.keyword is not None and index.keyword.value != "index":
        return None
    if index is None:
        safe = current_device(ctx, arg.value)
    else:
        safe = string_value(arg.value) == "cuda" and first_device(ctx, index.value)
    if ctx.stack == "xla":
        code, imports = device_code(ctx, None)
        return FixPlan(f"Use `{code}`", safe, (Replace(node, code),), imports)
    literal, _ = device_code(ctx, arg.value)
    if index is None:
        return FixPlan(f"Use `torch.device({literal})`", safe, (Replace(arg.value, literal),))
    alone = arg.with_changes(value=cst.parse_expression(literal), comma=cst.MaybeSentinel.DEFAULT)
    new_code = rewritten(ctx, node, node.with_changes(args=[alone], lpar=(), rpar=()))
    return None if new_code is None else FixPlan(f"Use `torch.device({literal})`", safe, (Replace(node, new_code),))


_CUDA_KEYWORDS = frozenset({"device", "non_blocking", "memory_format"})  # what `.to(...)` takes as well


def _cuda_method_fix(ctx: Context, node: cst.Call) -> FixPlan | None:
    """`.cuda()` → `.to("neuron")` / `.to(torch_xla.device())`, other arguments kept; a device index is replaced
    by the stack's device."""
    assert isinstance(node.func, cst.Attribute)
    positionals = [a for a in node.args if a.keyword is None]
    if any(a.star for a in node.args) or len(positionals) > 1:
        return None
    if any(a.keyword is not None and a.keyword.value not in _CUDA_KEYWORDS for a in node.args):
        return None
    index = positionals[0] if positionals else keyword(node, "device")
    device, imports = device_code(ctx, None)
    value = cst.parse_expression(device)
    if index is not None:
        args = [a.with_changes(value=value) if a is index else a for a in node.args]
    elif node.args:  # the device goes first, on a line of its own where the arguments stand one per line
        space = node.whitespace_before_args
        after = (space.with_changes(first_line=cst.TrailingWhitespace())
                 if isinstance(space, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(" "))
        args = [cst.Arg(value, comma=cst.Comma(whitespace_after=after)), *node.args]
    else:
        args = [cst.Arg(value)]
    new = node.with_changes(func=node.func.with_changes(attr=cst.Name("to")), args=args)
    code = rewritten(ctx, node, new.with_changes(lpar=(), rpar=()))  # a node's span leaves out its parentheses
    if code is None:
        return None
    safe = index is None or first_device(ctx, index.value)
    return FixPlan(f"Use `.to({device})`", safe, (Replace(node, code),), imports)


@check(cst.AnnAssign, cst.Assign, rules=(CudaDeviceArgument,), tokens=TOKENS)
def check_device_setting(node: cst.AnnAssign | cst.Assign, ctx: Context) -> None:
    """`device: str = "cuda"` in a class body (a dataclass of settings): the device everything built from the
    settings is placed on. No fix: what reads the field is not in view."""
    if node.value is None or len(ctx.statements) < 2 or not isinstance(ctx.statements[-2], cst.ClassDef):
        return
    where = cuda_device(ctx, node.value)
    if not where or isinstance(node.value, cst.Name):
        return
    targets = [node.target] if isinstance(node, cst.AnnAssign) else [t.target for t in node.targets]
    text = stack_device(ctx) if ctx.stack == "native" else '"xla"'
    for target in targets:
        if isinstance(target, cst.Name) and target.value.lower().endswith("device"):
            report_guarded(ctx, CudaDeviceArgument, node.value, f"`{target.value}` defaults to {where}, a CUDA "
                           "device a Neuron instance does not have, for everything placed by these settings; "
                           f"default to {text}{stack_hint(ctx)}")
            return
