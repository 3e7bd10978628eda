"""host-sync (PC70x): tensor values read on the host inside `forward` or inside a training step.

On PyTorch/XLA a host read (`loss.item()`, `print(tensor)`, `.cpu()`) is an implicit graph cut: the pending graph
is compiled and run to produce the value (SDK:archive/nxd-training/pytorch-neuron-programming-guide.rst), and under
`torch_neuronx.trace` the example's value is baked into the graph. On TorchNeuron native the read waits for the
device and ends eager op fusion at that point; under `torch.compile` it is a graph break.

Only two places are judged, the ones that run every step: `forward` (and functions nested in it), and the body of
a loop that steps an optimizer (`optimizer.step()`, `scaler.step(opt)`, `xm.optimizer_step(opt)`). Data
preparation, `__init__`, helpers, logging after the loop, code after `xm.mark_step()` in the same iteration, and
callbacks given to `xm.add_step_closure` (the documented fix) stay quiet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.dynamic_shape import SIZE_FACTORIES, SIZE_METHODS
from portcheck.static.rule import Context, Rule, call_name, check, keyword, positional, rule, string_value
from portcheck.static.syntax import dotted_name
from portcheck.static.walk import visit

CODES = ("PC701", "PC702", "PC703")
TOKENS = ("item", "tolist", "cpu", "numpy", "print", "float(", "int(", "bool(")

_HOST_METHODS = {"item": "PC701", "tolist": "PC701", "cpu": "PC702", "numpy": "PC702", "to": "PC702"}
_CASTS = ("float", "int", "bool")  # `float(loss)` is `loss.item()`
_HOST_MODULES = ("numpy", "math", "pandas", "random", "statistics", "builtins")
_STEP = "torch_xla.core.xla_model.optimizer_step"
_SYNCS = frozenset({"torch_xla.core.xla_model.mark_step", "torch_xla.sync"})
_OPTIMIZER = re.compile(r"optim|^opt(\d+|_\w*|[a-z])?$|_opt\d*$")

# Top-level torch functions that return tensors are the rule; these return Python values or objects.
_TORCH_NON_TENSOR = frozenset({
    "numel", "device", "dtype", "compile", "load", "save", "manual_seed", "seed", "initial_seed", "no_grad",
    "enable_grad", "inference_mode", "autocast", "typename", "finfo", "iinfo", "result_type", "promote_types",
    "can_cast", "broadcast_shapes", "set_grad_enabled", "cond",
})
_TORCH_TENSOR_MODULES = ("torch.", "torch.nn.functional.", "torch.linalg.", "torch.special.", "torch.fft.")
# Tensor methods whose result is a tensor (and that lists, dicts and strings do not have).
_TENSOR_METHODS = frozenset({
    "sum", "mean", "std", "var", "norm", "abs", "detach", "float", "half", "bfloat16", "double", "softmax",
    "log_softmax", "argmax", "argmin", "exp", "log", "sqrt", "clone", "flatten", "reshape", "view", "squeeze",
    "unsqueeze", "max", "min", "amax", "amin", "prod", "cumsum", "sigmoid", "tanh", "relu", "matmul", "transpose",
    "permute", "contiguous", "masked_fill", "clamp", "long", "bool", "eq", "ne", "gt", "lt", "ge", "le",
})
_TENSOR_ANNOTATIONS = re.compile(r"^torch\.(\w+\.)?\w*Tensor$")

_GRAPH_CUT = ("on PyTorch/XLA it is an implicit graph cut (the pending graph is compiled and run to produce the "
              "value)")
_TRACE = "and `torch_neuronx.trace` bakes the example's value into the graph"
_NATIVE = ("it waits for the device and ends TorchNeuron's eager op fusion there, and under "
           "`torch.compile(backend=\"neuron\")` it is a graph break (an error with `fullgraph=True`)")
_NATIVE_STEP = "it waits for the device and ends TorchNeuron's eager op fusion there"


# ---- where: forward, or a loop that steps an optimizer -----------------------------------------------------


@dataclass
class _Loop:
    """What one loop's body does, computed once per loop."""

    steps: bool = False  # steps an optimizer itself (not only in a nested loop)
    synced_at: int | None = None  # index of the first body statement that calls xm.mark_step()/torch_xla.sync()
    positions: dict[int, int] = field(default_factory=dict)  # id(body statement) -> its index
    nested: set[int] = field(default_factory=set)  # ids of functions, classes and lambdas defined inside
    tensors: set[str] = field(default_factory=set)  # names that receive `.backward()`: tensors for sure


