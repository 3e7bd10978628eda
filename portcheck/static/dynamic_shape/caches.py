"""Caches that grow inside the model (PC213): a state a caller passes back or an object keeps between calls,
extended by `torch.cat` with this call's own keys on every call. What grows is one position longer each decoding
step, so Neuron compiles a new graph per token."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.dynamic_shape.states import (
    SAME_VALUES,
    absent,
    optional_parameters,
    state_parameter,
    stored_state,
    unpacked,
)
from portcheck.static.syntax import item_root
from portcheck.static.walk import returns_of, visit

_CONCAT = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.hstack", "torch.column_stack"})


def grown_name(ctx: Context, statement: cst.SimpleStatementLine) -> tuple[str, cst.Call,
                                                                         list[cst.BaseExpression]] | None:
    """`x`, the call and its parts for `x = torch.cat([x, y], ...)`."""
    found = concatenation(statement, ctx)
    if found is None:
        return None
    target, call, parts = found
    if not isinstance(target, cst.Name) or len(parts) < 2 or not any(
            isinstance(p, cst.Name) and p.value == target.value for p in parts):
        return None
    return target.value, call, parts


def concatenation(statement: cst.SimpleStatementLine, ctx: Context) -> tuple[cst.BaseExpression, cst.Call,
                                                                               list[cst.BaseExpression]] | None:
    """(target, call, parts) of `target = torch.cat([...], ...)`, also where the result is only detached or
    reshaped (`torch.cat([...]).detach()`); read once a statement, which several readings ask about."""
    return ctx.memo("concatenation", statement, lambda: _concatenation(statement, ctx))


def _concatenation(statement: cst.SimpleStatementLine, ctx: Context) -> tuple[cst.BaseExpression, cst.Call,
                                                                               list[cst.BaseExpression]] | None:
    if len(statement.body) != 1 or not isinstance(statement.body[0], cst.Assign):
        return None
    assign = statement.body[0]
    value = assign.value
    while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in
           SAME_VALUES and isinstance(value.func.value, cst.Call)):
        value = value.func.value
    if len(assign.targets) != 1 or not isinstance(value, cst.Call) or not value.args:
        return None
    parts = value.args[0].value
    if ctx.qualname(value.func) not in _CONCAT or not isinstance(parts, (cst.List, cst.Tuple)):
        return None
    return assign.targets[0].target, value, [e.value for e in parts.elements]


# What attention does with keys and values: a cache concatenated and then given to one of these is attention's.
_ATTENTION_OPS = frozenset({"torch.matmul", "torch.bmm", "torch.baddbmm", "torch.einsum",
                            "torch.nn.functional.scaled_dot_product_attention"})
KEPT = ("`{name}` grows by `torch.cat` on every call of `{function}`: each call sees one more position than the "
        "last, so Neuron compiles a new graph per call; keep a buffer of the maximum length written at the step's "
        "position (`index_copy_`, scatter), as a static KV cache does")
STATE = ("`{name}` is the state a caller passes back (`{param}`) with this call's own appended by `torch.cat`: fed "
         "back every decoding step, it is one position longer each token, so Neuron compiles a new graph per "
         "token; keep a static KV cache of the maximum length written at the step's position (`index_copy_`, "
         "scatter), and bucket the prompt lengths, as NxD Inference and vLLM Neuron do")
HELD = ("`{name}` is the state the object keeps between calls (`{state}`) with this call's own appended by "
        "`torch.cat`, and is written back: one position longer every decoding step, so Neuron compiles a new graph "
        "per token; keep a static KV cache of the maximum length written at the step's position (`index_copy_`, "
        "scatter), as NxD Inference and vLLM Neuron do")


def _attends(ctx: Context, function: cst.FunctionDef, name: str) -> bool:
    """`name` enters a matrix product or attention in `function`: `q @ k.transpose(-1, -2)`, `torch.matmul(p, v)`,
    `F.scaled_dot_product_attention(q, k, v)`."""
    found = False

    class Finder(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            nonlocal found
            if isinstance(node.operator, cst.MatrixMultiply):
                found = found or name in (_operand_root(node.left), _operand_root(node.right))

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            if ctx.qualname(node.func) in _ATTENTION_OPS:
                found = found or any(_operand_root(a.value) == name for a in node.args)

    visit(function, Finder())
    return found


def _operand_root(node: cst.BaseExpression) -> str | None:
    """`k` of `k.transpose(-1, -2)`, `k[:, :n]`, `k.float()`."""
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def grown_state(ctx: Context, statement: cst.SimpleStatementLine) -> tuple[str, str, cst.Call] | None:
    """(name, the state it comes from, the call) for a cache that grows every call of its function: `key =
    torch.cat([past_key, key], dim=-2)` with `past_key` from a parameter defaulting to None, where the keys then
    enter attention or the values grow from the same state too; or `self.cache = torch.cat([self.cache, x])` in
    `forward`."""
    if not ctx.functions:
        return None
    function = ctx.functions[-1]
    found = concatenation(statement, ctx)
    if found is not None and isinstance(found[0], (cst.Attribute, cst.Subscript)):
        text = ctx.source(found[0])
        if any(ctx.source(p) == text for p in found[2]) and _kept_between_calls(ctx, function, found[0]) and (
                ctx.in_forward or handed_out(ctx, function, text)):
            return text, text, found[1]
        return None
    grown = _growth(ctx, function, statement)
    if grown is None:
        return None
    name, state, call = grown
    if state == name or _an_input(ctx, function, name):
        return None  # `embeds = torch.cat((prompts, embeds))`: the input itself extended once, not a state
    if absent(ctx, state):
        return None  # under `assert past is None`: what is concatenated here is no state passed back
    if _attends(ctx, function, name) or sum(
            1 for other in ctx.memo("concatenated-states", function, lambda: _states(ctx, function))
            if other == state) > 1:
        return name, state, call
    return None


def _kept_between_calls(ctx: Context, function: cst.FunctionDef, target: cst.BaseExpression) -> bool:
    """`self.cache`, `self.key_cache[i]`, `cache[module]` of a dict the function does not make (a parameter, or
    a name of the enclosing scope): what the function stores there is still there at its next call."""
    base = item_root(target)
    if base is None:
        return False
    if base == "self":
        return True
    return base not in ctx.memo("unpacked", function, lambda: unpacked(function)) and (
        isinstance(target, cst.Subscript))


def handed_out(ctx: Context, function: cst.FunctionDef, text: str) -> bool:
    """`function` returns the grown value itself (`return self.key_cache[i], self.value_cache[i]`): the caller
    computes with the whole of it, one position longer every call (transformers' dynamic cache, a hook's cache)."""
    for node in returns_of(function):
        value = node.value
        values = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        if any(v is not None and ctx.source(v) == text for v in values):
            return True
    return False


def _an_input(ctx: Context, function: cst.FunctionDef, name: str) -> bool:
    """`name` is an optional input itself, or only ever bound from one and from its own earlier value (`h =
    hidden_states_ctrl`, then `h = torch.cat([h, skip])`, `h = block(h)`): what grows is that input, extended once
    a call (`prompt_embeds = torch.cat([negative_prompt_embeds, prompt_embeds])`), not keys added to a cache."""
    optional = ctx.memo("optional-parameters", function, lambda: optional_parameters(function))
    if name in optional:
        return True
    values = ctx.memo("unpacked", function, lambda: unpacked(function)).get(name, ())
    return bool(values) and all(item_root(v) in optional or _reads(v, name) for v in values)


def _reads(value: cst.BaseExpression, name: str) -> bool:
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            visit(node.value, self)  # `self.k` reads `self`, not a name `k`
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            visit(node.value, self)  # nor does the keyword of `f(k=x)`
            return False

        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            found = found or node.value == name

    visit(value, Finder())
    return found


def _growth(ctx: Context, function: cst.FunctionDef, statement: cst.SimpleStatementLine) -> tuple[
        str, str, cst.Call] | None:
    """(name, state, call) for `name = torch.cat([..., name, ...])` one part of which comes from a parameter of
    `function` defaulting to None (`state_parameter`) or from a dict key the function writes back
    (`stored_state`); or for `name = torch.cat([past, new])` where `past` is read from a dict key the function
    writes `name` back to (audiocraft's streaming state: `self._streaming_state["past_keys"] = nk[:, offset:]`)."""
    grown = grown_name(ctx, statement)
    if grown is None:
        found = concatenation(statement, ctx)
        if found is None:
            return None
        target, call, parts = found  # `nk = torch.cat([pk, k])` with `pk = state["k"]` and `state["k"] = nk`
        if not isinstance(target, cst.Name):
            return None
        state = next((s for p in parts if (s := stored_state(ctx, function, p, target.value, written=True))
                      is not None), None)
        return None if state is None else (target.value, state, call)
    name, call, parts = grown
    state = next((s for p in parts if (s := state_parameter(ctx, function, p) or stored_state(ctx, function, p, name))
                  is not None), None)
    return None if state is None else (name, state, call)


def _states(ctx: Context, function: cst.FunctionDef) -> list[str]:
    """The parameter each self-growing concatenation of `function` draws on (keys and values both do)."""
    found: list[str] = []

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            grown = _growth(ctx, function, node)
            if grown is not None:
                found.append(grown[1])

    visit(function, Finder())
    return found


__all__ = ["HELD", "KEPT", "STATE", "concatenation", "grown_name", "grown_state", "handed_out"]
