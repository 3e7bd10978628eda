"""Attention written out by hand (PC401): softmax of q @ kᵀ, then @ v, followed through one function's names."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from portcheck.knowledge import load_native_sdpa
from portcheck.rules import Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.syntax import blocks, call_name, string_value

if TYPE_CHECKING:
    from portcheck.rules import TracedFinding
    from portcheck.traced import AttentionShape


@rule
class HandWrittenAttention(Rule):
    """## What it does
    Finds attention written out by hand: a softmax over a matmul of a query with a transposed key, then a
    matmul with the values, with `@`, `matmul`, `bmm`, `baddbmm` or `einsum`, with or without a scale, a mask,
    a cast and dropout in between, across reassignments of the same local name within one function. Reported
    as info: the Neuron compiler takes this code; the rule points at the fused kernels for the sequences where
    the score matrix gets large (`portcheck trace` measures them).

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
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("hand-written attention (softmax of q @ kᵀ, then `{shown}`): the Neuron compiler takes it as plain "
               "PyTorch, but it materialises the whole query × key score matrix in device memory; for long "
               "sequences use {fused}; the kernels need head_dim <= 128")
    INVALID = (
        "import torch\ndef f(q, k, v):\n    w = torch.matmul(q, k.transpose(2, 3)) * 0.1\n"
        "    w = torch.softmax(w, dim=-1)\n    return torch.matmul(w, v)",
        "import torch.nn.functional as F\ndef f(q, k, v, mask):\n    s = q @ k.mT\n    s = s + mask\n"
        "    p = F.softmax(s.float(), dim=-1).to(q.dtype)\n    p = F.dropout(p, 0.1, True)\n    return p @ v",
        "import torch\ndef f(q, k, v):\n    s = torch.einsum('bhqd,bhkd->bhqk', q, k)\n    p = s.softmax(dim=-1)\n"
        "    return torch.einsum('bhqk,bhkd->bhqd', p, v)",
        "import torch\ndef f(q, k, v):\n    return torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)), -1), v)",
        "import torch\ndef f(self, q, k, v):\n    s = q @ k.transpose(-2, -1)\n    s = softcap(s, self.cap)\n"
        "    s = self.mask(scores=s, mask=None)\n    return torch.softmax(s, -1) @ v",
        "import torch\ndef f(t, p, g):\n    a = torch.einsum('nct,ncp->ntp', (t, p)).softmax(2)\n"
        "    return torch.einsum('ntg,ncg->nct', (a, g))",
        "import torch\ndef f(q, k, v):\n    s = torch.einsum('bhid,bjd->bhij', q, k).softmax(-1)\n"
        "    return torch.einsum('bhij,bjd->bhid', s, v)",
    )
    VALID = (
        "import torch\ndef f(q, k, v):\n    return torch.nn.functional.scaled_dot_product_attention(q, k, v)",
        "import torch\ndef f(x, w, v):\n    p = torch.softmax(x @ w, dim=-1)\n    return p @ v",
        "import torch\ndef f(q, k, v):\n    s = q @ k.transpose(-2, -1)\n    p = torch.log_softmax(s, -1)\n"
        "    return p @ v",
        "import torch\ndef f(q, k):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1)",
        "import torch\ndef f(a, b, c):\n    x = torch.einsum('bij,bjk->bik', a, b).softmax(-1)\n"
        "    return torch.einsum('bik,bkl->bil', x, c)",
    )

    @classmethod
    def traced_message(cls, finding: TracedFinding, stack: str) -> str:
        """The trace's witness: the matmul → softmax → matmul of the graph, with its sizes."""
        shape = finding.attention
        assert shape is not None  # the graph's scores give their sizes
        return (f"hand-written attention in the graph (matmul → softmax → matmul; {attention_sizes(shape)}): it "
                f"builds the whole {shape.seq_q} × {shape.seq_k} score matrix per head; use "
                f"`F.scaled_dot_product_attention`, and for long sequences {kernel_advice(shape, stack)}")


def attention_sizes(shape: AttentionShape) -> str:
    """An attention's sizes as the trace's messages give them."""
    return f"{shape.heads} heads, head_dim {shape.head_dim}, query × key {shape.seq_q} × {shape.seq_k}"


def kernel_advice(shape: AttentionShape, stack: str) -> str:
    """Which fused NKI attention kernel fits a traced attention's sizes on a stack, if any."""
    head_dim, seq = shape.head_dim, shape.seq_q
    if stack == "native":
        return _native_sdpa_advice(shape)
    if isinstance(head_dim, int) and head_dim > 128:
        return f"head_dim {head_dim} is above the 128 the NKI attention kernels take, so it stays unfused"
    kernel = ("the NKI Library's `attention_cte` (prefill) in a `@nki.jit` op" if stack == "native" else
              "NxD Inference's `attn_kernel_enabled=True` or `neuronxcc.nki.kernels.attention.flash_fwd`")
    advice = f"a fused NKI kernel fits (head_dim {head_dim} <= 128): {kernel}"
    if isinstance(seq, int) and seq % 2048:
        advice += f"; NxD's training flash attention needs a sequence that is a multiple of 2048 (this is {seq})"
    return advice


