"""The rules only `portcheck trace` reports: evidence from the captured graph that no static check gives.
`portcheck rule CODE` prints a class's docstring; each rule's example is a model in fixtures/models/, checked
by tests/test_trace.py. Rules with static checks as well (PC201, PC303, ...) live in their category package under
portcheck/static/ and list `Pass.TRACE` among their passes."""

from __future__ import annotations

from portcheck.rules import Pass, Rule, TracedFinding, rule
from portcheck.static.custom_attention.handwritten import attention_sizes, kernel_advice


@rule
class DynamicAxes(Rule):
    """## What it does
    Exports the model once more with its batch and sequence axes dynamic (`torch.export.Dim.AUTO`) and reports
    which axes stay dynamic, the bounds export found (a `seq <= 128` guard from a position table), the
    model's position limit, and the sequence buckets to compile for (powers of two from 128).

    ## Example
    `portcheck trace --hf-config bert/` reports `input_ids` axis 1 dynamic up to 128: buckets 128.

    ## Use instead
    Compile one graph per bucket (`torch_neuronx.bucket_model_trace`, NxD Inference buckets) and pad inputs to
    the next bucket.

    ## Fix safety
    Advice only.
    """

    code = "PC211"
    passes = (Pass.TRACE,)
    message = "Neuron compiles static shapes: {axes}"


@rule
class SpecialisedAxis(Rule):
    """## What it does
    Reports an input axis the model cannot run at another size: export fixed it although it was asked to keep
    it dynamic, and the model run eagerly at another size (every input of that axis together) raised. The finding
    is at the line that raised: what fixes the size (a reshape to literal sizes, a buffer of that length). An axis
    export fixed but the model runs at another size too is not reported here: one graph per size works (PC211).

    ## Example
    `x.view(2, 16, 64)` in forward pins batch 2 and sequence 16.

    ## Use instead
    Sizes from the input (`x.view(b, s, -1)` with `b, s = x.shape[:2]`).

    ## Fix safety
    No automatic fix.
    """

    code = "PC212"
    passes = (Pass.TRACE,)
    message = "{axes}; so it compiles for that size only and cannot be bucketed"


@rule
class TracedUnsupportedOp(Rule):
    """## What it does
    Reports each ATen op of the traced graph whose status in rules/ops.toml is `unsupported` on the
    target's stack, with the documented reason and error code. With `--neuron-analyze` on a Neuron host it
    also reports what `torch_neuronx.analyze` finds unsupported.

    ## Example
    `torch.triangular_solve` traced to `aten::triangular_solve` (NCC_EUOC002).

    ## Use instead
    What the op's entry names: a supported formulation, or running that part on the CPU.

    ## Fix safety
    No automatic fix.
    """

    code = "PC316"
    passes = (Pass.TRACE,)
    message = "{usage} is unsupported on {chip} ({stack} stack){why}{error}"

    @classmethod
    def traced_message(cls, finding: TracedFinding, stack: str) -> str:
        """What `torch_neuronx.analyze` reported (`--neuron-analyze`)."""
        where = f" (failed in {finding.failure_at})" if finding.failure_at else ""
        return f"`torch_neuronx.analyze` reports `{finding.op}` as unsupported{where}"


@rule
class CpuFallbackOp(Rule):
    """## What it does
    Reports each ATen op of the traced graph that the target's stack runs on the host CPU (status
    `cpu-fallback` in rules/ops.toml).

    ## Example
    `aten::sort` on the native stack: TorchNeuron (eager, in the source rules/ops.toml cites) registers no device
    kernel for it, so it takes the catch-all CPU fallback. Under `torch.compile(backend="neuron")` the whole graph
    is compiled; what happens to the op there is not documented, and the finding says so.

    ## Use instead
    A supported formulation of the same computation, or accept the copy where the op is rare.

    ## Fix safety
    No automatic fix.
    """

    code = "PC317"
    passes = (Pass.TRACE,)
    message = "{usage} runs on the host CPU on {chip} ({stack} stack){mode}, with copies to and from the device{caveat}"


@rule
class UnknownOps(Rule):
    """## What it does
    One finding listing the ATen ops of the traced graph that no source in rules/ops.toml covers for the
    target's stack. Composite ops (`aten::linear`) are judged by what they decompose into. Unknown is
    reported as unknown, never as supported; the JSON report lists every op with its status per chip.

    ## Example
    An op no source covers for the stack, such as a CompositeExplicitAutograd op (`aten::zeros_like`) on the
    native stack, whose status depends on the ops its kernel calls.

    ## Use instead
    Check the listed ops with `torch_neuronx.analyze` on a Neuron host (`portcheck trace --neuron-analyze`).

    ## Fix safety
    Advice only.
    """

    code = "PC318"
    passes = (Pass.TRACE,)
    message = ("{count} ATen ops in the graph have no source on {stack}-stack support in rules/ops.toml: "
               "{names}{more}; they are unknown, not supported: check them with `torch_neuronx.analyze` on a Neuron "
               "host (the JSON report lists each with its first line)")


