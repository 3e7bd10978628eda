"""Integer matmuls and scatter-with-compute: NeuronCores have no integer datapath for either (PC313, PC314)."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from portcheck.knowledge import load_op
from portcheck.rules import Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.scope import host_code
from portcheck.static.syntax import call_name, keyword, positional
from portcheck.static.values import integer_dtype

MATH_TOKENS = ("@", "matmul", "mm", "scatter", "index_add")

_MATMULS = ("matmul", "mm", "bmm")
_SCATTERS = {"scatter_add": 2, "scatter_add_": 2, "index_add": 2, "index_add_": 2, "scatter_reduce": 2,
             "scatter_reduce_": 2}
_SOURCE_KEYWORDS = ("src", "source")


@rule
class IntegerMatmul(Rule):
    """## What it does
    Finds `@`, `torch.matmul`, `mm` and `bmm` where an operand is explicitly integer (`.long()`, `.int()`,
    `.to(torch.int32)`, a factory with an integer dtype, or a local name bound to one).

    ## Example
    ```python
    counts = onehot.long() @ weights.long()
    ```

    ## Use instead
    ```python
    counts = onehot.float() @ weights.float()
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC313"
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`{shown}` on {dtype} operands: NeuronCores have no integer matmul datapath, so it is computed in "
               "float32 (exact only below 2^24) or refused ({error}); cast to float explicitly, or keep the "
               "values small")
    INVALID = ("c = a.long() @ b", "import torch\nc = torch.matmul(a.to(torch.int32), b)", "c = a.int().bmm(b)")
    VALID = ("c = a @ b", "c = a.float() @ b.float()", "import torch\nc = torch.matmul(a, b)")


@rule
class IntegerScatterReduce(Rule):
    """## What it does
    Finds `scatter_add`, `index_add` and `scatter_reduce` (and their in-place forms) whose destination or source
    is explicitly integer.

    ## Example
    ```python
    counts = torch.zeros(n, dtype=torch.long).scatter_add_(0, ids, ones)
    ```

    ## Use instead
    ```python
    counts = torch.zeros(n, dtype=torch.float32).scatter_add_(0, ids, ones.float())
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC314"
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`{shown}` on {dtype} data: scatter-with-compute has no integer datapath on Neuron, so it is "
               "computed in float32 (exact only below 2^24) or refused ({error}); use float32 "
               "or bfloat16 data")
    INVALID = (
        "import torch\nc = torch.zeros(8, dtype=torch.long).scatter_add_(0, ids, ones)",
        "c = acc.index_add_(0, ids, src.int())",
    )
    VALID = ("import torch\nc = torch.zeros(8).scatter_add_(0, ids, ones)", "c = x.scatter_(0, ids, 1)")



_TORCH_MATMULS = frozenset(f"torch.{m}" for m in _MATMULS)


@check(cst.BinaryOperation, cst.Call, rules=(IntegerMatmul, IntegerScatterReduce), tokens=MATH_TOKENS)
def check_integer_math(node: cst.BinaryOperation | cst.Call, ctx: Context) -> None:
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.MatrixMultiply) and host_code(ctx) is None:
            _integer_matmul(ctx, node, (node.left, node.right), "@")
        return
    name = call_name(node)
    qualname = ctx.qualname(node.func)
    last = qualname.rsplit(".", 1)[-1] if qualname is not None else name
    if (last not in _MATMULS and last not in _SCATTERS) or host_code(ctx) is not None:
        return  # not matrix or scatter math (most calls); or the data pipeline, which runs on the host
    if qualname is not None:
        if qualname in _TORCH_MATMULS:
            _integer_matmul(ctx, node, tuple(a.value for a in node.args[:2]), qualname)
        elif qualname.startswith("torch.") and qualname[len("torch."):] in _SCATTERS:
            source = keyword(node, "src") or keyword(node, "source") or positional(node, 3)
            operands: Iterable[cst.BaseExpression] = [a.value for a in (positional(node, 0), source) if a is not None]
            _integer_scatter(ctx, node, operands, qualname)
        return
    if not isinstance(node.func, cst.Attribute):
        return
    if name in _MATMULS:
        operands = (node.func.value, *(a.value for a in node.args[:1]))
        _integer_matmul(ctx, node, operands, f".{name}()")
    elif name in _SCATTERS:
        source = next((keyword(node, k) for k in _SOURCE_KEYWORDS if keyword(node, k)), None)
        source = source or positional(node, _SCATTERS[name])
        operands = [node.func.value] + ([source.value] if source is not None else [])
        _integer_scatter(ctx, node, operands, f".{name}()")


def _integer_matmul(ctx: Context, node: cst.CSTNode, operands: Iterable[cst.BaseExpression], shown: str) -> None:
    dtype = next((d for d in (integer_dtype(ctx, o) for o in operands) if d), None)
    if dtype:
        ctx.report(IntegerMatmul, node, shown=shown, dtype=dtype, error=load_op("aten::matmul").error_code)


def _integer_scatter(ctx: Context, node: cst.CSTNode, operands: Iterable[cst.BaseExpression], shown: str) -> None:
    dtype = next((d for d in (integer_dtype(ctx, o) for o in operands) if d), None)
    if dtype:
        ctx.report(IntegerScatterReduce, node, shown=shown, dtype=dtype,
                   error=load_op("aten::scatter_add").error_code)
