"""Ops whose output size is the data's (PC201-PC203, PC205-PC207): `nonzero`, one-argument `where`,
`masked_select`, `unique`, `repeat_interleave` with tensor repeats, `bincount` without `minlength`."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.random_size import RandomSize
from portcheck.static.dynamic_shape.reach import STATIC, report_compiled
from portcheck.static.dynamic_shape.shape_from_data import ShapeFromData, report_shape_from_data
from portcheck.static.syntax import call_name, keyword, positional
from portcheck.static.values import numpy_rooted


@rule
class Nonzero(Rule):
    """## What it does
    Finds `torch.nonzero`, `x.nonzero()`, `torch.argwhere` and `x.argwhere()`, with or without `as_tuple`.
    Like every dynamic-shape rule it skips code that never reaches a compiled graph: host-side functions
    (`__init__`, `__getitem__`, `collate*`, `process`, `post_process*`; in a generation loop, `generate` and
    `*_for_generation`, the op is info, since it runs between the compiled model's steps), the data pipeline
    (`datasets/`, `transforms/`, `metrics/`, `loader/`, `sampler/` ... folders, `Dataset` and `BaseTransform`
    subclasses), host values (numpy, pandas, `.cpu()` copies, CPU tensors), error paths before a
    `raise`, and on the native stack the body of `if not is_torchdynamo_compiling():`.

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
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`{name}` returns one row per non-zero element, a shape known only from the data; " + STATIC
               + "; keep the fixed-size boolean mask and use `torch.where(cond, a, b)` or multiply by the mask")
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
        "import torch\nclass M:\n    def post_process(self, ids):\n        return torch.nonzero(ids)",
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
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("one-argument `torch.where(cond)` is `nonzero(cond, as_tuple=True)`: its size depends on the data; "
               + STATIC + "; use the three-argument `torch.where(cond, a, b)`")
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
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`masked_select` returns as many elements as the mask holds True; " + STATIC
               + "; use `torch.where(mask, x, 0)` or `x * mask` and keep the shape")
    INVALID = ("import torch\np = torch.masked_select(x, m)", "p = x.masked_select(m)")
    VALID = ("import torch\np = x.masked_fill(m, 0)", "import torch\np = torch.where(m, x, 0)")


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
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`{name}` returns as many values as the data holds distinct ones; " + STATIC
               + "; compute it outside the compiled model or pad to a fixed maximum")
    INVALID = ("import torch\nu = torch.unique(t)", "u = t.unique(sorted=True)", "u = t.unique_consecutive()")
    VALID = ("import numpy as np\nu = np.unique(a)", "u = set(values)", 'labels = dataset.unique("label")')


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
    passes = (Pass.STATIC, Pass.TRACE)
    INVALID = (
        "import torch\ni = torch.repeat_interleave(torch.arange(4), lengths.long())",
        "import torch\ni = torch.repeat_interleave(counts)",
        "r = grid[:, 1] * grid[:, 2]\ni = x.repeat_interleave(r, dim=0)",
        "import torch\nw = torch.repeat_interleave(weight, ptr[1:] - ptr[:-1])",
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
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`bincount` without `minlength` returns `max(input) + 1` bins, a size known only from the data; "
               + STATIC + "; pass `minlength=` the number of bins (and keep inputs below it)")
    INVALID = ("import torch\nc = torch.bincount(ids)", "c = ids.bincount()")
    VALID = ("import torch\nc = torch.bincount(ids, minlength=8)", "c = ids.bincount(None, 8)")


TOKENS = ("nonzero", "argwhere", "where", "masked_select", "[", "unique", "repeat_interleave", "bincount",
          "forward", "item", "tolist", "max", "sum")

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
    if (isinstance(func, cst.Attribute) and func.attr.value in _DATA_SIZED and not numpy_rooted(ctx, func.value)
            and _tensor_signature(node, func.attr.value)):
        return func.attr.value
    return None


