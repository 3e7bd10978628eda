"""CUDA extensions (PC503): `torch.utils.cpp_extension` builds that compile CUDA code."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.cuda_library.fallbacks import fallback, fallback_severity
from portcheck.static.cuda_library.imports import one_line
from portcheck.static.syntax import keyword, positional
from portcheck.static.values import under_type_checking
from portcheck.static.walk import visit


@rule
class CudaExtension(Rule):
    """## What it does
    Finds CUDA extensions built with `torch.utils.cpp_extension`: `CUDAExtension(...)`, `load(...)` whose
    `sources` name a `.cu`/`.cuh` file or that passes `with_cuda=True` / `extra_cuda_cflags`, and
    `load_inline(..., cuda_sources=...)`. A CPU-only `CppExtension` or `load` of `.cpp` files stays quiet.

    ## Example
    ```python
    from torch.utils.cpp_extension import load
    ext = load("fused_op", sources=["fused_op.cpp", "fused_op_kernel.cu"])
    ```

    ## Use instead
    Write the operator in PyTorch ops, or as an NKI kernel (Neuron's language for custom operators).

    ## Fix safety
    No automatic fix.
    """

    code = "PC503"
    INVALID = (
        "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('op', ['op.cpp', 'op_kernel.cu'])",
        "from torch.utils.cpp_extension import load\nop = load(name='op', sources=['op.cpp', 'op.cu'])",
        "import torch.utils.cpp_extension as ce\nop = ce.load_inline('op', cpp_sources=[], cuda_sources=[SRC])",
    )
    VALID = (
        "from torch.utils.cpp_extension import CppExtension\next = CppExtension('op', ['op.cpp'])",
        "from torch.utils.cpp_extension import load\nop = load(name='op', sources=['op.cpp'])",
        "from torch.utils.cpp_extension import load_inline\nop = load_inline('op', cpp_sources=[SRC])",
    )


EXTENSION_TOKENS = ("cpp_extension",)

_EXTENSION = "torch.utils.cpp_extension"
_CUDA_SOURCE = re.compile(r"\.(cu|cuh)$")


def _cuda_source_in(ctx: Context, node: cst.BaseExpression) -> str | None:
    """A `.cu`/`.cuh` path written anywhere in a `sources=` expression (a list, `os.path.join(...)`, or a
    local name bound to one), or None."""
    bound = ctx.constant(node)
    if bound is not None:
        node = bound[1]
    found: list[str] = []

    class Finder(cst.CSTVisitor):
        def visit_SimpleString(self, string: cst.SimpleString) -> bool:
            value = string.evaluated_value
            if isinstance(value, str) and _CUDA_SOURCE.search(value):
                found.append(value)
            return False

        def visit_FormattedStringText(self, text: cst.FormattedStringText) -> bool:
            if _CUDA_SOURCE.search(text.value):
                found.append(text.value)
            return False

    visit(node, Finder())
    return found[0] if found else None


def _is_true(node: cst.Arg | None) -> bool:
    return node is not None and isinstance(node.value, cst.Name) and node.value.value == "True"


def cuda_build(ctx: Context, node: cst.Call, qualname: str) -> str | None:
    """What makes this cpp_extension call a CUDA build, or None."""
    if qualname == f"{_EXTENSION}.CUDAExtension":
        return "builds a CUDA extension"
    if _is_true(keyword(node, "with_cuda")):
        return "builds with `with_cuda=True`"
    if qualname == f"{_EXTENSION}.load":
        sources = keyword(node, "sources") or positional(node, 1)
        cuda = sources and _cuda_source_in(ctx, sources.value)
        if cuda:
            return f"compiles the CUDA source `{cuda.rsplit('/', 1)[-1]}`"
        if keyword(node, "extra_cuda_cflags"):
            return "compiles CUDA code (`extra_cuda_cflags`)"
    if qualname == f"{_EXTENSION}.load_inline":
        cuda_sources = keyword(node, "cuda_sources") or positional(node, 2)
        if cuda_sources is not None and not (isinstance(cuda_sources.value, cst.Name)
                                             and cuda_sources.value.value == "None"):
            return "compiles inline CUDA sources (`cuda_sources=`)"
    return None


@check(cst.Call, rules=(CudaExtension,), tokens=EXTENSION_TOKENS)
def check_cuda_extension(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname is None or not qualname.startswith(f"{_EXTENSION}."):
        return
    what = cuda_build(ctx, node, qualname)
    if what is None or under_type_checking(ctx):
        return
    shown = one_line(ctx.source(node.func), 40)
    reason = fallback(ctx)
    advice = ("write the operator in NKI, Neuron's kernel language for custom operators, or in PyTorch ops; a "
              "CPU-only `CppExtension` still builds")
    if reason:
        message = (f"`{shown}(...)` {what} ({reason}): NVIDIA GPU kernels, which NeuronCores cannot run, so the "
                   f"fallback runs; make sure it is the PyTorch path ({advice})")
    else:
        message = f"`{shown}(...)` {what}: NVIDIA GPU kernels, which NeuronCores cannot run; {advice}"
    ctx.report(CudaExtension, node, message, fallback_severity(reason))
