"""The Hugging Face kernel hub (PC504): `get_kernel("org/name")`, a prebuilt kernel fetched for the host."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.cuda_library.fallbacks import fallback, fallback_severity
from portcheck.static.syntax import call_name, keyword, positional, string_value
from portcheck.static.values import under_type_checking


@rule
class KernelsHubKernel(Rule):
    """## What it does
    Finds `get_kernel("org/name")` from the Hugging Face `kernels` package (or transformers' `hub_kernels`
    wrapper): a prebuilt kernel downloaded for the host's backend. It loads on Neuron only if the repository
    ships a `neuron` build. Inside `try/except` or under an availability check it is info.

    ## Example
    ```python
    from kernels import get_kernel
    activation = get_kernel("kernels-community/activation")
    ```

    ## Use instead
    Check that the kernel repository has a `neuron` build, or keep the pure-PyTorch path:
    ```python
    y = torch.nn.functional.gelu(x, approximate="tanh")
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC504"
    INVALID = (
        "from kernels import get_kernel\nact = get_kernel('kernels-community/activation')",
        "import kernels\nk = kernels.get_kernel('kernels-community/rwkv', version=1)",
    )
    VALID = (
        "from kernels import get_kernel\nk = get_kernel(repo_name)",
        "k = registry.get_kernel('org/conv')",
        "def get_kernel(name):\n    return name\nk = get_kernel('org/conv')",
    )


HUB_TOKENS = ("get_kernel",)

_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def _hub_repo(ctx: Context, node: cst.Call) -> str | None:
    """The repository of `get_kernel("org/name")` from the `kernels` package (or a wrapper module named
    `hub_kernels`, as transformers has), or None."""
    if call_name(node) != "get_kernel":
        return None
    qualname = ctx.qualname(node.func)
    if qualname is None:
        # A bare name bound by a relative import (`from ...integrations.hub_kernels import get_kernel`),
        # not a function of this file.
        if not isinstance(node.func, cst.Name) or "get_kernel" in ctx.names.module_scope.bound:
            return None
    elif qualname != "kernels.get_kernel" and not qualname.endswith("hub_kernels.get_kernel"):
        return None
    arg = keyword(node, "repo_id") or positional(node, 0)
    if arg is None:
        return None
    bound = ctx.constant(arg.value)  # `get_kernel(KERNEL_REPO)` with `KERNEL_REPO = "org/name"`
    repo = string_value(bound[1] if bound else arg.value)
    return repo if repo is not None and _REPO_ID.match(repo) else None


@check(cst.Call, rules=(KernelsHubKernel,), tokens=HUB_TOKENS)
def check_hub_kernel(node: cst.Call, ctx: Context) -> None:
    repo = _hub_repo(ctx, node)
    if repo is None or under_type_checking(ctx):
        return
    reason = fallback(ctx)
    why = ("the `kernels` library loads a repository's `neuron` build only under TorchNeuron (where `torch.neuron` "
           "exists) and only if the repository ships one, and raises \"Cannot find a build variant\" otherwise")
    if reason:
        message = (f"`get_kernel(\"{repo}\")` ({reason}) fetches a prebuilt hub kernel: {why}; make sure the "
                   "fallback is the pure-PyTorch path")
    else:
        message = (f"`get_kernel(\"{repo}\")` fetches a prebuilt hub kernel: {why}; check that the repository has "
                   "a `neuron` build, or keep a pure-PyTorch path")
    ctx.report(KernelsHubKernel, node, message, fallback_severity(reason))
