"""Calls whose ATen op runs on the host CPU on the target's stack (PC321): linear algebra that TorchNeuron has no
device kernel for (`torch.linalg.svd`, `eigh`, `eig`, `inv`, `solve`, `slogdet`, `cholesky`, `qr`...) and
sorting (`torch.sort`, `argsort`, the quantiles built on it), medians, `searchsorted` / `bucketize`, sampling
(`torch.multinomial`, `torch.poisson`, `torch.binomial`) and the CTC loss, read from rules/ops.toml."""

from __future__ import annotations

import libcst as cst

from portcheck.knowledge import load_op_releases, load_ops
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.scope import host_code, host_value, number
from portcheck.summaries import ELSEWHERE

# The ATen op each torch function dispatches to (observed with torch 2.13: tests/test_value_kinds.py traces each
# one and checks the op). Only functions whose op rules/ops.toml has a status for are listed.
CALLS = {
    "torch.linalg.svd": "aten::_linalg_svd",
    "torch.linalg.svdvals": "aten::_linalg_svd",
    "torch.svd": "aten::_linalg_svd",
    "torch.linalg.eigh": "aten::_linalg_eigh",
    "torch.linalg.eigvalsh": "aten::_linalg_eigh",
    "torch.linalg.slogdet": "aten::_linalg_slogdet",
    "torch.slogdet": "aten::_linalg_slogdet",
    "torch.logdet": "aten::_linalg_slogdet",
    "torch.linalg.inv": "aten::linalg_inv_ex",
    "torch.linalg.inv_ex": "aten::linalg_inv_ex",
    "torch.inverse": "aten::linalg_inv_ex",
    "torch.cholesky": "aten::cholesky",
    "torch.linalg.cholesky": "aten::linalg_cholesky_ex",
    "torch.linalg.cholesky_ex": "aten::linalg_cholesky_ex",
    "torch.cholesky_inverse": "aten::cholesky_inverse",
    "torch.linalg.qr": "aten::linalg_qr",
    "torch.linalg.det": "aten::_linalg_det",
    "torch.det": "aten::_linalg_det",
    "torch.linalg.lu_factor": "aten::linalg_lu_factor_ex",
    "torch.linalg.lu_factor_ex": "aten::linalg_lu_factor_ex",
    "torch.linalg.ldl_factor": "aten::linalg_ldl_factor_ex",
    "torch.linalg.ldl_factor_ex": "aten::linalg_ldl_factor_ex",
    "torch.linalg.solve_triangular": "aten::linalg_solve_triangular",
    "torch.linalg.solve": "aten::_linalg_solve_ex",
    "torch.linalg.solve_ex": "aten::_linalg_solve_ex",
    "torch.linalg.lu_solve": "aten::linalg_lu_solve",
    "torch.linalg.eig": "aten::linalg_eig",
    "torch.linalg.eigvals": "aten::linalg_eig",
    "torch.linalg.matrix_exp": "aten::linalg_matrix_exp",
    "torch.matrix_exp": "aten::linalg_matrix_exp",
    "torch.sort": "aten::sort",
    "torch.argsort": "aten::sort",
    "torch.msort": "aten::sort",
    "torch.multinomial": "aten::multinomial",
    "torch.roll": "aten::roll",
    "torch.cumprod": "aten::cumprod",
    "torch.std": "aten::std.correction",
    "torch.var": "aten::var.correction",
    "torch.std_mean": "aten::std_mean.correction",
    "torch.var_mean": "aten::var_mean.correction",
    "torch.quantile": "aten::sort",
    "torch.nanquantile": "aten::sort",
    "torch.median": "aten::median",
    "torch.nanmedian": "aten::nanmedian",
    "torch.searchsorted": "aten::searchsorted",
    "torch.bucketize": "aten::bucketize",
    "torch.poisson": "aten::poisson",
    "torch.binomial": "aten::binomial",
    "torch.nn.functional.ctc_loss": "aten::_ctc_loss",
    # the 4-D (image) form; a 5-D input runs `grid_sampler_3d`, which the data has no status for
    "torch.nn.functional.grid_sample": "aten::grid_sampler_2d",
}

