"""Ops with a data-dependent output size beyond the named ones (PC210): in source, non-maximum suppression
(`torchvision.ops.nms`, `batched_nms`, `torch.ops.torchvision.nms`), which keeps as many boxes as the scores
allow, and `F.one_hot` without `num_classes`, as wide as the largest label; in a traced graph, any op
torch.export could size only from the data."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import EVERYWHERE, Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.reach import STATIC, host_function, report_compiled
from portcheck.static.syntax import keyword, positional


@rule
class UnbackedSize(Rule):
    """## What it does
    In source: finds non-maximum suppression, `torchvision.ops.nms`, `torchvision.ops.batched_nms` (and
    `torchvision.ops.boxes.*`) and `torch.ops.torchvision.nms`, which return as many box indices as survive
    suppression; in a detection model's post-processing (`postprocess_detections`, run inside `forward`) it is
    info, since the advice there is to keep that step on the CPU. And `torch.nn.functional.one_hot(labels)`
    without `num_classes` (or with -1), whose width is the largest label plus one, read from the data (torch 2.13:
    `torch.export` fails on it with a data-dependent guard, `torch.compile(fullgraph=True)` refuses it). In a
    traced ATen graph: an op whose output
    size torch.export could only express as an unbacked (data-dependent) size, when it is not one of the ops
    with a rule of their own (PC201–PC207).

    ## Example
    ```python
    keep = torchvision.ops.batched_nms(boxes, scores, labels, 0.5)
    ```

    ## Use instead
    Run the suppression on the CPU after the compiled model (the detection head's post-processing), or keep a
    fixed number of boxes (top-k by score, then mask the suppressed ones).

    ## Fix safety
    No automatic fix.
    """

    code = "PC210"
    # NMS on predictions matters where post-processing runs them, after the model
    CONTEXTS = EVERYWHERE - {"host", "setup"}
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`{name}` keeps as many boxes as survive suppression, a number known only from the data; " + STATIC
               + "; run it on the CPU after the compiled model, or keep a fixed top-k and mask")
    INVALID = (
        "import torchvision\nkeep = torchvision.ops.nms(boxes, scores, 0.5)",
        "import torch.nn.functional as F\ntarget = F.one_hot(labels)",
        "import torch\ntarget = torch.nn.functional.one_hot(labels, num_classes=-1)",
        "from torchvision.ops import boxes as box_ops\nkeep = box_ops.batched_nms(b, s, i, 0.5)",
        "import torch\nkeep = torch.ops.torchvision.nms(boxes, scores, 0.5)",
    )
    VALID = ("def nms(boxes):\n    return boxes", "import numpy as np\nkeep = np.argsort(scores)",
             "import torch.nn.functional as F\ntarget = F.one_hot(labels, num_classes=10)",
             "import torch.nn.functional as F\ntarget = F.one_hot(labels, self.num_classes)")


_POSTPROCESS = re.compile(r"_?post_?process\w*")
_NMS = frozenset({"torchvision.ops.nms", "torchvision.ops.batched_nms", "torchvision.ops.boxes.nms",
                  "torchvision.ops.boxes.batched_nms", "torch.ops.torchvision.nms"})


@check(cst.Call, rules=(UnbackedSize,), tokens=("nms",))
def check_nms(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname not in _NMS:
        return
    where = host_function(ctx)
    if where is not None and _POSTPROCESS.fullmatch(where):  # a detection model's post-processing in `forward`
        ctx.report(UnbackedSize, node, UnbackedSize.format(name=qualname) + f" (here in `{where}`: keep this step on "
                   "the CPU, after the compiled backbone and heads)", Severity.INFO)
        return
    first = node.args[0].value if node.args else None
    report_compiled(ctx, UnbackedSize, node, value=first, name=qualname)


_ONE_HOT = frozenset({"torch.nn.functional.one_hot", "torch._C._nn.one_hot"})
_ONE_HOT_WIDTH = ("`{name}` without `num_classes` is as wide as the largest label plus one, a size read from the data "
                  "(torch.export cannot size it, `torch.compile` breaks the graph there); " + STATIC
                  + "; pass `num_classes=` (the model's class count)")


@check(cst.Call, rules=(UnbackedSize,), tokens=("one_hot",))
def check_one_hot(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname not in _ONE_HOT or not node.args:
        return
    width = keyword(node, "num_classes") or positional(node, 1)
    if width is not None and not _minus_one(width.value):
        return  # `num_classes=10`, `self.num_classes`: a width the code chose
    report_compiled(ctx, UnbackedSize, node, _ONE_HOT_WIDTH.format(name=qualname), value=node.args[0].value,
                    name=qualname)


def _minus_one(value: cst.BaseExpression) -> bool:
    """`-1`, the default that asks one_hot to read its width from the data."""
    return (isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus)
            and isinstance(value.expression, cst.Integer) and value.expression.value == "1")
