"""`channels_last` memory format asked of tensors on TorchNeuron native, whose device tensors take only the
contiguous (or preserved) format (PC319)."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.cuda_api.paths import cuda_path
from portcheck.static.syntax import call_name, keyword, positional
from portcheck.static.values import named_or_branched


@rule
class ChannelsLastOnNeuron(Rule):
    """## What it does
    On TorchNeuron native, finds `.to(..., memory_format=torch.channels_last)` and
    `.contiguous(memory_format=torch.channels_last)` (also `channels_last_3d`, and `.contiguous(torch.channels_last)`
    positionally), through any import alias of torch. `torch.contiguous_format`, `torch.preserve_format`, a format
    chosen at run time, conversions inside a CUDA-only branch or under a CPU/CUDA device test
    (`if x.device.type in ("cpu", "cuda"):`), and functions named for those devices (`_ssim_cpu`) stay quiet.

    ## Example
    ```python
    images = images.to(device, memory_format=torch.channels_last)
    ```

    ## Use instead
    ```python
    images = images.to(device)   # keep the default contiguous format on Neuron
    ```

    ## Fix safety
    No automatic fix: removing the argument changes the strides other code may rely on.
    """

    code = "PC319"
    message = ("`.{method}(memory_format={shown})`: TorchNeuron's device tensors take only the contiguous or the "
               "preserved memory format, and its `{op}` raises a RuntimeError for {shown} on a Neuron tensor; "
               "drop the memory format (channels-last is a GPU/CPU layout optimisation)")
    INVALID = (
        "import torch\nx = x.to(device, memory_format=torch.channels_last)",
        "import torch\nx = x.contiguous(memory_format=torch.channels_last)",
        "import torch as th\nm = m.to(memory_format=th.channels_last_3d)",
        "from torch import channels_last\nx = x.contiguous(channels_last)",
    )
    VALID = (
        "import torch\nx = x.to(device, memory_format=torch.contiguous_format)",
        "import torch\nx = x.contiguous()",
        "import torch\nx = x.to(device, memory_format=fmt)",
        "import torch\nif x.is_cuda:\n    x = x.contiguous(memory_format=torch.channels_last)",
        "import torch\nif x.device.type == 'cpu':\n    x = x.to(memory_format=torch.channels_last)",
        "import torch\ndef _conv_cpu(x):\n    return x.contiguous(memory_format=torch.channels_last)",
        "x = 'x.to(memory_format=torch.channels_last)'",
    )


TOKENS = ("channels_last",)

_FORMATS = frozenset({"torch.channels_last", "torch.channels_last_3d"})
_OPS = {"to": "aten::_to_copy", "contiguous": "aten::contiguous"}


# channels-last is a CPU (oneDNN) and GPU layout optimisation: code written for those devices says so in its
# function's name (`_ssim_cpu`) or in a device test around it (`if x.device.type in ("cpu", "cuda"):`).
_DEVICE_WORD = re.compile(r"(^|_)(cpu|cuda|gpu|cudnn|onednn|mkldnn)(_|$)", re.IGNORECASE)
_DEVICE_TEST = re.compile(r"""\bis_cpu\b|\bis_cuda\b|['"](cpu|cuda)['"]""")


def _cpu_or_gpu_only(ctx: Context, node: cst.CSTNode) -> bool:
    return named_or_branched(ctx, node, _DEVICE_WORD, lambda test: _DEVICE_TEST.search(ctx.source(test)) is not None)


@check(cst.Call, rules=(ChannelsLastOnNeuron,), tokens=TOKENS)
def check_channels_last(node: cst.Call, ctx: Context) -> None:
    method = call_name(node)
    if method not in _OPS or not isinstance(node.func, cst.Attribute):
        return
    arg = keyword(node, "memory_format") or (positional(node, 0) if method == "contiguous" else None)
    if arg is None or ctx.qualname(arg.value) not in _FORMATS or cuda_path(ctx, node) or _cpu_or_gpu_only(ctx, node):
        return
    ctx.report(ChannelsLastOnNeuron, arg, method=method, shown=ctx.source(arg.value), op=_OPS[method])