# The op a torch.distributions object's `sample()` / `rsample()` draws with (observed with torch 2.13:
# tests/test_value_kinds.py traces each one), for the distributions whose sampler op rules/ops.toml has a status for.
SAMPLED = {
    "Gamma": "aten::_standard_gamma", "Chi2": "aten::_standard_gamma", "StudentT": "aten::_standard_gamma",
    "FisherSnedecor": "aten::_standard_gamma", "NegativeBinomial": "aten::_standard_gamma",
    "Beta": "aten::_sample_dirichlet", "Dirichlet": "aten::_sample_dirichlet", "Poisson": "aten::poisson",
    "Binomial": "aten::binomial", "Categorical": "aten::multinomial", "OneHotCategorical": "aten::multinomial",
    "Multinomial": "aten::multinomial",
}
_SAMPLERS = frozenset({"sample", "rsample", "sample_n"})

# A tensor's own reductions of those ops: `x.var(-1, keepdim=True, unbiased=False)`, `advantages.std()`.
_METHODS = {"std": "aten::std.correction", "var": "aten::var.correction"}


@rule
class CpuFallbackCall(Rule):
    """## What it does
    Finds calls of torch functions whose ATen op the target's stack runs on the host CPU: on TorchNeuron
    (native) the decompositions `torch.linalg.svd`, `svdvals`, `eigh`, `eigvalsh`, `eig`, `eigvals`, `slogdet`
    (and `torch.logdet`, built on it),
    `det`, `inv`, `qr`, `cholesky`, `lu_factor`, `ldl_factor`, `solve`, `solve_ex`, `lu_solve`,
    `solve_triangular`, `matrix_exp`, `torch.cholesky` and `torch.cholesky_inverse` have no device kernel and take
    the CPU fallback (on inf2, torch-xla 2.9 lowers some of them: `svd`, `eigh`, `slogdet`, `inv`), and so do
    `torch.sort`, `torch.argsort`, `torch.msort` and `torch.multinomial` (a sampling step of a decode loop: its
    probabilities go to the host every token),
    `torch.roll` (and a tensor's own `roll(...)` given `dims=` or numbers), `torch.cumprod`, and the variance
    reductions `torch.std`, `torch.var`, `torch.std_mean`,
    `torch.var_mean` and a tensor's `std(...)` / `var(...)` (TorchNeuron registers no kernel for their
    `correction` overload, where every form of them dispatches: a hand-written norm's `x.var(-1, keepdim=True)`
    leaves the device every step), `torch.quantile` and `torch.nanquantile` (they sort), `torch.median`,
    `torch.nanmedian`, `torch.searchsorted`, `torch.bucketize`, `torch.poisson`, `torch.binomial` and
    `F.ctc_loss`: none has a device kernel on TorchNeuron, nor an XLA lowering in torch-xla 2.9, so on inf2 they run
    on the CPU too, cutting the graph. So does `F.grid_sample` on a 4-D input (`grid_sampler_2d`: pytorch/xla#6581
    is open for its lowering). So do the draws of `torch.distributions` objects whose sampler is one of
    those ops (`Gamma`, `Chi2`, `StudentT`, `FisherSnedecor` and `NegativeBinomial` draw with `_standard_gamma`,
    `Beta` and `Dirichlet` with `_sample_dirichlet`, `Poisson` with `poisson`, `Binomial` with `binomial`, and
    `Categorical`, `OneHotCategorical` and `Multinomial` with `multinomial`, on native only): `Beta(a, b).sample()`,
    or `d.rsample()` with `d` bound once to one. And a
    tensor's own `argsort()`, `msort()` and `sort(...)` where its result is used or it takes `dim=` /
    `descending=` (a list's `sort` works in place and returns None). The
    status comes from rules/ops.toml, so a stack that lowers the op (PyTorch/XLA on inf2) stays quiet, and so
    does a call on a host value (numpy, a CPU tensor). Outside `forward` it is reported only where the project's
    call graph puts the function in what a module's forward reaches (set-up, initialisation and checkpoint
    conversion run once, on purpose). Other method forms (`a.inverse()`, `a.det()`) are not read: linear
    operators and group elements have methods of those names.

    ## Example
    ```python
    u, s, v = torch.linalg.svd(features)
    ```

    ## Use instead
    ```python
    u, s, v = torch.linalg.svd(features.cpu())  # once, outside the step, and move the result back
    ```
    or a formulation without the decomposition (a power iteration, a Newton–Schulz iteration for an inverse root).

    ## Fix safety
    No automatic fix.
    """

    code = "PC321"
    message = ("`{shown}` runs `{op}`, which the {stack} stack runs on the host CPU: its inputs and results are "
               "copied between the device and the host at every call; move it out of the step, or replace it")
    INVALID = (
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.linalg.svd(x)",
        "import torch as th\nclass M(th.nn.Module):\n    def forward(self, a):\n        return th.inverse(a)",
        "from torch import linalg\nclass M:\n    def forward(self, c):\n        return helper(c)\n"
        "def helper(c):\n    return linalg.eigh(c)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, a, b):\n"
        "        return torch.linalg.solve_triangular(torch.linalg.cholesky(a), b, upper=False)",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.roll(x, 1, -1)",
        "import torch\nclass Norm(torch.nn.Module):\n    def forward(self, x):\n"
        "        return (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt()",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        s, m = torch.std_mean(x, dim=-2)\n"
        "        return (x - m) / s",
    )
    VALID = (
        "import torch\nimport numpy as np\nclass M:\n    def forward(self, x):\n        return np.linalg.svd(x)",
        "import torch\nclass M:\n    def forward(self, x):\n        return torch.linalg.svd(x.cpu())",
        "import torch\nclass M:\n    def forward(self, x):\n        return torch.linalg.norm(x)",
        "import torch\nclass M:\n    def __init__(self, w):\n        self.u = torch.linalg.svd(w)",
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self, w):\n        self.w = merge(w)\n"
        "def merge(w):\n    return torch.inverse(w)",
        "import torch\nclass M:\n    def forward(self, op):\n        return op.inverse()",
        "import torch\nclass M:\n    def forward(self, x, names):\n        names.sort()\n        return x",
        "import torch\nclass Reduce(BaseTransform):\n    def forward(self, data):\n"
        "        return torch.linalg.svd(data.x)",
        "import numpy as np\nclass M:\n    def forward(self, x):\n        a = np.asarray(x)\n        return a.std()",
        "import torch\nclass M:\n    def forward(self, x):\n        return self.var(x)",
    )


