"""PyTorch/XLA inference code aimed at Trn2, which Neuron 2.34 stopped supporting: `torch_neuronx.trace`,
`parallel_model_trace`, NxD Inference, `xm.xla_device()` (PC722)."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.branches import tpu_only, version_fallback
from portcheck.static.check import Context, check
from portcheck.static.compile.text import one_line
from portcheck.static.syntax import dotted_name
from portcheck.static.values import guard, named_or_branched
from portcheck.static.walk import visit


@rule
class XlaInferenceOnTrn2(Rule):
    """## What it does
    On Trn2 (TorchNeuron native), finds the PyTorch/XLA inference paths Neuron 2.34 no longer supports there:
    `torch_neuronx.trace` and `torch_neuronx.bucket_model_trace` calls, NxD Core's
    `neuronx_distributed.trace.parallel_model_trace` and `ModelBuilder`, and imports of NxD Inference
    (`neuronx_distributed_inference`), through any import alias. `xm.xla_device()` and `torch_xla.device()` are
    reported too: a warning in a file that also uses `torch_neuronx` or `neuronx_distributed`, info elsewhere (the
    same call serves Google TPUs). A use under `try:` with an `except ImportError` fallback, behind an availability
    probe, in a TPU-only branch, or in a function or branch that names the XLA stack or a chip that keeps it
    (`def compile_xla(...)`, `if stack == "xla":`, `if target == "inf2":`) stays quiet. The same code on Inf2 or
    Trn1 stays quiet: the XLA stack remains in maintenance there.

    ## Example
    ```python
    traced = torch_neuronx.trace(model, example_inputs)
    ```

    ## Use instead
    ```python
    model = model.to("neuron")
    compiled = torch.compile(model, backend="neuron")   # TorchNeuron: eager or torch.compile
    # LLM serving on Trn2: vLLM Neuron, which runs on TorchNeuron
    ```

    ## Fix safety
    No automatic fix: moving from a traced XLA graph to TorchNeuron changes how the model is built, saved and
    loaded.
    """

    code = "PC722"
    message = ""
    INVALID = (
        "import torch_neuronx\ntraced = torch_neuronx.trace(model, (x,))",
        "from torch_neuronx import trace as neuron_trace\nm = neuron_trace(model, x, compiler_args=['--lnc', '2'])",
        "from neuronx_distributed.trace import parallel_model_trace\nm = parallel_model_trace(build, x, tp_degree=8)",
        "import neuronx_distributed as nxd\nm = nxd.trace.parallel_model_trace(build, x, tp_degree=2)",
        "from neuronx_distributed_inference.models.config import InferenceConfig",
        "import neuronx_distributed_inference",
        "import torch_neuronx\nimport torch_xla.core.xla_model as xm\ndevice = xm.xla_device()",
    )
    VALID = (
        "import torch\nm = torch.compile(model, backend='neuron')",
        "import torch\ntraced = torch.jit.trace(model, x)",
        "try:\n    import neuronx_distributed_inference\nexcept ImportError:\n    neuronx_distributed_inference = None",
        "x = 'torch_neuronx.trace(model, x)'",
        "import torch_neuronx\nn = torch_neuronx.DataParallel",
        "import torch_neuronx\ndef compile_xla(model, x):\n    return torch_neuronx.trace(model, x)",
        "import torch_neuronx\nif args.stack == 'xla':\n    m = torch_neuronx.trace(model, x)",
    )


TOKENS = ("trace", "neuronx_distributed_inference", "ModelBuilder", "xla_device", "torch_xla")

# Qualified name -> what it is, in a message. Sources: the catalog entry's.
_TRACE_APIS = {
    "torch_neuronx.trace": "`torch_neuronx.trace` (PyTorch/XLA inference)",
    "torch_neuronx.bucket_model_trace": "`torch_neuronx.bucket_model_trace` (PyTorch/XLA inference)",
    "torch_neuronx.xla_impl.trace.trace": "`torch_neuronx.trace` (PyTorch/XLA inference)",
    "neuronx_distributed.trace.parallel_model_trace": "NxD Core's `parallel_model_trace`",
    "neuronx_distributed.trace.trace.parallel_model_trace": "NxD Core's `parallel_model_trace`",
    "neuronx_distributed.trace.ModelBuilder": "NxD Core's `ModelBuilder`",
    "neuronx_distributed.trace.model_builder.ModelBuilder": "NxD Core's `ModelBuilder`",
}
_XLA_DEVICE = frozenset({"torch_xla.core.xla_model.xla_device", "torch_xla.device"})
_NXDI = "neuronx_distributed_inference"
_NEURON_XLA_MODULES = ("torch_neuronx", "neuronx_distributed")

def _unsupported(ctx: Context) -> str:
    return (f"is not supported on {ctx.chip.capitalize()} from Neuron 2.34, which ended PyTorch/XLA inference and NxD "
            "Inference there")
_WAY_FORWARD = ("run the model on TorchNeuron (`model.to(\"neuron\")`, eager or `torch.compile(backend=\"neuron\")`), "
                "and serve LLMs with vLLM Neuron")


# A function or branch whose name or test says it is for the XLA stack or a chip that keeps it (Inf2, Trn1):
# `def compile_xla(...)`, `if stack == "xla":`. Code that picks a stack per target runs it only there.
_OTHER_TARGET = re.compile(r"xla|inf[12]|trn1", re.IGNORECASE)


def _for_other_target(ctx: Context, node: cst.CSTNode) -> bool:
    return named_or_branched(ctx, node, _OTHER_TARGET, lambda test: _OTHER_TARGET.search(
        " ".join(s.value for s in _strings_and_names(test))) is not None)


def _strings_and_names(test: cst.BaseExpression) -> list[cst.Name | cst.SimpleString]:
    found: list[cst.Name | cst.SimpleString] = []

    class Finder(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name)

        def visit_SimpleString(self, string: cst.SimpleString) -> None:
            found.append(string)

        def visit_Call(self, call: cst.Call) -> bool:
            return False  # `is_torch_xla_available()` probes are values.guard's

        def visit_UnaryOperation(self, op: cst.UnaryOperation) -> bool:
            return not isinstance(op.operator, cst.Not)  # `if not use_xla:` is the other side

    visit(test, Finder())
    return found


def _fallback(ctx: Context, node: cst.CSTNode) -> bool:
    return bool(guard(ctx, node) or tpu_only(ctx, node) or version_fallback(ctx, node)
                or _for_other_target(ctx, node))


def _neuron_xla_file(ctx: Context) -> bool:
    """The file imports the XLA stack's Neuron packages: its torch-xla device is a Neuron device."""
    def compute() -> bool:
        return any(target.split(".", 1)[0] in _NEURON_XLA_MODULES for target in ctx.names.aliases.values())
    return ctx.memo("neuron-xla-file", ctx.module, compute)


