"""Triton kernels (PC502): functions decorated `@triton.jit`, `@triton.autotune` or `@triton.heuristics`."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.cuda_library.fallbacks import fallback, fallback_severity
from portcheck.static.values import under_type_checking


@rule
class TritonKernel(Rule):
    """## What it does
    Finds Triton kernels: functions decorated `@triton.jit`, `@triton.autotune(...)` or
    `@triton.heuristics(...)`, through any import alias. One finding per kernel, at its first Triton
    decorator. A kernel defined where its file has a fallback (under `if is_triton_available():`, inside
    `try/except ImportError`) is info.

    ## Example
    ```python
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        ...
    ```

    ## Use instead
    ```python
    out = x + y  # the PyTorch op the kernel fused; the Neuron compiler optimizes it
    ```
    or an NKI kernel (`@nki.jit`) for the hot spots the compiler does not handle well.

    ## Fix safety
    No automatic fix: a kernel has to be rewritten by hand.
    """

    code = "PC502"
    INVALID = (
        "import triton\n@triton.jit\ndef k(x_ptr, n):\n    pass",
        "import triton as tr\n@tr.autotune(configs=[], key=['n'])\n@tr.jit\ndef k(x_ptr, n):\n    pass",
        "from triton import jit\n@jit\ndef k(x_ptr, n):\n    pass",
    )
    VALID = (
        "import torch\n@torch.jit.script\ndef f(x):\n    return x",
        "from numba import jit\n@jit\ndef f(x):\n    return x",
        "def triton_jit_fallback(x):\n    return x",
    )


TRITON_TOKENS = ("import triton", "from triton", ", triton")

_TRITON_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})


def _kernel_advice(stack: str) -> str:
    if stack == "native":
        return ("replace it with the PyTorch ops it fuses (the Neuron compiler optimizes those), or rewrite it in "
                "NKI (`@nki.jit`, registered as a PyTorch op with `@nki_op`)")
    return ("replace it with the PyTorch ops it fuses (the Neuron compiler optimizes those), or rewrite it as an "
            "NKI kernel called directly (`@nki.jit`; `torch_neuronx.nki_jit` is unsupported since Neuron 2.24)")


@check(cst.FunctionDef, rules=(TritonKernel,), tokens=TRITON_TOKENS)
def check_triton_kernel(node: cst.FunctionDef, ctx: Context) -> None:
    for decorator in node.decorators:
        expr = decorator.decorator
        name = ctx.qualname(expr.func if isinstance(expr, cst.Call) else expr)
        if name in _TRITON_DECORATORS:
            break
    else:
        return
    if under_type_checking(ctx):
        return
    reason = fallback(ctx, node)
    if reason:
        message = (f"Triton kernel `{node.name.value}` (`@{name}`, {reason}) is GPU code; on Neuron make sure "
                   f"the fallback is the pure-PyTorch path ({_kernel_advice(ctx.stack)})")
    else:
        message = (f"Triton kernel `{node.name.value}` (`@{name}`) is GPU code that NeuronCores cannot run; "
                   f"{_kernel_advice(ctx.stack)}")
    ctx.report(TritonKernel, decorator, message, fallback_severity(reason))
