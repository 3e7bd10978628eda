"""A tensor grown every iteration of a loop that feeds it back to the model (PC213): an autoregressive decode loop
that appends each new token with `torch.cat`, so the model sees a new input shape at every step."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import EVERYWHERE, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.states import (
    absent,
    optional_parameters,
    root,
    state_parameter,
    stored_state,
    target_names,
    unpacked,
)
from portcheck.static.scope import host_value
from portcheck.static.syntax import binds
from portcheck.static.walk import visit


@rule
class TensorGrownPerStep(Rule):
    """## What it does
    Finds a tensor that a loop rebinds to `torch.cat` of itself and something more (`tokens = torch.cat([tokens,
    next_token], dim=-1)`) while the same loop passes it to a model or another function of the project
    (`logits = model(tokens)`): the input of every step is one token longer. Quiet where what grows is only
    collected (predictions gathered batch after batch and never fed back), is a host value (numpy, a CPU tensor),
    or is concatenated outside a loop.

    The same growth inside the model: a cache a caller passes back (a parameter defaulting to None, `layer_past`,
    `past_key_value`) with this call's keys appended (`key = torch.cat((past_key, key), dim=-2)`), where the keys
    then enter attention (a matrix product, `scaled_dot_product_attention`) or the values grow from the same cache
    too, or a cache kept in a dict the caller hands in (`prev = saved["prev_key"]`, `k = torch.cat([prev, k])`,
    `saved["prev_key"] = k`); and a module attribute grown on every call of `forward` (`self.cache =
    torch.cat([self.cache, x])`). One finding a cache. A skip connection concatenated once (`x = torch.cat([x,
    skip], dim=1)`) is no cache.
    And a loop that hands the model a slice its own counter cuts (`model(tokens[:, :step])`, `model(ids[:,
    :cur_len])` with `cur_len += 1`), in a file that names torch or a library built on it (a socket buffer
    `buf[written:]` is no tensor); a window both ends of which move (`x[i:i + k]`) keeps its length.
    And transformers' own decode loop: `model.generate(..., max_new_tokens=...)` in a file that uses transformers
    (or trl, peft) grows its default dynamic KV cache per token; quiet where the file chooses a fixed-size cache
    (`cache_implementation="static"`, `StaticCache`) or serves through optimum-neuron, NxD Inference or vLLM.

    ## Example
    ```python
    for _ in range(max_new_tokens):
        logits = model(tokens)
        next_token = logits[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=-1)
    ```

    ## Use instead
    ```python
    # a buffer of the maximum length, written in place; the model reads a fixed shape (a static KV cache)
    tokens = torch.full((batch, max_length), pad_id, device=device)
    for step in range(prompt_length, max_length):
        logits = model(tokens, position=step)
        tokens[:, step] = logits[:, step - 1].argmax(-1)
    ```
    For serving, vLLM Neuron and NxD Inference keep the KV cache in fixed blocks and compile one graph per
    length bucket.

    ## Fix safety
    No automatic fix: the loop and the model's cache change together.
    """

    code = "PC213"
    # the loop that grows it drives the device: a decode loop is no part of the graph
    CONTEXTS = EVERYWHERE - {"host", "setup"}
    message = ("`{name}` grows by `torch.cat` every iteration of a loop that passes it to `{callee}`: each step is a "
               "new input shape, so Neuron compiles a new graph per step; keep a buffer of the maximum length (a "
               "static KV cache) written by index, and bucket the lengths")
    INVALID = (
        "import torch\nfor _ in range(8):\n    out = model(ids)\n    ids = torch.cat([ids, out[:, -1:]], dim=1)",
        "import torch as th\nwhile True:\n    y = self.net(x[:, -16:])\n    x = th.cat((x, y.argmax(-1)), -1)",
        "import torch\nclass A:\n    def forward(self, h, past=None):\n        k, v = self.k(h), self.v(h)\n"
        "        if past is not None:\n            k = torch.cat([past[0], k], dim=-2)\n"
        "            v = torch.cat([past[1], v], dim=-2)\n        return (self.q(h) @ k.transpose(-1, -2)) @ v, (k, v)",
        "import torch\nfor step in range(1, 64):\n    logits = model(tokens[:, :step])\n"
        "    tokens[:, step] = logits[:, -1].argmax(-1)",
    )
    VALID = (
        "import torch\nfor batch in loader:\n    preds = torch.cat([preds, model(batch)])",
        "import torch\nfor layer in self.layers:\n    x = torch.cat([x, layer(x)], 1)",
        "import torch\nfor t in steps:\n    x = torch.cat([x, cond], 1)\n    x = unet(x, t)",
        "import torch\nids = torch.cat([ids, extra])\nout = model(ids)",
        "import torch\nfor _ in range(8):\n    out = model(ids)\n    ids = torch.cat([ids.cpu(), out.cpu()])",
        "import torch\nclass Up:\n    def forward(self, x, skip=None):\n        if skip is not None:\n"
        "            x = torch.cat([x, skip], dim=1)\n        return self.conv(x)",
        "import torch\nclass Up:\n    def forward(self, x, skip=None):\n        if skip is not None:\n"
        "            x = torch.cat([skip, x], dim=1)\n        x = self.conv(x)\n        return x",
        "import torch\nclass Up:\n    def forward(self, x, skip=None):\n        if skip is not None:\n"
        "            x = torch.cat([x, skip], dim=1)\n        return x",
        "for i in range(0, n, bs):\n    outs.append(model(x[i:i + bs]))",
    )


_CONCAT = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.hstack", "torch.column_stack"})


def _grown_name(ctx: Context, statement: cst.SimpleStatementLine) -> tuple[str, cst.Call,
                                                                         list[cst.BaseExpression]] | None:
    """`x`, the call and its parts for `x = torch.cat([x, y], ...)`."""
    found = _concatenation(statement, ctx)
    if found is None:
        return None
    target, call, parts = found
    if not isinstance(target, cst.Name) or len(parts) < 2 or not any(
            isinstance(p, cst.Name) and p.value == target.value for p in parts):
        return None
    return target.value, call, parts


def _concatenation(statement: cst.SimpleStatementLine, ctx: Context) -> tuple[cst.BaseExpression, cst.Call,
                                                                               list[cst.BaseExpression]] | None:
    """(target, call, parts) of `target = torch.cat([...], ...)`."""
    if len(statement.body) != 1 or not isinstance(statement.body[0], cst.Assign):
        return None
    assign = statement.body[0]
    value = assign.value
    if len(assign.targets) != 1 or not isinstance(value, cst.Call) or not value.args:
        return None
    parts = value.args[0].value
    if ctx.qualname(value.func) not in _CONCAT or not isinstance(parts, (cst.List, cst.Tuple)):
        return None
    return assign.targets[0].target, value, [e.value for e in parts.elements]


def _rebound(loop: cst.For | cst.While, name: str, grown: cst.CSTNode) -> bool:
    """`name` is bound in the loop other than by the concatenation: the loop's own target (`for ids in batch:`),
    a slice that keeps it at a fixed size (`queue = queue[:k]`), a new value every step (`x = model(x)`)."""
    if isinstance(loop, cst.For) and binds(loop.target, name):
        return True
    found = False

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            found = found or (node is not grown and any(binds(t.target, name) for t in node.targets))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            nonlocal found
            found = found or binds(node.target, name)

    visit(loop.body, Finder())
    return found


def _feeds(ctx: Context, loop: cst.For | cst.While, name: str) -> str | None:
    """The callee (not a torch function, not a builtin, not the loop's own variable: `for layer in layers:
    x = torch.cat([x, layer(x)])` is a dense block of fixed shapes) the loop passes `name` to, or a slice of it."""
    found: str | None = None
    varying = {n.value for n in target_names(loop.target)} if isinstance(loop, cst.For) else set()

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal found
            if found is not None or callee_of_interest(ctx, call, varying) is None:
                return found is None
            for arg in call.args:
                value = arg.value
                while isinstance(value, (cst.Subscript, cst.Attribute)) and not (
                        isinstance(value, cst.Attribute) and value.attr.value not in ("T", "data")):
                    value = value.value
                if isinstance(value, cst.Name) and value.value == name:
                    found = " ".join(ctx.source(call.func).split())
            return found is None

    visit(loop.body, Finder())
    return found


def callee_of_interest(ctx: Context, call: cst.Call, varying: set[str] | frozenset[str]) -> str | None:
    """What a loop may feed its growing input to, as written: a model or a function of the project, not a torch
    function, a builtin, or the loop's own variable (`for layer in layers: layer(x)`, a stack of fixed shapes)."""
    if ctx.qualname(call.func) is not None or (isinstance(call.func, cst.Name) and (
            call.func.value in _BUILTINS or call.func.value in varying)):
        return None
    return " ".join(ctx.source(call.func).split())


_BUILTINS = frozenset({"len", "print", "range", "enumerate", "zip", "list", "tuple", "int", "float", "str",
                       "isinstance", "min", "max", "sum", "any", "all", "sorted", "repr", "getattr", "hasattr",
                       "setattr", "type"})


# What attention does with keys and values: a cache concatenated and then given to one of these is attention's.
_ATTENTION_OPS = frozenset({"torch.matmul", "torch.bmm", "torch.baddbmm", "torch.einsum",
                            "torch.nn.functional.scaled_dot_product_attention"})
_KEPT = ("`{name}` grows by `torch.cat` on every call of `forward`: each call sees one more position than the "
         "last, so Neuron compiles a new graph per call; keep a buffer of the maximum length written at the step's "
         "position (`index_copy_`, scatter), as a static KV cache does")
_STATE = ("`{name}` is the state a caller passes back (`{param}`) with this call's own appended by `torch.cat`: fed "
          "back every decoding step, it is one position longer each token, so Neuron compiles a new graph per "
          "token; keep a static KV cache of the maximum length written at the step's position (`index_copy_`, "
          "scatter), and bucket the prompt lengths, as NxD Inference and vLLM Neuron do")


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


def _grown_state(ctx: Context, statement: cst.SimpleStatementLine) -> tuple[str, str, cst.Call] | None:
    """(name, the state it comes from, the call) for a cache that grows every call of its function: `key =
    torch.cat([past_key, key], dim=-2)` with `past_key` from a parameter defaulting to None, where the keys then
    enter attention or the values grow from the same state too; or `self.cache = torch.cat([self.cache, x])` in
    `forward`."""
    if not ctx.functions:
        return None
    function = ctx.functions[-1]
    found = _concatenation(statement, ctx)
    if found is not None and isinstance(found[0], cst.Attribute) and ctx.in_forward:
        text = ctx.source(found[0])
        if text.startswith("self.") and any(ctx.source(p) == text for p in found[2]):
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


def _an_input(ctx: Context, function: cst.FunctionDef, name: str) -> bool:
    """`name` is an optional input itself, or only ever bound from one and from its own earlier value (`h =
    hidden_states_ctrl`, then `h = torch.cat([h, skip])`, `h = block(h)`): what grows is that input, extended once
    a call (`prompt_embeds = torch.cat([negative_prompt_embeds, prompt_embeds])`), not keys added to a cache."""
    optional = ctx.memo("optional-parameters", function, lambda: optional_parameters(function))
    if name in optional:
        return True
    values = ctx.memo("unpacked", function, lambda: unpacked(function)).get(name, ())
    return bool(values) and all(root(v) in optional or _reads(v, name) for v in values)


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
    (`stored_state`)."""
    grown = _grown_name(ctx, statement)
    if grown is None:
        return None
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


@check(cst.SimpleStatementLine, rules=(TensorGrownPerStep,), tokens=("cat", "stack"))
def check_grown(node: cst.SimpleStatementLine, ctx: Context) -> None:
    if not ctx.loops:
        state = _grown_state(ctx, node)
        if state is None:
            return
        name, source, call = state
        reported = ctx.memo("grown-states", ctx.functions[-1], set)
        if source in reported:
            return  # one finding a cache: its values grow with its keys
        reported.add(source)
        message = (_STATE.format(name=name, param=source) if name != source else
                   _KEPT.format(name=name))
        ctx.report(TensorGrownPerStep, call, message)
        return
    grown = _grown_name(ctx, node)
    if grown is None:
        return
    name, call, _ = grown
    loop = ctx.loops[-1]
    if host_value(ctx, call) or _rebound(loop, name, node.body[0]):
        return
    callee = _feeds(ctx, loop, name)
    if callee is not None:
        ctx.report(TensorGrownPerStep, call, name=name, callee=callee)
