"""Functions that return a boolean mask, read from Python's syntax tree: every `return` gives a comparison, an
inverted value (`~m`), a logical or `isnan`-like result, a `.bool()`, a factory filled with booleans
(`np.full(shape, False)`, `torch.zeros(n, dtype=torch.bool)`), a view or a device copy of one, or a local name
whose last binding before the `return` is one. The call graph reads the role where a file indexes by what such a
function returns (`x[make_non_pad_mask(lengths)]`: summaries.MASK_OF). A function that only hands on another
function's value is not followed."""

from __future__ import annotations

import ast

MASK = "mask"  # every `return` gives a boolean mask (summary role)

_MASK_CALLS = frozenset({
    "isnan", "isinf", "isfinite", "isin", "isclose", "isneginf", "isposinf", "logical_and", "logical_or",
    "logical_not", "logical_xor", "bool", "eq", "ne", "gt", "lt", "ge", "le",
})
# Views, copies and reshapes keep a mask a mask (`torch.from_numpy(m).to(x.device).unsqueeze(1)`).
_KEEPS = frozenset({
    "to", "cuda", "view", "reshape", "unsqueeze", "squeeze", "expand", "expand_as", "transpose", "permute", "t",
    "contiguous", "flatten", "repeat", "detach", "clone", "flip", "roll", "from_numpy", "as_tensor", "tensor",
    "asarray", "array",
})
_CONVERTERS = frozenset({"from_numpy", "as_tensor", "tensor", "asarray", "array"})  # what they convert is an argument
_FACTORIES = frozenset({"full", "zeros", "ones", "empty", "zeros_like", "ones_like", "empty_like", "full_like"})
_COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_DEPTH = 4


def returns_mask(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Every `return` of `function` (nested functions have their own; one at least) gives a boolean mask."""
    bindings: dict[str, list[tuple[int, ast.expr]]] = {}
    returns: list[ast.expr | None] = []
    todo: list[ast.AST] = list(function.body)
    while todo:  # statements only (a binding inside an expression, `(n := ...)`, is not read): one cheap pass
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            returns.append(node.value)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bindings.setdefault(node.targets[0].id, []).append((node.lineno, node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            bindings.setdefault(node.target.id, []).append((node.lineno, node.value))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            for target in _targets(node):  # bound otherwise too: no plain value says what it is
                bindings.setdefault(target, []).append((node.lineno, ast.Constant(None)))
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                todo.extend(block)
    if not returns or any(r is None for r in returns):
        return False
    for values in bindings.values():
        values.sort(key=lambda pair: pair[0])
    return all(_mask(r, bindings, 0, r.lineno) for r in returns if r is not None)


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        targets: list[ast.expr] = list(node.targets)
    elif isinstance(node, ast.AugAssign):
        # `mask |= other`, `mask &= ...` keep a mask; any other augmented assignment does not
        return [] if isinstance(node.op, (ast.BitOr, ast.BitAnd, ast.BitXor)) else [
            node.target.id] if isinstance(node.target, ast.Name) else []
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    else:
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None] \
            if isinstance(node, (ast.With, ast.AsyncWith)) else []
    names = []
    for target in targets:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            names += [e.id for e in ast.walk(target) if isinstance(e, ast.Name)]
    return names


def _mask(node: ast.expr, bindings: dict[str, list[tuple[int, ast.expr]]], depth: int, before: int) -> bool:
    """`node`, read on line `before`, is a mask; a name by the last binding before that line (a rebinding that
    only converts the name's earlier value, `m = torch.from_numpy(m)`, by the one before it)."""
    if depth > _DEPTH:
        return False
    if isinstance(node, ast.Compare):
        return all(isinstance(op, _COMPARISONS) for op in node.ops) and not any(
            isinstance(side, ast.Constant) and (side.value is None or isinstance(side.value, (str, bytes)))
            for side in (node.left, *node.comparators))
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.Invert)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _mask(node.left, bindings, depth + 1, before) or _mask(node.right, bindings, depth + 1, before)
    if isinstance(node, ast.Subscript):  # `mask[:, :n]`, `mask[idx]`: part of a mask
        return _mask(node.value, bindings, depth + 1, before)
    if isinstance(node, ast.Call):
        func = node.func
        name = _called(node)
        if name in _MASK_CALLS:
            return isinstance(func, ast.Attribute)  # `m.bool()`, `torch.isnan(x)`; `bool(x)` is Python's
        if name in _FACTORIES:
            return _boolean_fill(node, name)
        if name in _KEEPS:
            inner = _converted(node)
            return inner is not None and _mask(inner, bindings, depth + 1, before)
        return False
    if isinstance(node, ast.Name):
        earlier = [(line, v) for line, v in bindings.get(node.id, []) if line < before]
        while earlier and _wraps(earlier[-1][1], node.id):
            earlier.pop()
        return bool(earlier) and _mask(earlier[-1][1], bindings, depth + 1, earlier[-1][0])
    return False


def _called(call: ast.Call) -> str:
    """The last part of what is called: `isnan` of `torch.isnan(x)`, `bool` of `m.bool()` and of `bool(x)`."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _converted(call: ast.Call) -> ast.expr | None:
    """What a conversion or view (a `_KEEPS` call) works on: `torch.from_numpy(m)`'s argument, `m.to(device)`'s
    receiver; None for a plain function called with none (`view(m)`)."""
    func = call.func
    if _called(call) in _CONVERTERS and call.args:
        return call.args[0]
    return func.value if isinstance(func, ast.Attribute) else None


def _wraps(value: ast.expr, name: str) -> bool:
    """`mask = torch.from_numpy(mask).to(device)`: a rebinding that only converts the name's earlier value."""
    inner: ast.expr | None = value
    while isinstance(inner, ast.Call):
        if _called(inner) not in _KEEPS:
            return False
        inner = _converted(inner)
    return isinstance(inner, ast.Name) and inner.id == name


def _boolean_fill(node: ast.Call, name: str) -> bool:
    """`np.full(shape, False)`, `torch.zeros(n, dtype=torch.bool)`, `np.ones(n, dtype=bool)`."""
    for keyword in node.keywords:
        if keyword.arg == "dtype":
            value = keyword.value
            text = value.attr if isinstance(value, ast.Attribute) else value.id if isinstance(value, ast.Name) else ""
            return text in ("bool", "bool_", "bool8")
    if name in ("full", "full_like") and len(node.args) >= 2:
        fill = node.args[1]
        return isinstance(fill, ast.Constant) and isinstance(fill.value, bool)
    return False
