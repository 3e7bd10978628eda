"""torch.distributions objects built with argument validation on, inside `forward` or a training step (PC704).

`Distribution.__init__` checks each parameter against its constraint with `if not torch._is_all_true(valid):`, a
Python truth test on a tensor, so every construction reads the parameters' check on the host; `log_prob` does the
same for its value. Validation is on unless `validate_args=False` is passed or turned off for the process:
`Distribution._validate_args` is `__debug__`, true unless Python runs with `-O` (pytorch/pytorch#48743, torch 1.8
on)."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.host_sync.place import evaluating, read_place
from portcheck.static.host_sync.wording import place_words
from portcheck.static.scope import host_value, literal
from portcheck.static.syntax import keyword
from portcheck.summaries import ELSEWHERE

# The classes of torch.distributions whose constructor checks its parameters (a non-empty `arg_constraints`;
# observed with torch 2.13, checked against torch by tests/test_value_kinds.py). `Independent`,
# `MixtureSameFamily` and `TransformedDistribution` check only what they wrap, which is built (and checked) apart.
VALIDATING = frozenset({
    "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "ContinuousBernoulli", "Dirichlet",
    "Exponential", "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy",
    "HalfNormal", "InverseGamma", "Kumaraswamy", "LKJCholesky", "Laplace", "LogNormal", "LogisticNormal",
    "LowRankMultivariateNormal", "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal",
    "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "RelaxedBernoulli",
    "RelaxedOneHotCategorical", "StudentT", "Uniform", "VonMises", "Weibull", "Wishart",
})
_TURNED_OFF = "set_default_validate_args(False)"


@rule
class DistributionValidation(Rule):
    """## What it does
    Finds `torch.distributions` objects (`Normal(mu, sigma)`, `Categorical(logits=...)`) built from tensors
    inside `forward`, a training step, or code the project's call graph finds they call, with argument
    validation on: no `validate_args=False`, and no `Distribution.set_default_validate_args(False)` in the
    file. Distributions of Python numbers or host tensors stay quiet, and so do those built once in `__init__`.
    A warning in a training step on the xla stack, where each check cuts the lazy graph; info elsewhere: on
    TorchNeuron native a check is a device sync, and `torch_neuronx.trace` runs it once, while tracing.

    ## Example
    ```python
    def forward(self, x):
        mu, sigma = self.head(x).chunk(2, dim=-1)
        return Normal(mu, F.softplus(sigma))
    ```

    ## Use instead
    ```python
    def forward(self, x):
        mu, sigma = self.head(x).chunk(2, dim=-1)
        return Normal(mu, F.softplus(sigma), validate_args=False)
    ```
    or `torch.distributions.Distribution.set_default_validate_args(False)` once at start-up, after the model
    has been checked on the CPU.

    ## Fix safety
    No automatic fix: without validation, invalid parameters (a negative scale, probabilities that do not sum
    to one) no longer raise `ValueError` but give NaNs or wrong samples.
    """

    code = "PC704"
    INVALID = (
        "import torch\nfrom torch.distributions import Normal\nclass M(torch.nn.Module):\n"
        "    def forward(self, x):\n        return Normal(x, x.exp())",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, logits):\n"
        "        return torch.distributions.Categorical(logits=logits).sample()",
    )
    VALID = (
        "import torch\nfrom torch.distributions import Normal\nclass M(torch.nn.Module):\n"
        "    def forward(self, x):\n        return Normal(x, x.exp(), validate_args=False)",
        "import torch\nfrom torch.distributions import Normal\nclass M(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x + Normal(0.0, 1.0).sample(x.shape)",
        "import torch\nfrom torch.distributions import Distribution, Normal\n"
        "Distribution.set_default_validate_args(False)\nclass M(torch.nn.Module):\n"
        "    def forward(self, x):\n        return Normal(x, x.exp())",
    )


def _validating(ctx: Context, node: cst.Call) -> str | None:
    """The class name, where `node` builds a torch distribution that checks its parameters."""
    qualname = ctx.qualname(node.func)
    if qualname is None or not qualname.startswith("torch.distributions."):
        return None
    name = qualname.rsplit(".", 1)[1]
    return name if name in VALIDATING else None


@check(cst.Call, rules=(DistributionValidation,), tokens=("distributions",))
def check_distribution(node: cst.Call, ctx: Context) -> None:
    name = _validating(ctx, node)
    if name is None or _TURNED_OFF in ctx.text or keyword(node, "validate_args") is not None:
        return  # `validate_args=True` asks for the checks on purpose; `=flag` is the caller's choice
    values = [a.value for a in node.args if a.star != "**"]
    if not values or all(literal(v) or host_value(ctx, v) for v in values):
        return  # `Normal(0.0, 1.0)`: its checks run on CPU tensors
    place = read_place(ctx, node)
    if place is None:
        return
    shown = " ".join(ctx.source(node.func).split())
    what = (f"`{shown}(...)` checks its parameters with a Python test on a tensor (torch.distributions validates "
            "by default), and `log_prob` checks its value the same way: each check reads a tensor on the host")
    fix = ("pass `validate_args=False`, or call `torch.distributions.Distribution.set_default_validate_args(False)` "
           "once at start-up")
    # in a helper: where a forward or a training step reaches it, and info where neither does (a likelihood's
    # `log_prob`, a policy's distribution built through an attribute the call graph cannot follow)
    for where, requires in (("helper", "forward"), ("step-helper", "step"), ("helper", ELSEWHERE)) \
            if place == "helper" else ((place, ""),):
        ctx.report(DistributionValidation, node, *_worded(ctx, what, where, fix), requires=requires)


def _worded(ctx: Context, what: str, where: str, fix: str) -> tuple[str, Severity]:
    """A warning only where the check cuts a lazy graph every training step (the xla stack); info elsewhere: on
    TorchNeuron native it is a device sync, and `torch_neuronx.trace` runs the check once, while tracing."""
    if evaluating(ctx):
        return f"{what}, only when the model is not training; {fix}", Severity.INFO
    step = where in ("step", "step-helper")
    place = place_words(where)
    if ctx.stack != "xla":
        return f"{what} {place}: it waits for the device and ends TorchNeuron's eager op fusion there; {fix}", \
            Severity.INFO
    if step:
        return (f"{what} {place}: on PyTorch/XLA each check is an implicit graph cut (the pending graph is "
                f"compiled and run to produce it); {fix}"), Severity.WARNING
    return (f"{what} {place}: on PyTorch/XLA each check cuts the lazy graph, while under `torch_neuronx.trace` it "
            f"runs once, at trace time; {fix}"), Severity.INFO


__all__ = ["VALIDATING", "DistributionValidation", "check_distribution"]
