"""Tensor values read on the host every step: `.item()`, `.tolist()`, `float(t)`, copies with `.cpu()` /
`.numpy()` / `.to("cpu")`, and `print` of a tensor, inside `forward` or a training step (PC701-PC703)."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Pass, Rule, rule
from portcheck.static.attribute_defaults import built_as
from portcheck.static.check import Context, check
from portcheck.static.compile.text import one_line
from portcheck.static.host_sync.handoff import hand_off
from portcheck.static.host_sync.place import quiet_calls, read_place
from portcheck.static.host_sync.sizes import bound_to_a_size
from portcheck.static.host_sync.tensors import (
    COPIES,
    VALUE_READS,
    below_reads,
    formats_tensor,
    from_host_module,
    is_tensor,
    known_tensors,
    names_cpu,
)
from portcheck.static.host_sync.wording import read_message
from portcheck.static.scope import host_value
from portcheck.static.syntax import call_name, keyword, positional
from portcheck.static.walk import visit
from portcheck.summaries import ELSEWHERE, reads_of


@rule
class HostValueRead(Rule):
    """## What it does
    Finds tensor values read into Python inside `forward` or inside a loop that steps an optimizer:
    `t.item()`, `t.tolist()`, `float(t)` / `int(t)` / `bool(t)` on something that is certainly a tensor, and
    `torch.equal(a, b)` / `torch.allclose(a, b)` (a Python bool made of two tensors' values),
    `F.gaussian_nll_loss(mu, y, var)` and a `nn.GaussianNLLLoss` object's call with a tensor `var` (torch checks
    `torch.any(var < 0)` in Python on every call: observed in torch 2.13's source), and in the loop an
    `if` or `while` that takes a tensor's truth (`if not torch.isfinite(grad_norm):`, `while loss.sum() > 0:`).
    A check on a tensor in the model or its step (`assert (x > 0).all()`, `if torch.isnan(loss): raise ...`) is
    info: it chooses no graph, but reads the tensor on every call.
    A read in a helper that neither a forward nor a training step of the scan is seen to reach is info.
    A read that feeds a shape (`torch.arange(n.item())`) or an `if` in `forward` is reported once, as PC209 or
    PC208. Reads after `xm.mark_step()` in the same iteration, in lambdas (`xm.add_step_closure(lambda: ...)`),
    in functions defined inside the loop, in loops that step no optimizer (evaluation, data preparation), under
    a logging interval (`if step % 100 == 0:`), on error paths, on host values (CPU draws such as
    `torch.randint(...).item()`, `.cpu()` copies, numpy), in the data pipeline and after the loop stay quiet.
    On the native stack the finding is advice (info); on PyTorch/XLA too where only host code uses what `forward`
    reads and it does no device work after it (its result handed to the host).

    ## Example
    ```python
    for batch in loader:
        loss = model(batch).loss
        loss.backward()
        optimizer.step()
        total += loss.item()
    ```

    ## Use instead
    ```python
    for step, batch in enumerate(loader):
        loss = model(batch).loss
        loss.backward()
        optimizer.step()
        total += loss.detach()          # stays on the device
        if step % 100 == 0:
            xm.add_step_closure(log, args=(total,))   # PyTorch/XLA: read it when the step has run
    ```

    ## Fix safety
    No automatic fix: where the value is needed decides the rewrite.
    """

    code = "PC701"
    passes = (Pass.STATIC, Pass.TRACE)
    TARGET = ("trn1", "xla")
    INVALID = (
        "for b in loader:\n    loss = model(b)\n    loss.backward()\n    optimizer.step()\n    total += loss.item()",
        "class M:\n    def forward(self, x, grid):\n        for t, h, w in grid.tolist():\n            x = x + t\n"
        "        return x",
        "class M:\n    def forward(self, x):\n        scale = x.abs().max().item()\n        return x / scale",
        "for b in loader:\n    loss = crit(model(b), b)\n    loss.backward()\n    opt.step()\n    seen += float(loss)",
        "for b in loader:\n    out = model(b)\n    out.loss.backward()\n    self.optimizer.step()\n"
        "    acc = (out.logits.argmax(-1) == b.labels).float().mean().cpu().item()",
        "import torch\nclass M:\n    def forward(self, a, b):\n        same = torch.equal(a, b)\n"
        "        return a if same else b",
        "import torch\nfor b in loader:\n    loss = model(b)\n    loss.backward()\n"
        "    norm = torch.nn.utils.clip_grad_norm_(params, 1.0)\n    if not torch.isfinite(norm):\n"
        "        optimizer.zero_grad()\n        continue\n    optimizer.step()",
        "import torch\nclass M:\n    def forward(self, a, b):\n        assert torch.allclose(a, b)\n        return a",
        "import torch\nclass M:\n    def forward(self, x):\n        if torch.any(torch.isnan(x)):\n"
        "            print(x)\n            raise ValueError('nan')",
    )
    VALID = (
        "import torch\nclass M:\n    def forward(self, a, b):\n        return torch.allclose(a.cpu(), b.cpu())",
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self, x):\n        self.n = helper(x)\n"
        "def helper(x):\n    return x.max().item()",
        "for b in loader:\n    n += b['ids'].sum().item()",
        "import torch\nfor b in loader:\n    loss = model(b)\n    if torch.isnan(loss):\n"
        "        raise FloatingPointError(b)\n    loss.backward()\n    optimizer.step()",
        "for epoch in range(3):\n    for b in loader:\n        loss = model(b)\n        loss.backward()\n"
        "        optimizer.step()\n    print(loss.item())",
        "import torch_xla.core.xla_model as xm\nfor b in loader:\n    loss = model(b)\n    loss.backward()\n"
        "    optimizer.step()\n    xm.mark_step()\n    total += loss.item()",
        "import torch_xla.core.xla_model as xm\nfor b in loader:\n    loss = model(b)\n    loss.backward()\n"
        "    xm.optimizer_step(optimizer)\n    xm.add_step_closure(lambda: print(loss.item()))",
        "import numpy as np\nclass M:\n    def forward(self, x):\n        k = np.prod(self.shape).item()\n"
        "        return x * k",
        "import torch\nclass M:\n    def forward(self, x, t):\n        n = t.sum().item()\n"
        "        return x + torch.arange(n)",
        "for b in loader:\n    loss = model(b)\n    loss.backward()\n    scheduler.step()\n    total += loss.item()",
    )


@rule
class HostCopy(Rule):
    """## What it does
    Finds tensors copied to host memory inside `forward` or inside a loop that steps an optimizer: `t.cpu()`,
    `t.numpy()`, `t.to("cpu")`. A chain such as `t.detach().cpu().numpy()` is one finding. Calls on numpy values
    and module functions (`torch.cpu.…`) stay quiet, and so does the same code outside those two places. On the
    native stack the finding is advice (info); on PyTorch/XLA too for `forward`'s result handed to the host (PC701).

    ## Example
    ```python
    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True)
    ```

    ## Use instead
    ```python
    def forward(self, x, lengths):   # lengths arrive as a CPU tensor or a list from the data pipeline
        packed = pack_padded_sequence(x, lengths, batch_first=True)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC702"
    TARGET = ("trn1", "xla")
    INVALID = (
        "class M:\n    def forward(self, x, lengths):\n        return pack(x, lengths.cpu())",
        "for b in loader:\n    loss = model(b)\n    loss.backward()\n    optimizer.step()\n"
        "    preds.append(model.logits.detach().cpu().numpy())",
        "class M:\n    def forward(self, x):\n        return x.to('cpu')",
    )
    VALID = (
        "def evaluate(x):\n    return x.cpu().numpy()",
        "import numpy as np\nclass M:\n    def forward(self, x):\n        return np.asarray(self.table).tolist()",
        "class M:\n    def forward(self, x):\n        return x.to(self.device)",
        "for b in loader:\n    loss = model(b)\n    loss.backward()\n    optimizer.step()\n"
        "preds = model.logits.cpu().numpy()",
    )


@rule
class PrintTensor(Rule):
    """## What it does
    Finds `print` of a tensor inside `forward` or inside a loop that steps an optimizer: the argument (or an
    f-string field, a `%` or `.format()` argument) must certainly be a tensor — a torch function's result, a
    tensor method's result (`x.mean()`), a name that receives `.backward()` in the loop, a `forward` parameter
    annotated `torch.Tensor`, or a local name bound to one of these. Printing shapes, dtypes, Python numbers and
    strings stays quiet. On the native stack the finding is advice (info).

    ## Example
    ```python
    for batch in loader:
        loss = criterion(model(batch.x), batch.y)
        loss.backward()
        optimizer.step()
        print(f"loss {loss}")
    ```

    ## Use instead
    ```python
    for batch in loader:
        loss = criterion(model(batch.x), batch.y)
        loss.backward()
        xm.optimizer_step(optimizer)
        xm.add_step_closure(lambda: print(f"loss {loss}"))   # PyTorch/XLA
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC703"
    TARGET = ("trn1", "xla")
    INVALID = (
        "for b in loader:\n    loss = crit(model(b.x), b.y)\n    loss.backward()\n    optimizer.step()\n"
        "    print(f'loss {loss}')",
        "import torch\nclass M:\n    def forward(self, x: torch.Tensor):\n        print(x)\n        return x",
        "class M:\n    def forward(self, x):\n        print('mean', x.mean())\n        return x",
        "import torch\nfor b in loader:\n    loss = torch.nn.functional.mse_loss(model(b), b)\n    optimizer.step()\n"
        "    print('loss %.3f' % loss)",
    )
    VALID = (
        "class M:\n    def forward(self, x):\n        print(x.shape, x.dtype)\n        return x",
        "for b in loader:\n    loss = crit(model(b.x), b.y)\n    loss.backward()\n    optimizer.step()\n"
        "    print(step)",
        "class M:\n    def forward(self, x):\n        print(x)\n        return x",
        "import torch\nx = torch.ones(2)\nprint(x.sum())",
    )


TOKENS = ("item", "tolist", "cpu", "numpy", "print", "float(", "int(", "bool(", "equal(", "allclose(",
          "gaussian_nll_loss", "GaussianNLLLoss")

_RULES = (HostValueRead, HostCopy, PrintTensor)
# method -> the rule its call on a tensor breaks
_HOST_METHODS: dict[str, type[Rule]] = {**dict.fromkeys(VALUE_READS, HostValueRead), **dict.fromkeys(COPIES, HostCopy)}
_CASTS = ("float", "int", "bool")  # `float(loss)` is `loss.item()`

def _host_method(ctx: Context, node: cst.Call) -> type[Rule] | None:
    """HostValueRead for `.item()` / `.tolist()`, HostCopy for `.cpu()` / `.numpy()` / `.to("cpu")` on something
    that may be a tensor; None otherwise."""
    func = node.func
    if not isinstance(func, cst.Attribute):
        return None
    name = func.attr.value
    found = _HOST_METHODS.get(name)
    if found is None or ctx.qualname(func) is not None:  # `torch.cpu.…`, `np.…`: a module, not a method
        return None
    if name in VALUE_READS and node.args:
        return None
    if name == "to":
        target = keyword(node, "device") or positional(node, 0)
        if target is None or not names_cpu(ctx, target.value):
            return None
    if from_host_module(ctx, func.value) or host_value(ctx, below_reads(func.value)):
        return None
    return found


def _skip_inner_reads(ctx: Context, node: cst.Call) -> None:
    """`loss.detach().cpu().item()` is one host read: the outermost call speaks for the chain."""
    inner: cst.BaseExpression = node.func.value if isinstance(node.func, cst.Attribute) else node
    while isinstance(inner, (cst.Call, cst.Attribute, cst.Subscript)):
        if isinstance(inner, cst.Call):
            if isinstance(inner.func, cst.Attribute) and inner.func.attr.value in _HOST_METHODS:
                ctx.skip.add(id(inner))
            inner = inner.func
        else:
            inner = inner.value


def report_read(ctx: Context, read: type[Rule], node: cst.Call, place: str, through: str = "", why: str = "") -> None:
    """A read in a helper is two candidates, worded for each caller: the call graph keeps the one whose caller
    reaches it (a forward, else a training step), drops the other, and keeps a value read's third as info where
    neither does and it cannot place the code. `through`: a call of that helper, kept where it reads (helpers.py);
    `why`: how a torch function reads its input, where the read is inside it."""
    for where, requires in _CANDIDATES.get(place, ((place, ""),)):
        _report_one_read(ctx, read, node, where, requires, through, why)
    if place == "helper" and read is HostValueRead:
        # and a value read (not a copy, which post-processing makes everywhere) where neither reaches it, as info
        _report_one_read(ctx, read, node, "elsewhere", ELSEWHERE, through, why)


# place -> (wording, what the call graph must settle) for each candidate finding
_CANDIDATES = {"helper": (("helper", "forward"), ("step-helper", "step"))}


def _report_one_read(ctx: Context, read: type[Rule], node: cst.Call, place: str, requires: str,
                     through: str = "", why: str = "") -> None:
    shown = one_line(ctx, node)
    if place in ("forward", "helper", "elsewhere"):
        fix_xla = fix_native = ("keep the value on the device (tensor ops, `torch.where`) or compute it outside the "
                                "model")
    elif read is HostValueRead:
        fix_xla = ("accumulate on the device (`total += loss.detach()`) and read it in `xm.add_step_closure(...)` "
                   "or after `xm.mark_step()`")
        fix_native = "accumulate on the device (`total += loss.detach()`) and read it once per logging interval"
    else:
        fix_xla = "copy to the host in `xm.add_step_closure(...)` or after `xm.mark_step()`"
        fix_native = "copy to the host once per logging interval, not every step"
    verb = why or ("copies a tensor to the host" if read is HostCopy else "reads a tensor value on the host")
    if through:
        verb += f" (`{through}` returns its argument's value on the host)"
        requires = f"{reads_of(ctx.stack)}{through}\n{requires}"
    message, severity = read_message(ctx, f"`{shown}` {verb}", place, fix_xla, fix_native, read is HostValueRead)
    if severity is None and (note := hand_off(ctx, node, place)) is not None:
        message, severity = message + note, Severity.INFO
    ctx.report(read, node, message, severity, requires=requires)


@check(cst.Call, rules=_RULES, tokens=TOKENS)
def check_call(node: cst.Call, ctx: Context) -> None:
    name = call_name(node)
    if name in _HOST_METHODS:
        read = _host_method(ctx, node)
        if read is None:
            return
        _skip_inner_reads(ctx, node)
        if id(node) in ctx.skip or id(node) in quiet_calls(ctx):
            return
        place = read_place(ctx, node)
        if place is not None and not bound_to_a_size(ctx):
            report_read(ctx, read, node, place)
    elif name in _CASTS and isinstance(node.func, cst.Name) and name not in ctx.names.aliases:
        _check_cast(ctx, node)
    elif name == "print" and isinstance(node.func, cst.Name) and id(node) not in quiet_calls(ctx):
        _check_print(ctx, node)
    elif name in _COMPARES and ctx.qualname(node.func) in _COMPARES.values():
        _check_compare(ctx, node)
    elif ctx.memo("names-gaussian-nll", ctx.module, lambda: "gaussian_nll_loss" in ctx.text
                  or "GaussianNLLLoss" in ctx.text):  # one file in thousands: the text is searched once
        _check_hidden_read(ctx, node)


# Torch functions that read their input on the host before computing: torch 2.13's `gaussian_nll_loss` (and the
# `nn.GaussianNLLLoss` module, which calls it) runs `if torch.any(var < 0): raise ValueError(...)` on a tensor `var`.
_GAUSSIAN_NLL = "torch.nn.functional.gaussian_nll_loss"
_GAUSSIAN_NLL_MODULE = "torch.nn.GaussianNLLLoss"


def _check_hidden_read(ctx: Context, node: cst.Call) -> None:
    """`F.gaussian_nll_loss(mu, y, var)`, `self.nll(mu, y, var)` (`self.nll = nn.GaussianNLLLoss()`): reads `var`."""
    var = keyword(node, "var") or positional(node, 2)
    if var is None or isinstance(var.value, (cst.Integer, cst.Float)) or id(node) in quiet_calls(ctx) or (
            ctx.qualname(node.func) != _GAUSSIAN_NLL and built_as(ctx, node.func) != _GAUSSIAN_NLL_MODULE):
        return
    place = read_place(ctx, node)
    if place is None or host_value(ctx, var.value) or bound_to_a_size(ctx):
        return
    report_read(ctx, HostValueRead, node, place, why="checks `torch.any(var < 0)` in Python, a host read of `var`, "
                "at every call")


# `torch.equal(a, b)` and `torch.allclose(a, b)` answer with a Python bool: the tensors' values, read on the host
# (two device tensors; a host value among them is a host comparison).
_COMPARES = {"equal": "torch.equal", "allclose": "torch.allclose"}


def _check_compare(ctx: Context, node: cst.Call) -> None:
    args = [a.value for a in node.args if a.keyword is None][:2]
    if len(args) < 2 or id(node) in quiet_calls(ctx) or id(node) in ctx.skip:
        return
    place = read_place(ctx, node)
    if place is None or bound_to_a_size(ctx) or any(host_value(ctx, a) for a in args):
        return
    report_read(ctx, HostValueRead, node, place)  # its arguments are tensors: torch takes nothing else


def _check_cast(ctx: Context, node: cst.Call) -> None:
    """`float(loss)`, `int(mask.sum())`: `.item()` by another name."""
    if len(node.args) != 1 or id(node) in quiet_calls(ctx):
        return
    arg = node.args[0].value
    if id(arg) in ctx.skip or id(node) in ctx.skip:
        return
    place = read_place(ctx, node)
    if place is None or not is_tensor(ctx, arg, known_tensors(ctx, place)) or bound_to_a_size(ctx):
        return
    if host_value(ctx, below_reads(arg)):  # `int(mask.sum())` of a CPU `mask`: nothing leaves the device
        return
    report_read(ctx, HostValueRead, node, place)


def _check_print(ctx: Context, node: cst.Call) -> None:
    place = read_place(ctx, node)
    if place is None:
        return
    tensors = known_tensors(ctx, place)
    for arg in node.args:
        if arg.keyword is not None:
            continue
        shown = formats_tensor(ctx, arg.value, tensors)
        if shown is not None:
            for where, requires in _CANDIDATES.get(place, ((place, ""),)):
                message, severity = read_message(
                    ctx, f"`print` formats a tensor (`{one_line(ctx, shown)}`), which copies it to the host,", where,
                    "print in `xm.add_step_closure(...)` or after `xm.mark_step()`",
                    "print once per logging interval, or print shapes and dtypes instead of values")
                ctx.report(PrintTensor, node, message, severity, requires=requires)
            return


def _calls_in(node: cst.CSTNode) -> set[int]:
    found: set[int] = set()

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            found.add(id(call))

    visit(node, Finder())
    return found


@check(cst.Lambda, rules=_RULES, tokens=TOKENS)
def quiet_lambdas(node: cst.Lambda, ctx: Context) -> None:
    """A lambda runs when it is called (a hook, a closure, a key function), not where it is written."""
    if ctx.in_forward or ctx.loops:
        quiet_calls(ctx).update(_calls_in(node.body))
