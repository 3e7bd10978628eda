"""A loop that hands the model a slice its own counter cuts (PC213): `for step in range(1, n): logits =
model(tokens[:, :step])`, `cur_len += 1` then `model(ids[:, :cur_len])`: every step's input has a new length."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.grown import TensorGrownPerStep, callee_of_interest, target_names
from portcheck.static.scope import host_value
from portcheck.static.walk import visit

MESSAGE = ("`{shown}` is cut by the loop's counter `{counter}` and passed to `{callee}`: each step's input has a new "
           "length, so Neuron compiles a new graph per step; pass a buffer of the maximum length with the position "
           "(or a mask), and bucket the lengths")


def _counters(ctx: Context, loop: cst.For | cst.While) -> frozenset[str]:
    """The names a loop steps: its `for` target, and what its body increments (`cur_len += 1`)."""

    def compute() -> frozenset[str]:
        found = {n.value for n in target_names(loop.target)} if isinstance(loop, cst.For) else set()

        class Finder(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return False

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                if isinstance(node.target, cst.Name) and isinstance(node.operator, (cst.AddAssign,
                                                                                     cst.SubtractAssign)):
                    found.add(node.target.value)

        visit(loop.body, Finder())
        return frozenset(found)

    return ctx.memo("loop-counters", loop, compute)


def _mentions(node: cst.BaseExpression | None, names: frozenset[str]) -> str | None:
    """The first of `names` that `node` reads."""
    if node is None:
        return None
    todo: list[cst.CSTNode] = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, cst.Name) and current.value in names:
            return current.value
        todo.extend(current.children)
    return None


def _cut(index: cst.Slice, counters: frozenset[str]) -> str | None:
    """The counter that moves one end of the slice while the other stays (`:step`, `:cur_len + 1`, `step:`);
    a window both ends of which move (`i:i + k`) keeps its length."""
    lower, upper = _mentions(index.lower, counters), _mentions(index.upper, counters)
    if (lower is None) == (upper is None):
        return None
    return lower or upper


@check(cst.Call, rules=(TensorGrownPerStep,), tokens=(":",))
def check_counter_slice(node: cst.Call, ctx: Context) -> None:
    if not ctx.loops:
        return
    loop = ctx.loops[-1]
    counters = _counters(ctx, loop)
    if not counters:
        return
    callee = callee_of_interest(ctx, node, counters)
    if callee is None:
        return
    for arg in node.args:
        value = arg.value
        if not isinstance(value, cst.Subscript) or host_value(ctx, value.value):
            continue
        for element in value.slice:
            if isinstance(element.slice, cst.Slice) and (counter := _cut(element.slice, counters)) is not None:
                shown = " ".join(ctx.source(value).split())
                ctx.report(TensorGrownPerStep, value, MESSAGE.format(shown=shown, counter=counter, callee=callee))
                return
