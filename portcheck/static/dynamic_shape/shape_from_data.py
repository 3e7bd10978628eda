"""Sizes read out of tensor data (PC209): `torch.zeros(int(t.max()))`, `range(t.item())`, `x.view(*t.tolist())`."""

from __future__ import annotations

import builtins

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context
from portcheck.static.dynamic_shape.elements import element_size
from portcheck.static.dynamic_shape.random_size import report_random_size
from portcheck.static.dynamic_shape.reach import STATIC, report_compiled
from portcheck.static.scope import host_value, literal
from portcheck.static.syntax import call_name, dotted_name, keyword
from portcheck.static.values import contains, numpy_rooted, reads_tensor_values
from portcheck.static.walk import visit
from portcheck.summaries import reads_of


@rule
class ShapeFromData(Rule):
    """## What it does
    Finds sizes read out of tensor data: `torch.zeros(int(t.max()))`, `torch.arange(lengths.max())`,
    `range(t.item())`, `x.view(*t.tolist())`, `torch.split(x, sizes.tolist())`, also through a local name
    bound once (`n = t.max().item(); torch.zeros(n)`), and sizes read one item at a time out of an array the
    function receives (`x[b, :lengths[b]]`, `t[:n] for t, n in zip(x, lengths)`, where `lengths` is used as a
    tensor: `lengths.max()`, `lengths.to(...)`, a `Tensor` annotation).

    ## Example
    ```python
    max_len = int(lengths.max())
    positions = torch.arange(max_len)
    ```

    ## Use instead
    ```python
    positions = torch.arange(config.max_position_embeddings)  # a fixed maximum, then mask
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC209"
    message = ("a size taken from tensor data (`{shown}`) makes the shape depend on the values; " + STATIC
               + "; use a fixed maximum size and mask or pad, or bucket the inputs")
    INVALID = (
        "import torch\nz = torch.zeros(int(t.max()))",
        "for i in range(n.item()):\n    pass",
        "y = x.view(*shape.tolist())",
        "import torch\nn = lengths.max().item()\np = torch.arange(n)",
        "import torch\nparts = torch.split(x, sizes.tolist())",
        "import torch\ndef sizes(t):\n    return t.tolist()\nparts = torch.split(x, sizes(lengths))",
        "def pool(x, lengths):\n    lengths = lengths.to(x.device)\n    return [x[i, :lengths[i]] for i in range(4)]",
        "import torch\ndef f(inputs):\n    idx = inputs['idx_m']\n    n = int(idx[-1]) + 1\n"
        "    return torch.zeros(n, 3, device=idx.device)",
        "def f(y, idx):\n    n = int(idx.max()) + 1\n    return scatter_add(y, idx, dim_size=n)",
        "from typing import Dict\nimport torch\ndef f(y, inputs: Dict[str, torch.Tensor]):\n"
        "    idx = inputs['idx_m']\n    n = int(idx[-1]) + 1\n    return scatter_add(y, idx, dim_size=n)",
    )
    VALID = (
        "import torch\nz = torch.zeros(x.size(0), x.shape[1])",
        "import numpy as np\nn = np.where(d <= 3)[0].max()\nfor i in range(n):\n    pass",
        "for i in range(len(xs)):\n    pass",
        "y = x.view(b, -1, h)",
        "import torch, math\nz = torch.zeros(int(math.sqrt(n)))",
        "for i in range(max(a, b)):\n    pass",
        "import torch\ndef sizes(t):\n    return t.tolist()\nparts = torch.split(x, sizes(lengths.cpu()))",
        "def pool(x, lengths):\n    return [x[i, :lengths[i]] for i in range(4)]",  # nothing says it is an array
        "import torch\ndef f(config):\n    sizes = config['sizes']\n    n = int(sizes[-1]) + 1\n"
        "    return torch.zeros(n)",
        "def f(y, idx, n_graphs):\n    return scatter_add(y, idx, dim_size=n_graphs)",
        "from typing import Dict, Union\nimport torch\ndef f(y, inputs: Dict[str, Union[torch.Tensor, int]]):\n"
        "    idx = inputs['idx_m']\n    n = int(idx[-1]) + 1\n    return scatter_add(y, idx, dim_size=n)",
    )


SIZE_FACTORIES = frozenset({
    "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.rand", "torch.randn", "torch.randint",
    "torch.arange", "torch.linspace", "torch.eye", "torch.split",
})
SIZE_METHODS = frozenset({
    "view", "reshape", "expand", "repeat", "new_zeros", "new_ones", "new_empty", "new_full", "split", "narrow",
    "split_with_sizes",
})
# Calls whose later arguments are values, not sizes: `torch.full(shape, t.max().item())` has a static shape.
_FILLS = frozenset({"torch.full", "new_full"})


def data_read(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> cst.Call | None:
    """The call that turns tensor data into a Python size in `node`: `t.item()`, `t.tolist()`, `int(t.max())`,
    `lengths.max()`; through a local name bound once (`n = t.max().item()`)."""
    if isinstance(node, cst.Name):
        bound = ctx.constant(node)
        return data_read(ctx, bound[1], depth + 1) if bound and depth < 3 else None
    if isinstance(node, (cst.Tuple, cst.List)):  # `size=(n, maxcnt)`: each element is a size
        return next((r for r in (data_read(ctx, e.value, depth) for e in node.elements) if r is not None), None)
    found: cst.Call | None = None

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal found
            func = call.func
            if (found is None and isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist")
                    and not call.args and not numpy_rooted(ctx, func.value) and not host_value(ctx, func.value)):
                found = call
            return found is None

    visit(node, Finder())
    if found is not None:
        return found
    reduction = reads_tensor_values(ctx, node)
    if reduction is not None and call_name(reduction) in ("max", "sum", "amax", "count_nonzero", "prod"):
        receiver = reduction.func.value if isinstance(reduction.func, cst.Attribute) else None
        if ctx.qualname(reduction.func) is not None:  # `torch.prod(x)`: what it reads is its argument
            receiver = reduction.args[0].value if reduction.args else None
        return None if receiver is not None and host_value(ctx, receiver) else reduction
    return _operand_read(ctx, node, depth) if depth < 2 else None


def _operand_read(ctx: Context, node: cst.BaseExpression, depth: int) -> cst.Call | None:
    """A read through a local name the arithmetic uses (`width - counts[i]` with `counts = (m != 0).sum(dim=1)`):
    the name's own binding reads the data."""
    todo = [node]
    while todo:
        part = todo.pop()
        if isinstance(part, cst.BinaryOperation):
            todo.extend((part.right, part.left))
        elif isinstance(part, cst.Subscript):
            todo.append(part.value)
        elif isinstance(part, cst.UnaryOperation):
            todo.append(part.expression)
        elif isinstance(part, cst.Name) and part is not node and (read := data_read(ctx, part, depth + 1)):
            return read
    return None