def _is_step(ctx: Context, call: cst.Call) -> bool:
    qualname = ctx.qualname(call.func)
    if qualname == _STEP:
        return True
    if qualname is not None or not isinstance(call.func, cst.Attribute) or call.func.attr.value != "step":
        return False
    receiver = dotted_name(call.func.value)
    if receiver is None:
        return False
    last = receiver.rsplit(".", 1)[-1].lower()
    # `optimizer.step()`, `opt_g.step()`, `scaler.step(optimizer)`, DeepSpeed's `model_engine.step()`
    return bool(_OPTIMIZER.search(last)) or ("scaler" in last and bool(call.args)) or "engine" in last


def _backward_name(call: cst.Call) -> str | None:
    """`loss` for `loss.backward()`, `scaler.scale(loss).backward()` and `accelerator.backward(loss)`."""
    if call_name(call) != "backward" or not isinstance(call.func, cst.Attribute):
        return None
    receiver = call.func.value
    if isinstance(receiver, cst.Name) and not call.args:
        return receiver.value
    if isinstance(receiver, cst.Call) and call_name(receiver) == "scale" and receiver.args:
        receiver = receiver.args[0].value
        return receiver.value if isinstance(receiver, cst.Name) else None
    first = positional(call, 0)
    return first.value.value if first is not None and isinstance(first.value, cst.Name) else None


def _scan_loop(ctx: Context, loop: cst.For | cst.While) -> _Loop:
    facts = _Loop()

    class Scan(cst.CSTVisitor):
        def __init__(self) -> None:
            self.inner_loops = 0
            self.definitions = 0
            self.synced = False

        def _define(self, node: cst.CSTNode) -> bool:
            facts.nested.add(id(node))
            self.definitions += 1
            return True

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return self._define(node)

        def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
            self.definitions -= 1

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return self._define(node)

        def leave_ClassDef(self, node: cst.ClassDef) -> None:
            self.definitions -= 1

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return self._define(node)

        def leave_Lambda(self, node: cst.Lambda) -> None:
            self.definitions -= 1

        def visit_For(self, node: cst.For) -> None:
            self.inner_loops += 1

        def leave_For(self, node: cst.For) -> None:
            self.inner_loops -= 1

        def visit_While(self, node: cst.While) -> None:
            self.inner_loops += 1

        def leave_While(self, node: cst.While) -> None:
            self.inner_loops -= 1

        def visit_Call(self, call: cst.Call) -> None:
            if self.definitions:
                return
            name = _backward_name(call)
            if name is not None:
                facts.tensors.add(name)
            if self.inner_loops:
                return
            if _is_step(ctx, call):
                facts.steps = True
                barrier = keyword(call, "barrier")
                if barrier is not None and dotted_name(barrier.value) == "True":
                    self.synced = True  # `xm.optimizer_step(opt, barrier=True)` marks the step
            elif ctx.qualname(call.func) in _SYNCS:
                self.synced = True

    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    scan = Scan()
    for index, statement in enumerate(body):
        facts.positions[id(statement)] = index
        visit(statement, scan)
        if scan.synced and facts.synced_at is None:
            facts.synced_at = index
    return facts


def _loop(ctx: Context, loop: cst.For | cst.While) -> _Loop:
    return ctx.memo("host-sync-loop", loop, lambda: _scan_loop(ctx, loop))  # type: ignore[return-value]


def _enclosing_loops(ctx: Context) -> list[tuple[cst.For | cst.While, _Loop]]:
    """The loops around the current node that run it directly (innermost first): a function defined inside a
    loop runs when called, not once per iteration."""
    function = ctx.functions[-1] if ctx.functions else None
    out = []
    for loop in reversed(ctx.loops):
        facts = _loop(ctx, loop)
        if function is not None and id(function) in facts.nested:
            break
        out.append((loop, facts))
    return out


def _after_sync(ctx: Context, loop: cst.CSTNode, facts: _Loop) -> bool:
    """The current statement comes after `xm.mark_step()` in the same iteration: the value is already computed."""
    if facts.synced_at is None:
        return False
    for index in range(len(ctx.statements) - 1, 0, -1):
        if ctx.statements[index - 1] is loop:
            position = facts.positions.get(id(ctx.statements[index]))
            return position is not None and position > facts.synced_at
    return False


def _place(ctx: Context) -> str | None:
    """"forward", "step" (a loop body that steps an optimizer), or None where a host read is harmless."""
    if ctx.in_forward:
        return "forward"
    for loop, facts in _enclosing_loops(ctx):
        if facts.steps:
            return None if _after_sync(ctx, loop, facts) else "step"
    return None


