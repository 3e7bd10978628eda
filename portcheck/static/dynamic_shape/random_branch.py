"""Branches a random draw decides in the model (PC217): LayerDrop (`if self.training and torch.rand(1) < p:
continue`), a layer list that yields a random subset, stochastic skips by `random.random()`."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import EVERYWHERE, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.compile.text import one_line
from portcheck.static.dynamic_shape.reach import report_compiled
from portcheck.static.reaching import reaching
from portcheck.static.scope import host_value
from portcheck.static.syntax import call_name
from portcheck.static.walk import any_call, visit


@rule
class RandomBranch(Rule):
    """## What it does
    Finds `if`, `while` and conditional expressions in a model's `forward` (and the code it calls) whose test is
    decided by a random draw: `torch.rand(...)`, `torch.empty(n).uniform_()`, `np.random.random()`,
    `random.random()`, `torch.bernoulli(...)`, also through a local name bound to one (`probs =
    torch.empty(len(layers)).uniform_()`, then `if probs[i] > p:`). That is LayerDrop and its kin: each draw
    runs a different set of layers. Reported however the draw is made, on the device or on the host: the
    problem is the graph, not a read. A warning where a loop repeats the draw (per layer: the subsets multiply);
    one draw outside a loop is info (at most two graphs, each compiled once, or one graph break). Info on a chip
    that only serves inference (inf2): what it costs is training's (LayerDrop and scheduled sampling run only when
    training).

    ## Example
    ```python
    for layer in self.layers:
        if self.training and torch.rand(1) < self.layerdrop:
            continue
        x = layer(x)
    ```

    ## Use instead
    ```python
    for layer in self.layers:  # every layer in the graph; a per-sample mask drops its update (stochastic depth)
        keep = (torch.rand(x.shape[0], 1, 1, device=x.device) >= self.layerdrop).to(x.dtype)
        x = x + keep * (layer(x) - x)
    ```

    ## Fix safety
    No automatic fix: dropping through a mask computes every layer, which changes the cost of a step.
    """

    code = "PC217"
    CONTEXTS = EVERYWHERE - {"host", "setup"}
    message = ("`{keyword}` on a random draw (`{shown}`) {where}: each outcome runs different code, so training "
               "traces a different graph for every combination drawn; on Neuron each new one compiles anew "
               "(PyTorch/XLA) or breaks the `torch.compile` graph; keep every layer in the graph and drop through a "
               "mask (stochastic depth), or set the drop rate to 0 when training on Neuron")
    INVALID = (
        "import torch\nclass M:\n    def forward(self, x):\n        for layer in self.layers:\n"
        "            if self.training and torch.rand(1) < self.p:\n                continue\n            x = layer(x)\n"
        "        return x",
        "import numpy as np\nclass M:\n    def forward(self, x):\n        for layer in self.layers:\n"
        "            if not self.training or np.random.random() > self.p:\n                x = layer(x)\n"
        "        return x",
        "import torch\nclass M:\n    def forward(self, x):\n        probs = torch.empty(len(self.layers)).uniform_()\n"
        "        for i, layer in enumerate(self.layers):\n            if probs[i] > self.p:\n"
        "                x = layer(x)\n        return x",
        "import numpy as np\nclass M:\n    def forward(self, x):\n        for layer in self.layers:\n"
        "            p = np.random.random() if self.layerdrop > 0 else 1\n"
        "            if not self.training or p > self.layerdrop:\n                x = layer(x)\n        return x",
    )
    VALID = (
        "import torch\nclass M:\n    def forward(self, x):\n        keep = (torch.rand(x.shape[0], 1) >= self.p)\n"
        "        return x * keep",
        "import torch\nclass M:\n    def forward(self, x):\n        if self.training:\n            x = x + 1\n"
        "        return x",
        "import random\ndef augment(img):\n    if random.random() < 0.5:\n        img = img[::-1]\n    return img",
    )


_DRAWS = frozenset({
    "torch.rand", "torch.rand_like", "torch.bernoulli", "numpy.random.random", "numpy.random.rand",
    "numpy.random.uniform", "numpy.random.random_sample", "numpy.random.binomial", "random.random",
    "random.uniform",
})
_DRAW_METHODS = frozenset({"uniform_", "bernoulli_", "random_"})
_KEYWORDS = {cst.If: "if", cst.While: "while", cst.IfExp: "if"}
TOKENS = ("rand", "uniform", "bernoulli")


def _is_draw(ctx: Context, call: cst.Call) -> bool:
    """`torch.rand(1)`, `np.random.random()`, `probs.uniform_()`: a call that draws a random number."""
    return ctx.qualname(call.func) in _DRAWS or (
        isinstance(call.func, cst.Attribute) and call_name(call) in _DRAW_METHODS)


def random_draw(ctx: Context, test: cst.BaseExpression,
                depth: int = 0) -> tuple[cst.BaseExpression, cst.Call] | None:
    """The random draw a test reads, itself or through a local name bound to one (and indexed: `probs[i]`; or
    bound to a conditional expression with a draw on one side, `p = np.random.random() if drop > 0 else 1`): what
    the test shows (the call or the name) and the draw itself."""
    found: list[tuple[cst.BaseExpression, cst.Call]] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> bool:
            if not found and _is_draw(ctx, node):
                found.append((node, node))
            return not found

        def visit_Name(self, node: cst.Name) -> None:
            if found or depth >= 2:
                return
            bound = ctx.constant(node)
            values = [bound[1]] if bound is not None else list((reaching(ctx, node) or ((), False))[0][:1])
            if values and (inner := random_draw(ctx, values[0], depth + 1)) is not None:
                found.append((node, inner[1]))

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    visit(test, Finder())
    return found[0] if found else None


def _on_device(ctx: Context, draw: cst.Call) -> bool:
    """A torch draw made on a device (`torch.rand(1, device=x.device)`); Python's and numpy's are host values."""
    if (ctx.qualname(draw.func) or "").startswith(("numpy.", "random.")):
        return False
    return not host_value(ctx, draw)


def _in_loop(ctx: Context) -> bool:
    """The test runs in a loop of its own function (`for layer in self.layers:`), a test of a `while` included."""
    chain = ctx.statements
    start = max((i for i, s in enumerate(chain) if isinstance(s, cst.FunctionDef)), default=-1)
    return any(isinstance(s, (cst.For, cst.While)) for s in chain[start + 1:])


@check(cst.If, cst.While, cst.IfExp, rules=(RandomBranch,), tokens=TOKENS)
def check_random_branch(node: cst.If | cst.While | cst.IfExp, ctx: Context) -> None:
    if not ctx.functions or not ctx.memo("random-draws", ctx.functions[0],
                                         lambda: any_call(ctx.functions[0], lambda c: _is_draw(ctx, c))):
        return  # one walk of the outermost function instead of following every name of every test
    found = random_draw(ctx, node.test)
    if found is None or _on_device(ctx, found[1]):
        return  # a draw on the device is a tensor value the test reads: PC208's
    shown = one_line(ctx, found[0])
    # what it costs is training's; and a draw a loop repeats (per layer) multiplies the graphs, where one draw
    # outside a loop makes at most two, each compiled once
    looped = _in_loop(ctx)
    severity = Severity.INFO if ctx.inference_only or not looped else None
    where = "inside `forward`" if ctx.in_forward else "in code a model's `forward` calls"
    message = RandomBranch.format(keyword=_KEYWORDS[type(node)], shown=shown, where=where) + (
        "" if looped else " (one draw outside a loop: at most two graphs, each compiled once, or one graph break)")
    # a helper: only where a model's forward reaches it (a data augmentation draws at random as well)
    report_compiled(ctx, RandomBranch, node.test, message, severity, requires="" if ctx.in_forward else "forward")

__all__ = ["RandomBranch", "check_random_branch"]