# What only a tensor's `sort` takes: a list's takes `key` and `reverse`, and returns None.
_TENSOR_SORT_KEYWORDS = frozenset({"dim", "descending", "stable"})


def _tensor_method(ctx: Context, node: cst.Call) -> str | None:
    """The op of a tensor's own `std(...)` / `var(...)` (dims written as numbers or tuples), or `aten::sort` for its
    own sort: `x.argsort()`, `x.msort()` (lists have neither), and `x.sort(...)` whose result is used (`values,
    order = probs.sort(descending=True)`: a list's sorts in place and returns None) or that takes a tensor's
    arguments (`dim=`, `descending=`). A numpy array's is a host value, left alone below."""
    func = node.func
    if not isinstance(func, cst.Attribute):
        return None
    own = isinstance(func.value, cst.Name) and func.value.value in ("self", "cls")  # `self.var(x)`: its own method
    if func.attr.value == "roll" and not own:  # `x.roll(delay, dims=1)`: a tensor's takes `dims=` (numpy's `axis=`)
        dims = any(a.keyword is not None and a.keyword.value == "dims" for a in node.args)
        numbers = bool(node.args) and all(a.keyword is None and (_integer(a.value) or isinstance(a.value, cst.Tuple))
                                          for a in node.args)
        return "aten::roll" if dims or numbers else None
    if func.attr.value in _METHODS:
        if own or any(
                a.keyword is None and not _integer(a.value) and not isinstance(a.value, cst.Tuple) for a in node.args):
            return None  # `self.var(x)`: the object's own method; `stats.std(values)`: a function given the data
        return _METHODS[func.attr.value]
    if func.attr.value not in ("sort", "argsort", "msort"):
        return None
    if any(a.keyword is None and not _integer(a.value) for a in node.args):
        return None  # `xp.argsort(scores)`: a module's function (numpy's, cupy's) takes the array; a tensor's a dim
    if func.attr.value == "sort" and not any(a.keyword is not None and a.keyword.value in _TENSOR_SORT_KEYWORDS
                                             for a in node.args):
        statement = ctx.statements[-1] if ctx.statements else None
        small = statement.body if isinstance(statement, cst.SimpleStatementLine) else ()
        if any(isinstance(s, cst.Expr) and s.value is node for s in small) or any(
                a.keyword is not None and a.keyword.value in ("key", "reverse") for a in node.args):
            return None  # `items.sort()`, `items.sort(key=len)`: a list sorted in place
    return "aten::sort"


