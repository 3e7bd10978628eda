"""One element of an array of sizes used as a size (PC209): `x[b, :lengths[b]]`, `out[i, :n]` with `for i, n in
enumerate(lengths)`, `torch.zeros(counts[i])`, where `lengths` is an array the function receives or computes with
torch (a loop count, `range(counts[i])`, is not read: shape_from_data leaves it out).

Such an array holds a size per batch item: the data, not the model, decides each slice's length, so every distinct
value is another shape (and on a device tensor, reading the element is a host read). What tells an array from a
Python list or a configuration's table is what the function does with it: a tensor's method (`lengths.max()`,
`lengths.to(x.device)`), a tensor's attribute (`.device`, `.dtype`), a torch call that made it, or a tensor
annotation. An attribute of the object (`self.splits[i]`), an array built by numpy from constants and a torch class's
object (`torch.Size(shape)`) are not read."""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context
from portcheck.static.syntax import bound_names, call_name, dotted_name, parameters, root_name
from portcheck.static.values import numpy_rooted
from portcheck.static.walk import visit

# Methods a Python list, tuple or dict lacks: called on a name, they say it is an array (a tensor or numpy's).
_ARRAY_METHODS = frozenset({
    "max", "min", "sum", "amax", "argmax", "argmin", "long", "int", "float", "to", "size", "dim", "numel", "tolist",
    "item", "unsqueeze", "squeeze", "view", "reshape", "masked_fill", "clamp", "cumsum", "flip", "type_as", "detach",
    "new_zeros", "new_ones", "eq", "ne", "gt", "lt", "ge", "le", "expand", "repeat", "cpu", "cuda", "numpy",
})
_ARRAY_ATTRIBUTES = frozenset({"device", "dtype", "shape", "ndim"})
_TENSOR_ANNOTATIONS = ("Tensor", "LongTensor", "IntTensor")
# What a tensor (or a torch.distributions Distribution: `_extended_shape()` is its `torch.Size`) answers with sizes or
# with parts of itself, not with data.
_SHAPE_QUERIES = frozenset({"size", "dim", "numel", "stride", "split", "chunk", "unbind", "_extended_shape",
                            "shape_as_tensor"})


