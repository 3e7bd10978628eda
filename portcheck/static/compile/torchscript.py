"""TorchScript, which neither Neuron stack compiles through: `torch.jit.script` called or used as a decorator
(PC716)."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.compile.text import one_line


@rule
class TorchJitScript(Rule):
    """## What it does
    Finds `torch.jit.script(...)` and `@torch.jit.script`. TorchScript is deprecated in PyTorch, and neither
    Neuron stack compiles through it: the XLA stack's `torch_neuronx.trace` records the eager model with torch-xla
    (freezing control flow, so scripting keeps no branch), and TorchNeuron native compiles with `torch.compile`.
    `torch.jit.load` / `save` / `trace` / `ignore` / `is_tracing` / `is_scripting` / `script_if_tracing` stay
    quiet (a `torch_neuronx.trace` result is a ScriptModule), and so does scripting in a file that uses
    torch_neuronx's bucketing, whose bucket kernel must be scripted. Advice (info).

    ## Example
    ```python
    @torch.jit.script
    def gelu(x):
        return x * 0.5 * (1.0 + torch.erf(x / 1.41421))
    ```

    ## Use instead
    ```python
    def gelu(x):
        return x * 0.5 * (1.0 + torch.erf(x / 1.41421))
    ```

    ## Fix safety
    No automatic fix: code that receives the scripted function or module may rely on what eager code lacks
    (`.save()`, `.graph`, `.code`).
    """

    code = "PC716"
    INVALID = (
        "import torch\n@torch.jit.script\ndef f(x):\n    return x",
        "import torch\nm = torch.jit.script(model)",
        "from torch import jit\nm = jit.script(model)",
    )
    VALID = (
        "import torch\nm = torch.jit.load('model.pt')",
        "import torch\n@torch.jit.ignore\ndef f(x):\n    return x",
        "import torch\nif torch.jit.is_scripting():\n    pass",
        "import torch\n@torch.jit.script_if_tracing\ndef f(x):\n    return x",
        "import torch, torch_neuronx\nk = torch.jit.script(kernel)\n"
        "cfg = torch_neuronx.BucketModelConfig(lambda: k)",
    )


SCRIPT_TOKENS = ("script",)

_JIT_SCRIPT = "torch.jit.script"


def _uses_neuron_bucketing(ctx: Context) -> bool:
    """torch_neuronx's bucketing takes a `torch.jit.script`-ed bucket kernel: scripting is required there."""
    code = ctx.text
    return "torch_neuronx" in code and ("BucketModelConfig" in code or "bucket_model_trace" in code)


def _report_script(ctx: Context, node: cst.CSTNode) -> None:
    if ctx.memo("compile-bucketing", ctx.module, lambda: _uses_neuron_bucketing(ctx)):
        return
    if ctx.stack == "xla":
        advice = ("`torch_neuronx.trace` records the eager model through torch-xla and freezes its control flow, "
                  "so scripting keeps no branch in the Neuron graph; drop it and trace the eager module")
    else:
        advice = "TorchNeuron compiles with `torch.compile(backend=\"neuron\")`; drop the scripting"
    ctx.report(TorchJitScript, node, f"`{one_line(ctx, node)}`: TorchScript is deprecated in PyTorch; {advice}")


@check(cst.Call, rules=(TorchJitScript,), tokens=SCRIPT_TOKENS)
def check_script_call(node: cst.Call, ctx: Context) -> None:
    if ctx.qualname(node.func) == _JIT_SCRIPT:
        _report_script(ctx, node)


@check(cst.Decorator, rules=(TorchJitScript,), tokens=SCRIPT_TOKENS)
def check_script_decorator(node: cst.Decorator, ctx: Context) -> None:
    """`@torch.jit.script` without a call (with one, the Call check sees it)."""
    if not isinstance(node.decorator, cst.Call) and ctx.qualname(node.decorator) == _JIT_SCRIPT:
        _report_script(ctx, node.decorator)
