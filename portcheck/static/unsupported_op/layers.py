"""Layers and ops neuronx-cc restricts: `one_hot`, bilinear resizing with aligned corners, dilated max pooling,
transposed convolutions with both dilations, `triangular_solve` (PC307-PC311)."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import load_op
from portcheck.rules import Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.syntax import call_name, keyword, positional

LAYER_TOKENS = ("one_hot", "Upsampl", "interpolate", "upsample", "MaxPool", "max_pool", "ConvTranspose",
                "conv_transpose", "triangular_solve")

# (qualname -> index of `mode`, index of `align_corners` among positional arguments)
_RESIZE = {
    "torch.nn.Upsample": (2, 3), "torch.nn.functional.interpolate": (3, 4), "torch.nn.functional.upsample": (3, 4),
}
_ALWAYS_ALIGNED = frozenset({"torch.nn.UpsamplingBilinear2d", "torch.nn.functional.upsample_bilinear"})
_MAX_POOL = {f"torch.nn.MaxPool{d}d": 3 for d in (1, 2, 3)} | {
    f"torch.nn.functional.max_pool{d}d": 4 for d in (1, 2, 3)} | {
    f"torch.nn.functional.max_pool{d}d_with_indices": 4 for d in (1, 2, 3)}
# ConvTranspose{d}d(in, out, kernel, stride, padding, output_padding, groups, bias, dilation);
# conv_transpose{d}d(input, weight, bias, stride, padding, output_padding, groups, dilation)
_CONV_TRANSPOSE = {f"torch.nn.ConvTranspose{d}d": (3, 8) for d in (1, 2, 3)} | {
    f"torch.nn.functional.conv_transpose{d}d": (3, 7) for d in (1, 2, 3)}


@rule
class OneHot(Rule):
    """## What it does
    Finds `torch.nn.functional.one_hot`. Off by default: it failed on older SDKs, and compiler 2.32 rewrites the
    common `one_hot(ids) @ table` into a gather. Enable it when pinned to an older Neuron SDK.

    ## Example
    ```python
    expert_mask = F.one_hot(selected, num_classes=n_experts)
    ```

    ## Use instead
    ```python
    expert_mask = torch.zeros(*selected.shape, n_experts, device=selected.device).scatter_(-1, selected[..., None], 1)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC307"
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`one_hot` compiled to an unsupported dynamic-slice HLO on torch-neuronx 1.13 (aws-neuron-sdk#679); "
               "compiler 2.32 turns `one_hot(ids) @ table` into a gather; on older SDKs use an embedding lookup or "
               "`torch.zeros(...).scatter_(...)`")
    INVALID = ("import torch.nn.functional as F\nm = F.one_hot(ids, 8)", "from torch.nn import functional\n"
               "m = functional.one_hot(ids)")
    VALID = ("def one_hot(x):\n    return x\nm = one_hot(ids)",)


@rule
class BilinearAlignCorners(Rule):
    """## What it does
    Finds bilinear resizing with `align_corners=True`: `nn.Upsample(mode="bilinear", align_corners=True)`,
    `F.interpolate(..., mode="bilinear", align_corners=True)`, `nn.UpsamplingBilinear2d` and
    `F.upsample_bilinear` (both always align corners). An error on the xla stack, where it was reported; advice
    (info) on native, which does not lower through that custom call.

    ## Example
    ```python
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    ```

    ## Use instead
    ```python
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    ```

    ## Fix safety
    No automatic fix: `align_corners=False` shifts the sampling grid, which changes the output slightly.
    """

    code = "PC308"
    message = ("bilinear resize with `align_corners=True` lowers to the custom call `ResizeBilinear`, which "
               "torch-neuronx 2.1 rejected (\"Unsupported CustomCall target\", aws-neuron-sdk#889); use "
               "`align_corners=False` or a fixed interpolation matrix")
    INVALID = (
        "import torch.nn as nn\nup = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)",
        "import torch.nn.functional as F\ny = F.interpolate(x, size=(8, 8), mode='bilinear', align_corners=True)",
        "from torch import nn\nup = nn.UpsamplingBilinear2d(scale_factor=2)",
    )
    VALID = (
        "import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2, mode='bilinear')",
        "import torch.nn as nn\nup = nn.Upsample(scale_factor=2, mode='nearest')",
    )


_NATIVE_NOTE = (" (that custom call is PyTorch/XLA's lowering, reported with torch-neuronx; the native stack is not "
                "PyTorch/XLA and does not go through it, so here it is advice)")


@rule
class DilatedPooling(Rule):
    """## What it does
    Finds max pooling with a literal dilation above 1: `nn.MaxPool2d(3, dilation=2)`, `F.max_pool1d(x, 3, 1, 0, 2)`.

    ## Example
    ```python
    pool = nn.MaxPool2d(kernel_size=3, stride=1, dilation=2)
    ```

    ## Use instead
    ```python
    pool = nn.MaxPool2d(kernel_size=5, stride=1)  # or dilate the input explicitly
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC309"
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("max pooling with dilation > 1 is a reduce-window with window dilation, which neuronx-cc does not "
               "support ({error}); use dilation=1")
    INVALID = (
        "import torch.nn as nn\np = nn.MaxPool2d(3, dilation=2)",
        "import torch.nn.functional as F\ny = F.max_pool1d(x, 3, 1, 0, (2,))",
    )
    VALID = ("import torch.nn as nn\np = nn.MaxPool2d(3, dilation=1)", "import torch.nn as nn\np = nn.MaxPool2d(2)")