def _quiet(ctx: Context) -> set[int]:
    """Calls inside lambdas (`xm.add_step_closure(lambda: ...)`, hooks): they run later, outside the step."""
    return ctx.memo("host-sync-quiet", ctx.module, set)  # type: ignore[return-value]


# ---- what: is this a host read of a tensor? ----------------------------------------------------------------


def _from_host_module(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> bool:
    """The expression is built by numpy, math, ... (host data), as far as can be seen."""
    if depth > 3:
        return False
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Integer, cst.Float,
                         cst.List, cst.Dict, cst.Tuple, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)):
        return True
    if isinstance(node, cst.Call):
        qualname = ctx.qualname(node.func)
        if qualname is not None:
            return qualname.split(".", 1)[0] in _HOST_MODULES
        if isinstance(node.func, cst.Attribute) and call_name(node) not in _HOST_METHODS:
            return _from_host_module(ctx, node.func.value, depth + 1)
        return False
    if isinstance(node, cst.Subscript):
        return _from_host_module(ctx, node.value, depth + 1)
    if isinstance(node, cst.Name):
        bound = ctx.constant(node)
        return bound is not None and _from_host_module(ctx, bound[1], depth + 1)
    return False


def _names_cpu(ctx: Context, node: cst.BaseExpression) -> bool:
    if string_value(node) == "cpu":
        return True
    if isinstance(node, cst.Call) and ctx.qualname(node.func) == "torch.device":
        first = positional(node, 0) or keyword(node, "type")
        return first is not None and string_value(first.value) == "cpu"
    bound = ctx.constant(node)
    return bound is not None and string_value(bound[1]) == "cpu"


def _host_method(ctx: Context, node: cst.Call) -> str | None:
    """PC701 for `.item()` / `.tolist()`, PC702 for `.cpu()` / `.numpy()` / `.to("cpu")` on something that may be
    a tensor; None otherwise."""
    func = node.func
    if not isinstance(func, cst.Attribute):
        return None
    name = func.attr.value
    code = _HOST_METHODS.get(name)
    if code is None or ctx.qualname(func) is not None:  # `torch.cpu.…`, `np.…`: a module, not a method
        return None
    if name in ("item", "tolist") and node.args:
        return None
    if name == "to":
        target = keyword(node, "device") or positional(node, 0)
        if target is None or not _names_cpu(ctx, target.value):
            return None
    if _from_host_module(ctx, func.value):
        return None
    return code


def _torch_returns_tensor(qualname: str) -> bool:
    for prefix in _TORCH_TENSOR_MODULES:
        if qualname.startswith(prefix):
            rest = qualname[len(prefix):]
            if "." in rest or not rest[:1].islower():
                continue
            return rest not in _TORCH_NON_TENSOR and not rest.startswith(("is_", "get_", "set_", "use_", "are_"))
    return False


def _forward_tensors(ctx: Context) -> frozenset[str]:
    """Parameters of the enclosing `forward` annotated as tensors (`x: torch.Tensor`)."""
    forward = next((f for f in reversed(ctx.functions) if f.name.value == "forward"), None)
    if forward is None:
        return frozenset()

    def compute() -> frozenset[str]:
        names = set()
        params = forward.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            annotation = param.annotation.annotation if param.annotation is not None else None
            if annotation is not None and _TENSOR_ANNOTATIONS.match(ctx.qualname(annotation) or ""):
                names.add(param.name.value)
        return frozenset(names)

    return ctx.memo("host-sync-forward", forward, compute)  # type: ignore[return-value]


def _known_tensors(ctx: Context, place: str) -> set[str] | frozenset[str]:
    if place == "forward":
        return _forward_tensors(ctx)
    names: set[str] = set()
    for _, facts in _enclosing_loops(ctx):
        names |= facts.tensors
    return names


def _is_tensor(ctx: Context, node: cst.BaseExpression, tensors, depth: int = 0) -> bool:
    """A conservative "this is certainly a tensor": a torch function's result, a tensor method's result, a name
    that receives `.backward()`, a `forward` parameter annotated `torch.Tensor`, or a local name bound to one."""
    if depth > 3:
        return False
    if isinstance(node, cst.Name):
        if node.value in tensors:
            return True
        bound = ctx.constant(node)
        return bound is not None and _is_tensor(ctx, bound[1], tensors, depth + 1)
    if isinstance(node, cst.Call):
        qualname = ctx.qualname(node.func)
        if qualname is not None:
            return _torch_returns_tensor(qualname)
        return (isinstance(node.func, cst.Attribute) and call_name(node) in _TENSOR_METHODS
                and not _from_host_module(ctx, node.func.value)
                and (call_name(node) != "float" or not node.args))
    if isinstance(node, cst.Subscript):
        return _is_tensor(ctx, node.value, tensors, depth + 1)
    if isinstance(node, cst.UnaryOperation):
        return _is_tensor(ctx, node.expression, tensors, depth + 1)
    if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, (cst.Modulo, cst.MatrixMultiply)):
        return _is_tensor(ctx, node.left, tensors, depth + 1) or _is_tensor(ctx, node.right, tensors, depth + 1)
    return False


