"""A test that takes a tensor's truth in the loop that steps an optimizer (PC701): `if not torch.isfinite(grad_norm):`,
`while loss.sum() > limit:`. Python asks the tensor for a bool, which reads its value on the host as `.item()`
does, every step. (Inside `forward` and its helpers the same test chooses a graph: PC208 reports it there.)"""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context, check
from portcheck.static.host_sync.place import read_place
from portcheck.static.host_sync.reads import HostValueRead
from portcheck.static.host_sync.tensors import compared_tensor, known_tensors
from portcheck.static.host_sync.wording import read_message
from portcheck.static.named_truth import named_truth
from portcheck.static.scope import host_value
from portcheck.static.syntax import call_name, only_raises
from portcheck.static.values import PREDICATES, REDUCTIONS, predicate_truth, reads_tensor_values

TOKENS = (*(f"{name}(" for name in sorted(REDUCTIONS - {"item"})),
          *(f"{name.rsplit('.', 1)[1]}(" for name in sorted(PREDICATES)), "backward")
_KEYWORDS = {cst.If: "if", cst.While: "while"}


@check(cst.If, cst.While, rules=(HostValueRead,), tokens=TOKENS)
def check_step_test(node: cst.If | cst.While, ctx: Context) -> None:
    if ctx.in_forward or only_raises(node):
        return
    read = reads_tensor_values(ctx, node.test) or predicate_truth(ctx, node.test) or named_truth(ctx, node.test) \
        or compared_tensor(ctx, node.test, known_tensors(ctx, "step"))
    if read is None or (isinstance(read, cst.Call) and call_name(read) in ("item", "tolist")) or id(read) in ctx.skip:
        return  # `if t.item() > 0:` is the read's own finding
    if read_place(ctx, node.test) != "step" or (not isinstance(read, cst.Call) and host_value(ctx, read)):
        return
    shown = " ".join(ctx.source(read).split())
    message, severity = read_message(
        ctx, f"`{_KEYWORDS[type(node)]}` takes the truth of a tensor (`{shown}`), which reads it on the host,", "step",
        "decide on the device (`torch.where`, `torch.nan_to_num`) or read it in `xm.add_step_closure(...)`",
        "decide on the device (`torch.where`, `torch.nan_to_num`) or check once per logging interval")
    ctx.report(HostValueRead, read, message, severity)


__all__ = ["check_step_test"]
