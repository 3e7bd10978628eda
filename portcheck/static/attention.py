"""custom-attention (PC4xx): attention written by hand, and attention kernels that only exist for NVIDIA GPUs.

Neuron's guidance for CUDA attention kernels (flash-attn, xformers, Triton) is to strip them: plain PyTorch
attention is what the compiler takes, and NKI flash-attention kernels are the fused path (KNOWLEDGE.md §3.7, §4).
So a call of a CUDA attention kernel is an error, and attention written out by hand (softmax of q @ kᵀ, then @ v)
is advice: it compiles, but materialises the whole (query × key) score matrix, which the NKI kernels avoid.

The hand-written matcher follows values through one function in source order, tagging each local name with
what it holds — a transposed operand, attention scores, attention probabilities — so the usual reassignment
chain (`w = q @ k.T; w = w * s; w = w + mask; w = softmax(w); w = dropout(w); out = w @ v`) is recognised
whether it is written with `@`, `matmul`, `bmm`, `baddbmm` or `einsum`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.libraries import fallback
from portcheck.static.rule import Context, Rule, call_name, check, rule, string_value
from portcheck.static.syntax import blocks as sub_blocks
from portcheck.static.syntax import dotted_name
from portcheck.static.values import availability_probe, catches_import_error

HANDWRITTEN_TOKENS = ("softmax",)
KERNEL_TOKENS = ("flash_attn", "xformers", "memory_efficient_attention", "triton")

# Tags a value can carry while a function is followed.
_TRANSPOSED = "transposed"  # k.transpose(-2, -1), k.mT, k.permute(...): the right operand of q @ kᵀ
_SCORES = "scores"  # q @ kᵀ, scaled, masked, cast
_PROBS = "probs"  # softmax(scores), dropped out, cast

_TRANSPOSE_METHODS = frozenset({"transpose", "permute", "t", "swapaxes", "swapdims"})
_TRANSPOSE_FUNCTIONS = frozenset({"torch.transpose", "torch.permute", "torch.swapaxes", "torch.swapdims", "torch.t"})
_MATMUL_FUNCTIONS = frozenset({"torch.matmul", "torch.bmm", "torch.mm"})
_MATMUL_METHODS = frozenset({"matmul", "bmm", "mm"})
_EINSUM = frozenset({"torch.einsum", "opt_einsum.contract", "einops.einsum"})
# Methods that keep what a tensor holds (a cast, a layout change, a mask fill, a clamp).
_KEEPING_METHODS = frozenset({
    "to", "type", "type_as", "float", "half", "bfloat16", "double", "contiguous", "masked_fill", "masked_fill_",
    "clamp", "clamp_", "clamp_min", "view", "reshape", "view_as", "reshape_as", "squeeze", "unsqueeze", "add",
    "add_", "mul", "mul_", "div", "div_", "sub", "sub_", "expand", "expand_as", "nan_to_num", "tanh", "clip",
})
_KEEPING_FUNCTIONS = frozenset({"torch.where", "torch.masked_fill", "torch.clamp", "torch.nan_to_num", "torch.add",
                                "torch.mul", "torch.div", "torch.sub", "torch.tanh", "torch.clip", "torch.maximum",
                                "torch.minimum"})


@dataclass
class _Flow:
    """What the names of one function hold, followed in source order."""

    ctx: Context
    names: dict[str, str] = field(default_factory=dict)
    scores_at: dict[str, cst.CSTNode] = field(default_factory=dict)  # name -> the matmul that made the scores
    hits: list[cst.CSTNode] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)
    _origin: dict[int, cst.CSTNode] = field(default_factory=dict)  # id(expression) -> its q @ kᵀ

    # ---- statements ----

    def block(self, body) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: cst.CSTNode) -> None:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return  # its own scope: the check visits nested functions separately
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.small(small)
            return
        for attr in ("test", "iter"):
            expr = getattr(stmt, attr, None)
            if isinstance(expr, cst.BaseExpression):
                self.tag(expr)
        if isinstance(stmt, cst.With):
            for item in stmt.items:
                self.tag(item.item)
        for part in sub_blocks(stmt):
            self.block(part)

    def small(self, small: cst.CSTNode) -> None:
        if isinstance(small, cst.Assign):
            tag = self.tag(small.value)
            for target in small.targets:
                self.bind(target.target, tag, small.value)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self.bind(small.target, self.tag(small.value), small.value)
        elif isinstance(small, cst.AugAssign):
            value = self.tag(small.value)
            if isinstance(small.target, cst.Name):
                name = small.target.value
                held = self.names.get(name)
                if isinstance(small.operator, cst.MatrixMultiplyAssign):
                    self.bind(small.target, self.matmul(small, held, value), small)
                elif held not in (_SCORES, _PROBS):
                    self.names.pop(name, None)
        elif isinstance(small, (cst.Expr, cst.Return)) and small.value is not None:
            self.tag(small.value)

    def bind(self, target: cst.BaseExpression, tag: str | None, value: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            if tag is None:
                self.names.pop(target.value, None)
            else:
                self.names[target.value] = tag
                if tag == _SCORES and id(value) in self._origin:
                    self.scores_at[target.value] = self._origin[id(value)]
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.bind(element.value, None, value)

    # ---- expressions ----

    def tag(self, node: cst.BaseExpression) -> str | None:
        tag, origin = self._tag(node)
        if origin is not None:
            self._origin[id(node)] = origin
        return tag

    def _tag(self, node: cst.BaseExpression) -> tuple[str | None, cst.CSTNode | None]:
        if isinstance(node, cst.Name):
            tag = self.names.get(node.value)
            return tag, self.scores_at.get(node.value) if tag == _SCORES else None
        if isinstance(node, cst.Attribute):
            if node.attr.value in ("mT", "T", "mH"):
                self.tag(node.value)
                return _TRANSPOSED, None
            return None, None
        if isinstance(node, cst.Subscript):
            return self._carry(node.value)
        if isinstance(node, cst.BinaryOperation):
            left, right = self.tag(node.left), self.tag(node.right)
            if isinstance(node.operator, cst.MatrixMultiply):
                return self.matmul(node, left, right), node if left != _PROBS else None
            for side, tag in ((node.left, left), (node.right, right)):
                if tag in (_SCORES, _PROBS):
                    return tag, self._origin.get(id(side))
            return None, None
        if isinstance(node, cst.UnaryOperation):
            return self._carry(node.expression)
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self.tag(element.value)
        elif isinstance(node, cst.IfExp):
            self.tag(node.test)
            body, orelse = self._carry(node.body), self._carry(node.orelse)
            return body if body[0] is not None else orelse
        return None, None

    def _carry(self, node: cst.BaseExpression) -> tuple[str | None, cst.CSTNode | None]:
        tag = self.tag(node)
        return (tag, self._origin.get(id(node))) if tag in (_SCORES, _PROBS) else (None, None)

    def call(self, node: cst.Call) -> tuple[str | None, cst.CSTNode | None]:
        ctx = self.ctx
        qualname = ctx.qualname(node.func)
        name = call_name(node) or ""
        method = isinstance(node.func, cst.Attribute) and qualname is None
        receiver = self.tag(node.func.value) if method else None  # type: ignore[union-attr]
        args = [self.tag(arg.value) for arg in node.args]
        positional_args = [(arg, tag) for arg, tag in zip(node.args, args, strict=True)
                           if arg.keyword is None and not arg.star]

        if (method and name in _TRANSPOSE_METHODS) or qualname in _TRANSPOSE_FUNCTIONS:
            inner = receiver if method else (positional_args[0][1] if positional_args else None)
            return (inner, None) if inner in (_SCORES, _PROBS) else (_TRANSPOSED, None)
        if qualname in _MATMUL_FUNCTIONS and len(positional_args) >= 2:
            (_, a), (_, b) = positional_args[0], positional_args[1]
            return self.matmul(node, a, b), node
        if method and name in _MATMUL_METHODS and positional_args:
            b = positional_args[0][1]
            return self.matmul(node, receiver, b), node
        if (qualname == "torch.baddbmm" and len(positional_args) >= 3) or (
                method and name == "baddbmm" and len(positional_args) >= 2):
            offset = 1 if qualname == "torch.baddbmm" else 0
            (_, a), (_, b) = positional_args[offset], positional_args[offset + 1]
            return self.matmul(node, a, b), node
        if qualname in _EINSUM or (qualname is None and name == "einsum" and not method):
            return self.einsum(node, positional_args)
        if "softmax" in name and "log" not in name:
            first = receiver if method and name == "softmax" and not _module_softmax(node) else (
                positional_args[0][1] if positional_args else None)
            return (_PROBS, None) if first == _SCORES else (None, None)
        if "drop" in name and positional_args and positional_args[0][1] == _PROBS:  # dropout, attn_drop
            return _PROBS, None
        if method and name in _KEEPING_METHODS and receiver in (_SCORES, _PROBS):
            return receiver, self._origin.get(id(node.func.value))  # type: ignore[union-attr]
        if qualname in ("torch.cat", "torch.concat", "torch.concatenate") and positional_args:
            # `torch.cat([scores, sinks], dim=-1)`: attention sinks add a column to the scores.
            sequence = positional_args[0][0].value
            if isinstance(sequence, (cst.List, cst.Tuple)) and any(
                    self.tag(e.value) == _SCORES for e in sequence.elements):
                return _SCORES, None
        if qualname in _KEEPING_FUNCTIONS:
            for arg, tag in positional_args:
                if tag in (_SCORES, _PROBS):
                    return tag, self._origin.get(id(arg.value))
        return None, None

    def matmul(self, node: cst.CSTNode, left: str | None, right: str | None) -> str | None:
        if left == _PROBS:
            self.report(node)
            return None
        if right == _TRANSPOSED:
            return _SCORES
        return None

    def einsum(self, node: cst.Call, args) -> tuple[str | None, cst.CSTNode | None]:
        equation = string_value(args[0][0].value) if args else None
        operands = args[1:]
        if equation is None or len(operands) != 2 or "->" not in equation:
            return None, None
        inputs, output = equation.replace(" ", "").split("->")
        parts = inputs.split(",")
        if len(parts) != 2 or not all(parts):
            return None, None
        (_, first), _ = operands
        if first == _PROBS:
            self.report(node)
            return None, None
        contracted = (set(parts[0]) & set(parts[1])) - set(output)
        # q·kᵀ contracts the feature axis, the last of both operands ("bhqd,bhkd->bhqk").
        if parts[0][-1] == parts[1][-1] and parts[0][-1] in contracted:
            return _SCORES, node
        return None, None

    def report(self, node: cst.CSTNode) -> None:
        if id(node) not in self._seen:
            self._seen.add(id(node))
            self.hits.append(node)


def _module_softmax(node: cst.Call) -> bool:
    """`self.softmax(scores)`: a module attribute called with the scores, not the method `scores.softmax(-1)`."""
    return isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) and \
        node.func.value.value == "self"


def _handwritten_message(ctx: Context, shown: str) -> str:
    if ctx.stack == "native":
        fused = ("an NKI flash-attention kernel (the NKI Library's `attention_cte` for prefill, called from a "
                 "`@nki.jit` op)")
    else:
        fused = ("an NKI flash-attention kernel (`neuronxcc.nki.kernels.attention.flash_fwd`, or NxD "
                 "Inference's `attn_kernel_enabled=True`)")
    return (f"hand-written attention (softmax of q @ kᵀ, then `{shown}`): the Neuron compiler takes it as plain "
            "PyTorch, but it materialises the whole query × key score matrix in device memory; for long "
            f"sequences use {fused}; the kernels need head_dim <= 128")


@check(cst.FunctionDef, codes=("PC401",), tokens=HANDWRITTEN_TOKENS)
def check_handwritten(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.FunctionDef)
    if not isinstance(node.body, cst.IndentedBlock):
        return
    flow = _Flow(ctx)
    flow.block(node.body.body)
    for hit in flow.hits:
        shown = " ".join(ctx.source(hit).split())
        if len(shown) > 50:
            shown = shown[:47] + "..."
        ctx.report("PC401", hit, _handwritten_message(ctx, shown))


# ---- CUDA attention kernels ------------------------------------------------------------------------------

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


def _imported_names(body) -> set[str]:
    names: set[str] = set()
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    for alias in small.names:
                        bound = alias.asname.name if alias.asname else alias.name
                        names.add((dotted_name(bound) or "").split(".")[0])
    return names


def _names_with_fallback(ctx: Context) -> frozenset[str]:
    """Local names imported inside `try:` with an ImportError handler or under an availability check
    (`try: from flash_attn import flash_attn_func / except ImportError: flash_attn_func = None`): a call of
    one is reached only where the library is installed."""
    found: set[str] = set()

    def walk(body) -> None:
        for stmt in body:
            if isinstance(stmt, (cst.Try, cst.TryStar)) and catches_import_error(stmt):
                found.update(_imported_names(stmt.body.body))
            elif isinstance(stmt, cst.If) and availability_probe(stmt.test):
                found.update(_imported_names(stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ()))
            if not isinstance(stmt, cst.SimpleStatementLine):
                for block in sub_blocks(stmt):
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


@check(cst.Call, codes=("PC402",), tokens=KERNEL_TOKENS)
def check_kernel_call(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    func = node.func
    if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name):
        # `_attn_fwd[grid](q, k, v, ...)`: the launch of a Triton attention kernel defined in this file.
        kernels = ctx.memo("triton-attention", ctx.module, lambda: _triton_attention_kernels(ctx))
        if func.value.value in kernels:  # type: ignore[operator]
            shown, library = func.value.value, "Triton"
        else:
            return
    else:
        qualname = ctx.qualname(func)
        library = _kernel_library(qualname) if qualname else None
        if library is None:
            return
        shown = qualname
    reason = fallback(ctx)
    head = (dotted_name(func) or "").split(".")[0]
    if reason is None and head in ctx.memo("fallback-imports", ctx.module, lambda: _names_with_fallback(ctx)):  # type: ignore[operator]
        reason = f"with `{head}` imported with an ImportError fallback"
    if reason is not None:
        ctx.report("PC402", node, f"`{shown}` is a CUDA-only {library} attention kernel, called here {reason}: on "
                   f"Neuron the fallback runs instead; make sure it is plain PyTorch attention", Severity.INFO)
        return
    ctx.report("PC402", node, f"`{shown}` is a CUDA-only {library} attention kernel: it cannot run on a Neuron "
               f"instance; {_replacement(ctx)}")


# ---- rules -------------------------------------------------------------------------------------------------


@rule
class HandWrittenAttention(Rule):
    """## What it does
    Finds attention written out by hand: a softmax over a matmul of a query with a transposed key, then a
    matmul with the values, with `@`, `matmul`, `bmm`, `baddbmm` or `einsum`, with or without a scale, a mask,
    a cast and dropout in between, across reassignments of the same local name within one function. Off by
    default and reported as info: the Neuron compiler takes this code; the rule points at the fused kernels
    for the sequences where the score matrix gets large. Enable it with `extend-select = ["PC401"]`.

    ## Example
    ```python
    def attend(q, k, v, mask, scale):
        weights = q @ k.transpose(-2, -1) * scale
        weights = weights.masked_fill(mask, float("-inf"))
        weights = torch.softmax(weights, dim=-1)
        return weights @ v
    ```

    ## Use instead
    Keep it for short sequences. For long ones, an NKI flash-attention kernel: on the native stack the NKI
    Library's `attention_cte` in a `@nki.jit` op; on the xla stack `neuronxcc.nki.kernels.attention.flash_fwd`,
    or NxD Inference with `attn_kernel_enabled=True`. The kernels need head_dim <= 128.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC401"
    INVALID = (
        "import torch\ndef f(q, k, v):\n    w = torch.matmul(q, k.transpose(2, 3)) * 0.1\n"
        "    w = torch.softmax(w, dim=-1)\n    return torch.matmul(w, v)",
        "import torch.nn.functional as F\ndef f(q, k, v, mask):\n    s = q @ k.mT\n    s = s + mask\n"
        "    p = F.softmax(s.float(), dim=-1).to(q.dtype)\n    p = F.dropout(p, 0.1, True)\n    return p @ v",
        "import torch\ndef f(q, k, v):\n    s = torch.einsum('bhqd,bhkd->bhqk', q, k)\n    p = s.softmax(dim=-1)\n"
        "    return torch.einsum('bhqk,bhkd->bhqd', p, v)",
        "import torch\ndef f(q, k, v):\n    return torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)), -1), v)",
    )
    VALID = (
        "import torch\ndef f(q, k, v):\n    return torch.nn.functional.scaled_dot_product_attention(q, k, v)",
        "import torch\ndef f(x, w, v):\n    p = torch.softmax(x @ w, dim=-1)\n    return p @ v",
        "import torch\ndef f(q, k, v):\n    s = q @ k.transpose(-2, -1)\n    p = torch.log_softmax(s, -1)\n"
        "    return p @ v",
        "import torch\ndef f(q, k):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1)",
    )


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


__all__ = ["CudaAttentionKernel", "HandWrittenAttention"]
