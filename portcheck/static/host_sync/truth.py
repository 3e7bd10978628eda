"""A test that takes a tensor's truth in the loop that steps an optimizer (PC701): `if not torch.isfinite(grad_norm):`,
`while loss.sum() > limit:`. Python asks the tensor for a bool, which reads its value on the host as `.item()`
does, every step. So does the same test in a function the project's call graph puts in a training step and no
forward reaches (Lightning's `training_step`, a trainer's `train_step`: `if torch.isnan(loss):`), where it runs
around the compiled model, not inside it; a test there that only guards an error (`assert`, `if ...: raise`) is
info, the read still made every step. (Inside `forward` and its helpers the same test chooses a graph: PC208
reports it there.)"""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.check import Context, check
from portcheck.static.host_sync.place import read_place
from portcheck.static.host_sync.reads import HostValueRead
from portcheck.static.host_sync.tensors import compared_tensor, known_tensors
from portcheck.static.host_sync.wording import read_message
from portcheck.static.scope import host_value
from portcheck.static.syntax import call_name, only_raises
from portcheck.static.values import PREDICATES, REDUCTIONS, predicate_truth, reads_tensor_values

TOKENS = (*(f"{name}(" for name in sorted(REDUCTIONS - {"item"})),
          *(f"{name.rsplit('.', 1)[1]}(" for name in sorted(PREDICATES)), "backward")
_KEYWORDS = {cst.If: "if", cst.While: "while"}


@check(cst.If, cst.While, cst.Assert, rules=(HostValueRead,), tokens=TOKENS)
def check_step_test(node: cst.If | cst.While | cst.Assert, ctx: Context) -> None:
    if ctx.in_forward:
        return
    checks = isinstance(node, cst.Assert) or only_raises(node)
    place = read_place(ctx, node.test)
    if place not in ("step", "helper") or (place == "step" and checks):
        return
    read = reads_tensor_values(ctx, node.test) or predicate_truth(ctx, node.test) or compared_tensor(
        ctx, node.test, known_tensors(ctx, "step" if place == "step" else "helper"))
    if read is None or (isinstance(read, cst.Call) and call_name(read) in ("item", "tolist")):
        return  # `if t.item() > 0:` is the read's own finding
    if (place == "step" and id(read) in ctx.skip) or (not isinstance(read, cst.Call) and host_value(ctx, read)):
        return
    shown = " ".join(ctx.source(read).split())
    keyword = "assert" if isinstance(node, cst.Assert) else _KEYWORDS[type(node)]
    what = f"`{keyword}` takes the truth of a tensor (`{shown}`), which reads it on the host,"
    fix_xla = "decide on the device (`torch.where`, `torch.nan_to_num`) or read it in `xm.add_step_closure(...)`"
    fix_native = "decide on the device (`torch.where`, `torch.nan_to_num`) or check once per logging interval"
    if place == "step":
        message, severity = read_message(ctx, what, "step", fix_xla, fix_native)
        ctx.report(HostValueRead, read, message, severity)
        return
    # a training step's own function: kept where the call graph finds a step, and no forward, reaching it
    message, severity = read_message(ctx, what + (" to guard an error" if checks else ""), "step-helper", fix_xla,
                                     fix_native)
    ctx.report(HostValueRead, read, message, Severity.INFO if checks else severity, requires="step")


__all__ = ["check_step_test"]