@check(cst.Call, rules=(XlaInferenceOnTrn2,), tokens=TOKENS)
def check_xla_inference_call(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname is None or _fallback(ctx, node):
        return
    if qualname in _TRACE_APIS:
        ctx.report(XlaInferenceOnTrn2, node, f"`{one_line(ctx, node)}`: {_TRACE_APIS[qualname]} {_unsupported(ctx)}; "
                   f"{_WAY_FORWARD}")
    elif qualname in _XLA_DEVICE:
        if _neuron_xla_file(ctx):
            ctx.report(XlaInferenceOnTrn2, node, f"`{one_line(ctx, node)}` places the model on a PyTorch/XLA device, "
                       f"which {ctx.chip.capitalize()} no longer runs inference on from Neuron 2.34 (training on it "
                       "ended in 2.30); "
                       f"{_WAY_FORWARD}", severity=Severity.WARNING)
        else:
            ctx.report(XlaInferenceOnTrn2, node, f"`{one_line(ctx, node)}`: if this torch-xla device is meant to be "
                       f"a {ctx.chip.capitalize()} NeuronCore, PyTorch/XLA no longer runs there from Neuron 2.34; use "
                       "the \"neuron\" device of TorchNeuron", severity=Severity.INFO)


@check(cst.Import, cst.ImportFrom, rules=(XlaInferenceOnTrn2,), tokens=(_NXDI,))
def check_nxdi_import(node: cst.Import | cst.ImportFrom, ctx: Context) -> None:
    if isinstance(node, cst.Import):
        modules = [dotted_name(alias.name) or "" for alias in node.names]
    else:
        modules = [dotted_name(node.module) or ""] if node.module is not None and not node.relative else []
    if any(m == _NXDI or m.startswith(_NXDI + ".") for m in modules) and not _fallback(ctx, node):
        ctx.report(XlaInferenceOnTrn2, node, f"NxD Inference (`{_NXDI}`) {_unsupported(ctx)}; serve with vLLM Neuron, "
                   "and move model build and trace code to `torch.compile(backend=\"neuron\")` on TorchNeuron")
