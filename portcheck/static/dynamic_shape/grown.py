"""A tensor grown every iteration of a loop that feeds it back to the model (PC213): an autoregressive decode loop
that appends each new token with `torch.cat`, so the model sees a new input shape at every step."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import EVERYWHERE, Rule, rule
from portcheck.static.check import Context, check
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
    )
    VALID = (
        "import torch\nfor batch in loader:\n    preds = torch.cat([preds, model(batch)])",
        "import torch\nfor layer in self.layers:\n    x = torch.cat([x, layer(x)], 1)",
        "import torch\nfor t in steps:\n    x = torch.cat([x, cond], 1)\n    x = unet(x, t)",
        "import torch\nids = torch.cat([ids, extra])\nout = model(ids)",
        "import torch\nfor _ in range(8):\n    out = model(ids)\n    ids = torch.cat([ids.cpu(), out.cpu()])",
    )


_CONCAT = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.hstack", "torch.column_stack"})


def _grown_name(ctx: Context, statement: cst.CSTNode) -> tuple[str, cst.Call] | None:
    """`x` and the call for `x = torch.cat([x, y], ...)`."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target, value = assign.targets[0].target, assign.value
    if not isinstance(target, cst.Name) or not isinstance(value, cst.Call) or not value.args:
        return None
    if ctx.qualname(value.func) not in _CONCAT:
        return None
    parts = value.args[0].value
    if not isinstance(parts, (cst.List, cst.Tuple)) or len(parts.elements) < 2:
        return None
    if not any(isinstance(e.value, cst.Name) and e.value.value == target.value for e in parts.elements):
        return None
    return target.value, value


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
    varying = {n.value for n in _target_names(loop.target)} if isinstance(loop, cst.For) else set()

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal found
            if found is not None or ctx.qualname(call.func) is not None:
                return found is None
            if isinstance(call.func, cst.Name) and (call.func.value in _BUILTINS or call.func.value in varying):
                return True
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


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []


_BUILTINS = frozenset({"len", "print", "range", "enumerate", "zip", "list", "tuple", "int", "float", "str",
                       "isinstance", "min", "max", "sum", "any", "all", "sorted", "repr", "getattr", "hasattr",
                       "setattr", "type"})


@check(cst.SimpleStatementLine, rules=(TensorGrownPerStep,), tokens=("cat", "stack"))
def check_grown(node: cst.SimpleStatementLine, ctx: Context) -> None:
    if not ctx.loops:
        return
    grown = _grown_name(ctx, node)
    if grown is None:
        return
    name, call = grown
    loop = ctx.loops[-1]
    if host_value(ctx, call) or _rebound(loop, name, node.body[0]):
        return
    callee = _feeds(ctx, loop, name)
    if callee is not None:
        ctx.report(TensorGrownPerStep, call, name=name, callee=callee)