# torch's own operator namespaces; an op in any other (`transformers::grouped_mm_fallback`) is a custom operator.
TORCH_NAMESPACES = frozenset({"aten", "prims", "_c10d_functional", "_c10d_functional_autograd", "c10d"})


# Custom ops that exist only because the graph is captured (export, dynamo), with the op the model runs eagerly on
# Neuron instead: transformers' MoE layers call `transformers::grouped_mm_fallback` only under torchdynamo with
# non-bfloat16 weights, and `aten::_grouped_mm` otherwise (transformers 5.24, integrations/moe.py
# `_can_use_grouped_mm`). Such an op is judged as that op and is not the model's custom op (PC320).
EXPORT_ONLY = {"transformers::grouped_mm_fallback": "aten::_grouped_mm"}


def custom_op(op: str) -> bool:
    return op.split("::")[0] not in TORCH_NAMESPACES and op not in EXPORT_ONLY


@rule
class CustomOp(Rule):
    """## What it does
    Reports each call of a custom operator in the traced graph: an op outside torch's own namespaces (`aten`,
    `prims`), registered by a library or by the model (`torch.library.custom_op`, a C++ extension), such as
    `transformers::grouped_mm_fallback`, at the line that calls it.

    ## Example
    A mixture-of-experts layer whose expert matmuls go through `torch.ops.mylib.grouped_mm(...)`.

    ## Use instead
    The same computation in ATen ops (`torch.bmm`, a loop over experts), or an implementation of the op for the
    Neuron device (an NKI kernel registered for it).

    ## Fix safety
    No automatic fix.
    """

    code = "PC320"
    passes = (Pass.TRACE,)
    message = "`{op}` is a custom operator, not an ATen op: {why}"

    @classmethod
    def traced_message(cls, finding: TracedFinding, stack: str) -> str:
        why = ("torch-xla has no lowering for it, so it runs on the CPU and cuts the graph, and `torch_neuronx.trace` "
               "can throw on it" if stack == "xla" else
               "without a kernel for the neuron device it takes TorchNeuron's CPU fallback, and `torch.compile` "
               "needs it in ATen ops")
        return cls.format(op=finding.op, why=f"{why}; write it in ATen ops or give it a Neuron (NKI) implementation")


@rule
class AttentionKernelFit(Rule):
    """## What it does
    Reports each `scaled_dot_product_attention` node of the traced graph with its heads, head_dim and
    query × key lengths, and says which fused NKI attention kernel fits those shapes. Info only: the Neuron
    compiler takes SDPA, so a model that uses it gets no warning for its attention.

    ## Example
    `F.scaled_dot_product_attention(q, k, v, is_causal=True)` with head_dim 128.

    ## Use instead
    For long sequences, the NKI kernel the message names (head_dim <= 128).

    ## Fix safety
    Advice only.
    """

    code = "PC403"
    passes = (Pass.TRACE,)

    @classmethod
    def traced_message(cls, finding: TracedFinding, stack: str) -> str:
        assert finding.attention is not None  # the graph's SDPA node gives its sizes
        return (f"`scaled_dot_product_attention` ({attention_sizes(finding.attention)}): the Neuron compiler takes it "
                f"as PyTorch ops; {kernel_advice(finding.attention, stack)}")


@rule
class GraphBreak(Rule):
    """## What it does
    Where torch.export fails, runs `torch._dynamo.explain` and reports each graph break at the user's line
    with Dynamo's reason; a break at a dynamic-shape operator (`nonzero`) also reports that op's rule.

    ## Example
    `if y.sum() > 0:` in forward breaks the graph ("generic_jump TensorVariable").

    ## Use instead
    Tensor operations for the decision (`torch.where`), or the decision outside forward.

    ## Fix safety
    No automatic fix.
    """

    code = "PC720"
    passes = (Pass.TRACE,)
    message = ("graph break: {reason}; each break cuts the Neuron graph in two (torch.compile) and "
               "`torch_neuronx.trace` freezes it to the example's values")

    @classmethod
    def traced_message(cls, finding: TracedFinding, stack: str) -> str:
        return cls.format(reason=finding.reason)


@rule
class ExportFailure(Rule):
    """## What it does
    Reports where torch.export could not capture the model, when the reason is not a data-dependent branch
    (those are PC208): an unsupported Python construct, a failing shape check, a custom op without a fake
    implementation.

    ## Example
    A forward that calls into a C extension torch.export cannot trace.

    ## Use instead
    What export's message suggests; a fake (meta) implementation for custom ops.

    ## Fix safety
    No automatic fix.
    """

    code = "PC721"
    passes = (Pass.TRACE,)
    message = "torch.export could not capture the model whole here: {reason}"

    @classmethod
    def traced_message(cls, finding: TracedFinding, stack: str) -> str:
        return cls.format(reason=finding.reason)


__all__ = [
    "AttentionKernelFit", "CpuFallbackOp", "CustomOp", "DynamicAxes", "ExportFailure", "GraphBreak", "SpecialisedAxis",
    "TracedUnsupportedOp", "UnknownOps",
]
