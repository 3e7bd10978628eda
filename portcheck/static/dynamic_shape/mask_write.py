"""Writes through a boolean mask (PC216): `x[mask] = 0`, `scores[scores != scores] = -inf`."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.mask_index import report_first_mask


@rule
class BooleanMaskWrite(Rule):
    """## What it does
    Finds writes through a boolean mask on a tensor the model computes: `x[mask] = value`, where the mask is what
    PC204 takes for one (a comparison, `~m`, `.bool()`, `torch.isnan`, a name bound to one). The result keeps its
    shape, so it compiles; but the write goes to the mask's True positions, whose count comes from the data:
    eager PyTorch turns the mask into indices first (`index_put` with a boolean index), and PyTorch/XLA computes
    the mask before the graph it belongs to, then scatters through indices of a data-dependent count. A
    same-shape select does the same write with static shapes. Info: it runs, but slower than it needs to.
    Quiet where the mask or the tensor is a host value (numpy, pandas, a CPU tensor), in host-side code, and for
    integer and slice indexing. A read through a mask (`y = x[mask]`, and `x[mask] += 1`, which reads first)
    is PC204's.

    ## Example
    ```python
    scores[scores != scores] = float("-inf")
    x_std[x_std == 0] = 1.0
    ```

    ## Use instead
    ```python
    scores = scores.masked_fill(scores != scores, float("-inf"))
    x_std = torch.where(x_std == 0, torch.ones_like(x_std), x_std)
    ```

    ## Fix safety
    No automatic fix: `masked_fill` broadcasts the mask from the trailing dimensions, indexing from the leading
    ones, so the rewrite depends on shapes the scan does not know.
    """

    code = "PC216"
    message = ("writing through a boolean mask (`{shown}`) goes to the mask's True positions, a count known only "
               "from the data: eager PyTorch turns the mask into indices first, and PyTorch/XLA computes the mask "
               "ahead of the graph; `x.masked_fill(mask, value)` or `torch.where(mask, value, x)` makes the same "
               "write with static shapes")
    INVALID = (
        "x[x == 0] = 1.0",
        "scores[scores != scores] = float('-inf')",
        "import torch\nx[torch.isnan(x)] = 0",
        "keep = ids != pad\nhidden[~keep] = 0.0",
        "out[m > 0], log_det[m > 0] = spline(x)",
        "x[~pad, :] = 0",
        "import torch\nq[torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)] = 0",
    )
    VALID = (
        "y = x[x > 0]",
        "x[idx] = 0",
        "x[:, 0] = 1",
        "x[x > 0] += 1",
        "import numpy as np\na = np.zeros(3)\na[a == 0] = 1",
        "df[df['a'] > 0] = 0",
        "x = x.masked_fill(x == 0, 1.0)",
        "x[idx, :] = 0",
        "import torch\nq[torch.triu(torch.ones(4, 4), 1).long()] = 0",
    )


@check(cst.Assign, cst.AnnAssign, rules=(BooleanMaskWrite,), tokens=("[",))
def check_mask_write(node: cst.Assign | cst.AnnAssign, ctx: Context) -> None:
    targets: list[cst.BaseExpression] = (
        [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target])
    while targets:  # the first masked write of the statement speaks for it: `a[m], b[m] = f(x)` is one
        target = targets.pop(0)
        if isinstance(target, (cst.Tuple, cst.List)):
            targets[:0] = [element.value for element in target.elements]
            continue
        if isinstance(target, cst.StarredElement):
            targets.insert(0, target.value)
            continue
        # `x[~pad, :] = 0`: the mask with whole-axis slices beside it
        if isinstance(target, cst.Subscript) and report_first_mask(ctx, BooleanMaskWrite, target):
            return


__all__ = ["BooleanMaskWrite"]