def _native_sdpa_advice(shape: AttentionShape) -> str:
    """Whether TorchNeuron's NKI SDPA kernel takes these sizes, eager and under torch.compile (ops.toml
    [native_sdpa])."""
    sdpa = load_native_sdpa()
    head_dim, seq_q, seq_k = shape.head_dim, shape.seq_q, shape.seq_k
    if isinstance(head_dim, int) and head_dim > sdpa.head_dim_max:
        return (f"head_dim {head_dim} is above the {sdpa.head_dim_max} TorchNeuron's NKI SDPA kernel takes, so SDPA "
                "runs unfused on the device")
    known = isinstance(seq_q, int) and isinstance(seq_k, int)

    def fits(multiple: int, key_tile: int = 1) -> str:
        if not known:
            return "unknown lengths"
        assert isinstance(seq_q, int) and isinstance(seq_k, int)
        return "fits" if not seq_q % multiple and not seq_k % multiple and not seq_k % key_tile else "does not fit"

    return (f"TorchNeuron's NKI SDPA kernel needs head_dim <= {sdpa.head_dim_max}, no mask and dropout 0, and "
            f"eager both lengths multiples of {sdpa.eager_seq_multiple} ({fits(sdpa.eager_seq_multiple)}), "
            f"torch.compile both multiples of {sdpa.compile_seq_multiple} and the key length of its tile (at least "
            f"{sdpa.compile_key_tile}; {fits(sdpa.compile_seq_multiple, sdpa.compile_key_tile)}, with "
            "TORCH_NEURONX_ENABLE_NKI_SDPA on); otherwise SDPA runs unfused on the device")


