"""Whether a function does any computation autocast changes: `custom_fwd` / `custom_bwd` with CUDA's device type on
a function that only moves data (a collective, a split, a reshape) changes nothing on Neuron, since autocast only
ever recasts the ops on its lists.

The lists are PyTorch's "Autocast Op Reference" (pytorch.org/docs/stable/amp.html#autocast-op-reference, the CUDA
ops that autocast to float16, to float32 and to the widest input type), plus `einsum` and attention, which reach
`bmm` inside; the functions of the same file a function calls count as its own body (three calls deep).
"""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import call_name
from portcheck.static.walk import visit

_AUTOCAST_OPS = frozenset({
    # to float16
    "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "multi_dot", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "GRUCell", "linear", "LSTMCell", "matmul", "mm", "mv",
    "prelu", "RNNCell", "einsum", "scaled_dot_product_attention",
    # to float32
    "acos", "asin", "binary_cross_entropy_with_logits", "cosh", "cosine_embedding_loss", "cdist",
    "cosine_similarity", "cross_entropy", "cumprod", "cumsum", "dist", "erfinv", "exp", "expm1", "group_norm",
    "hinge_embedding_loss", "kl_div", "l1_loss", "layer_norm", "log", "log_softmax", "log10", "log1p", "log2",
    "margin_ranking_loss", "mse_loss", "multilabel_margin_loss", "multi_margin_loss", "nll_loss", "norm",
    "normalize", "pdist", "poisson_nll_loss", "pow", "prod", "reciprocal", "rsqrt", "sinh", "smooth_l1_loss",
    "soft_margin_loss", "softmax", "softmin", "softplus", "sum", "renorm", "tan", "triplet_margin_loss",
    # to the widest input type
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample", "index_put", "scatter_add",
    "tensordot",
})
_DEPTH = 3


def computes(ctx: Context, function: cst.FunctionDef) -> bool:
    """`function` (or a function of the same file it calls) runs an op autocast recasts, a matrix product (`@`), or
    a module of the object (`self.proj(x)`, which may be a layer); False where it only moves and reshapes data."""
    defined = ctx.memo("autocast-file-functions", ctx.module, lambda: {
        s.name.value: s for s in ctx.module.body if isinstance(s, cst.FunctionDef)})
    seen: set[str] = set()

    def walk(node: cst.FunctionDef, depth: int) -> bool:
        finder = _Finder(ctx)
        visit(node.body, finder)
        if finder.found:
            return True
        for name in finder.local_calls:
            if name in defined and name not in seen and depth < _DEPTH:
                seen.add(name)
                if walk(defined[name], depth + 1):
                    return True
        return False

    return walk(function, 0)


class _Finder(cst.CSTVisitor):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.found = False
        self.local_calls: list[str] = []

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.MatrixMultiply):
            self.found = True

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.MatrixMultiplyAssign):
            self.found = True

    def visit_Call(self, node: cst.Call) -> None:
        name = call_name(node) or ""
        qualname = self.ctx.qualname(node.func)
        method = isinstance(node.func, cst.Attribute) and qualname is None
        if name in _AUTOCAST_OPS and (method or (qualname or "").startswith("torch.")):
            self.found = True  # `x.softmax(-1)`, `torch.matmul(a, b)`, `F.linear(x, w)` (not the builtin `sum`)
        elif isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) and \
                node.func.value.value == "self":
            self.found = True  # a module the object holds: a layer, for all this check knows
        elif isinstance(node.func, cst.Name) and qualname is None:
            self.local_calls.append(node.func.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested function runs where it is called


__all__ = ["computes"]
