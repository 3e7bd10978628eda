"""`channels_last` memory format asked of tensors on TorchNeuron native, whose device tensors take only the
contiguous (or preserved) format (PC319)."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.cuda_api.paths import cuda_path
from portcheck.static.syntax import call_name, keyword, positional


@rule
class ChannelsLastOnNeuron(Rule):
    """## What it does
    On TorchNeuron native, finds `.to(..., memory_format=torch.channels_last)` and
    `.contiguous(memory_format=torch.channels_last)` (also `channels_last_3d`, and `.contiguous(torch.channels_last)`
    positionally), through any import alias of torch. `torch.contiguous_format`, `torch.preserve_format`, a format
    chosen at run time, and conversions inside a CUDA-only branch stay quiet.

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
        "x = 'x.to(memory_format=torch.channels_last)'",
    )


TOKENS = ("channels_last",)

_FORMATS = frozenset({"torch.channels_last", "torch.channels_last_3d"})
_OPS = {"to": "aten::_to_copy", "contiguous": "aten::contiguous"}


@check(cst.Call, rules=(ChannelsLastOnNeuron,), tokens=TOKENS)
def check_channels_last(node: cst.Call, ctx: Context) -> None:
    method = call_name(node)
    if method not in _OPS or not isinstance(node.func, cst.Attribute):
        return
    arg = keyword(node, "memory_format") or (positional(node, 0) if method == "contiguous" else None)
    if arg is None or ctx.qualname(arg.value) not in _FORMATS or cuda_path(ctx, node):
        return
    ctx.report(ChannelsLastOnNeuron, arg, method=method, shown=ctx.source(arg.value), op=_OPS[method])
