"""Host-side code and host values: what never reaches the Neuron device, so dynamic-shape, dtype and host-sync
rules stay quiet there.

Host-side code is the data pipeline and the tooling around the model: data-pipeline folders and files (host_paths:
a prior the call graph may overrule), dataset, sampler, loader, transform and metric classes, data-building
functions (`__getitem__`, `collate*`, `process`), and branches for another device or accelerator. kornia's
`augmentation/` and `geometry/transform/` are not among them: they run on batched device tensors.

Host values are numpy arrays and pandas objects, tensors copied to the host (`.cpu()`, `.to("cpu")`), CPU
tensors a torch factory makes without `device=` from host data, and what is derived from them. Every answer errs
towards "don't know" (not host), so a rule keeps reporting what it cannot place.
"""

from __future__ import annotations

import re
from functools import partial

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.host_attributes import host_attribute
from portcheck.static.host_names import marked_host, python_value, typed_host
from portcheck.static.host_paths import HOST_FOLDERS
from portcheck.static.reaching import reaching
from portcheck.static.rebindings import rebindings
from portcheck.static.syntax import bound_names, call_name, dotted_name, keyword, parameters, positional, string_value
from portcheck.static.values import contains
from portcheck.static.walk import visit

# Base classes of host-side objects (the last part of the name).
_HOST_BASES = re.compile(r"(\w*Dataset|\w*Sampler|\w*DataLoader|BaseTransform|Metric)$")
# Classes that are host-side objects by their own name (`LastNeighborLoader`, `NeighborSampler`).
_HOST_CLASSES = re.compile(r"(Dataset|Sampler|Loader)$")
_HOST_FUNCTIONS = re.compile(
    r"(__getitem__|__iter__|collate\w*|process|_?post_?process\w*|download|test|evaluate\w*)")
_HOST_LIBRARIES = ("numpy.", "pandas.", "scipy.", "onnxruntime.", "networkx.", "sklearn.")
# torch functions that make a tensor from sizes or host data: without `device=` the tensor is on the CPU.
_FACTORIES = frozenset(f"torch.{n}" for n in (
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "rand",
    "randn", "randint", "randperm", "from_numpy", "multinomial", "Tensor", "FloatTensor", "LongTensor",
))
# Methods whose result is on the host whatever the receiver: copies and Python values.
HOST_RESULTS = frozenset({"cpu", "numpy", "tolist", "item"})
# Tensor metadata, held on the host: `x.size()`, a nested tensor's sizes.
_METADATA = frozenset({"size", "dim", "numel", "stride", "nelement", "_nested_tensor_size"})
_MOVES = frozenset({"cuda", "to", "type_as", "new_tensor", "pin_memory"})
# `torch.nn.Module` and its containers, as torch names them: a class built on one is a model part.
MODULE_CLASSES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", *(
    f"torch.nn{module}.{container}" for module in ("", ".modules.container")
    for container in ("ModuleList", "Sequential", "ModuleDict"))})


def host_path(ctx: Context) -> str | None:
    """The folder or file name that puts this file in the data pipeline (`datasets/`, `neighbor_sampler.py`),
    or None (host_paths.host_path_of)."""
    return ctx.host_path


def host_code(ctx: Context) -> str | None:
    """Why the current code runs on the host around the model, or None: a data-pipeline folder, a class that
    subclasses a dataset, sampler, loader, transform base or metric, or a data-building function."""
    if ctx.statements:  # the innermost statement stands for the whole chain: asked once per statement
        return ctx.memo("host-code", ctx.statements[-1], lambda: _host_code(ctx))
    return _host_code(ctx)