# The tensor methods' signatures: (how many positional arguments they take, their keywords). A call its
# arguments do not fit is another type's method of the same name: a Hugging Face dataset's `.unique("label")`.
_SIGNATURES: dict[str, tuple[int, frozenset[str]]] = {
    "unique": (4, frozenset({"sorted", "return_inverse", "return_counts", "dim"})),
    "unique_consecutive": (3, frozenset({"return_inverse", "return_counts", "dim"})),
    "nonzero": (0, frozenset({"as_tuple"})),
    "argwhere": (0, frozenset()),
    "masked_select": (1, frozenset({"mask"})),
    "repeat_interleave": (2, frozenset({"repeats", "dim", "output_size"})),
    "bincount": (2, frozenset({"weights", "minlength"})),
}


def _tensor_signature(node: cst.Call, name: str) -> bool:
    """`x.<name>(...)`'s arguments fit the tensor method's: no more positional arguments than it takes, no
    keyword it lacks, and no string where it takes flags, tensors and sizes."""
    most, keywords = _SIGNATURES[name]
    positional_args = [a for a in node.args if a.keyword is None and not a.star]
    if len(positional_args) > most or any(a.keyword is not None and a.keyword.value not in keywords
                                          for a in node.args):
        return False
    return not any(isinstance(a.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
                   for a in node.args)


# One check for every call rule of the family, PC209 (shape_from_data) included: while any of them is on, a host
# read PC209 would report is kept from PC701 (`ctx.skip`). `item`, `tolist`, `max` and `sum` are PC209's words.
@check(cst.Call, rules=(Nonzero, WhereSingleArgument, MaskedSelect, Unique, RepeatInterleaveTensor,
                        BincountUnbounded, ShapeFromData, RandomSize), tokens=TOKENS)
def check_call(node: cst.Call, ctx: Context) -> None:
    name = _torch_or_method(ctx, node)
    value = _operand(ctx, node)
    if name in ("nonzero", "argwhere"):
        report_compiled(ctx, Nonzero, node, value=value, name=name)
    elif ctx.qualname(node.func) == "torch.where" and len(node.args) == 1 and node.args[0].keyword is None:
        report_compiled(ctx, WhereSingleArgument, node, value=value)
    elif name == "masked_select":
        report_compiled(ctx, MaskedSelect, node, value=value)
    elif name in ("unique", "unique_consecutive"):
        report_compiled(ctx, Unique, node, value=value, name=name)
    elif name == "repeat_interleave":
        _check_repeat_interleave(ctx, node, method=ctx.qualname(node.func) is None)
    elif name == "bincount":
        minlength = keyword(node, "minlength") or positional(node, 1 if ctx.qualname(node.func) is None else 2)
        if minlength is None:
            report_compiled(ctx, BincountUnbounded, node, value=value)
    else:
        report_shape_from_data(ctx, node)


def _operand(ctx: Context, node: cst.Call) -> cst.BaseExpression | None:
    """The tensor an op works on: the receiver of `x.unique()`, the first argument of `torch.unique(x)`."""
    if ctx.qualname(node.func) is None and isinstance(node.func, cst.Attribute):
        return node.func.value
    first = positional(node, 0)
    return first.value if first is not None else None


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


def _sliced(node: cst.BaseExpression) -> bool:
    """`ptr[1:] - ptr[:-1]`: repeats are a Python int or a tensor, and a slice (or arithmetic on slices) is no int."""
    if isinstance(node, cst.BinaryOperation):
        return _sliced(node.left) or _sliced(node.right)
    return isinstance(node, cst.Subscript) and any(isinstance(e.slice, cst.Slice) for e in node.slice)


def _check_repeat_interleave(ctx: Context, node: cst.Call, method: bool) -> None:
    if keyword(node, "output_size") is not None:
        return  # the caller states the size: static
    repeats = keyword(node, "repeats") or positional(node, 0 if method else 1)
    if repeats is None and not method and positional(node, 0) is not None:
        # torch.repeat_interleave(repeats): the one-argument form takes a tensor of counts.
        report_compiled(ctx, RepeatInterleaveTensor, node, f"`repeat_interleave(repeats)` returns `repeats.sum()` "
                        f"elements; {STATIC}; pass `output_size=` or build the index with a fixed size")
        return
    if repeats is not None and (_is_tensor_expression(ctx, repeats.value) or _sliced(repeats.value)):
        report_compiled(ctx, RepeatInterleaveTensor, node, f"`repeat_interleave` with a tensor of repeats "
                        f"(`{ctx.source(repeats.value)}`) has an output size known only from the data; {STATIC}; "
                        "pass `output_size=` or repeat by a Python int")