_NOT_HELPERS = ("torch.", "numpy.", "math.", "builtins.", "random.")


def project_helper(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> str | None:
    """The dotted name (`sizes`, `utils.sizes`, `self.lengths`) of a project function that computes `node`,
    directly or through a local name bound once, given a value not known to be on the host: what the call graph
    may find to be a helper that reads tensor data (every `return` of it does: summary.READS)."""
    if isinstance(node, cst.Name) and depth < 2:
        bound = ctx.constant(node)
        return project_helper(ctx, bound[1], depth + 1) if bound is not None else None
    if not isinstance(node, cst.Call) or not node.args:
        return None
    name = dotted_name(node.func)
    qualname = ctx.qualname(node.func)
    if name is None or (qualname or "").startswith(_NOT_HELPERS) or name in _BUILTINS:
        return None
    if isinstance(node.func, cst.Attribute) and qualname is None and not name.startswith("self."):
        return None  # a method of a local value (`x.size(0)`): no project function the graph could name
    if all(host_value(ctx, a.value) or literal(a.value) for a in node.args):
        return None
    return name


_BUILTINS = frozenset(dir(builtins))  # `len(x)`, `round(n)`: Python's own, no project function


def is_self_method(node: cst.Call) -> bool:
    """`self.expand(...)`: the object's own method, not a tensor's `expand`."""
    return isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) and (
        node.func.value.value == "self")