def _formats_tensor(ctx: Context, node: cst.BaseExpression, tensors) -> cst.BaseExpression | None:
    """The tensor a `print` argument formats: itself, an f-string field, a `%` or `.format()` argument."""
    if _is_tensor(ctx, node, tensors):
        return node
    parts: list[cst.BaseExpression] = []
    if isinstance(node, cst.FormattedString):
        parts = [p.expression for p in node.parts if isinstance(p, cst.FormattedStringExpression)]
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo) and string_value(node.left):
        right = node.right
        parts = [e.value for e in right.elements] if isinstance(right, cst.Tuple) else [right]
    elif (isinstance(node, cst.Call) and call_name(node) == "format" and isinstance(node.func, cst.Attribute)
          and string_value(node.func.value) is not None):
        parts = [a.value for a in node.args]
    return next((p for p in parts if _is_tensor(ctx, p, tensors)), None)


# ---- one problem, one finding -------------------------------------------------------------------------------


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


def _size_names(ctx: Context, scope: cst.CSTNode) -> frozenset[str]:
    """Names passed as sizes in this function (`torch.zeros(n)`, `range(n)`, `x.view(*shape)`): PC209 reports a
    host read bound to one of them as part of the dynamic shape it makes."""
    found: set[str] = set()

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            qualname = ctx.qualname(call.func)
            name = call_name(call)
            if qualname in SIZE_FACTORIES:
                args = [a for a in call.args if a.keyword is None]
                args = args[1:2] if qualname == "torch.split" else args
            elif (isinstance(call.func, cst.Name) and name == "range") or (
                    isinstance(call.func, cst.Attribute) and qualname is None and name in SIZE_METHODS):
                args = list(call.args)
            else:
                return
            found.update(a.value.value for a in args if isinstance(a.value, cst.Name))

    visit(scope, Finder())
    return frozenset(found)


def _bound_to_a_size(ctx: Context) -> bool:
    """`n = t.sum().item()` later used as `torch.arange(n)`: PC209's finding, not ours."""
    if "PC209" not in ctx.enabled or not ctx.statements:
        return False
    statement = ctx.statements[-1]
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return False
    target = assign.targets[0].target
    if not isinstance(target, cst.Name):
        return False
    bound = ctx.constant(target)
    if bound is None or bound[1] is not assign.value:
        return False
    scope = ctx.functions[-1] if ctx.functions else ctx.module
    sizes = ctx.memo("host-sync-sizes", scope, lambda: _size_names(ctx, scope))
    return target.value in sizes  # type: ignore[operator]


# ---- the checks ---------------------------------------------------------------------------------------------


