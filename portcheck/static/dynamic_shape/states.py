"""Where the state a function grows comes from (PC213): a parameter defaulting to None that a caller passes back
(`past_key_value`, `cache`), and the local names bound from it."""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import taken_ifs
from portcheck.static.check import Context
from portcheck.static.syntax import blocks, item_root, parameters, small_statements, string_value
from portcheck.static.walk import visit


def target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in target_names(e.value)]
    return []


def optional_parameters(function: cst.FunctionDef) -> frozenset[str]:
    params = function.params
    return frozenset(p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                     if isinstance(p.default, cst.Name) and p.default.value == "None")


def state_parameter(ctx: Context, function: cst.FunctionDef, part: cst.BaseExpression) -> str | None:
    """The parameter defaulting to None a part of a concatenation comes from: itself, an item or attribute of it,
    or a local name bound from one (`past_key, past_value = layer_past`, `ck = cache.k`)."""
    optional = ctx.memo("optional-parameters", function, lambda: optional_parameters(function))
    base = item_root(part)
    if base is None:
        return None
    if base in optional:  # rebinding it later (`past_key_value = (key, value)`) hands the grown state on
        return base
    for value in ctx.memo("unpacked", function, lambda: unpacked(function)).get(base, ()):
        source = item_root(value)
        if source in optional:
            return source
    return None


# Methods that give the same values in another shape or dtype: `prev = saved["prev_key"].view(b * h, -1, d)`.
SAME_VALUES = frozenset({"view", "reshape", "float", "half", "bfloat16", "to", "type_as", "contiguous", "transpose",
                         "permute", "unsqueeze", "squeeze", "flatten", "clone", "detach"})


def stored_state(ctx: Context, function: cst.FunctionDef, part: cst.BaseExpression, grown: str,
                 written: bool = False) -> str | None:
    """The container a part of the concatenation that rebinds `grown` is read from, `saved` of `saved["prev_key"]`
    (directly, in another shape, or through other local names), where `function` also writes that key back
    (`saved["prev_key"] = k`) and the container comes from the caller (a parameter, or what a call makes of one:
    `saved = self._get_input_buffer(incremental_state)`): a cache kept between calls (fairseq's
    `incremental_state`). `grown` itself is not followed: its bindings elsewhere in the function say nothing of
    what it holds where it is concatenated (`k = torch.cat([k, bias_k])` before the cache is read). With
    `written`, the function must write that key from `grown` itself (`state["k"] = grown[:, offset:]`)."""
    writes = ctx.memo("stored-keys", function, lambda: stored_keys(function))
    if not writes:
        return None
    bindings = ctx.memo("unpacked", function, lambda: unpacked(function))
    todo, seen = [part], 0
    while todo and seen < 12:  # names bound from one another, a cycle too, end here
        node, seen = todo.pop(), seen + 1
        while (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
               and node.func.attr.value in SAME_VALUES):
            node = node.func.value
        if isinstance(node, cst.Name):
            if node.value != grown:
                todo.extend(bindings.get(node.value, ()))
        elif (key := _string_key(node)) is not None and key in writes and _handed_in(function, key[0], bindings) and (
                not written or any(item_root(v) == grown for v in writes[key])):
            return key[0]
    return None


def _handed_in(function: cst.FunctionDef, name: str, bindings: dict[str, list[cst.BaseExpression]]) -> bool:
    """`name` is a parameter of `function`, an attribute of `self` (a dict the module keeps between calls: a
    streaming state), or every binding of it (None aside) is a call given one: a dict the caller keeps between
    calls, not one the function builds (`kwargs = {k: v for ...}`)."""
    names = {p.name.value for p in parameters(function)} - {"self"}
    if name in names or name.startswith("self."):
        return True
    values = [v for v in bindings.get(name, ()) if not (isinstance(v, cst.Name) and v.value == "None")]
    return bool(values) and all(isinstance(v, cst.Call) and any(item_root(a.value) in names for a in v.args)
                                for v in values)


def _string_key(node: cst.BaseExpression) -> tuple[str, str] | None:
    """(`saved`, `"prev_key"`) of `saved["prev_key"]`; (`self.state`, `"k"`) of `self.state["k"]`."""
    if not (isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)):
        return None
    holder = node.value
    if isinstance(holder, cst.Name):
        container = holder.value
    elif (isinstance(holder, cst.Attribute) and isinstance(holder.value, cst.Name) and holder.value.value == "self"):
        container = f"self.{holder.attr.value}"
    else:
        return None
    key = string_value(node.slice[0].slice.value)
    return None if key is None else (container, key)


def stored_keys(function: cst.FunctionDef) -> dict[tuple[str, str], list[cst.BaseExpression]]:
    """The (dict, key) pairs `function` assigns, with the values: `saved["prev_key"] = k`."""
    found: dict[tuple[str, str], list[cst.BaseExpression]] = {}

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if (key := _string_key(t.target)) is not None:
                    found.setdefault(key, []).append(node.value)

    visit(function, Finder())
    return found


def unpacked(function: cst.FunctionDef) -> dict[str, list[cst.BaseExpression]]:
    """Each local name and the values it is bound from, a tuple target's names included (`k, v = past`)."""
    found: dict[str, list[cst.BaseExpression]] = {}

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                for name in target_names(target.target):
                    found.setdefault(name.value, []).append(node.value)

    visit(function, Finder())
    return found


def absent(ctx: Context, state: str) -> bool:
    """The current statement runs only where the parameter `state` is None: in the body of `if state is None:` (or
    of an `and` holding that test), or after `assert state is None` in its own block or an enclosing one. What is
    concatenated there is not the state a caller passed back (fairseq's `assert static_k is None` before
    `k = torch.cat([k, bias_k.repeat(1, bsz, 1)])`, a learned bias appended once)."""
    if any(_tests_none(holder.test, state) for holder, _ in taken_ifs(ctx)):
        return True
    for index, holder in enumerate(ctx.statements[:-1]):
        inner = ctx.statements[index + 1]
        for block in blocks(holder):
            if inner in block:
                before = block[:block.index(inner)]
                if any(isinstance(small, cst.Assert) and _tests_none(small.test, state)
                       for small in small_statements(before)):
                    return True
    return False


def _tests_none(test: cst.BaseExpression, state: str) -> bool:
    """`state is None`, alone or as an operand of `and`."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _tests_none(test.left, state) or _tests_none(test.right, state)
    return (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == state
            and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Is)
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None")


__all__ = ["SAME_VALUES", "absent", "optional_parameters", "state_parameter", "stored_keys", "stored_state",
           "target_names", "unpacked"]
