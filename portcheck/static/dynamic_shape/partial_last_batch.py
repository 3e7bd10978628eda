"""A loop that hands the model its data in fixed-size batches, `for i in range(0, n, bs): model(x[i:i + bs])`, whose
last batch holds only what is left over (PC214): one input shape more than the others."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.rules import EVERYWHERE, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.grown import callee_of_interest
from portcheck.static.rebindings import rebindings
from portcheck.static.scope import host_value
from portcheck.static.syntax import call_name
from portcheck.static.walk import visit


@rule
class PartialLastBatch(Rule):
    """## What it does
    Finds a loop that steps through data a batch at a time (`for i in range(0, n, bs):`, also `np.arange`) and
    passes the window it cuts (`x[i:i + bs]`, `x[i:min(i + bs, n)]`), directly or through a name, to a model or
    another function of the project; or a loop over chunk numbers (`for i in range(n_chunks):`) that clips its
    window's end (`x[i * bs:min((i + 1) * bs, n)]`, `np.arange(i * bs, min((i + 1) * bs, n))`: the indices of
    one). Unless `n` is a multiple of `bs`, the last window is shorter, so the callee
    meets one more input shape. Quiet where the window is padded in the loop (`F.pad`, `np.pad`), where the data
    is a host value (numpy, a CPU tensor) or a Python list or string (a parameter annotated so, a name bound only
    to lists: what is batched there is records or text, not a tensor), where the step is 1, and where the window
    only goes into Python's own containers (`out.append(...)`), and in a file that names neither torch nor a
    library built on it. Advice (info): what it costs depends on how the
    model runs (a traced model refuses the shorter batch, a compiled one compiles one more graph per remainder)
    and on whether `n` can leave a remainder at all, which the code rarely shows.

    ## Example
    ```python
    for start in range(0, len(chunks), batch_size):
        outputs.append(model(chunks[start:start + batch_size]))
    ```

    ## Use instead
    ```python
    for start in range(0, len(chunks), batch_size):
        batch = chunks[start:start + batch_size]
        missing = batch_size - len(batch)
        if missing:  # pad the last batch to the compiled size, and drop what the padding produced
            batch = torch.cat([batch, batch.new_zeros((missing, *batch.shape[1:]))])
        outputs.append(model(batch)[: batch_size - missing])
    ```

    ## Fix safety
    No automatic fix: the padding and what the model returns for it are the caller's to handle.
    """

    code = "PC214"
    # the loop drives the device: what a data pipeline batches on the host costs nothing
    CONTEXTS = EVERYWHERE - {"host", "setup"}
    message = ("`{shown}` cuts `{step}` items a step, so where the data's length does not divide by it the "
               "loop's last batch holds only what is left over and `{callee}` meets a smaller input shape: a model "
               "traced with `torch_neuronx.trace` takes only the shape it was traced with, and a compiled one "
               "compiles another graph for each remainder; pad the last batch to `{step}` items and drop what the "
               "padding produced")
    INVALID = (
        "import torch\nfor i in range(0, n, bs):\n    out.append(model(x[i:i + bs]))",
        "import numpy as np\nimport torch\nfor c in np.arange(0, num, self.batch_size):\n"
        "    batch = chunks[c : c + self.batch_size]\n    y = self.infer(batch)",
        "import torch\nfor i in range(0, len(x), bs):\n    y = self.model(x[i:min(i + bs, len(x))].to(device))",
        "import torch\nfor i in range(k):\n    y = self.model(x[i * bs:min((i + 1) * bs, n)])",
    )
    VALID = (
        "for i in range(0, n, bs):\n    out.append(x[i:i + bs])",
        "import torch.nn.functional as F\nfor i in range(0, n, bs):\n"
        "    batch = F.pad(x[i:i + bs], (0, 0, 0, bs))\n    y = model(batch)",
        "import numpy as np\nx = np.zeros(10)\nfor i in range(0, 10, 2):\n    y = model(x[i:i + 2])",
        "for i in range(0, n):\n    y = model(x[i:i + 1])",
        "import torch\nfor i in range(n // bs):\n    y = model(x[i * bs:(i + 1) * bs])",
        "for i in range(0, n, bs):\n    y = model(x[i:i + window])",
        "for i in range(0, n, bs):\n    y = model(x[:i + bs])",
        "def f(texts: list[str], bs):\n    for i in range(0, len(texts), bs):\n"
        "        y = self.encode(texts[i:i + bs])",
        "def f(params, bs):\n    rows = [str(p) for p in params]\n    for i in range(0, len(rows), bs):\n"
        "        self.log_batch(rows[i:i + bs])",
    )


_RANGES = frozenset({"numpy.arange", "torch.arange"})


def _step(ctx: Context, loop: cst.For) -> tuple[str, cst.BaseExpression | None] | None:
    """(the loop's counter, its step) for `for i in range(a, n, step)` with a step other than 1; (the counter,
    None) for a loop over chunk numbers, `for i in range(n_batches)`, whose windows its body computes."""
    if not isinstance(loop.target, cst.Name) or not isinstance(loop.iter, cst.Call):
        return None
    func = loop.iter.func
    if not _range(ctx, func):
        return None
    args = loop.iter.args
    if any(a.keyword is not None or a.star for a in args) or not 1 <= len(args) <= 3:
        return None
    step = args[2].value if len(args) == 3 else None
    if step is None or (isinstance(step, cst.Integer) and step.value == "1"):
        return loop.target.value, None
    return loop.target.value, step


def _range(ctx: Context, func: cst.BaseExpression) -> bool:
    return (isinstance(func, cst.Name) and func.value == "range" and "range" not in ctx.names.aliases) \
        or ctx.qualname(func) in _RANGES


def _same(ctx: Context, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    return "".join(ctx.source(a).split()) == "".join(ctx.source(b).split())


def _window(ctx: Context, index: cst.Slice, counter: str, step: cst.BaseExpression | None) -> bool:
    """`counter:counter + step` (either order), or its end clipped: `counter:min(counter + step, n)`; in a loop
    over chunk numbers, bounds its counter computes with the end clipped: `i * bs:min((i + 1) * bs, n)`."""
    return index.step is None and _bounds(ctx, index.lower, index.upper, counter, step)


def _bounds(ctx: Context, lower: cst.BaseExpression | None, upper: cst.BaseExpression | None, counter: str,
            step: cst.BaseExpression | None) -> bool:
    clipped = _min_of(upper)
    if step is None:
        return (lower is not None and _mentions(lower, counter) and clipped is not None and len(clipped.args) == 2
                and any(_mentions(a.value, counter) for a in clipped.args))
    if not (isinstance(lower, cst.Name) and lower.value == counter):
        return False
    if clipped is not None and clipped.args:
        upper = clipped.args[0].value
    if not isinstance(upper, cst.BinaryOperation) or not isinstance(upper.operator, cst.Add):
        return False
    for mine, other in ((upper.left, upper.right), (upper.right, upper.left)):
        if isinstance(mine, cst.Name) and mine.value == counter and _same(ctx, other, step):
            return True
    return False


def _min_of(node: cst.BaseExpression | None) -> cst.Call | None:
    """`node` when it is a `min(...)` call: a window end clipped to the data's length."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "min":
        return node
    return None


