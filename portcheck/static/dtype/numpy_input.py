"""Float64 numpy arrays turned into tensors: numpy's default float is float64, which no NeuronCore has (PC304)."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dtype.kept import outlives
from portcheck.static.syntax import call_name, keyword

NUMPY_TOKENS = ("from_numpy", "tensor")

_NUMPY_FLOAT_FACTORIES = frozenset(f"numpy.{n}" for n in (
    "zeros", "ones", "empty", "linspace", "eye", "identity", "logspace", "geomspace", "random.rand",
    "random.randn", "random.random", "random.uniform", "random.normal", "random.standard_normal",
    "random.random_sample", "random.sample", "random.beta", "random.exponential",
))
_CASTS = frozenset({"float", "half", "bfloat16", "to", "type", "int", "long", "bool"})


@rule
class NumpyFloat64Input(Rule):
    """## What it does
    Finds float64 numpy arrays turned into tensors: `torch.from_numpy`, `torch.tensor`, `torch.as_tensor` of
    `np.zeros(...)`, `np.random.rand(...)`, `np.linspace(...)`, `a.astype(np.float64)` (numpy's default float
    is float64), directly or through a local name, unless a dtype or a `.float()` cast follows.

    ## Example
    ```python
    noise = torch.from_numpy(np.random.randn(batch, dim))
    ```

    ## Use instead
    ```python
    noise = torch.from_numpy(np.random.randn(batch, dim).astype(np.float32))
    ```

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC304"
    message = ("`{function}` of a float64 numpy array (`{array}`) makes a float64 tensor, and no NeuronCore has an "
               "FP64 type; create the array as float32 or add `.float()` / `dtype=torch.float32`")
    INVALID = (
        "import numpy as np, torch\nt = torch.from_numpy(np.random.randn(3, 4))",
        "import numpy as np\nimport torch\na = np.zeros((2, 2))\nt = torch.tensor(a)",
        "import numpy as np, torch\nt = torch.as_tensor(x.astype(np.float64))",
    )
    VALID = (
        "import numpy as np, torch\nt = torch.from_numpy(np.random.randn(3, 4)).float()",
        "import numpy as np, torch\nt = torch.tensor(np.zeros(3), dtype=torch.float32)",
        "import numpy as np, torch\nt = torch.from_numpy(np.zeros(3, dtype=np.float32))",
        "import torch\nt = torch.from_numpy(array)",
    )


def _numpy_float64(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> str | None:
    """How `node` is known to be a float64 numpy array: `np.random.rand(...)`, `a.astype(np.float64)`, or a local
    name bound once to such."""
    if isinstance(node, cst.Name) and depth < 2:
        bound = ctx.constant(node)
        return _numpy_float64(ctx, bound[1], depth + 1) if bound else None
    if not isinstance(node, cst.Call):
        return None
    qualname = ctx.qualname(node.func)
    if qualname in _NUMPY_FLOAT_FACTORIES or (qualname or "").startswith("numpy.random.default_rng"):
        dtype = keyword(node, "dtype")
        if dtype is None or ctx.qualname(dtype.value) in ("numpy.float64", "numpy.double", "float"):
            return " ".join(ctx.source(node).split())
        return None
    if isinstance(node.func, cst.Attribute) and call_name(node) == "astype" and node.args:
        target = node.args[0].value
        if ctx.qualname(target) in ("numpy.float64", "numpy.double") or (
                isinstance(target, cst.Name) and target.value == "float" and "float" not in ctx.names.aliases):
            return " ".join(ctx.source(node).split())
    return None


# What makes a tensor of a numpy array (ctx.skip holds one cast right away: only such a call, which other rules'
# checks also see, is skipped)
_MAKERS = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.asarray"})


@check(cst.Call, rules=(NumpyFloat64Input,), tokens=NUMPY_TOKENS)
def check_numpy_input(node: cst.Call, ctx: Context) -> None:
    if isinstance(node.func, cst.Attribute) and call_name(node) in _CASTS and isinstance(node.func.value, cst.Call):
        if ctx.qualname(node.func.value.func) in _MAKERS:
            ctx.skip.add(id(node.func.value))  # `torch.from_numpy(a).float()`: cast right away
        return
    if id(node) in ctx.skip:
        return
    qualname = ctx.qualname(node.func)
    if qualname not in _MAKERS:
        return
    if keyword(node, "dtype") is not None or not node.args:
        return
    origin = _numpy_float64(ctx, node.args[0].value)
    if origin:
        ctx.report(NumpyFloat64Input, node, function=qualname, array=origin, kept=outlives(ctx, node, returned=False))