def report_shape_from_data(ctx: Context, node: cst.Call) -> None:
    """PC209 for a call taking sizes (`torch.zeros`, `range`, `x.view`, ...); run by the family's one call check
    (data_sized.check_call) on the calls none of its other rules is about."""
    qualname = ctx.qualname(node.func)
    name = call_name(node)
    if qualname in SIZE_FACTORIES:
        args = [a for a in node.args if a.keyword is None or a.keyword.value in ("size", "end", "steps",
                                                                                 "split_size_or_sections")]
        if qualname == "torch.split":
            args = args[1:2]
        elif qualname == "torch.randint":  # `randint(low, high, size)`: the bounds are values, the size is last
            positional_args = [a for a in args if a.keyword is None]
            args = [a for a in args if a.keyword is not None] + positional_args[-1:]
    elif qualname == "torch.nn.functional.interpolate":  # `F.interpolate(x, size=(h, w))`, or a scale factor
        args = [a for a in node.args[1:3] if a.keyword is None] + [a for a in node.args if a.keyword is not None
                                                                   and a.keyword.value in ("size", "scale_factor")]
    elif keyword(node, "dim_size") is not None:
        # `scatter_add(src, index, dim_size=n)`: the scatter libraries' (torch_scatter, PyG's `scatter`, a project's
        # own) output size along the reduced axis
        args = [a for a in node.args if a.keyword is not None and a.keyword.value == "dim_size"]
    elif (isinstance(node.func, cst.Name) and name == "range" and "range" not in ctx.names.aliases) or (
            isinstance(node.func, cst.Attribute) and qualname is None and name in SIZE_METHODS
            and not is_self_method(node)):
        args = list(node.args)
    else:
        return
    if qualname in _FILLS or (qualname is None and name in _FILLS):
        args = [a for a in args if a.keyword is None or a.keyword.value == "size"][:1]
    for arg in args:
        read = data_read(ctx, arg.value)
        if read is not None:
            ctx.skip.add(id(read))  # one finding: the host read is part of this problem (PC701 stays quiet)
            shown = ctx.source(arg.value) if isinstance(arg.value, cst.Name) else ctx.source(read)
            _report_read(ctx, node, read, shown)
            return
        helper = project_helper(ctx, arg.value)
        if helper is not None:
            shown = " ".join(ctx.source(arg.value).split())
            report_compiled(ctx, ShapeFromData, node, requires=f"{reads_of(ctx.stack)}{helper}", shown=shown)
            return
        element = element_size(ctx, arg.value) if name != "range" else None
        if element is not None:
            _report_read(ctx, node, element, ctx.source(arg.value))
            return
    if name != "range" and any(report_random_size(ctx, node, arg.value) for arg in args):
        return  # one finding a call: the first size drawn at random


def _report_read(ctx: Context, node: cst.Call, read: cst.CSTNode, shown: str) -> None:
    """PC209 at `node`, sized by what `read` takes out of tensor data. Where the read is in the body of the function
    being read (`n = int(idx[-1]) + 1`, before the call that uses `n`), the finding runs from the read to the use,
    and a read used as several sizes is one problem, reported at its first use; a read elsewhere (a module's
    constant) leaves the finding on the use."""
    start = None
    if ctx.functions:
        started: set[int] = ctx.memo("size-reads-reported", ctx.functions[-1], set)
        if id(read) in started:
            return
        if contains(ctx.functions[-1], read):
            start = read
            started.add(id(read))
    report_compiled(ctx, ShapeFromData, node, shown=" ".join(shown.split()), start=start)


def report_slice_from_data(ctx: Context, node: cst.Subscript) -> None:
    """PC209 for a slice bound read out of tensor data: `x[:, :lengths.max().item()]`, `x[:n]` with
    `n = t.sum().item()`. Run by mask_index's subscript check."""
    for element in node.slice:
        index = element.slice
        if not isinstance(index, cst.Slice) or fixed_length(ctx, index):
            continue
        for bound in (index.lower, index.upper):
            if bound is None or isinstance(bound, (cst.Integer, cst.UnaryOperation)):
                continue
            read = data_read(ctx, bound)
            if read is not None:
                ctx.skip.add(id(read))
                shown = ctx.source(bound) if isinstance(bound, cst.Name) else ctx.source(read)
                report_compiled(ctx, ShapeFromData, node, value=node.value, shown=" ".join(shown.split()))
                return
            helper = project_helper(ctx, bound)
            if helper is not None:
                report_compiled(ctx, ShapeFromData, node, value=node.value, requires=f"{reads_of(ctx.stack)}{helper}",
                                shown=" ".join(ctx.source(bound).split()))
                return
            if element_size(ctx, bound) is not None:
                report_compiled(ctx, ShapeFromData, node, value=node.value, shown=" ".join(ctx.source(bound).split()))
                return
            if report_random_size(ctx, node, bound):
                return


def fixed_length(ctx: Context, index: cst.Slice) -> bool:
    """`x[i : i + n]`: only the start comes from the data, the length is `n` (a host read, not a shape)."""
    upper = index.upper
    return (index.lower is not None and isinstance(upper, cst.BinaryOperation) and isinstance(upper.operator, cst.Add)
            and ctx.source(upper.left).strip() == ctx.source(index.lower).strip())
