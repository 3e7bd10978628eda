"""Sizes drawn at random (PC219): multi-scale training and random resizing in the step (`F.interpolate(x,
scale_factor=np.random.uniform(0.5, 1.5))`, `size = random.randrange(320, 640, 32)`), a repeat count a random draw
picks in `forward` (StyleGAN's style-mixing index): every size drawn is a new input shape."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.check import Context
from portcheck.static.dynamic_shape.reach import report_compiled
from portcheck.static.reaching import reaching
from portcheck.static.rebindings import rebindings
from portcheck.static.walk import visit


@rule
class RandomSize(Rule):
    """## What it does
    Finds sizes drawn at random: a size, a scale factor, a repeat count or a slice bound computed from
    `random.randint` / `randrange` / `uniform` / `choice` or numpy's `np.random.*` (directly, or through local names
    and arithmetic: `sz = random.randrange(lo, hi) // stride * stride`, `ns = [math.ceil(x * sz / m) for x in
    shape]`, then `F.interpolate(imgs, size=ns)`). Multi-scale training, random resizing of a batch on the
    device, a style-mixing index that sets how often a latent repeats: each size drawn is a new shape. Quiet in
    the data pipeline (a dataset's random crop runs on the host, and the batch is collated to one size).

    ## Example
    ```python
    scale = np.random.uniform(0.5, 1.5)
    out = F.interpolate(out, scale_factor=scale, mode="bilinear")
    ```

    ## Use instead
    ```python
    scale = random.choice((0.5, 1.0, 1.5))  # a few sizes, each compiled once (or pad to one size)
    out = F.interpolate(out, scale_factor=scale, mode="bilinear")
    ```
    On Neuron, draw from a short fixed list of sizes (each compiles once and is cached), or keep one size.

    ## Fix safety
    No automatic fix.
    """

    code = "PC219"
    message = ("a size drawn at random (`{shown}`, from `{draw}`) gives this call a new shape at every draw; Neuron "
               "compiles a graph per input shape, so every new size is a new compilation; draw from a short fixed "
               "list of sizes (each compiled once) or keep one size")
    INVALID = (
        "import numpy as np\nimport torch.nn.functional as F\nclass M:\n    def forward(self, x):\n"
        "        s = np.random.uniform(0.5, 1.5)\n        return F.interpolate(x, scale_factor=s)",
        "import random\nclass M:\n    def forward(self, x):\n        k = random.randint(1, 4)\n"
        "        return x.repeat(1, k, 1)",
    )
    VALID = (
        "import random\nimport torch.nn.functional as F\nclass M:\n    def forward(self, x):\n"
        "        mode = random.choice(['bilinear', 'nearest'])\n"
        "        return F.interpolate(x, size=(8, 8), mode=mode)",
        "import random\nclass M:\n    def forward(self, x):\n        return x.repeat(1, 2, 1)",
    )


# Python's and numpy's draws: what a size is drawn from (torch's draws are tensors: a size read from one is PC209's).
_DRAWS = frozenset({
    "random.randint", "random.randrange", "random.uniform", "random.random", "random.choice", "random.gauss",
    "random.triangular", "numpy.random.randint", "numpy.random.uniform", "numpy.random.choice",
    "numpy.random.random", "numpy.random.rand", "numpy.random.normal", "numpy.random.random_integers",
})
_DEPTH = 4  # local names followed from the size to its draw


def random_size(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> cst.Call | None:
    """The draw a size expression is computed from, directly or through local names (their bindings that reach
    the use: `scale = np.random.uniform(1, 2)` in one branch, `scale = 1` in another)."""
    if not ctx.memo("names-random", ctx.module, lambda: "random" in ctx.text):
        return None  # a file that never names `random` draws nothing (most files: one search, not a walk per size)
    found: list[cst.Call] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            if not found and ctx.qualname(call.func) in _DRAWS:
                found.append(call)
            return not found

        def visit_Name(self, name: cst.Name) -> None:
            if found or depth >= _DEPTH:
                return
            bound = ctx.constant(name)
            if bound is not None:
                values = [bound[1]]
            elif ctx.scopes and ctx.scopes[-1].rebound(name.value):  # bound in each branch of an `if`
                values = list(rebindings(ctx, name.value))
            else:
                values = list((reaching(ctx, name) or ((), False))[0])
            for value in values[:4]:
                inner = random_size(ctx, value, depth + 1)
                if inner is not None:
                    found.append(inner)
                    return

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            return False  # `self.size`, `x.shape`: not a local name

    visit(node, Finder())
    return found[0] if found else None


def report_random_size(ctx: Context, node: cst.CSTNode, size: cst.BaseExpression) -> bool:
    """PC219 where `size` (an argument of `node` that gives a shape) is drawn at random; whether it reported."""
    draw = random_size(ctx, size)
    if draw is None:
        return False
    shown = " ".join(ctx.source(size).split())
    severity = Severity.INFO if ctx.inference_only else None  # random sizes are training's (augmentation)
    report_compiled(ctx, RandomSize, node, severity=severity, shown=shown if len(shown) <= 60 else f"{shown[:57]}...",
                    draw=" ".join(ctx.source(draw.func).split()))
    return True


__all__ = ["RandomSize", "random_size", "report_random_size"]