def element_size(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression | None:
    """The element of a per-item array of sizes that `node` reads (`lengths[b]`, the `n` of `for i, n in
    enumerate(lengths)`), through `int(...)` and arithmetic; None where `node` reads none."""
    if depth > 3 or not ctx.functions:
        return None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "int" and node.args:
        return element_size(ctx, node.args[0].value, depth + 1)
    if isinstance(node, cst.BinaryOperation):
        return element_size(ctx, node.left, depth + 1) or element_size(ctx, node.right, depth + 1)
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and all(
            isinstance(e.slice, cst.Index) for e in node.slice):
        return node if _sizes_array(ctx, node.value.value) else None
    if isinstance(node, cst.Name):
        source = _iterated(ctx, node)
        if source is not None and isinstance(source, cst.Name) and _sizes_array(ctx, source.value):
            return node
        bound = ctx.constant(node) if source is None else None  # `n = int(idx[-1]) + 1`, then `torch.zeros(n)`
        if bound is not None:
            return element_size(ctx, bound[1], depth + 1)
    return None


def _iterated(ctx: Context, name: cst.Name) -> cst.BaseExpression | None:
    """What `name` is an item of: the iterable of the enclosing `for` (statement or comprehension) that binds it,
    seen through `enumerate(...)` and `zip(...)` to the one part whose items it takes."""
    loops: list[tuple[cst.BaseAssignTargetExpression, cst.BaseExpression]] = [
        (s.target, s.iter) for s in ctx.statements if isinstance(s, cst.For)]
    for c in ancestors(ctx, name):  # a comprehension's `for` is not among the name's holders: it is the sibling
        if isinstance(c, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            part: cst.CompFor | None = c.for_in
            while part is not None:
                loops.append((part.target, part.iter))
                part = part.inner_for_in
    for target, source in reversed(loops):
        if name.value not in bound_names(target):
            continue
        if isinstance(source, cst.Call) and isinstance(source.func, cst.Name) and source.func.value in (
                "enumerate", "zip"):
            items = [a.value for a in source.args if a.keyword is None and not a.star]
            if source.func.value == "enumerate":
                target_items = target.elements if isinstance(target, cst.Tuple) else []
                return items[0] if items and len(target_items) == 2 and isinstance(
                    target_items[1].value, cst.Name) and target_items[1].value.value == name.value else None
            if isinstance(target, cst.Tuple) and len(target.elements) == len(items):
                for element, item in zip(target.elements, items, strict=True):
                    if isinstance(element.value, cst.Name) and element.value.value == name.value:
                        return item
            return None
        return source if isinstance(target, cst.Name) else None
    return None


def _sizes_array(ctx: Context, name: str) -> bool:
    """`name` is an array the innermost function receives or makes with torch, and uses as one."""
    function = ctx.functions[-1]
    if name == "self":
        return False
    return name in ctx.memo("sizes-arrays", function, lambda: _arrays(ctx, function))


def _arrays(ctx: Context, function: cst.FunctionDef) -> frozenset[str]:
    params = function.params
    received = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    annotated = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                 if p.annotation is not None and (dotted_name(p.annotation.annotation) or "").endswith(
                     _TENSOR_ANNOTATIONS)}
    # `inputs: Dict[str, torch.Tensor]`, `xs: list[Tensor]`: a container annotated as holding tensors
    holders = {p.name.value for p in parameters(function)
               if p.annotation is not None and _holds_tensors(p.annotation.annotation)}
    used: set[str] = set()
    made: set[str] = set()
    taken: set[str] = set()  # `idx_m = inputs["idx_m"]`: a part of what it received, an array if used as one
    numpy: set[str] = set()

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if isinstance(node.value, cst.Name) and node.attr.value in _ARRAY_ATTRIBUTES:
                used.add(node.value.value)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value in (
                    _ARRAY_METHODS):
                used.add(func.value.value)

        def visit_Assign(self, node: cst.Assign) -> None:
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                target = node.targets[0].target.value
                value = node.value
                if numpy_rooted(ctx, value):
                    numpy.add(target)
                elif isinstance(value, cst.Subscript) and root_name(value) in holders:
                    made.add(target)  # `idx_m = inputs[properties.idx_m]` of `inputs: Dict[str, Tensor]`
                elif isinstance(value, cst.Subscript) and root_name(value) in received - {"self"}:
                    taken.add(target)
                elif isinstance(value, cst.Call) and call_name(value) not in _SHAPE_QUERIES and (
                        root_name(value) in received - {"self"} or (
                        _torch_function(ctx.qualname(value.func)) and any(
                        root_name(a.value) in received for a in value.args))):
                    made.add(target)  # `valid = mask.sum(1)`, `lengths = torch.sum(mask, 1)`: of what it received

    visit(function.body, Finder())
    return frozenset((annotated | (used & (received | taken)) | made) - numpy - {"self"})


def _holds_tensors(annotation: cst.BaseExpression) -> bool:
    """`Dict[str, torch.Tensor]`, `list[Tensor]`, `Tuple[Tensor, ...]`, `Mapping[str, Tensor]`, optional or not: a
    container whose values, as its annotation says, are tensors (every value, not one among other types)."""
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):  # `X | None`
        sides = [annotation.left, annotation.right]
        rest = [s for s in sides if not (isinstance(s, cst.Name) and s.value == "None")]
        return len(rest) == 1 and _holds_tensors(rest[0])
    if not isinstance(annotation, cst.Subscript):
        return False
    outer = (dotted_name(annotation.value) or "").rsplit(".", 1)[-1]
    inner = [e.slice.value for e in annotation.slice if isinstance(e.slice, cst.Index)]
    if outer == "Optional" and len(inner) == 1:
        return _holds_tensors(inner[0])
    if outer.lower() not in ("dict", "mapping", "mutablemapping", "list", "sequence", "tuple", "iterable"):
        return False
    values = inner[1:] if outer.lower() in ("dict", "mapping", "mutablemapping") else inner
    values = [v for v in values if not isinstance(v, cst.Ellipsis)]
    return bool(values) and all((dotted_name(v) or "").endswith(_TENSOR_ANNOTATIONS) for v in values)


def _torch_function(qualname: str | None) -> bool:
    """A torch function, which makes a tensor (`torch.sum`), not a class (`torch.Size(shape)`, `torch.device`)."""
    return qualname is not None and qualname.startswith("torch.") and qualname.rsplit(".", 1)[1][:1].islower() and (
        qualname not in ("torch.device", "torch.dtype"))