HANDWRITTEN_TOKENS = ("softmax",)

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
    scores_at: dict[str, cst.CSTNode] = field(default_factory=dict)  # name -> the q @ kᵀ its scores or probs come from
    hits: list[tuple[cst.CSTNode, cst.CSTNode | None]] = field(default_factory=list)  # (the @ v, its q @ kᵀ)
    _seen: set[int] = field(default_factory=set)
    _origin: dict[int, cst.CSTNode] = field(default_factory=dict)  # id(expression) -> its q @ kᵀ

    # ---- statements ----

    def block(self, body: Iterable[cst.BaseStatement]) -> None:
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
        for part in blocks(stmt):
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
                    self.bind(small.target, self.matmul(small, held, value, self.scores_at.get(name)), small)
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
                if tag in (_SCORES, _PROBS) and id(value) in self._origin:
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
            return tag, self.scores_at.get(node.value) if tag in (_SCORES, _PROBS) else None
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
                return self.matmul(node, left, right, self._origin.get(id(node.left))), node if left != _PROBS else None
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
        owner = node.func.value if isinstance(node.func, cst.Attribute) and qualname is None else None
        method = owner is not None  # a method of a value (`scores.softmax(-1)`), not a function of an import
        receiver = self.tag(owner) if owner is not None else None
        args = [self.tag(arg.value) for arg in node.args]
        positional_args = [(arg, tag) for arg, tag in zip(node.args, args, strict=True)
                           if arg.keyword is None and not arg.star]

        if (method and name in _TRANSPOSE_METHODS) or qualname in _TRANSPOSE_FUNCTIONS:
            inner = receiver if method else (positional_args[0][1] if positional_args else None)
            return (inner, None) if inner in (_SCORES, _PROBS) else (_TRANSPOSED, None)
        if qualname in _MATMUL_FUNCTIONS and len(positional_args) >= 2:
            (first, a), (_, b) = positional_args[0], positional_args[1]
            return self.matmul(node, a, b, self._origin.get(id(first.value))), node
        if method and name in _MATMUL_METHODS and positional_args:
            b = positional_args[0][1]
            return self.matmul(node, receiver, b, self._origin.get(id(owner))), node
        if (qualname == "torch.baddbmm" and len(positional_args) >= 3) or (
                method and name == "baddbmm" and len(positional_args) >= 2):
            offset = 1 if qualname == "torch.baddbmm" else 0
            (first, a), (_, b) = positional_args[offset], positional_args[offset + 1]
            return self.matmul(node, a, b, self._origin.get(id(first.value))), node
        if qualname in _EINSUM or (qualname is None and name == "einsum" and not method):
            return self.einsum(node, positional_args)
        if "softmax" in name and "log" not in name:
            held = owner if method and name == "softmax" and not _module_softmax(node) else (
                positional_args[0][0].value if positional_args else None)
            tagged = receiver if held is owner else (positional_args[0][1] if positional_args else None)
            return (_PROBS, self._origin.get(id(held))) if tagged == _SCORES else (None, None)
        if "drop" in name and positional_args and positional_args[0][1] == _PROBS:  # dropout, attn_drop
            return _PROBS, self._origin.get(id(positional_args[0][0].value))
        if method and name in _KEEPING_METHODS and receiver in (_SCORES, _PROBS):
            return receiver, self._origin.get(id(owner))
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
        on_self = isinstance(owner, cst.Name) and owner.value == "self"
        if (on_self or not method) and not (qualname or "").startswith("torch."):
            # `apply_softcap(scores, cap)`, `self.mask_scores(attn_scores=s)`, `self.hook_scores(s)`: a function of
            # the project (or a module or hook the object holds) handed the scores alone returns them transformed.
            carried = [(given, held) for given, held in zip(node.args, args, strict=True) if held in (_SCORES, _PROBS)]
            if len(carried) == 1:
                return carried[0][1], self._origin.get(id(carried[0][0].value))
        return None, None

    def matmul(self, node: cst.CSTNode, left: str | None, right: str | None,
               origin: cst.CSTNode | None = None) -> str | None:
        """`left @ right`: the scores of q @ kᵀ, or (reported, with `origin`, the q @ kᵀ of `left`) probs @ v."""
        if left == _PROBS:
            self.report(node, origin)
            return None
        if right == _TRANSPOSED:
            return _SCORES
        return None

    def einsum(self, node: cst.Call,
               args: list[tuple[cst.Arg, str | None]]) -> tuple[str | None, cst.CSTNode | None]:
        equation = string_value(args[0][0].value) if args else None
        operands = [(arg.value, tag) for arg, tag in args[1:]]
        if len(operands) == 1 and isinstance(packed := operands[0][0], (cst.Tuple, cst.List)):
            # `torch.einsum("nct,ncp->ntp", (theta, phi))`: the operands as one sequence
            operands = [(e.value, self.tag(e.value)) for e in packed.elements if not isinstance(e, cst.StarredElement)]
        if equation is None or len(operands) != 2 or "->" not in equation:
            return None, None
        inputs, output = equation.replace(" ", "").split("->")
        parts = inputs.split(",")
        if len(parts) != 2 or not all(parts):
            return None, None
        (held, first), _ = operands
        if first == _PROBS:
            self.report(node, self._origin.get(id(held)))
            return None, None
        contracted = (set(parts[0]) & set(parts[1])) - set(output)
        # q·kᵀ contracts the feature axis: the last of both operands ("bhqd,bhkd->bhqk"), or with channels first one
        # at the same place in both ("nct,ncp->ntp"); a plain product contracts the first's last with the second's
        # second-to-last ("bij,bjk->bik").
        if parts[0][-1] == parts[1][-1] and parts[0][-1] in contracted:
            return _SCORES, node  # the last axis of both, whatever else they hold ("bhid,bjd->bhij": k shared)
        if len(contracted) == 1 and len(parts[0]) == len(parts[1]) and \
                parts[0].index(axis := next(iter(contracted))) == parts[1].index(axis):
            return _SCORES, node
        return None, None

    def report(self, node: cst.CSTNode, origin: cst.CSTNode | None) -> None:
        if id(node) not in self._seen:
            self._seen.add(id(node))
            self.hits.append((node, origin))


def _module_softmax(node: cst.Call) -> bool:
    """`self.softmax(scores)`: a module attribute called with the scores, not the method `scores.softmax(-1)`."""
    return isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) and \
        node.func.value.value == "self"


def _fused_kernel(stack: str) -> str:
    if stack == "native":
        return ("an NKI flash-attention kernel (the NKI Library's `attention_cte` for prefill, called from a "
                "`@nki.jit` op)")
    return ("an NKI flash-attention kernel (`neuronxcc.nki.kernels.attention.flash_fwd`, or NxD "
            "Inference's `attn_kernel_enabled=True`)")


@check(cst.FunctionDef, rules=(HandWrittenAttention,), tokens=HANDWRITTEN_TOKENS)
def check_handwritten(node: cst.FunctionDef, ctx: Context) -> None:
    if not isinstance(node.body, cst.IndentedBlock):
        return
    flow = _Flow(ctx)
    flow.block(node.body.body)
    for hit, origin in flow.hits:
        shown = " ".join(ctx.source(hit).split())
        if len(shown) > 50:
            shown = shown[:47] + "..."
        # The finding spans the construct: from the q @ kᵀ that makes the scores to the @ v that ends it.
        ctx.report(HandWrittenAttention, hit, shown=shown, fused=_fused_kernel(ctx.stack), start=origin)