def _mentions(node: cst.BaseExpression, name: str) -> bool:
    """`node` reads `name` (`i * bs`, `(i + 1) * bs`)."""
    todo: list[cst.CSTNode] = [node]
    while todo:
        part = todo.pop()
        if isinstance(part, cst.Name) and part.value == name:
            return True
        if isinstance(part, (cst.BinaryOperation, cst.UnaryOperation)):
            todo.extend(part.children)
    return False


def _receiver(node: cst.BaseExpression) -> cst.BaseExpression:
    """What a method chain starts from: `x[i:i + bs]` of `x[i:i + bs].float().to(device)`."""
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value
    return node


def _windowed(ctx: Context, node: cst.BaseExpression, counter: str,
              step: cst.BaseExpression | None) -> cst.Subscript | cst.Call | None:
    """The window `node` is, or the receiver of a method chain on it (`x[i:i + bs].to(device)`); in a loop over
    chunk numbers also the indices of one (`np.arange(i * bs, min((i + 1) * bs, n))`)."""
    if step is None and isinstance(node, cst.Call) and _range(ctx, node.func) and len(node.args) == 2 \
            and _bounds(ctx, node.args[0].value, node.args[1].value, counter, None):
        return node
    node = _receiver(node)
    if isinstance(node, cst.Subscript) and any(
            isinstance(e.slice, cst.Slice) and _window(ctx, e.slice, counter, step) for e in node.slice):
        return node
    return None


# Annotations of Python sequences and strings (`list[str]`, `List[Param]`, `Sequence[str]`, `str`).
_SEQUENCE_ANNOTATION = re.compile(r"^(typing\.)?(list|List|Sequence|MutableSequence|str|tuple|Tuple)\b")
# Calls that make Python lists and strings.
_SEQUENCE_CALLS = frozenset({"list", "sorted", "tuple", "str", "split", "splitlines", "join", "format", "keys",
                             "values", "items"})


