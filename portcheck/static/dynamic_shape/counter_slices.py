"""A loop that hands the model a slice its own counter cuts (PC213): `for step in range(1, n): logits =
model(tokens[:, :step])`, `cur_len += 1` then `model(ids[:, :cur_len])`: every step's input has a new length."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.grown import TensorGrownPerStep, callee_of_interest
from portcheck.static.dynamic_shape.states import target_names
from portcheck.static.rebindings import rebindings
from portcheck.static.scope import host_value
from portcheck.static.syntax import call_name
from portcheck.static.walk import visit

MESSAGE = ("`{shown}` is cut by the loop's counter `{counter}` and passed to `{callee}`: each step's input has a new "
           "length, so Neuron compiles a new graph per step; pass a buffer of the maximum length with the position "
           "(or a mask), and bucket the lengths")


def _counters(ctx: Context, loop: cst.For | cst.While) -> frozenset[str]:
    """The names a loop steps: the target of `for` over `range(...)`, the index `enumerate` gives, and what its body
    increments (`cur_len += 1`). Not the items of what it iterates (`for f, n in zip(feats, lengths)`: each sample's
    own length, not one that grows)."""

    def compute() -> frozenset[str]:
        found = _stepped(ctx, loop) if isinstance(loop, cst.For) else set()

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


def _stepped(ctx: Context, loop: cst.For) -> set[str]:
    source = loop.iter
    while isinstance(source, cst.Call) and source.args and isinstance(first := source.args[0].value, cst.Call) \
            and _builtin(ctx, first) in ("range", "enumerate"):
        source = first  # `tqdm(range(n))`, `reversed(range(t))`, `tqdm(enumerate(batches))`: the same steps
    name = _builtin(ctx, source) if isinstance(source, cst.Call) else None
    if name == "range" or (isinstance(source, cst.Call) and call_name(source) == "trange"):
        return {n.value for n in target_names(loop.target)}
    if name == "enumerate" and isinstance(loop.target, cst.Tuple) and loop.target.elements:
        return {n.value for n in target_names(loop.target.elements[0].value)}
    return set()


def _builtin(ctx: Context, call: cst.Call) -> str | None:
    """`range` / `enumerate` of `range(n)`, not a function imported under that name."""
    func = call.func
    return func.value if isinstance(func, cst.Name) and func.value not in ctx.names.aliases else None


def _counted(node: cst.BaseExpression | None, counters: frozenset[str]) -> str | None:
    """The counter a slice bound is arithmetic of (`step`, `step + 1`, `cur_len - offset`); not a value looked up
    by it (`lengths[i]`: each sample's own length, not one that grows)."""
    if isinstance(node, cst.Name):
        return node.value if node.value in counters else None
    if isinstance(node, cst.BinaryOperation):
        left, right = _counted(node.left, counters), _counted(node.right, counters)
        sides = (node.left, node.right)
        if all(isinstance(s, (cst.Name, cst.Integer, cst.BinaryOperation)) for s in sides):
            return left or right
    return None


def _moves(node: cst.BaseExpression | None, loop: cst.For | cst.While, ctx: Context) -> bool:
    """A slice bound the loop changes: a name its body binds (`end = min(start + chunk, n)`), or any read of one."""
    if node is None or isinstance(node, (cst.Integer, cst.UnaryOperation)):
        return False
    bound = ctx.memo("loop-bound-names", loop, lambda: _bound_in(loop))
    todo: list[cst.CSTNode] = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, cst.Name) and current.value in bound:
            return True
        todo.extend(current.children)
    return False


def _bound_in(loop: cst.For | cst.While) -> frozenset[str]:
    found = {n.value for n in target_names(loop.target)} if isinstance(loop, cst.For) else set()

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                found.update(n.value for n in target_names(target.target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name):
                found.add(node.target.value)

    visit(loop.body, Finder())
    return frozenset(found)


def _cut(ctx: Context, loop: cst.For | cst.While, index: cst.Slice, counters: frozenset[str]) -> str | None:
    """The counter that moves one end of the slice while the other stays (`:step`, `:cur_len + 1`, `step:`);
    a window both ends of which move (`i:i + k`, `start:end` with `end` rebound each step) keeps its length."""
    lower, upper = _counted(index.lower, counters), _counted(index.upper, counters)
    if lower is not None and upper is None and not _moves(index.upper, loop, ctx):
        return lower
    if upper is not None and lower is None and not _moves(index.lower, loop, ctx):
        return upper
    return None


# What Python's own containers and strings do with a slice: no model there.
_CONTAINER_METHODS = frozenset({"append", "extend", "insert", "join", "add", "update", "write", "format", "index",
                                "count", "startswith", "endswith", "split", "replace", "encode", "decode"})


# What makes a Python list or string, never a tensor: `parts = path.split(".")`, `keys = sorted(d)`, `segs = []`.
_SEQUENCE_BUILTINS = frozenset({"list", "sorted", "tuple", "str", "reversed"})
_SEQUENCE_METHODS = frozenset({"split", "rsplit", "splitlines", "keys", "values", "items", "readlines", "strip",
                               "lower", "upper", "join", "format", "replace"})


def _python_sequence(ctx: Context, value: cst.BaseExpression) -> bool:
    """A local name every binding of which makes a Python list, tuple or string (a literal, a comprehension,
    `list(...)`, `sorted(...)`, `text.split(".")`): sliced on its one axis it holds no tensor."""
    if not isinstance(value, cst.Name):
        return False
    bound = ctx.constant(value)
    values = [bound[1]] if bound is not None else list(rebindings(ctx, value.value))

    def sequence(made: cst.BaseExpression) -> bool:
        if isinstance(made, (cst.List, cst.Tuple, cst.ListComp, cst.SimpleString, cst.FormattedString,
                             cst.ConcatenatedString)):
            return True
        if isinstance(made, cst.Call) and isinstance(made.func, cst.Name):
            return made.func.value in _SEQUENCE_BUILTINS and made.func.value not in ctx.names.aliases
        return isinstance(made, cst.Call) and isinstance(made.func, cst.Attribute) and (
            call_name(made) in _SEQUENCE_METHODS) and ctx.qualname(made.func) is None

    return bool(values) and all(sequence(v) for v in values)


@check(cst.Call, rules=(TensorGrownPerStep,), tokens=(":",))
def check_counter_slice(node: cst.Call, ctx: Context) -> None:
    if not ctx.loops or not ctx.uses_torch:
        return
    loop = ctx.loops[-1]
    counters = _counters(ctx, loop)
    if not counters:
        return
    callee = callee_of_interest(ctx, node, counters)
    if callee is None or (isinstance(node.func, cst.Attribute) and (
            node.func.attr.value in _CONTAINER_METHODS or isinstance(node.func.value, cst.SimpleString))):
        return
    for arg in node.args:
        value = arg.value
        if not isinstance(value, cst.Subscript) or host_value(ctx, value.value) or (
                len(value.slice) == 1 and _python_sequence(ctx, value.value)):
            continue
        for element in value.slice:
            if isinstance(element.slice, cst.Slice) and (
                    counter := _cut(ctx, loop, element.slice, counters)) is not None:
                shown = " ".join(ctx.source(value).split())
                ctx.report(TensorGrownPerStep, value, MESSAGE.format(shown=shown, counter=counter, callee=callee))
                return