def _one_line(ctx: Context, node: cst.CSTNode) -> str:
    text = " ".join(ctx.source(node).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _message(ctx: Context, what: str, place: str, fix_xla: str, fix_native: str,
             graph_break: bool = False) -> tuple[str, Severity | None]:
    """`graph_break`: the read is a data access that `torch.compile` graph-breaks on (`.item()`, `.tolist()`)."""
    where = "inside `forward`" if place == "forward" else "every training step"
    if ctx.stack == "xla":
        cut = f"{_GRAPH_CUT} {_TRACE}" if place == "forward" else _GRAPH_CUT
        return f"{what} {where}: {cut}; {fix_xla}", None
    native = _NATIVE if place == "forward" and graph_break else _NATIVE_STEP
    return f"{what} {where}: {native}; {fix_native}", Severity.INFO


def _report_read(ctx: Context, code: str, node: cst.Call, place: str) -> None:
    shown = _one_line(ctx, node)
    if place == "forward":
        fix_xla = fix_native = ("keep the value on the device (tensor ops, `torch.where`) or compute it outside the "
                                "model")
    elif code == "PC701":
        fix_xla = ("accumulate on the device (`total += loss.detach()`) and read it in `xm.add_step_closure(...)` "
                   "or after `xm.mark_step()`")
        fix_native = "accumulate on the device (`total += loss.detach()`) and read it once per logging interval"
    else:
        fix_xla = "copy to the host in `xm.add_step_closure(...)` or after `xm.mark_step()`"
        fix_native = "copy to the host once per logging interval, not every step"
    verb = "copies a tensor to the host" if code == "PC702" else "reads a tensor value on the host"
    message, severity = _message(ctx, f"`{shown}` {verb}", place, fix_xla, fix_native, code == "PC701")
    ctx.report(code, node, message, severity)


@check(cst.Call, codes=CODES, tokens=TOKENS)
def check_call(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    name = call_name(node)
    if name in _HOST_METHODS:
        code = _host_method(ctx, node)
        if code is None:
            return
        _skip_inner_reads(ctx, node)
        if id(node) in ctx.skip or id(node) in _quiet(ctx):
            return
        place = _place(ctx)
        if place is not None and not _bound_to_a_size(ctx):
            _report_read(ctx, code, node, place)
    elif name in _CASTS and isinstance(node.func, cst.Name) and name not in ctx.names.aliases:
        _check_cast(ctx, node)
    elif name == "print" and isinstance(node.func, cst.Name) and id(node) not in _quiet(ctx):
        _check_print(ctx, node)


def _check_cast(ctx: Context, node: cst.Call) -> None:
    """`float(loss)`, `int(mask.sum())`: `.item()` by another name."""
    if len(node.args) != 1 or id(node) in _quiet(ctx):
        return
    arg = node.args[0].value
    if id(arg) in ctx.skip or id(node) in ctx.skip:
        return
    place = _place(ctx)
    if place is None or not _is_tensor(ctx, arg, _known_tensors(ctx, place)) or _bound_to_a_size(ctx):
        return
    _report_read(ctx, "PC701", node, place)


def _check_print(ctx: Context, node: cst.Call) -> None:
    place = _place(ctx)
    if place is None:
        return
    tensors = _known_tensors(ctx, place)
    for arg in node.args:
        if arg.keyword is not None:
            continue
        shown = _formats_tensor(ctx, arg.value, tensors)
        if shown is not None:
            message, severity = _message(
                ctx, f"`print` formats a tensor (`{_one_line(ctx, shown)}`), which copies it to the host,", place,
                "print in `xm.add_step_closure(...)` or after `xm.mark_step()`",
                "print once per logging interval, or print shapes and dtypes instead of values")
            ctx.report("PC703", node, message, severity)
            return


def _calls_in(node: cst.CSTNode) -> set[int]:
    found: set[int] = set()

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            found.add(id(call))

    visit(node, Finder())
    return found


@check(cst.Lambda, codes=CODES, tokens=TOKENS)
def quiet_lambdas(node: cst.CSTNode, ctx: Context) -> None:
    """A lambda runs when it is called (a hook, a closure, a key function), not where it is written."""
    assert isinstance(node, cst.Lambda)
    if ctx.in_forward or ctx.loops:
        _quiet(ctx).update(_calls_in(node.body))


# ---- rules ----------------------------------------------------------------------------------------------------


@rule
class HostValueRead(Rule):
    """## What it does
    Finds tensor values read into Python inside `forward` or inside a loop that steps an optimizer:
    `t.item()`, `t.tolist()`, and `float(t)` / `int(t)` / `bool(t)` on something that is certainly a tensor.
    A read that feeds a shape (`torch.arange(n.item())`) or an `if` in `forward` is reported once, as PC209 or
    PC208. Reads after `xm.mark_step()` in the same iteration, in lambdas (`xm.add_step_closure(lambda: ...)`),
    in functions defined inside the loop, in loops that step no optimizer (evaluation, data preparation) and
    after the loop stay quiet. On the native stack the finding is advice (info).

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
    TARGET = ("trn1", "xla")
    INVALID = (
        "for b in loader:\n    loss = model(b)\n    loss.backward()\n    optimizer.step()\n    total += loss.item()",
        "class M:\n    def forward(self, x, grid):\n        for t, h, w in grid.tolist():\n            x = x + t\n"
        "        return x",
        "class M:\n    def forward(self, x):\n        scale = x.abs().max().item()\n        return x / scale",
        "for b in loader:\n    loss = crit(model(b), b)\n    loss.backward()\n    opt.step()\n    seen += float(loss)",
        "for b in loader:\n    out = model(b)\n    out.loss.backward()\n    self.optimizer.step()\n"
        "    acc = (out.logits.argmax(-1) == b.labels).float().mean().cpu().item()",
    )
    VALID = (
        "def helper(x):\n    return x.max().item()",
        "for b in loader:\n    n += b['ids'].sum().item()",
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
    native stack the finding is advice (info).

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
