"""dynamic-shape (PC2xx): shapes known only from tensor data, and Python control flow on tensor values.

The Neuron compiler needs every shape static (NCC_EMOD025); `torch_neuronx.trace` freezes control flow and
intermediate shapes. So an op whose output size depends on the data (`nonzero`, a boolean mask, `unique`),
a size read out of a tensor (`torch.zeros(int(t.max()))`) or an `if` on a tensor value inside `forward`
either fails to compile, compiles one graph per value, or bakes the example's value into the graph.

Only code that can reach a compiled graph counts. Functions that run on the host around the model stay quiet
(`__init__`, `__getitem__`, `collate*`, transformers' `generate` and `*_for_generation` helpers,
`post_process*`), and so, on the native stack, does code that `torch.compile` skips: the body of
`if not is_torchdynamo_compiling():` / `torch.compiler.is_compiling()` (observed: Dynamo answers True while
tracing). The xla stack's `torch_neuronx.trace` runs the model eagerly on XLA tensors and sets neither flag
nor `torch.jit.is_tracing()` (`xla_trace` calls `func(*example_inputs)` directly: gschaves/torch-neuronx:
xla_impl/hlo_conversion.py, a public copy of the torch-neuronx wheel), so there those guards change nothing.
"""

from __future__ import annotations

import re

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.rule import Context, Rule, call_name, check, keyword, positional, rule
from portcheck.static.values import (
    and_operands,
    method_call,
    numpy_rooted,
    reads_tensor_values,
    skipped_when_compiling,
)
from portcheck.static.walk import visit

TOKENS = ("nonzero", "argwhere", "where", "masked_select", "[", "unique", "repeat_interleave", "bincount",
          "forward", "item", "tolist", "max", "sum")

_STATIC = ("the Neuron compiler needs every shape static (NCC_EMOD025) and `torch_neuronx.trace` rejects "
           "data-dependent shapes")


# Functions that run on the host around the compiled model, never inside it: construction, data loading,
# transformers' generation loop and its input helpers, post-processing of outputs.
_HOST_FUNCTIONS = re.compile(
    r"(__init__|__getitem__|generate|_generate|\w+_for_generation|_?post_?process\w*|collate\w*)")


def _host_function(ctx: Context) -> str | None:
    return next((f.name.value for f in ctx.functions if _HOST_FUNCTIONS.fullmatch(f.name.value)), None)


def _report(ctx: Context, code: str, node: cst.CSTNode, message: str, severity: Severity | None = None,
            read: cst.CSTNode | None = None) -> None:
    """Report unless the code never reaches a compiled graph: it runs in a host-side function, or (native
    stack) under a test that `torch.compile` answers by skipping it (`if not is_torchdynamo_compiling():`)."""
    if _host_function(ctx) is not None:
        return
    if ctx.stack == "native" and skipped_when_compiling(ctx, read or node) is not None:
        return
    ctx.report(code, node, message, severity)


_DATA_SIZED = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive",
                         "repeat_interleave", "bincount"})


def _torch_or_method(ctx: Context, node: cst.Call) -> str | None:
    """For `torch.<name>(x)` (through any alias) or `x.<name>()` on something that is not a module, where
    <name> is one of the calls whose output size is data: the name."""
    qualname = ctx.qualname(node.func)
    if qualname is not None:
        name = qualname[6:] if qualname.startswith("torch.") else None
        return name if name in _DATA_SIZED else None
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in _DATA_SIZED and not numpy_rooted(ctx, func.value):
        return func.attr.value
    return None


