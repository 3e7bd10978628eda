"""A tensor grown every iteration of a loop that feeds it back to the model (PC213): an autoregressive decode loop
that appends each new token with `torch.cat`, so the model sees a new input shape at every step."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import EVERYWHERE, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.caches import HELD, KEPT, STATE, grown_name, grown_state, handed_out
from portcheck.static.dynamic_shape.states import SAME_VALUES, target_names
from portcheck.static.scope import host_value
from portcheck.static.syntax import binds, keyword, parameters
from portcheck.static.walk import visit
from portcheck.summaries import FED_BACK


@rule
class TensorGrownPerStep(Rule):
    """## What it does
    Finds a tensor that a loop rebinds to `torch.cat` of itself and something more (`tokens = torch.cat([tokens,
    next_token], dim=-1)`) while the same loop passes it to a model or another function of the project
    (`logits = model(tokens)`), itself or a name the loop binds to it (`x = out[:, -max_len:]`, then `net(x)`):
    the input of every step is one token longer. Likewise a list the loop appends to and makes the model's input
    from (`trg = torch.LongTensor(tokens).unsqueeze(0).to(device)`, `model(src, trg)`, `tokens.append(next_id)`),
    unless the loop also takes items from it (`pop`) or it is a `deque(maxlen=...)`: a window of fixed size. And
    a parameter a function grows and hands back (`tokens = torch.cat([tokens, next_tokens], -1)`, `return tokens,
    completed`) where a loop of the project rebinds its input to the result and feeds it on (`tokens, done =
    self.decoder.update(tokens, logits)`), found through the call graph.
    One finding a loop. Quiet where what grows is only collected
    (predictions gathered batch after batch and never fed back), is a host value (numpy, a CPU tensor), or is
    concatenated outside a loop.

    The same growth inside the model: a cache a caller passes back (a parameter defaulting to None, `layer_past`,
    `past_key_value`) with this call's keys appended (`key = torch.cat((past_key, key), dim=-2)`), where the keys
    then enter attention (a matrix product, `scaled_dot_product_attention`) or the values grow from the same cache
    too, or a cache kept in a dict the caller hands in (`prev = saved["prev_key"]`, `k = torch.cat([prev, k])`,
    `saved["prev_key"] = k`) or in a dict of the object's own (`pk = self._streaming_state["past_keys"]`, `nk =
    torch.cat([pk, k])`, `self._streaming_state["past_keys"] = nk`); and state grown in place on every call
    (`self.cache = torch.cat([self.cache, x])`, `self.key_cache[i] = torch.cat([self.key_cache[i], k])`, `cache[m] =
    torch.cat([cache[m], out])` of a dict the function does not make) in `forward` or where the function returns
    it. One finding a cache. A skip connection concatenated once (`x = torch.cat([x, skip], dim=1)`) is no cache,
    nor is a dict entry extended and never handed back (outputs collected for a metric).
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
        "import torch\nfor i in range(len(self.blocks)):\n    y = self.blocks[i](x)\n    x = torch.cat((x, y), 1)",
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
        "import torch\nparts = path.split('.')\nfor i in range(1, len(parts)):\n    model.get(parts[i - 1:])",
    )


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
    x = torch.cat([x, layer(x)])` is a dense block of fixed shapes) the loop passes `name` to, or a slice of it,
    or a name the loop binds to either (`x = out`, `x = out[:, -max_len:]`, then `model(x)`)."""
    found: str | None = None
    varying = {n.value for n in target_names(loop.target)} if isinstance(loop, cst.For) else set()
    names = _aliases(loop, name)

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
                if isinstance(value, cst.Name) and value.value in names:
                    found = " ".join(ctx.source(call.func).split())
            return found is None

    visit(loop.body, Finder())
    return found


def _aliases(loop: cst.For | cst.While, name: str) -> set[str]:
    """`name` and the names the loop's body binds to it, a slice of it or the same values in another form (`x =
    out`, `x = out[:, -n:]`, `x = out.long()`), and to those in turn: what the loop hands the model as `x` is the
    grown tensor. A name bound to anything else as well (`x = model(x)`) is left out: it is not only the input."""
    bound: dict[str, list[cst.BaseExpression]] = {}

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                for each in target_names(target.target):
                    bound.setdefault(each.value, []).append(
                        node.value if isinstance(target.target, cst.Name) else target.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name):
                bound.setdefault(node.target.value, []).append(node.target)

    visit(loop.body, Finder())
    names, changed = {name}, True
    while changed:
        changed = False
        for other, values in bound.items():
            if other not in names and all(_view_of(value) in names for value in values):
                names.add(other)
                changed = True
    return names


def _view_of(value: cst.BaseExpression) -> str | None:
    """`out` of `out`, `out[:, -n:]`, `out.T`, `out.long()`, `out.to(device)`; None for anything else."""
    while True:
        if isinstance(value, cst.Subscript) or (isinstance(value, cst.Attribute) and value.attr.value in ("T", "data")):
            value = value.value
        elif (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
              and value.func.attr.value in SAME_VALUES):
            value = value.func.value
        else:
            return value.value if isinstance(value, cst.Name) else None


def callee_of_interest(ctx: Context, call: cst.Call, varying: set[str] | frozenset[str]) -> str | None:
    """What a loop may feed its growing input to, as written: a model or a function of the project, not a torch
    function, a builtin, or the loop's own variable (`for layer in layers: layer(x)`, a stack of fixed shapes) or
    an item its counter picks (`for i in range(len(self.blocks)): self.blocks[i](x)`)."""
    if ctx.qualname(call.func) is not None or (isinstance(call.func, cst.Name) and (
            call.func.value in _BUILTINS or call.func.value in varying)):
        return None
    if isinstance(call.func, cst.Subscript) and any(
            isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Name) and e.slice.value.value in varying
            for e in call.func.slice):
        return None  # `self.dense_blocks[i](x)` for `i` the loop's counter: the same stack of fixed shapes, by index
    return " ".join(ctx.source(call.func).split())


_BUILTINS = frozenset({"len", "print", "range", "enumerate", "zip", "list", "tuple", "int", "float", "str",
                       "isinstance", "min", "max", "sum", "any", "all", "sorted", "repr", "getattr", "hasattr",
                       "setattr", "type", "map", "filter", "reversed", "set", "dict", "iter", "next", "round",
                       "abs", "bool", "callable", "vars", "format"})


# What makes a tensor of a Python list's items: the list is the tensor's length.
_BUILDERS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.hstack",
                       "torch.column_stack", "torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.Tensor",
                       "torch.IntTensor", "torch.FloatTensor"})
_LIST = ("`{name}` gets one more item every iteration of a loop that makes the model's input from it (`{built}`) "
         "and passes that to `{callee}`: each step is a new input shape, so Neuron compiles a new graph per step; "
         "keep a buffer of the maximum length (a static KV cache) written by index, and bucket the lengths")


def _list_built(ctx: Context, node: cst.SimpleStatementLine) -> tuple[str, str, cst.Call] | None:
    """(list, name, call) for `name = torch.cat(list, dim=1)`, `name = torch.LongTensor(list).unsqueeze(0).to(d)`:
    a tensor made of a Python list's items."""
    if len(node.body) != 1 or not isinstance(node.body[0], cst.Assign) or len(node.body[0].targets) != 1:
        return None
    target, value = node.body[0].targets[0].target, node.body[0].value
    while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value,
           cst.Call) and value.func.attr.value in (*SAME_VALUES, "unsqueeze", "long", "cuda", "int")):
        value = value.func.value
    if not isinstance(target, cst.Name) or not isinstance(value, cst.Call) or not value.args or (
            ctx.qualname(value.func) not in _BUILDERS) or not isinstance(value.args[0].value, cst.Name):
        return None
    return value.args[0].value.value, target.value, value


def _appended(ctx: Context, loop: cst.For | cst.While, name: str) -> bool:
    """The loop adds to the list `name` (`name.append(x)`, `name.extend(xs)`), never takes from it (`pop`, a
    sliding window), never binds it anew, and the list is no `deque(maxlen=...)`: it grows every iteration."""
    methods: set[str] = set()

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name:
                methods.add(func.attr.value)

    visit(loop.body, Finder())
    if not methods & {"append", "extend"} or methods & {"pop", "popleft", "remove", "clear"}:
        return False
    return not _rebound(loop, name, loop) and not _bounded(ctx, name)


def _bounded(ctx: Context, name: str) -> bool:
    """`name = deque(..., maxlen=k)` in the function: a window of at most k items."""
    bounded = False

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal bounded
            value = node.value
            bounded = bounded or (isinstance(value, cst.Call) and keyword(value, "maxlen") is not None and any(
                binds(t.target, name) for t in node.targets))

    if ctx.functions:
        visit(ctx.functions[-1], Finder())
    return bounded


def _report_list_growth(ctx: Context, node: cst.SimpleStatementLine) -> None:
    built = _list_built(ctx, node)
    if built is None:
        return
    items, name, call = built
    loop = ctx.loops[-1]
    done: set[str] = ctx.memo("grown-loop", loop, set)
    if done or not _appended(ctx, loop, items) or (callee := _feeds(ctx, loop, name)) is None:
        return
    done.add(name)
    ctx.report(TensorGrownPerStep, call, _LIST.format(name=items, built=" ".join(ctx.source(call).split()),
                                                      callee=callee))


_FED_BACK = ("`{name}` grows by `torch.cat` and `{function}` hands it back, and a decode loop of the project rebinds "
             "its input to what `{function}` returns and feeds it on: one token longer every step, so Neuron "
             "compiles a new graph per step; keep a buffer of the maximum length (a static KV cache) written by "
             "index, and bucket the lengths")


def _report_fed_back(ctx: Context, node: cst.SimpleStatementLine) -> None:
    """`tokens = torch.cat([tokens, next_tokens[:, None]], dim=-1)` on a parameter the function then returns
    (`return tokens, completed`): a candidate the call graph keeps where a loop of the project rebinds what it
    passes to the result and hands that to another call (`tokens, done = self.decoder.update(tokens, logits)`,
    summaries.FED_BACK)."""
    grown = grown_name(ctx, node)
    if grown is None or not ctx.functions:
        return
    name, call, _ = grown
    function = ctx.functions[-1]
    if name not in {p.name.value for p in parameters(function)} or not handed_out(ctx, function, name):
        return
    ctx.report(TensorGrownPerStep, call, _FED_BACK.format(name=name, function=function.name.value),
               requires=FED_BACK)


@check(cst.SimpleStatementLine, rules=(TensorGrownPerStep,), tokens=("cat", "stack", "Tensor", "tensor"))
def check_grown(node: cst.SimpleStatementLine, ctx: Context) -> None:
    if not ctx.loops:
        state = grown_state(ctx, node)
        if state is None:
            _report_fed_back(ctx, node)
            return
        name, source, call = state
        reported = ctx.memo("grown-states", ctx.functions[-1], set)
        key = source if name != source else "kept"  # `self.keys[i]` and `self.values[i]` are one cache too
        if key in reported:
            return  # one finding a cache: its values grow with its keys
        reported.add(key)
        function = ctx.functions[-1].name.value
        message = (KEPT.format(name=name, function=function) if name == source else
                   HELD.format(name=name, state=source) if source.startswith("self.") else
                   STATE.format(name=name, param=source))
        ctx.report(TensorGrownPerStep, call, message)
        return
    grown = grown_name(ctx, node)
    if grown is None:
        _report_list_growth(ctx, node)
        return
    name, call, _ = grown
    loop = ctx.loops[-1]
    if host_value(ctx, call) or _rebound(loop, name, node.body[0]):
        return
    callee = _feeds(ctx, loop, name)
    done: set[str] = ctx.memo("grown-loop", loop, set)
    if callee is not None and not done:
        done.add(name)  # one finding a loop: what it feeds the model grows together
        ctx.report(TensorGrownPerStep, call, name=name, callee=callee)