@rule
class DilatedTransposedConv(Rule):
    """## What it does
    Finds transposed convolutions with both a stride and a dilation above 1 (literals), e.g.
    `nn.ConvTranspose1d(c, c, 3, stride=2, dilation=2)`: the stride dilates the input and the dilation the kernel.

    ## Example
    ```python
    up = nn.ConvTranspose1d(64, 64, kernel_size=3, stride=2, dilation=2)
    ```

    ## Use instead
    ```python
    up = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv1d(64, 64, 3, dilation=2, padding=2))
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC310"
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("a strided transposed convolution dilates its input, and with kernel dilation as well it needs both "
               "dilations at once, which neuronx-cc rejects ({both_dilations}); keep dilation=1 or upsample and "
               "convolve as separate steps ({dilated_input})")
    INVALID = ("import torch.nn as nn\nc = nn.ConvTranspose1d(8, 8, 3, stride=2, dilation=2)",)
    VALID = (
        "import torch.nn as nn\nc = nn.ConvTranspose1d(8, 8, 3, stride=2)",
        "import torch.nn as nn\nc = nn.Conv1d(8, 8, 3, stride=2, dilation=2)",
    )


@rule
class TriangularSolve(Rule):
    """## What it does
    Finds `torch.triangular_solve` and `A.triangular_solve(b)`.

    ## Example
    ```python
    x, _ = torch.triangular_solve(b, A)
    ```

    ## Use instead
    ```python
    x = torch.inverse(A) @ b
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC311"
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`triangular_solve` has no Neuron lowering ({error}); the docs suggest `torch.inverse(A) @ b` "
               "(equivalent, slower), or run it on the CPU")
    INVALID = ("import torch\nx, _ = torch.triangular_solve(b, A)", "x = b.triangular_solve(A)")
    VALID = ("import torch\nx = torch.inverse(A) @ b",)



def _literal(node: cst.BaseExpression) -> object:
    """An int, bool, str or tuple literal's value, or None."""
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        return node.evaluated_value
    if isinstance(node, (cst.Tuple, cst.List)):
        values = [_literal(e.value) for e in node.elements]
        return None if any(v is None for v in values) else tuple(values)
    return None


def _argument(node: cst.Call, name: str, index: int) -> object:
    arg = keyword(node, name) or positional(node, index)
    return None if arg is None else _literal(arg.value)


def _above_one(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > 1
    return isinstance(value, tuple) and any(isinstance(v, int) and not isinstance(v, bool) and v > 1 for v in value)


@check(cst.Call, rules=(OneHot, BilinearAlignCorners, DilatedPooling, DilatedTransposedConv, TriangularSolve),
       tokens=LAYER_TOKENS)
def check_layers(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname is None:
        if isinstance(node.func, cst.Attribute) and call_name(node) == "triangular_solve":
            qualname = "torch.triangular_solve"
        else:
            return
    if qualname == "torch.nn.functional.one_hot":
        ctx.report(OneHot, node)
    elif qualname in _RESIZE or qualname in _ALWAYS_ALIGNED:
        mode: object  # literal values, as _argument reads them
        aligned: object
        if qualname in _ALWAYS_ALIGNED:
            mode, aligned = "bilinear", True
        else:
            mode_at, aligned_at = _RESIZE[qualname]
            mode, aligned = _argument(node, "mode", mode_at), _argument(node, "align_corners", aligned_at)
        if mode == "bilinear" and aligned is True:
            if ctx.stack == "native":  # the custom call is the XLA lowering's: TorchNeuron does not emit it
                ctx.report(BilinearAlignCorners, node, BilinearAlignCorners.format() + _NATIVE_NOTE, Severity.INFO)
            else:
                ctx.report(BilinearAlignCorners, node)
    elif qualname in _MAX_POOL:
        if _above_one(_argument(node, "dilation", _MAX_POOL[qualname])):
            ctx.report(DilatedPooling, node, error=load_op("aten::max_pool2d").error_code)
    elif qualname in _CONV_TRANSPOSE:
        stride_at, dilation_at = _CONV_TRANSPOSE[qualname]
        if _above_one(_argument(node, "stride", stride_at)) and _above_one(_argument(node, "dilation", dilation_at)):
            # aten::convolution's codes: input with kernel dilation, then a strided convolution of a dilated input
            both_dilations, dilated_input = load_op("aten::convolution").error_codes
            ctx.report(DilatedTransposedConv, node, both_dilations=both_dilations, dilated_input=dilated_input)
    elif qualname == "torch.triangular_solve":
        ctx.report(TriangularSolve, node, error=load_op("aten::triangular_solve").error_code)