def _python_sequence(ctx: Context, node: cst.BaseExpression) -> bool:
    """`node` is a Python list, tuple or string: a parameter annotated so, or a name every binding of which in the
    function is a list, a comprehension, a string or a call that makes one (`list(...)`, `s.split()`)."""
    if not isinstance(node, cst.Name) or not ctx.functions:
        return False
    params = ctx.functions[-1].params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == node.value:
            annotation = param.annotation
            return annotation is not None and bool(_SEQUENCE_ANNOTATION.match(ctx.source(annotation.annotation)))
    bound = ctx.constant(node)
    values = (bound[1],) if bound is not None else rebindings(ctx, node.value)
    return bool(values) and all(
        isinstance(v, (cst.List, cst.ListComp, cst.Tuple, cst.SimpleString, cst.FormattedString,
                       cst.ConcatenatedString))
        or (isinstance(v, cst.Call) and call_name(v) in _SEQUENCE_CALLS) for v in values)


# What Python's own containers and strings do with a value: no model there.
_CONTAINER_METHODS = frozenset({"append", "extend", "insert", "add", "update", "write", "join", "put"})


def _padded(loop: cst.For) -> frozenset[str]:
    """Names the loop pads (`batch = F.pad(batch, ...)`, `np.pad(x[i:i + bs], ...)`): a last batch made full."""
    found: set[str] = set()

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if "pad" in (call_name(call) or "").lower():
                for arg in call.args:
                    todo: list[cst.CSTNode] = [arg.value]
                    while todo:
                        part = todo.pop()
                        if isinstance(part, cst.Name):
                            found.add(part.value)
                        todo.extend(part.children)

    visit(loop.body, Finder())
    return frozenset(found)


def _bound_windows(ctx: Context, loop: cst.For, counter: str,
                   step: cst.BaseExpression | None) -> dict[str, cst.Subscript | cst.Call]:
    """Names the loop body binds to a window: `batch = chunks[c : c + bs]`."""
    found: dict[str, cst.Subscript | cst.Call] = {}

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            window = _windowed(ctx, node.value, counter, step)
            if window is not None and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                found[node.targets[0].target.value] = window

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            window = _windowed(ctx, node.value, counter, step) if node.value is not None else None
            if window is not None and isinstance(node.target, cst.Name):
                found[node.target.value] = window

    visit(loop.body, Finder())
    return found


def _size(window: cst.Subscript | cst.Call, counter: str) -> cst.BaseExpression:
    """The chunk size a window over chunk numbers cuts: the end it clips (`(i + 1) * bs` of `min((i + 1) * bs,
    n)`)."""
    upper: cst.BaseExpression | None = window.args[1].value if isinstance(window, cst.Call) else next(
        (e.slice.upper for e in window.slice if isinstance(e.slice, cst.Slice)), None)
    clipped = _min_of(upper)
    if clipped is not None and clipped.args:
        upper = clipped.args[0].value  # `min((i + 1) * bs, n)`
    if isinstance(upper, cst.BinaryOperation) and isinstance(upper.operator, cst.Multiply):
        return upper.right if isinstance(upper.left, (cst.Name, cst.BinaryOperation)) and _mentions(
            upper.left, counter) else upper.left  # `(i + 1) * bs`: `bs`
    return upper if upper is not None else window


@check(cst.Call, rules=(PartialLastBatch,), tokens=("range",))
def check_partial_last_batch(node: cst.Call, ctx: Context) -> None:
    if not ctx.uses_torch:
        return
    loop = next((s for s in reversed(ctx.loops) if isinstance(s, cst.For)), None)
    facts = ctx.memo("partial-batch-step", loop, lambda: _step(ctx, loop)) if loop is not None else None
    if loop is None or facts is None:
        return
    counter, step = facts
    callee = callee_of_interest(ctx, node, {counter})
    if callee is None or (isinstance(node.func, cst.Attribute) and node.func.attr.value in _CONTAINER_METHODS):
        return
    reported: list[bool] = ctx.memo("partial-batch-reported", loop, list)
    if reported:
        return  # one finding a loop: its last batch is one problem, however many windows it cuts
    named = ctx.memo("partial-batch-names", loop, lambda: _bound_windows(ctx, loop, counter, step))
    padded = ctx.memo("partial-batch-padded", loop, lambda: _padded(loop))
    for arg in node.args:
        value = _receiver(arg.value)  # `batch.to(device)`
        if isinstance(value, cst.Name) and value.value in named and value.value not in padded:
            window: cst.Subscript | cst.Call | None = named[value.value]
        else:
            window = _windowed(ctx, value, counter, step)
        if window is None:
            continue
        if isinstance(window, cst.Subscript) and (host_value(ctx, window.value) or _python_sequence(ctx, window.value)
                                                  or (isinstance(window.value, cst.Name)
                                                      and window.value.value in padded)):
            continue
        ctx.report(PartialLastBatch, window, shown=" ".join(ctx.source(window).split()),
                   step=" ".join(ctx.source(step if step is not None else _size(window, counter)).split()),
                   callee=callee)
        reported.append(True)
        return