def _host_code(ctx: Context) -> str | None:
    if host_path(ctx) is not None and not ctx.functions:
        # module-level code: no function for the call graph to place. In a function the path is a prior the call
        # graph settles: a value rule's finding there is kept where a forward or a training step reaches it
        # (Context.report)
        return f"in `{host_path(ctx)}`"
    for statement in ctx.statements:
        if isinstance(statement, cst.ClassDef):
            if _HOST_CLASSES.search(statement.name.value) and not _module_class(ctx, statement):
                return f"in `{statement.name.value}`"
            for base in statement.bases:
                name = dotted_name(base.value) or ""
                if _HOST_BASES.search(name.rsplit(".", 1)[-1]):
                    return f"in a subclass of `{name}`"
    function = next((f.name.value for f in ctx.functions if _HOST_FUNCTIONS.fullmatch(f.name.value)), None)
    if function in ("__iter__", "__getitem__") and _module_class(ctx, ctx.enclosing_class):
        function = None  # a module list's own iteration: the layer loop of the forward that holds it
    if function is not None:
        return f"in `{function}`"
    if _other_device_branch(ctx):
        return "in a branch a Neuron host never takes (it tests for another device type or accelerator)"
    return "in a class that runs an onnxruntime session" if _onnxruntime_class(ctx) else None


def _module_class(ctx: Context, statement: cst.ClassDef | None) -> bool:
    """The class subclasses `torch.nn.Module` or one of its containers: a model part whatever its name (a
    variational `...Sampler`)."""
    return statement is not None and any(ctx.qualname(base.value) in MODULE_CLASSES for base in statement.bases)


def _other_device_branch(ctx: Context) -> bool:
    """Inside the body of `if x.device.type == "cpu" ...:` (another device type than Neuron's, or another
    accelerator's probe): a Neuron host never takes it."""
    return any(isinstance(statement, cst.If) and ctx.statements[index + 1] in _body(statement)
               and _tests_other_device(ctx, statement.test) for index, statement in enumerate(ctx.statements[:-1]))


# Device types a Neuron tensor never has (it is "neuron" on the native stack, "xla" on the XLA one).
_OTHER_DEVICES = frozenset({"cpu", "mps", "xpu", "cuda", "hpu", "npu", "mlu", "mtia"})


def _tests_other_device(ctx: Context, test: cst.BaseExpression, depth: int = 0) -> bool:
    """`x.device.type == "cpu"`, `x.device.type in ("mps", "xpu")`, `x.is_mps`, and a name bound once to such a
    test (`x_is_mps = x.device.type in ["mps", "xpu"]`): true only for tensors that are not Neuron's. So is another
    accelerator's probe (`torch.backends.mps.is_available()`, `is_torch_npu_available()`): False on a Neuron host."""
    if isinstance(test, cst.Call):  # imported here: the trace child loads this module, not the cuda_api rules
        from portcheck.static.cuda_api.paths import other_accelerator
        return other_accelerator(ctx, test)
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.Or):
            return _tests_other_device(ctx, test.left, depth) and _tests_other_device(ctx, test.right, depth)
        return _tests_other_device(ctx, test.left, depth) or _tests_other_device(ctx, test.right, depth)
    if isinstance(test, cst.Attribute):
        return test.attr.value in ("is_cpu", "is_mps", "is_xpu", "is_cuda")
    if isinstance(test, cst.Name) and depth < 2:
        bound = ctx.constant(test)
        return bound is not None and _tests_other_device(ctx, bound[1], depth + 1)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        left, right, operator = test.left, test.comparisons[0].comparator, test.comparisons[0].operator
        if isinstance(right, cst.Call) and ctx.qualname(right.func) == "torch.device" and len(right.args) == 1:
            right = right.args[0].value  # `torch.device("cpu")`: the bare type it names
        if isinstance(operator, cst.Equal) and (dotted_name(left) or "").endswith(".device"):
            return string_value(right) in _OTHER_DEVICES  # `x.device == torch.device("cpu")`, `x.device == "cpu"`
        if not (isinstance(left, cst.Attribute) and left.attr.value == "type"
                and (dotted_name(left.value) or "").endswith("device")):
            return False
        if isinstance(operator, cst.Equal):
            return string_value(right) in _OTHER_DEVICES
        if isinstance(operator, cst.In) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            names = [string_value(e.value) for e in right.elements]
            return bool(names) and all(name in _OTHER_DEVICES for name in names)
    return False