def _distribution(ctx: Context, node: cst.Call) -> tuple[str, cst.BaseExpression | None] | None:
    """The sampler op and first parameter of `Gamma(a, b).sample()`, or of `d.rsample()` with `d` bound once to
    such a distribution (`distr = Beta(alpha, beta)` then `distr.sample()`)."""
    func = node.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in _SAMPLERS:
        return None
    made: cst.BaseExpression | None = func.value
    if isinstance(made, cst.Name):
        bound = ctx.constant(made)
        made = bound[1] if bound is not None else None
    if not isinstance(made, cst.Call):
        return None
    qualname = ctx.qualname(made.func) or ""
    op = SAMPLED.get(qualname.rpartition(".")[2]) if qualname.startswith("torch.distributions.") else None
    parameters = [a.value for a in made.args if a.keyword is None or a.keyword.value != "validate_args"]
    if op is None or (parameters and all(number(v) for v in parameters)):
        return None  # `Beta(0.8, 0.8)`: made from Python numbers, a CPU tensor's distribution
    return op, parameters[0] if parameters else None


def _integer(node: cst.BaseExpression) -> bool:
    """`1`, `-1`: a dimension written as a number."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, cst.Integer)


@check(cst.Call, rules=(CpuFallbackCall,), tokens=("svd", "eigh", "eigvalsh", "slogdet", "inv", "cholesky", "sort",
                                                    "_factor", "det", "qr", "solve_triangular", "multinomial", "roll",
                                                    "cumprod", "std(", "var(", "std_mean", "var_mean", "quantile",
                                                    "median", "searchsorted", "bucketize", "poisson", "binomial",
                                                    "ctc_loss", "sample(", "grid_sample"))
def check_fallback_call(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    op = CALLS.get(qualname or "") if qualname is not None else _tensor_method(ctx, node)
    subject = node.args[0].value if node.args and qualname is not None else (
        node.func.value if isinstance(node.func, cst.Attribute) else None)
    if op is None and qualname is None and (sampled := _distribution(ctx, node)) is not None:
        op, subject = sampled  # a distribution's draw: on the host if its parameters are
    if op is None:
        return  # other methods (`a.inverse()`) are left alone: linear operators and group elements have them too
    if (subject is not None and host_value(ctx, subject)) or host_code(ctx) is not None:
        return  # on the host already: a host value, or the data pipeline's code (`transforms/`, a Dataset)
    if not load_op_releases()[ctx.stack].holds(ctx.sdk):
        return  # the stack's statuses do not speak for this release
    entry = load_ops().get(op)
    if entry is None or entry.on(ctx.stack) != "cpu-fallback" or not ctx.functions:
        return
    # In `forward` it runs every step; elsewhere only where the project's call graph puts the function in what a
    # forward or a training step reaches (a decomposition in set-up, initialisation or checkpoint conversion runs
    # once, on purpose), and as info where the graph reaches it from neither and cannot place it.
    shown = " ".join(ctx.source(node.func).split())
    for requires in ("",) if ctx.in_forward else ("device", ELSEWHERE):
        ctx.report(CpuFallbackCall, node, shown=shown, op=op, stack=ctx.stack, requires=requires)
