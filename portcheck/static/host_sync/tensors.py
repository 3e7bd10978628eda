"""What a host read reads: whether an expression is certainly a tensor, or host data (numpy, math, literals)."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.static.ancestry import taken_ifs
from portcheck.static.check import Context
from portcheck.static.host_sync.place import enclosing_loops
from portcheck.static.scope import host_value
from portcheck.static.syntax import call_name, keyword, positional, self_attribute, string_value
from portcheck.static.values import and_operands, truth_operands
from portcheck.static.walk import visit

VALUE_READS = ("item", "tolist")  # the value as a Python number or list
COPIES = ("cpu", "numpy", "to")  # the tensor copied to host memory (`.to` with a CPU device)
HOST_METHODS = frozenset({*VALUE_READS, *COPIES})

_HOST_MODULES = ("numpy", "math", "pandas", "random", "statistics", "builtins")
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
    "dot", "mm", "bmm", "mv", "pow", "square", "logsumexp",
})
_TENSOR_ANNOTATIONS = re.compile(r"^torch\.(\w+\.)?\w*Tensor$")


def from_host_module(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> bool:
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
        if isinstance(node.func, cst.Attribute) and call_name(node) not in HOST_METHODS:
            return from_host_module(ctx, node.func.value, depth + 1)
        return False
    if isinstance(node, cst.Subscript):
        return from_host_module(ctx, node.value, depth + 1)
    if isinstance(node, cst.Name):
        bound = ctx.constant(node)
        return bound is not None and from_host_module(ctx, bound[1], depth + 1)
    return False


def names_cpu(ctx: Context, node: cst.BaseExpression) -> bool:
    if string_value(node) == "cpu":
        return True
    if isinstance(node, cst.Call) and ctx.qualname(node.func) == "torch.device":
        first = positional(node, 0) or keyword(node, "type")
        return first is not None and string_value(first.value) == "cpu"
    bound = ctx.constant(node)
    return bound is not None and string_value(bound[1]) == "cpu"


def _torch_returns_tensor(qualname: str) -> bool:
    for prefix in _TORCH_TENSOR_MODULES:
        if qualname.startswith(prefix):
            rest = qualname[len(prefix):]
            if "." in rest or not rest[:1].islower():
                continue
            return rest not in _TORCH_NON_TENSOR and not rest.startswith(("is_", "get_", "set_", "use_", "are_"))
    return False


def _forward_tensors(ctx: Context) -> frozenset[str]:
    """Parameters of the enclosing `forward` (else of the function a read is in) annotated as tensors (`x:
    torch.Tensor`)."""
    forward = next((f for f in reversed(ctx.functions) if f.name.value == "forward"),
                   ctx.functions[-1] if ctx.functions else None)
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

    return ctx.memo("host-sync-forward", forward, compute)


def known_tensors(ctx: Context, place: str) -> set[str] | frozenset[str]:
    if place in ("forward", "helper"):
        return _forward_tensors(ctx)
    names: set[str] = set()
    for _, facts in enclosing_loops(ctx):
        names |= facts.tensors
    return names


def is_tensor(ctx: Context, node: cst.BaseExpression, tensors: set[str] | frozenset[str], depth: int = 0) -> bool:
    """A conservative "this is certainly a tensor": a torch function's result, a tensor method's result, a name
    that receives `.backward()`, a `forward` parameter annotated `torch.Tensor`, or a local name bound to one."""
    if depth > 3:
        return False
    if isinstance(node, cst.Name):
        if node.value in tensors or _tested_tensor(ctx, node.value):
            return True
        bound = ctx.constant(node)
        return bound is not None and is_tensor(ctx, bound[1], tensors, depth + 1)
    if (name := self_attribute(node)) is not None:
        return name in module_tensors(ctx)
    if isinstance(node, cst.Call):
        qualname = ctx.qualname(node.func)
        if qualname is not None:
            return _torch_returns_tensor(qualname)
        return (isinstance(node.func, cst.Attribute) and call_name(node) in _TENSOR_METHODS
                and not from_host_module(ctx, node.func.value)
                and (call_name(node) != "float" or not node.args))
    if isinstance(node, cst.Subscript):
        return is_tensor(ctx, node.value, tensors, depth + 1)
    if isinstance(node, cst.UnaryOperation):
        return is_tensor(ctx, node.expression, tensors, depth + 1)
    if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, (cst.Modulo, cst.MatrixMultiply)):
        return is_tensor(ctx, node.left, tensors, depth + 1) or is_tensor(ctx, node.right, tensors, depth + 1)
    return False


# Tests that a value is a tensor: in their body it is one. `is_xla_tensor` negated too, off the xla stack (fairseq's
# `if not is_xla_tensor(v): v = float(v)`): the code asks which device the tensor is on, not whether it is one.
_TENSOR_TESTS = frozenset({"torch.is_tensor", "is_tensor"})
_DEVICE_TESTS = frozenset({"is_xla_tensor"})


def _tested_tensor(ctx: Context, name: str) -> bool:
    """`name` is tested to be a tensor by an `if` holding the code: `torch.is_tensor(name)`, `isinstance(name,
    torch.Tensor)`, `not is_xla_tensor(name)`."""
    for statement, _ in taken_ifs(ctx):
        for operand in and_operands(statement.test):
            negated = isinstance(operand, cst.UnaryOperation) and isinstance(operand.operator, cst.Not)
            call = operand.expression if isinstance(operand, cst.UnaryOperation) and negated else operand
            if not isinstance(call, cst.Call) or not call.args or not isinstance(call.args[0].value, cst.Name) or (
                    call.args[0].value.value != name):
                continue
            tested = ctx.qualname(call.func) or call_name(call) or ""
            if not negated and (tested in _TENSOR_TESTS or (tested == "isinstance" and len(call.args) == 2 and (
                    ctx.qualname(call.args[1].value) or "").endswith("Tensor"))):
                return True
            if negated and tested.rsplit(".", 1)[-1] in _DEVICE_TESTS:
                return ctx.stack != "xla"  # on the xla stack every tensor is an XLA tensor: the body never runs
    return False


def module_tensors(ctx: Context) -> frozenset[str]:
    """The buffers and parameters of the class the code is in: `self.register_buffer("ptr", ...)`,
    `self.register_parameter("w", ...)`, `self.w = nn.Parameter(...)`, anywhere in the class."""
    cls = ctx.enclosing_class
    if cls is None:
        return frozenset()

    def compute() -> frozenset[str]:
        names: set[str] = set()

        class Finder(cst.CSTVisitor):
            def visit_Call(self, call: cst.Call) -> None:
                if self_attribute(call.func) in ("register_buffer", "register_parameter") and call.args:
                    name = string_value(call.args[0].value)
                    if name is not None:
                        names.add(name)

            def visit_Assign(self, node: cst.Assign) -> None:
                if (isinstance(node.value, cst.Call)
                        and ctx.qualname(node.value.func) in ("torch.nn.Parameter", "torch.nn.parameter.Parameter")):
                    names.update(n for t in node.targets if (n := self_attribute(t.target)) is not None)

        visit(cls, Finder())
        return frozenset(names)

    return ctx.memo("module-tensors", cls, compute)


def buffer_truth(ctx: Context, test: cst.BaseExpression) -> cst.Attribute | None:
    """A buffer or parameter of the class a test takes the truth of itself: `if self.inited:` with `inited`
    registered by `self.register_buffer("inited", torch.Tensor([False]))` (a codebook's first-call flag). The
    module's tensors follow it to the device, so Python's bool of one reads it on the host; a plain attribute
    (`self.enabled = True`) is no tensor and stays quiet."""
    buffers = module_tensors(ctx)
    for part in truth_operands(test) if buffers else ():
        if isinstance(part, cst.Attribute) and self_attribute(part) in buffers:
            return part
    return None


def compared_tensor(ctx: Context, test: cst.BaseExpression,
                    tensors: set[str] | frozenset[str]) -> cst.BaseExpression | None:
    """The tensor a test compares, which Python then asks for a bool: `if rand < accept_prob:` with `accept_prob`
    bound to `(-d).exp().clamp(max=1.0)`, an operand of `and` / `or` / `not` so made. Certainly a tensor
    (`is_tensor`), and not one on the host (`torch.rand(1) < p`: a draw made without a device is a CPU tensor);
    identity and membership tests (`is None`, `in`) read no value."""
    for part in truth_operands(test):
        if isinstance(part, cst.Comparison) and not any(
                isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in part.comparisons):
            for side in (part.left, *(c.comparator for c in part.comparisons)):
                if is_tensor(ctx, side, tensors) and not host_value(ctx, side) and not _host_arithmetic(
                        ctx, side, tensors):
                    return side
    return None


def _host_arithmetic(ctx: Context, side: cst.BaseExpression, tensors: set[str] | frozenset[str]) -> bool:
    """`span_start - s - gap` with `span_start = torch.randint(s, e, size=(1,))`: arithmetic whose only tensors are
    on the host, the rest Python values (a device tensor there would not mix with a host one of more than one
    element), computes on the host."""
    parts: list[cst.BaseExpression] = []
    todo = [side]
    while todo:
        part = todo.pop()
        if isinstance(part, cst.BinaryOperation):
            todo += [part.left, part.right]
        elif isinstance(part, cst.UnaryOperation):
            todo.append(part.expression)
        elif is_tensor(ctx, part, tensors):
            parts.append(part)
    return isinstance(side, (cst.BinaryOperation, cst.UnaryOperation)) and bool(parts) and all(
        host_value(ctx, p) for p in parts)


def formats_tensor(ctx: Context, node: cst.BaseExpression,
                   tensors: set[str] | frozenset[str]) -> cst.BaseExpression | None:
    """The tensor a `print` argument formats: itself, an f-string field, a `%` or `.format()` argument."""
    if is_tensor(ctx, node, tensors):
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
    return next((p for p in parts if is_tensor(ctx, p, tensors)), None)


def below_reads(node: cst.BaseExpression) -> cst.BaseExpression:
    """`x` for `x.detach().cpu()`: what a chain of host reads starts from (`.cpu()` itself is judged by the read)."""
    while (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
           and node.func.attr.value in (*VALUE_READS, *COPIES, "detach")):
        node = node.func.value
    return node
