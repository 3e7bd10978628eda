"""Control flow on tensor values inside `forward` (PC208): `if mask.any():`, `while (t < n).all()`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import EVERYWHERE, Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.reach import report_compiled
from portcheck.static.dynamic_shape.stop_checks import early_exit
from portcheck.static.host_sync.reads import HostValueRead  # a check's cost is its read (PC701)
from portcheck.static.named_truth import named_truth
from portcheck.static.syntax import call_name, only_raises
from portcheck.static.values import PREDICATES, REDUCTIONS, and_operands, predicate_truth, reads_tensor_values
from portcheck.summaries import ELSEWHERE

if TYPE_CHECKING:
    from portcheck.rules import TracedFinding


@rule
class TensorControlFlow(Rule):
    """## What it does
    Finds `if`, `while` and conditional expressions inside `forward` whose test reads tensor data:
    `if x.sum() > 0`, `if mask.any()`, `while (t < n).all()`, `if ids[0, 0] == bos`, and a comparison with a name
    bound to a tensor (`score = x.softmax(-1).max()`, then `if score > 0.5`). A test that reads the value
    into Python itself (`if t.item() == 0:`) is PC701's: the read is the cost, the branch is then on a Python
    number. So is a check, an `assert` or an `if` whose body only raises (after printing, perhaps): it chooses no
    graph, its other outcome is an error, and what it costs is the read (PC701, info). Tests on shapes, dtypes,
    `None`, flags and configuration (`if x.dim() == 3`, `if self.training`) stay quiet. Reported as info: a test
    that reads the tensor only for float16 (`if h.dtype == torch.float16 and torch.isinf(h).any():`, the fp16
    overflow clamp, which bfloat16 and float32 never reach). On the native stack, a read that
    `if not is_torchdynamo_compiling() and ...` keeps from `torch.compile` stays quiet.

    ## Example
    ```python
    def forward(self, x, mask):
        if mask.any():
            x = x.masked_fill(mask, 0.0)
    ```

    ## Use instead
    ```python
    def forward(self, x, mask):
        x = x.masked_fill(mask, 0.0)  # a no-op where mask is all False
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC208"
    # outside `forward` it already requires the device step; in any `forward` it is the model's
    CONTEXTS = EVERYWHERE - {"host", "setup"}
    passes = (Pass.STATIC, Pass.TRACE)
    INVALID = (
        "class M:\n    def forward(self, x):\n        if x.sum() > 0:\n            return x\n        return -x",
        "class M:\n    def forward(self, x, mask):\n        while mask.any():\n            mask = step(mask)",
        "class M:\n    def forward(self, ids):\n        if ids[0, 0] == 1:\n            return ids",
        "import torch\nclass M:\n    def forward(self, h):\n"
        "        if h.dtype == torch.float16 and torch.isinf(h).any():\n"
        "            h = h.clamp(-9, 9)\n        return h",
    )
    VALID = (
        "class M:\n    def forward(self, x):\n        if x.dim() == 3:\n            return x",
        "import torch\nclass M:\n    def forward(self, m):\n"
        "        if not torch.compiler.is_compiling() and m.any():\n            print('masked')",
        "class M:\n    def forward(self, x, m=None):\n        if m is not None and self.training:\n"
        "            return x",
        "class M:\n    def __init__(self, x):\n        self.x = helper(x)\n"
        "def helper(x):\n    if x.sum() > 0:\n        return x",
        "class M:\n    def forward(self, xs):\n        if max(len(a) for a in xs) > 2:\n            return xs",
        "class M:\n    def forward(self, x, t):\n        if t.item() == 0:\n            return x",
        "import torch\nclass M:\n    def forward(self, x):\n        if torch.any(torch.isnan(x)):\n"
        "            print(x)\n            raise ValueError('nan')",
        "class M:\n    def forward(self, x):\n        assert (x > 0).all()\n        return x",
    )

    @classmethod
    def traced_message(cls, finding: TracedFinding, stack: str) -> str:
        """The trace's witness: torch.export's guard on a data-dependent value, at the user's line."""
        return ("torch.export stopped here: a Python decision depends on a tensor's value "
                f"({finding.reason}); Neuron compiles one static graph, so compute both outcomes and select with "
                "`torch.where`, or move the decision out of forward")


TOKENS = ("forward", *(f"{name}(" for name in sorted(REDUCTIONS)),
          *(f"{name.rsplit('.', 1)[1]}(" for name in sorted(PREDICATES)))

_KEYWORDS = {cst.If: "if", cst.While: "while", cst.Assert: "assert", cst.IfExp: "if"}
_FLOAT16 = frozenset({"torch.float16", "torch.half"})


def _branch_effect(ctx: Context) -> str:
    if ctx.stack == "native":
        return ("`torch.compile` cannot trace a branch on a tensor value: the graph breaks there (an error with "
                "`fullgraph=True`) and the value is read on the host on every call")
    return ("`torch_neuronx.trace` bakes the example's branch into the graph and PyTorch/XLA compiles a graph per "
            "outcome")


def _control_flow_message(ctx: Context, keyword_: str, read: cst.CSTNode, where: str = "inside `forward`") -> str:
    shown = " ".join(ctx.source(read).split())
    return (f"`{keyword_}` on a tensor value (`{shown}`) {where}: {_branch_effect(ctx)}; decide it from "
            "configuration in `__init__`, or compute both sides and select with `torch.where(cond, a, b)`")


def _tensor_element_comparison(node: cst.BaseExpression) -> cst.CSTNode | None:
    """`t[0, 0] == 1`: a comparison against a tensor element (tuple indexing: lists cannot do it)."""
    if not isinstance(node, cst.Comparison):
        return None
    for side in (node.left, *(t.comparator for t in node.comparisons)):
        if isinstance(side, cst.Subscript) and len(side.slice) >= 2 and all(
                isinstance(e.slice, cst.Index) for e in side.slice):
            return side
    return None


def _float16_only(ctx: Context, test: cst.BaseExpression, read: cst.CSTNode) -> str | None:
    """`x.dtype == torch.float16 and torch.isinf(x).any()`: the read happens only for float16 tensors (the
    fp16 overflow clamp); in bfloat16 or float32 the test stops at the dtype check. The dtype test, or None."""
    operands = and_operands(test)
    for operand in operands:
        if reads_tensor_values(ctx, operand) is read:
            return None  # the read comes first
        if (isinstance(operand, cst.Comparison) and len(operand.comparisons) == 1
                and isinstance(operand.comparisons[0].operator, (cst.Equal, cst.Is))
                and isinstance(operand.left, cst.Attribute) and operand.left.attr.value == "dtype"
                and ctx.qualname(operand.comparisons[0].comparator) in _FLOAT16):
            return " ".join(ctx.source(operand).split())
    return None


@check(cst.If, cst.While, cst.Assert, cst.IfExp, rules=(TensorControlFlow, HostValueRead), tokens=TOKENS)
def check_control_flow(node: cst.If | cst.While | cst.Assert | cst.IfExp, ctx: Context) -> None:
    if not ctx.in_forward:
        # elsewhere only in a function the project's call graph puts in the device step (a helper of forward, a
        # loss, a training step); a check that raises is info there, as in `forward`
        from portcheck.static.host_sync.place import read_place  # host_sync reads dynamic_shape's sizes

        found = reads_tensor_values(ctx, node.test) or predicate_truth(ctx, node.test) or \
            named_truth(ctx, node.test) or _compared(ctx, node.test, "helper") or _buffer(ctx, node.test)
        if found is not None and not _explicit(found) and read_place(ctx) == "helper":
            checks = isinstance(node, cst.Assert) or only_raises(node)  # a check: info, as in `forward`
            callee = early_exit(ctx, node)
            if callee is not None:
                report_compiled(ctx, TensorControlFlow, node.test, _stop_message(ctx, found, callee), Severity.INFO,
                                found)
                return
            if not checks:
                ctx.skip.add(id(found))  # the branch is the problem; a check's read stays the host read's (PC701)
            where = "in code the model's `forward` or a training step calls"
            message = _check_message(ctx, _KEYWORDS[type(node)], found, where) if checks else \
                _control_flow_message(ctx, _KEYWORDS[type(node)], found, where)
            value = _receiver(ctx, found) if isinstance(found, cst.Call) else found
            for requires in ("device", ELSEWHERE):  # info where neither a forward nor a step reaches it
                report_compiled(ctx, HostValueRead if checks else TensorControlFlow, node.test, message,
                                Severity.INFO if checks else None, found, value, requires)
        return
    test = node.test
    keyword_ = _KEYWORDS[type(node)]
    read: cst.CSTNode | None = reads_tensor_values(ctx, test) or predicate_truth(ctx, test) or named_truth(ctx, test)
    if read is not None and _explicit(read):
        return  # `if t.item() == 0:`: PC701 reports the read
    if read is not None:
        ctx.skip.add(id(read))
    else:
        read = _tensor_element_comparison(test) or _compared(ctx, test, "forward") or _buffer(ctx, test)
        if read is None:
            return
    shown = " ".join(ctx.source(read).split())
    if isinstance(node, cst.Assert) or only_raises(node):
        report_compiled(ctx, HostValueRead, test, _check_message(ctx, keyword_, read), Severity.INFO, read)
        return
    callee = early_exit(ctx, node)
    if callee is not None:
        report_compiled(ctx, TensorControlFlow, test, _stop_message(ctx, read, callee), Severity.INFO, read)
        return
    fp16 = _float16_only(ctx, test, read)
    if fp16 is not None:
        message = (f"`{keyword_}` on a tensor value (`{shown}`) inside `forward`, reached only for float16 "
                   f"(`{fp16}`): in bfloat16 or float32 the test stops at the dtype check; in float16, "
                   f"{_branch_effect(ctx)}; clamp unconditionally instead")
        report_compiled(ctx, TensorControlFlow, test, message, Severity.INFO, read)
        return
    value = _receiver(ctx, read) if isinstance(read, cst.Call) else read if isinstance(read, cst.Name) else None
    report_compiled(ctx, TensorControlFlow, test, _control_flow_message(ctx, keyword_, read), None, read, value)


def _compared(ctx: Context, test: cst.BaseExpression, place: str) -> cst.BaseExpression | None:
    """A tensor the test compares (`if rand < accept_prob:`, `accept_prob` bound to a tensor method's result)."""
    from portcheck.static.host_sync.tensors import compared_tensor, known_tensors  # host_sync reads sizes here

    return compared_tensor(ctx, test, known_tensors(ctx, place))


def _buffer(ctx: Context, test: cst.BaseExpression) -> cst.Attribute | None:
    """A buffer or parameter of the module the test takes the truth of (`if self.inited:`)."""
    from portcheck.static.host_sync.tensors import buffer_truth  # host_sync reads sizes here

    return buffer_truth(ctx, test)


def _check_message(ctx: Context, keyword_: str, read: cst.CSTNode, where: str = "inside `forward`") -> str:
    shown = " ".join(ctx.source(read).split())
    effect = ("`torch.compile` breaks the graph there" if ctx.stack == "native"
              else "`torch_neuronx.trace` checks only the example")
    return (f"`{keyword_}` on a tensor value (`{shown}`) {where} only guards an error: it reads the tensor on the "
            f"host and {effect}; validate inputs before calling the model, or drop the check")


def _stop_message(ctx: Context, read: cst.CSTNode, callee: str) -> str:
    shown = " ".join(ctx.source(read).split())
    traced = ("" if ctx.stack == "native" else "; where the loop itself is traced as one graph, "
              "`torch_neuronx.trace` fixes the exit at the example's step")
    return (f"`if` on a tensor value (`{shown}`) ends a loop that calls `{callee}` every step: a stop check, one "
            f"host read a step of a loop the host drives around the model, not a branch inside its graph{traced}")


def _explicit(read: cst.CSTNode) -> bool:
    """`t.item()`, `t.tolist()`: the test reads the value into Python itself (a host read, PC701's)."""
    return isinstance(read, cst.Call) and call_name(read) in ("item", "tolist")


def _receiver(ctx: Context, read: cst.Call) -> cst.BaseExpression | None:
    """The tensor a read reads: `mask` of `mask.any()`, `x` of `torch.any(x)`."""
    if not isinstance(read.func, cst.Attribute):
        return None
    if (ctx.qualname(read.func) or "").startswith("torch."):
        return read.args[0].value if read.args and read.args[0].keyword is None else None
    return read.func.value