def _onnxruntime_class(ctx: Context) -> bool:
    """In a class that builds an `onnxruntime.InferenceSession`: the model runs in ONNX Runtime, not in torch."""
    if not any(v.rsplit(".", 1)[-1] == "onnxruntime" or v.startswith("onnxruntime.")
               for v in ctx.names.aliases.values()):
        return False
    return any(isinstance(s, cst.ClassDef) and ctx.memo("onnxruntime-class", s, partial(_builds_session, ctx, s))
               for s in ctx.statements)


def _builds_session(ctx: Context, cls: cst.ClassDef) -> bool:
    return "InferenceSession(" in ctx.source(cls)


def cpu_device(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> bool:
    """`"cpu"`, `torch.device("cpu")`, or a name bound once to one of them."""
    if string_value(node) == "cpu":
        return True
    if isinstance(node, cst.Call) and ctx.qualname(node.func) == "torch.device":
        first = positional(node, 0) or keyword(node, "type")
        return first is not None and string_value(first.value) == "cpu"
    if isinstance(node, cst.Name) and ctx.functions and node.value in ctx.memo(
            "parameter-names", ctx.functions[-1], lambda: {p.name.value for p in parameters(ctx.functions[-1])}):
        return False  # `device="cpu"` in a signature: the default of a device each caller may choose
    bound = ctx.constant(node) if depth < 2 else None
    return bound is not None and cpu_device(ctx, bound[1], depth + 1)


def _device_arg(node: cst.Call) -> cst.BaseExpression | None:
    arg = keyword(node, "device")
    return arg.value if arg is not None else None


def host_value(ctx: Context, node: cst.BaseExpression, depth: int = 0, assumed: frozenset[str] = frozenset(), *,
               factories: bool = True) -> bool:
    """`node` certainly lives on the host: a numpy, pandas or scipy value, a tensor copied with `.cpu()` /
    `.to("cpu")`, a torch factory given `device="cpu"` or no device at all (outside the model's construction a
    tensor made without `device=` is a CPU tensor), or a value derived from one of them (methods, indexing,
    arithmetic, torch functions of it), through local names bound once."""
    if depth > 12:
        return False
    if isinstance(node, cst.Call):
        qualname = ctx.qualname(node.func)
        if qualname is not None:
            if qualname.startswith(_HOST_LIBRARIES):
                return True
            if qualname in _FACTORIES:
                device = _device_arg(node)
                if device is not None:
                    return cpu_device(ctx, device)
                return not _in_construction(ctx) and (factories or copies_to_host(ctx))
            if qualname.startswith("torch.") and node.args:
                return host_value(ctx, node.args[0].value, depth + 1, assumed, factories=factories)
            return _of_host_arguments(ctx, node, depth, assumed, factories)
        if isinstance(node.func, cst.Name):
            if node.func.value == "len":
                return True  # a Python int
            return _of_host_arguments(ctx, node, depth, assumed, factories)
        if not isinstance(node.func, cst.Attribute):
            return False
        name = node.func.attr.value
        if name in HOST_RESULTS or name in _METADATA:
            return True
        if name in _MOVES:
            target = keyword(node, "device") or positional(node, 0)
            if name == "to" and target is not None and cpu_device(ctx, target.value):
                return True
            if name != "to" or target is None or not _is_dtype(ctx, target.value):
                return False
        return host_value(ctx, node.func.value, depth + 1, assumed, factories=factories)
    if isinstance(node, cst.Attribute) and node.attr.value in ("shape", "ndim", "batch_sizes"):
        return True  # shape metadata is held on the host; a PackedSequence's `batch_sizes` is a CPU tensor (torch)
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return host_attribute(ctx, node.attr.value)  # `self.offset = torch.tensor(0)`: no buffer, never moved
    if isinstance(node, (cst.Subscript, cst.Attribute)):
        return host_value(ctx, node.value, depth + 1, assumed, factories=factories)
    if isinstance(node, cst.UnaryOperation):
        return host_value(ctx, node.expression, depth + 1, assumed, factories=factories)
    if isinstance(node, (cst.Tuple, cst.List)):  # `a, b = x.shape[:2], x.shape[2:]`: each part of the whole
        return bool(node.elements) and all(
            literal(e.value) or host_value(ctx, e.value, depth + 1, assumed, factories=factories)
            for e in node.elements)
    if isinstance(node, (cst.BinaryOperation, cst.Comparison)):  # `a * b`, `iou >= threshold`
        operands = ((node.left, node.right) if isinstance(node, cst.BinaryOperation)
                    else (node.left, *(c.comparator for c in node.comparisons)))
        sides = [s for s in operands if not number(s)]
        return bool(sides) and all(host_value(ctx, s, depth + 1, assumed, factories=factories) for s in sides)
    if isinstance(node, cst.Name):
        if node.value in assumed or marked_host(node.value) or typed_host(ctx, node.value):
            return True  # `losses = losses[ok]`: host if every other binding is; `x_cpu`; `w` of `h, w: int`
        if f"!{node.value}" in assumed:
            return False
        bound = ctx.constant(node)
        if bound is not None:
            return host_value(ctx, bound[1], depth + 1, assumed, factories=factories)
        if (reached := reaching(ctx, node)) is not None:  # `iou = iou.cpu().numpy()` before the use
            host = reached[1]  # an incomplete chain starts from a value not known to be on the host
            for value in reversed(reached[0]):
                mark = node.value if host else f"!{node.value}"
                host = host_value(ctx, value, depth + 1, assumed | {mark}, factories=factories)
            return bool(host)
        if _loop_over_host(ctx, node.value, depth, assumed, factories):
            return True
        values = rebindings(ctx, node.value)
        assumed = assumed | {node.value}
        return bool(values) and all(host_value(ctx, v, depth + 1, assumed, factories=factories) for v in values)
    return False


def _loop_over_host(ctx: Context, name: str, depth: int, assumed: frozenset[str], factories: bool) -> bool:
    """`name` is the target of an enclosing `for` over host values (`for row, mask in zip(ids.cpu(), m.cpu()):`,
    `enumerate` of one): each item is a host value."""
    for statement in ctx.statements:
        if isinstance(statement, cst.For) and name in bound_names(statement.target):
            source = statement.iter
            if isinstance(source, cst.Call) and ctx.qualname(source.func) in ("zip", "enumerate", "reversed"):
                parts = [a.value for a in source.args if a.keyword is None and not a.star]
                return bool(parts) and all(host_value(ctx, p, depth + 1, assumed, factories=factories) for p in parts)
            return host_value(ctx, source, depth + 1, assumed, factories=factories)
    return False


def host_argument(ctx: Context, node: cst.CSTNode) -> bool:
    """`node` is given to numpy, pandas, scipy or scikit-learn (`np.mean(emb[labels == k])`), directly or in
    arithmetic or a list of such arguments: it has to be a host value for that call to work."""
    if not ctx.statements:
        return False
    statement = ctx.statements[-1]
    return id(node) in ctx.memo("host-arguments", statement, lambda: _host_arguments(ctx, statement))


def _host_arguments(ctx: Context, statement: cst.CSTNode) -> frozenset[int]:
    found: set[int] = set()

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is statement  # a nested function's statements have their own

        def visit_Call(self, call: cst.Call) -> None:
            if not (ctx.qualname(call.func) or "").startswith(_HOST_LIBRARIES):
                return
            todo: list[cst.BaseExpression] = [arg.value for arg in call.args]
            while todo:
                value = todo.pop()
                found.add(id(value))
                if isinstance(value, cst.BinaryOperation):
                    todo.extend((value.left, value.right))
                elif isinstance(value, cst.UnaryOperation):
                    todo.append(value.expression)
                elif isinstance(value, (cst.List, cst.Tuple)):
                    todo.extend(e.value for e in value.elements)

    visit(statement, Finder())
    return frozenset(found)


def _of_host_arguments(ctx: Context, node: cst.Call, depth: int, assumed: frozenset[str], factories: bool) -> bool:
    """A function of host values only (`cumsum(counts)`, `to_tensor(x.shape, int, wrap=True)`): it computes on the
    host. Keywords are literals, host values or Python-typed parameters (`mode: str`); none names a device."""
    args = [a.value for a in node.args if a.keyword is None and not a.star]
    if not args or len(args) + sum(1 for a in node.args if a.keyword is not None) != len(node.args):
        return False
    if any(a.keyword is not None and (a.keyword.value == "device" or not (
            literal(a.value) or (isinstance(a.value, cst.Name) and python_value(ctx, a.value.value))
            or host_value(ctx, a.value, depth + 1, assumed, factories=factories))) for a in node.args):
        return False
    return all(literal(a) or host_value(ctx, a, depth + 1, assumed, factories=factories) for a in args)


_BUILTIN_TYPES = frozenset({"int", "float", "bool", "str", "complex"})


def number(node: cst.BaseExpression) -> bool:
    """A number written in the source: `3`, `0.5`, `-100` (`labels != -100`)."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


def literal(node: cst.BaseExpression) -> bool:
    """A number, a string, True / False / None, or a builtin type (`int`): a Python value, never a tensor."""
    if number(node) or isinstance(node, cst.SimpleString):
        return True
    return isinstance(node, cst.Name) and node.value in ("True", "False", "None", *_BUILTIN_TYPES)


def copies_to_host(ctx: Context) -> bool:
    """The current function copies data to the CPU (`.cpu()`, `.to("cpu")`): it works on the host on purpose,
    so a tensor it makes without `device=` stays there."""
    if not ctx.functions:
        return False
    function = ctx.functions[-1]

    def compute() -> bool:
        found = False

        class Finder(cst.CSTVisitor):
            def visit_Call(self, call: cst.Call) -> bool:
                nonlocal found
                if isinstance(call.func, cst.Attribute):
                    name = call.func.attr.value
                    target = positional(call, 0) or keyword(call, "device")
                    found = found or (name == "cpu" and not call.args) or (
                        name == "to" and target is not None and cpu_device(ctx, target.value))
                return not found

        visit(function, Finder())
        return found

    return ctx.memo("copies-to-host", function, compute)


def _is_dtype(ctx: Context, node: cst.BaseExpression) -> bool:
    qualname = ctx.qualname(node) or ""
    return qualname.startswith("torch.") and qualname.rsplit(".", 1)[-1][:3] in ("flo", "dou", "int", "lon", "boo",
                                                                                  "hal", "bfl", "sho", "uin")


def _in_construction(ctx: Context) -> bool:
    """In `__init__` (or a module-level helper it may call): tensors made there become parameters or buffers that
    `model.to(device)` moves, so no `device=` does not make them host values."""
    return any(f.name.value in ("__init__", "reset_parameters", "_init_weights") for f in ctx.functions)


def under_test(ctx: Context, predicate: str, node: cst.CSTNode) -> bool:
    """`node` is in the body of an `if` (statement or expression) whose test calls the tensor method `predicate`
    (`if x.is_complex():`, `torch.complex(a, b) if x.is_complex() else a`)."""
    for index, statement in enumerate(ctx.statements[:-1]):
        if (isinstance(statement, cst.If) and ctx.statements[index + 1] in _body(statement)
                and _calls(statement.test, predicate)):
            return True
    found = False

    class Finder(cst.CSTVisitor):
        def visit_IfExp(self, expr: cst.IfExp) -> bool:
            nonlocal found
            found = found or (_calls(expr.test, predicate) and contains(expr.body, node))
            return not found

    if ctx.statements:
        visit(ctx.statements[-1], Finder())
    return found


def _body(statement: cst.If) -> tuple[cst.CSTNode, ...]:
    body = statement.body
    return tuple(body.body) if isinstance(body, cst.IndentedBlock) else (body,)


def _calls(test: cst.BaseExpression, predicate: str) -> bool:
    if isinstance(test, cst.Call):
        return call_name(test) == predicate or any(_calls(a.value, predicate) for a in test.args)
    if isinstance(test, cst.BooleanOperation):
        return _calls(test.left, predicate) or _calls(test.right, predicate)
    return False


__all__ = ["HOST_FOLDERS", "HOST_RESULTS", "MODULE_CLASSES", "copies_to_host", "cpu_device", "host_code", "host_path",
           "host_value", "literal", "number", "under_test"]
