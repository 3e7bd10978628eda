"""CUDA-only attention kernels (PC402): calls of flash-attn and xformers attention, and launches of Triton
attention kernels defined in the file."""

from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.cuda_library import fallback
from portcheck.static.syntax import block_body, blocks, bound_name, dotted_name, import_statements
from portcheck.static.values import availability_probe, catches_import_error


@rule
class CudaAttentionKernel(Rule):
    """## What it does
    Finds calls of CUDA-only attention kernels: flash-attn (`flash_attn_func`, `flash_attn_varlen_func`,
    `flash_attn_with_kvcache`, the packed variants, FlashAttention-3's `flash_attn_interface`, flash-attn's
    `MHA` / `FlashSelfAttention` modules), xformers `memory_efficient_attention` and `xformers.ops.fmha`, and
    launches of Triton kernels defined in the file whose name says attention (`_attn_fwd[grid](...)`). A call
    inside `try`/`except ImportError` or under an availability check, or of a name imported that way, is info:
    the code has a fallback.
    (The import of the library is PC501.)

    ## Example
    ```python
    from flash_attn import flash_attn_func

    out = flash_attn_func(q, k, v, causal=True)
    ```

    ## Use instead
    ```python
    scores = (q @ k.transpose(-2, -1)) * scale + causal_mask
    out = torch.softmax(scores, dim=-1) @ v
    ```
    or an NKI flash-attention kernel (the NKI Library's `attention_cte`; on the xla stack
    `neuronxcc.nki.kernels.attention.flash_fwd`, or `neuronx_distributed.kernels.flash_attn.nki_flash_attn_func`
    for training).

    ## Fix safety
    No automatic fix: the layouts differ (flash-attn takes `(batch, seq, heads, dim)`).
    """

    code = "PC402"
    INVALID = (
        "from flash_attn import flash_attn_func\nout = flash_attn_func(q, k, v, causal=True)",
        "import flash_attn\nout = flash_attn.flash_attn_varlen_func(q, k, v, cu, cu, 8, 8)",
        "import xformers.ops as xops\nout = xops.memory_efficient_attention(q, k, v)",
        "import triton\n@triton.jit\ndef _attn_fwd(Q, K, V):\n    pass\n_attn_fwd[(1,)](q, k, v)",
    )
    VALID = (
        "try:\n    from flash_attn import flash_attn_func\nexcept ImportError:\n    flash_attn_func = None",
        "from flash_attn.bert_padding import unpad_input\nx = unpad_input(h, m)",
        "# out = flash_attn_func(q, k, v)\nuse_flash_attn = False",
        "import torch.nn.functional as F\nout = F.scaled_dot_product_attention(q, k, v)",
    )


KERNEL_TOKENS = ("flash_attn", "xformers", "memory_efficient_attention", "triton")

_FLASH_MODULES = ("flash_attn.", "flash_attn_interface.")
_FLASH_CLASSES = frozenset({"FlashSelfAttention", "FlashCrossAttention", "MHA"})
_XFORMERS = ("xformers.ops.memory_efficient_attention", "xformers.ops.fmha.")
_ATTENTION_NAME = re.compile(r"attn|attention", re.IGNORECASE)


def _kernel_library(qualname: str) -> str | None:
    last = qualname.rsplit(".", 1)[-1]
    if qualname.startswith(_FLASH_MODULES) and (last.startswith("flash_attn") or last in _FLASH_CLASSES):
        return "flash-attn"
    if qualname.startswith("flash_attn_2_cuda.") or qualname.startswith("flash_attn_3_cuda."):
        return "flash-attn"
    if qualname.startswith(_XFORMERS):
        return "xformers"
    return None


def _triton_attention_kernels(ctx: Context) -> frozenset[str]:
    """Names of module-level functions decorated `@triton.jit` / `@triton.autotune` whose name says attention."""
    found = set()
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.FunctionDef) and _ATTENTION_NAME.search(stmt.name.value):
            for decorator in stmt.decorators:
                target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
                if (ctx.qualname(target) or "").startswith("triton."):
                    found.add(stmt.name.value)
    return frozenset(found)


def _imported_names(body: Iterable[cst.BaseStatement]) -> set[str]:
    """The first segment of each name the imports of `body` bind (not those of nested blocks, nor `*`)."""
    return {bound_name(alias).split(".")[0] for small, _ in import_statements(body, nested=False)
            if not isinstance(small.names, cst.ImportStar) for alias in small.names}


def _names_with_fallback(ctx: Context) -> frozenset[str]:
    """Local names imported inside `try:` with an ImportError handler or under an availability check
    (`try: from flash_attn import flash_attn_func / except ImportError: flash_attn_func = None`): a call of
    one is reached only where the library is installed."""
    found: set[str] = set()

    def walk(body: Iterable[cst.BaseStatement]) -> None:
        for stmt in body:
            if (isinstance(stmt, (cst.Try, cst.TryStar)) and catches_import_error(stmt)) or (
                    isinstance(stmt, cst.If) and availability_probe(stmt.test, ctx)):
                found.update(_imported_names(block_body(stmt.body)))
            if not isinstance(stmt, cst.SimpleStatementLine):
                for block in blocks(stmt):
                    walk(block)

    walk(ctx.module.body)
    return frozenset(found)


def _replacement(ctx: Context) -> str:
    if ctx.stack == "native":
        return ("use plain PyTorch attention, which the Neuron compiler takes, or an NKI flash-attention kernel "
                "(the NKI Library's `attention_cte`) through a `@nki.jit` op")
    return ("use plain PyTorch attention, which the Neuron compiler takes, or an NKI flash-attention kernel "
            "(`neuronxcc.nki.kernels.attention.flash_fwd`; for training `neuronx_distributed.kernels.flash_attn."
            "nki_flash_attn_func`, sequence a multiple of 2048)")


@check(cst.Call, rules=(CudaAttentionKernel,), tokens=KERNEL_TOKENS)
def check_kernel_call(node: cst.Call, ctx: Context) -> None:
    func = node.func
    library: str | None
    if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name):
        # `_attn_fwd[grid](q, k, v, ...)`: the launch of a Triton attention kernel defined in this file.
        kernels = ctx.memo("triton-attention", ctx.module, lambda: _triton_attention_kernels(ctx))
        if func.value.value in kernels:
            shown, library = func.value.value, "Triton"
        else:
            return
    else:
        qualname = ctx.qualname(func)
        library = _kernel_library(qualname) if qualname else None
        if qualname is None or library is None:
            return
        shown = qualname
    reason = fallback(ctx)
    head = (dotted_name(func) or "").split(".")[0]
    if reason is None and head in ctx.memo("fallback-imports", ctx.module, lambda: _names_with_fallback(ctx)):
        reason = f"with `{head}` imported only where the library is (an ImportError fallback or an availability test)"
    if reason is not None:
        ctx.report(CudaAttentionKernel, node, f"`{shown}` is a CUDA-only {library} attention kernel, called here "
                   f"{reason}: on Neuron the fallback runs instead; make sure it is plain PyTorch attention",
                   Severity.INFO)
        return
    ctx.report(CudaAttentionKernel, node, f"`{shown}` is a CUDA-only {library} attention kernel: it cannot run on a "
               f"Neuron instance; {_replacement(ctx)}")
