"""TopK and sorting: integer inputs neuronx-cc rejects, and TopK's limit on k (PC305, PC306)."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import load_integer_sort, load_op
from portcheck.rules import Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.syntax import call_name, keyword, positional
from portcheck.static.values import integer_dtype

SORT_TOKENS = ("topk", "sort")


@rule
class IntegerSortInput(Rule):
    """## What it does
    Finds `topk`, `sort`, `argsort` and `msort` on a tensor that is explicitly integer (`ids.long().topk(k)`,
    `torch.sort(torch.arange(n))` with an integer dtype, or a local name bound to one). `topk` is an error
    (NCC_EVRF013). Sorting is reported only at a `--sdk` release whose compiler fails on it (rules/ops.toml
    `[integer_sort]`): neuronx-cc 2.18 fixed it, before every release portcheck knows.

    ## Example
    ```python
    top = counts.long().topk(8)
    ```

    ## Use instead
    ```python
    top = counts.float().topk(8)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC305"
    passes = (Pass.STATIC, Pass.TRACE)
    INVALID = (
        "top = ids.long().topk(4)",
        "import torch\nv, i = torch.topk(x.to(torch.int32), 2)",
    )
    VALID = ("top = logits.topk(4)", "top = ids.float().topk(4)", "import torch\nv = torch.sort(scores)",
             # neuronx-cc 2.18 sorts integers: fixed before every release the data knows (rules/ops.toml)
             "import torch\nc = torch.zeros(8, dtype=torch.long)\no = torch.argsort(c)")


@rule
class TopkLimit(Rule):
    """## What it does
    Finds `topk` with a literal (or constant) k above 16384, the compiler's documented limit, and, as a warning,
    `topk` whose k is a whole dimension (`x.size(-1)`, `x.shape[-1]`), which on a vocabulary exceeds it.
    `portcheck trace` reports it from the graph as well, with the sizes the model used: a `topk` whose k, or a
    `sort` whose sorted dimension, is larger than 16384 (the compiler rewrites such a sort followed by a slice to
    TopK over the whole dimension).

    ## Example
    ```python
    values, idx = logits.topk(50000)
    ```

    ## Use instead
    ```python
    values, idx = logits.topk(50)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC306"
    passes = (Pass.STATIC, Pass.TRACE)
    INVALID = (
        "v, i = logits.topk(32000)",
        "import torch\nK = 20000\nv, i = torch.topk(x, K)",
        "v, i = logits.topk(logits.size(-1))",
    )
    VALID = ("v, i = logits.topk(50)", "import torch\nv, i = torch.topk(x, k=16384)", "v, i = logits.topk(k)")


def _op_input(ctx: Context, node: cst.Call, names: tuple[str, ...]) -> tuple[str, cst.BaseExpression, bool] | None:
    """For `torch.topk(x, k)` or `x.topk(k)`: (op name, x, is_method)."""
    qualname = ctx.qualname(node.func)
    if qualname is not None:
        for name in names:
            if qualname == f"torch.{name}" and node.args:
                return name, node.args[0].value, False
        return None
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in names:
        return func.attr.value, func.value, True
    return None


def _int_value(ctx: Context, node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Name):
        bound = ctx.constant(node)
        node = bound[1] if bound else node
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    return None


def _whole_dimension(node: cst.BaseExpression) -> bool:
    """`x.size(-1)`, `x.shape[-1]`, `x.numel()`: k as large as the tensor."""
    if isinstance(node, cst.Call) and call_name(node) in ("size", "numel") and isinstance(node.func, cst.Attribute):
        return True
    return (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute)
            and node.value.attr.value == "shape")


@check(cst.Call, rules=(IntegerSortInput, TopkLimit), tokens=SORT_TOKENS)
def check_sort(node: cst.Call, ctx: Context) -> None:
    found = _op_input(ctx, node, ("topk", "sort", "argsort", "msort"))
    if found is None:
        return
    name, data, method = found
    dtype = integer_dtype(ctx, data)
    if dtype is not None:
        if name == "topk":
            ctx.report(IntegerSortInput, node, f"`topk` on an integer tensor ({dtype}) is rejected by neuronx-cc "
                       f"({load_op('aten::topk').error_code}); cast to float first (`x.float().topk(k)`)")
        elif load_integer_sort().fails(ctx.sdk):  # fixed in later compilers: only at the releases that fail
            ctx.report(IntegerSortInput, node, f"`{name}` on an integer tensor ({dtype}) failed to compile on trn1 "
                       "with neuronx-cc 2.13 and was reported working with 2.18 (aws-neuron-sdk#868); cast to float "
                       "or check your compiler version", severity=Severity.WARNING)
    if name != "topk":
        return
    k = keyword(node, "k") or positional(node, 0 if method else 1)
    if k is None:
        return
    value = _int_value(ctx, k.value)
    if value is None and not _whole_dimension(k.value):
        return
    limit = load_op("aten::topk").limit("k")
    if value is not None and value > limit.max:
        ctx.report(TopkLimit, node, f"`topk` with k={value}: neuronx-cc's TopK takes k <= {limit.max} "
                   f"({limit.error_code}); take the top k in two stages or on the CPU")
    elif value is None:
        ctx.report(TopkLimit, node, f"`topk` with k = a whole dimension (`{ctx.source(k.value)}`): neuronx-cc's "
                   f"TopK takes k <= {limit.max} ({limit.error_code}), which a vocabulary-sized k exceeds; use "
                   "`sort` or a smaller k", severity=Severity.WARNING)