@check(cst.Call, codes=("PC201", "PC202", "PC203", "PC205", "PC206", "PC207", "PC209"), tokens=TOKENS)
def check_call(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    name = _torch_or_method(ctx, node)
    if name in ("nonzero", "argwhere"):
        _report(ctx, "PC201", node, f"`{name}` returns one row per non-zero element, a shape known only from the "
                   f"data; {_STATIC}; keep the fixed-size boolean mask and use `torch.where(cond, a, b)` or "
                   "multiply by the mask")
    elif ctx.qualname(node.func) == "torch.where" and len(node.args) == 1 and node.args[0].keyword is None:
        _report(ctx, "PC202", node, f"one-argument `torch.where(cond)` is `nonzero(cond, as_tuple=True)`: its size "
                   f"depends on the data; {_STATIC}; use the three-argument `torch.where(cond, a, b)`")
    elif name == "masked_select":
        _report(ctx, "PC203", node, f"`masked_select` returns as many elements as the mask holds True; {_STATIC}; "
                   "use `torch.where(mask, x, 0)` or `x * mask` and keep the shape")
    elif name in ("unique", "unique_consecutive"):
        _report(ctx, "PC205", node, f"`{name}` returns as many values as the data holds distinct ones; {_STATIC}; "
                   "compute it outside the compiled model or pad to a fixed maximum")
    elif name == "repeat_interleave":
        _check_repeat_interleave(ctx, node, method=ctx.qualname(node.func) is None)
    elif name == "bincount":
        minlength = keyword(node, "minlength") or positional(node, 1 if ctx.qualname(node.func) is None else 2)
        if minlength is None:
            _report(ctx, "PC207", node, f"`bincount` without `minlength` returns `max(input) + 1` bins, a size "
                       f"known only from the data; {_STATIC}; pass `minlength=` the number of bins (and keep "
                       "inputs below it)")
    else:
        _check_size_arguments(ctx, node)


# ---- repeat_interleave ----------------------------------------------------------------------------

# Tensor methods that return tensors: a `repeats` built with them is a tensor, so the output size is data.
_TENSOR_METHODS = frozenset({
    "sum", "long", "int", "to", "cumsum", "diff", "bincount", "flatten", "view", "reshape", "squeeze", "unsqueeze",
    "prod", "clamp", "tensor", "masked_fill", "float", "argmax", "count_nonzero",
})


def _is_tensor_expression(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> bool:
    """A conservative "this is a tensor": a torch call, a tensor-returning method, tensor-style indexing
    (`t[:, 0]`: lists cannot be indexed with a tuple), arithmetic on those, or a local name bound to one."""
    if depth > 3:
        return False
    if isinstance(node, cst.Call):
        qualname = ctx.qualname(node.func)
        if qualname is not None:
            return qualname.startswith("torch.") and qualname not in ("torch.Size", "torch.numel")
        return call_name(node) in _TENSOR_METHODS and isinstance(node.func, cst.Attribute)
    if isinstance(node, cst.Subscript):
        return len(node.slice) >= 2 and any(isinstance(e.slice, cst.Slice) for e in node.slice)
    if isinstance(node, cst.BinaryOperation):
        return _is_tensor_expression(ctx, node.left, depth + 1) or _is_tensor_expression(ctx, node.right, depth + 1)
    if isinstance(node, cst.Name):
        bound = ctx.constant(node)
        return bound is not None and _is_tensor_expression(ctx, bound[1], depth + 1)
    return False


def _check_repeat_interleave(ctx: Context, node: cst.Call, method: bool) -> None:
    if keyword(node, "output_size") is not None:
        return  # the caller states the size: static
    repeats = keyword(node, "repeats") or positional(node, 0 if method else 1)
    if repeats is None and not method and positional(node, 0) is not None:
        # torch.repeat_interleave(repeats): the one-argument form takes a tensor of counts.
        _report(ctx, "PC206", node, f"`repeat_interleave(repeats)` returns `repeats.sum()` elements; {_STATIC}; "
                   "pass `output_size=` or build the index with a fixed size")
        return
    if repeats is not None and _is_tensor_expression(ctx, repeats.value):
        _report(ctx, "PC206", node, f"`repeat_interleave` with a tensor of repeats (`{ctx.source(repeats.value)}`) "
                   f"has an output size known only from the data; {_STATIC}; pass `output_size=` or repeat by "
                   "a Python int")


# ---- sizes read out of tensor data -------------------------------------------------------------------

SIZE_FACTORIES = frozenset({
    "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.rand", "torch.randn", "torch.randint",
    "torch.arange", "torch.linspace", "torch.eye", "torch.split",
})
SIZE_METHODS = frozenset({
    "view", "reshape", "expand", "repeat", "new_zeros", "new_ones", "new_empty", "new_full", "split", "narrow",
})


def _data_read(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> cst.Call | None:
    """The call that turns tensor data into a Python size in `node`: `t.item()`, `t.tolist()`, `int(t.max())`,
    `lengths.max()`; through a local name bound once (`n = t.max().item()`)."""
    if isinstance(node, cst.Name):
        bound = ctx.constant(node)
        return _data_read(ctx, bound[1], depth + 1) if bound and depth < 2 else None
    found = None

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal found
            if (found is None and method_call(call, "item", "tolist") and not call.args
                    and not numpy_rooted(ctx, call.func.value)):  # type: ignore[attr-defined]
                found = call
            return found is None

    visit(node, Finder())
    if found is not None:
        return found
    reduction = reads_tensor_values(ctx, node)
    if reduction is not None and call_name(reduction) in ("max", "sum", "amax", "count_nonzero", "prod"):
        return reduction
    return None


def _check_size_arguments(ctx: Context, node: cst.Call) -> None:
    qualname = ctx.qualname(node.func)
    name = call_name(node)
    if qualname in SIZE_FACTORIES:
        args = [a for a in node.args if a.keyword is None or a.keyword.value in ("size", "end", "steps",
                                                                                 "split_size_or_sections")]
        if qualname == "torch.split":
            args = args[1:2]
    elif (isinstance(node.func, cst.Name) and name == "range" and "range" not in ctx.names.aliases) or (
            isinstance(node.func, cst.Attribute) and qualname is None and name in SIZE_METHODS):
        args = list(node.args)
    else:
        return
    for arg in args:
        read = _data_read(ctx, arg.value)
        if read is not None:
            ctx.skip.add(id(read))  # one finding: the host read is part of this problem (PC701 stays quiet)
            shown = ctx.source(arg.value) if isinstance(arg.value, cst.Name) else ctx.source(read)
            _report(ctx, "PC209", node, f"a size taken from tensor data (`{' '.join(shown.split())}`) makes the "
                       f"shape depend on the values; {_STATIC}; use a fixed maximum size and mask or pad, or "
                       "bucket the inputs")
            return


# ---- boolean-mask indexing ----------------------------------------------------------------------------

_MASK_METHODS = frozenset({"bool", "eq", "ne", "gt", "lt", "ge", "le", "isnan", "isinf", "isfinite",
                           "logical_and", "logical_or", "logical_not", "logical_xor", "isin"})
_MASK_FUNCTIONS = frozenset(f"torch.{n}" for n in ("isnan", "isinf", "isfinite", "isin", "logical_and",
                                                   "logical_or", "logical_not", "logical_xor", "eq", "ne", "gt",
                                                   "lt", "ge", "le", "isneginf", "isposinf"))


def _is_mask(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> bool:
    if depth > 3:
        return False
    if isinstance(node, cst.Comparison):
        # `a is None`, `x in y` are Python truth values, never tensors.
        return all(isinstance(t.operator, (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual,
                                            cst.GreaterThan, cst.GreaterThanEqual))
                   for t in node.comparisons)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        return True  # `x[~m]`: inverting an index only makes sense for a boolean mask
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return _is_mask(ctx, node.left, depth + 1) or _is_mask(ctx, node.right, depth + 1)
    if isinstance(node, cst.Call):
        qualname = ctx.qualname(node.func)
        if qualname is not None:
            return qualname in _MASK_FUNCTIONS
        return isinstance(node.func, cst.Attribute) and call_name(node) in _MASK_METHODS
    if isinstance(node, cst.Name):
        bound = ctx.constant(node)
        return bound is not None and _is_mask(ctx, bound[1], depth + 1)
    return False


@check(cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del, codes=("PC204",), tokens=("[",))
def skip_stores(node: cst.CSTNode, ctx: Context) -> None:
    """`x[mask] = 0` writes in place and keeps the shape: only reads through a mask are dynamic."""
    if isinstance(node, cst.Del):
        targets = [node.target]
    else:
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    while targets:
        target = targets.pop()
        if isinstance(target, cst.Subscript):
            ctx.skip.add(id(target))
        elif isinstance(target, (cst.Tuple, cst.List)):  # `out[m], log_det[m] = f(...)`
            targets.extend(element.value for element in target.elements)
        elif isinstance(target, cst.StarredElement):
            targets.append(target.value)


@check(cst.Subscript, codes=("PC204",), tokens=("[",))
def check_mask_index(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Subscript)
    if id(node) in ctx.skip:
        return
    for element in node.slice:
        index = element.slice
        if isinstance(index, cst.Index) and _is_mask(ctx, index.value):
            _report(ctx, "PC204", node, f"indexing with a boolean mask (`{' '.join(ctx.source(node).split())}`) "
                       f"returns as many elements as the mask holds True; {_STATIC}; use "
                       "`torch.where(mask, x, fill)` or multiply by the mask")
            return


# ---- control flow on tensor values in forward ----------------------------------------------------------


def _branch_effect(ctx: Context) -> str:
    if ctx.stack == "native":
        return ("`torch.compile` cannot trace a branch on a tensor value: the graph breaks there (an error with "
                "`fullgraph=True`) and the value is read on the host on every call")
    return ("`torch_neuronx.trace` bakes the example's branch into the graph and PyTorch/XLA compiles a graph per "
            "outcome")


def _control_flow_message(ctx: Context, keyword_: str, read: cst.CSTNode) -> str:
    shown = " ".join(ctx.source(read).split())
    return (f"`{keyword_}` on a tensor value (`{shown}`) inside `forward`: {_branch_effect(ctx)}; decide it from "
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


def _only_raises(node: cst.CSTNode) -> bool:
    """`if <test>: raise ...`: a check in disguise, like `assert`."""
    if not isinstance(node, cst.If) or node.orelse is not None:
        return False
    if isinstance(node.body, cst.SimpleStatementSuite):
        smalls = list(node.body.body)
    else:
        lines = node.body.body
        if not all(isinstance(line, cst.SimpleStatementLine) for line in lines):
            return False
        smalls = [small for line in lines for small in line.body]  # type: ignore[attr-defined]
    return bool(smalls) and all(isinstance(small, cst.Raise) for small in smalls)


_FLOAT16 = frozenset({"torch.float16", "torch.half"})


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


@check(cst.If, cst.While, cst.Assert, cst.IfExp, codes=("PC208",), tokens=("forward",))
def check_control_flow(node: cst.CSTNode, ctx: Context) -> None:
    if not ctx.in_forward:
        return
    test = node.test
    keyword_ = {cst.If: "if", cst.While: "while", cst.Assert: "assert", cst.IfExp: "if"}[type(node)]
    read: cst.CSTNode | None = reads_tensor_values(ctx, test)
    if read is not None:
        ctx.skip.add(id(read))
    else:
        read = _tensor_element_comparison(test)
        if read is None:
            return
    shown = " ".join(ctx.source(read).split())
    if isinstance(node, cst.Assert) or _only_raises(node):
        where = ("`torch.compile` breaks the graph there" if ctx.stack == "native"
                 else "`torch_neuronx.trace` checks only the example")
        message = (f"`{keyword_}` on a tensor value (`{shown}`) inside `forward` only guards an error: it reads "
                   f"the tensor on the host and {where}; validate inputs before calling the model, or drop the "
                   "check")
        _report(ctx, "PC208", test, message, Severity.INFO, read)
        return
    fp16 = _float16_only(ctx, test, read)
    if fp16 is not None:
        message = (f"`{keyword_}` on a tensor value (`{shown}`) inside `forward`, reached only for float16 "
                   f"(`{fp16}`): in bfloat16 or float32 the test stops at the dtype check; in float16, "
                   f"{_branch_effect(ctx)}; clamp unconditionally instead")
        _report(ctx, "PC208", test, message, Severity.INFO, read)
        return
    _report(ctx, "PC208", test, _control_flow_message(ctx, keyword_, read), None, read)


# ---- rules ------------------------------------------------------------------------------------------------


@rule
class Nonzero(Rule):
    """## What it does
    Finds `torch.nonzero`, `x.nonzero()`, `torch.argwhere` and `x.argwhere()`, with or without `as_tuple`.
    Like every dynamic-shape rule it skips code that never reaches a compiled graph: host-side functions
    (`__init__`, `__getitem__`, `collate*`, `generate`, `*_for_generation`, `post_process*`), numpy arrays, and
    on the native stack the body of `if not is_torchdynamo_compiling():`.

    ## Example
    ```python
    idx = attention_mask.nonzero()
    kept = hidden[idx[:, 0], idx[:, 1]]
    ```

    ## Use instead
    ```python
    kept = hidden * attention_mask[..., None]  # keep the shape; mask what is not needed
    ```

    ## Fix safety
    No automatic fix: the replacement depends on what the indices are used for.
    """

    code = "PC201"
    INVALID = (
        "import torch\nidx = torch.nonzero(mask)",
        "idx = mask.nonzero(as_tuple=True)",
        "import torch as th\nidx = th.argwhere(x > 0)",
        "from torch import nonzero\nidx = nonzero(mask)",
    )
    VALID = (
        "import numpy as np\nidx = np.nonzero(a)",
        "import numpy as np\na = np.arange(4)\nidx = a.nonzero()",
        "# torch.nonzero(mask) is avoided here\nx = 'nonzero'",
        "import torch\nidx = torch.nonzero_static(mask, size=8)",
        "import torch\nclass Data:\n    def __init__(self, labels):\n        self.pos = torch.nonzero(labels)",
        "import torch\nclass M:\n    def generate(self, ids):\n        return torch.nonzero(ids)",
        "import torch\nfrom transformers.utils import is_torchdynamo_compiling\nclass M:\n"
        "    def forward(self, m):\n        if not is_torchdynamo_compiling():\n            self.seen = m.nonzero()",
    )


@rule
class WhereSingleArgument(Rule):
    """## What it does
    Finds the one-argument form `torch.where(cond)`, which returns the indices where `cond` holds.

    ## Example
    ```python
    rows, cols = torch.where(mask)
    ```

    ## Use instead
    ```python
    out = torch.where(mask, x, torch.zeros_like(x))
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC202"
    INVALID = ("import torch\nrows, cols = torch.where(mask)", "from torch import where\ni = where(x > 0)")
    VALID = ("import torch\ny = torch.where(mask, x, 0)", "import numpy as np\ni = np.where(a)")


@rule
class MaskedSelect(Rule):
    """## What it does
    Finds `torch.masked_select(x, mask)` and `x.masked_select(mask)`.

    ## Example
    ```python
    picked = torch.masked_select(logits, mask)
    ```

    ## Use instead
    ```python
    picked = torch.where(mask, logits, torch.zeros_like(logits))
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC203"
    INVALID = ("import torch\np = torch.masked_select(x, m)", "p = x.masked_select(m)")
    VALID = ("import torch\np = x.masked_fill(m, 0)", "import torch\np = torch.where(m, x, 0)")


@rule
class BooleanMaskIndex(Rule):
    """## What it does
    Finds reads through a boolean mask: `x[mask]` where the mask is a comparison (`x[x > 0]`), an inverted
    index (`x[~pad]`), a `.bool()` / `torch.isin` / `torch.isnan` result, or a local name bound to one.
    Writes (`x[mask] = 0`, also inside a tuple target `a[m], b[m] = f(x)`) keep the shape and stay quiet; so do
    integer and slice indexing.

    ## Example
    ```python
    keep = ids != pad_id
    tokens = hidden[keep]
    ```

    ## Use instead
    ```python
    tokens = hidden * keep[..., None]           # same shape, padding zeroed
    hidden = hidden.masked_fill(~keep[..., None], 0.0)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC204"
    INVALID = (
        "y = x[x > 0]",
        "keep = ids != pad\ny = hidden[keep]",
        "y = x[:, mask.bool()]",
        "y = x[~padding]",
        "import torch\ny = x[torch.isin(ids, special)]",
    )
    VALID = (
        "x[x > 0] = 0",
        "out[m > 0], log_det[m > 0] = spline(x)",
        "y = x[idx]",
        "y = x[:, 0]",
        "y = x[1:-1]",
        "y = cache[key is None]",
        "x[mask] += 1",
    )


@rule
class Unique(Rule):
    """## What it does
    Finds `torch.unique`, `torch.unique_consecutive` and their method forms.

    ## Example
    ```python
    labels = torch.unique(targets)
    ```

    ## Use instead
    Compute the distinct values before the model (in the data pipeline), or work with a fixed number of
    classes and a count per class (`torch.zeros(n).scatter_add_(...)`).

    ## Fix safety
    No automatic fix.
    """

    code = "PC205"
    INVALID = ("import torch\nu = torch.unique(t)", "u = t.unique(sorted=True)", "u = t.unique_consecutive()")
    VALID = ("import numpy as np\nu = np.unique(a)", "u = set(values)")


@rule
class RepeatInterleaveTensor(Rule):
    """## What it does
    Finds `repeat_interleave` whose repeats are a tensor (a torch call, a tensor-returning method, tensor
    indexing, or a local name bound to one), and the one-argument form `torch.repeat_interleave(repeats)`,
    unless `output_size=` states the size. Repeats given as a Python int (`n_rep`, `self.groups`) stay quiet.

    ## Example
    ```python
    index = torch.repeat_interleave(torch.arange(b), lengths.long())
    ```

    ## Use instead
    ```python
    index = torch.repeat_interleave(torch.arange(b), lengths, output_size=max_total)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC206"
    INVALID = (
        "import torch\ni = torch.repeat_interleave(torch.arange(4), lengths.long())",
        "import torch\ni = torch.repeat_interleave(counts)",
        "r = grid[:, 1] * grid[:, 2]\ni = x.repeat_interleave(r, dim=0)",
    )
    VALID = (
        "k = k.repeat_interleave(n_rep, dim=1)",
        "import torch\nk = torch.repeat_interleave(k, repeats=self.groups, dim=2)",
        "import torch\ni = torch.repeat_interleave(x, lengths.long(), output_size=64)",
    )


@rule
class BincountUnbounded(Rule):
    """## What it does
    Finds `torch.bincount(x)` and `x.bincount()` without `minlength`.

    ## Example
    ```python
    counts = torch.bincount(expert_ids)
    ```

    ## Use instead
    ```python
    counts = torch.bincount(expert_ids, minlength=num_experts)
    ```

    ## Fix safety
    No automatic fix: portcheck cannot know the number of bins.
    """

    code = "PC207"
    INVALID = ("import torch\nc = torch.bincount(ids)", "c = ids.bincount()")
    VALID = ("import torch\nc = torch.bincount(ids, minlength=8)", "c = ids.bincount(None, 8)")


@rule
class TensorControlFlow(Rule):
    """## What it does
    Finds `if`, `while`, `assert` and conditional expressions inside `forward` whose test reads tensor data:
    `if x.sum() > 0`, `if mask.any()`, `while t.item() < n`, `if ids[0, 0] == bos`. Tests on shapes, dtypes,
    `None`, flags and configuration (`if x.dim() == 3`, `if self.training`) stay quiet. Reported as info: an
    `assert` or an `if` whose body only raises (a check: it syncs, it does not choose a graph), and a test that
    reads the tensor only for float16 (`if h.dtype == torch.float16 and torch.isinf(h).any():`, the fp16
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
    INVALID = (
        "class M:\n    def forward(self, x):\n        if x.sum() > 0:\n            return x\n        return -x",
        "class M:\n    def forward(self, x, mask):\n        while mask.any():\n            mask = step(mask)",
        "import torch\nclass M:\n    def forward(self, x):\n        if torch.any(torch.isnan(x)):\n"
        "            raise ValueError('nan')",
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
        "def helper(x):\n    if x.sum() > 0:\n        return x",
        "class M:\n    def forward(self, xs):\n        if max(len(a) for a in xs) > 2:\n            return xs",
    )


@rule
class ShapeFromData(Rule):
    """## What it does
    Finds sizes read out of tensor data: `torch.zeros(int(t.max()))`, `torch.arange(lengths.max())`,
    `range(t.item())`, `x.view(*t.tolist())`, `torch.split(x, sizes.tolist())`, also through a local name
    bound once (`n = t.max().item(); torch.zeros(n)`).

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
    INVALID = (
        "import torch\nz = torch.zeros(int(t.max()))",
        "for i in range(n.item()):\n    pass",
        "y = x.view(*shape.tolist())",
        "import torch\nn = lengths.max().item()\np = torch.arange(n)",
        "import torch\nparts = torch.split(x, sizes.tolist())",
    )
    VALID = (
        "import torch\nz = torch.zeros(x.size(0), x.shape[1])",
        "import numpy as np\nn = np.where(d <= 3)[0].max()\nfor i in range(n):\n    pass",
        "for i in range(len(xs)):\n    pass",
        "y = x.view(b, -1, h)",
        "import torch, math\nz = torch.zeros(int(math.sqrt(n)))",
        "for i in range(max(a, b)):\n    pass",
    )
