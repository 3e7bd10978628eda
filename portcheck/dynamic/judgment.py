"""What the trace knows that changes a finding's weight: the longest keys a hand-written attention can take (PC401),
and a tensor test the model's own code skips whenever it is traced (PC208 on the xla stack). No torch here."""

from __future__ import annotations

import ast
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from portcheck.dynamic.outcome import ModelFacts
from portcheck.findings import Finding, Severity
from portcheck.rules import TracedFinding
from portcheck.static.custom_attention.handwritten import HandWrittenAttention
from portcheck.static.dynamic_shape.control_flow import TensorControlFlow

# The most keys a hand-written attention can take and still be small: its score matrix is at most 512 × 512 per
# head (1 MiB in float32), which device memory holds easily. NKI's attention kernels are written for long
# sequences: the NKI Library's attention_cte is "designed ... for context encoding (prefill) scenarios where the
# sequence length is large" (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.29.0/nki/library/api/attention-cte.html,
# Neuron 2.29-2.30), and flash_fwd tiles keys 2048 at a time (its seq_tile_size default,
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.21.0.beta/general/nki/api/generated/nki.kernels.flash_fwd.html).
SMALL_KEYS = 512


def longest_keys(finding: TracedFinding, model: ModelFacts | None) -> tuple[int, str] | None:
    """The most keys a traced hand-written attention can ever see, and why, or None where it can grow without a
    bound the trace knows. Keys as many as an axis of an input (past its batch axis: the tokens, a float input's
    sequence) grow with that input, up to the model's position limit; any other key count (the 49 tokens of a
    7 × 7 window, the patches of an image) is fixed by the model."""
    shape = finding.attention
    if shape is None or not isinstance(shape.seq_k, int) or model is None:
        return None
    sizes = {size for fact in model.inputs if fact.kind == "tensor" for size in fact.shape[1:]}
    if shape.seq_k in sizes or not model.inputs:
        limit = model.max_positions
        return (limit, f"the model's position limit is {limit} tokens") if limit else None
    return shape.seq_k, f"its key count ({shape.seq_k}) is fixed by the model, not by an input's size"


def weigh_attention(finding: TracedFinding, model: ModelFacts | None, message: str) -> TracedFinding:
    """A hand-written attention whose score matrix stays small whatever the input (a 7 × 7 window's 49 keys, an
    encoder limited to 512 positions) is the rule's info, not a warning: nothing long to fuse."""
    if finding.rule is not HandWrittenAttention:
        return replace(finding, message=message)
    bound = longest_keys(finding, model)
    if bound is None or bound[0] > SMALL_KEYS:
        return replace(finding, message=message)
    keys, why = bound
    return replace(finding, severity=Severity.INFO, message=(
        f"{message}; but {why}, so its score matrix stays at most {keys} × {keys} per head: small, with no long "
        f"sequence for a fused kernel to tile"))


# Calls that answer True while a graph is captured (transformers' `is_tracing(tensor)`, `is_torchdynamo_compiling()`,
# `torch.compiler.is_compiling()`): a test `not <call> and <read>` is one the code skips whenever it is traced.
_TRACING_CALLS = frozenset({"is_tracing", "is_torchdynamo_compiling", "is_compiling", "is_dynamo_compiling"})


def _skipped_when_traced(test: ast.expr) -> bool:
    if not isinstance(test, ast.BoolOp) or not isinstance(test.op, ast.And):
        return False
    for part in test.values:
        if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not) and isinstance(part.operand, ast.Call):
            func = part.operand.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in _TRACING_CALLS:
                return True
    return False


@lru_cache(maxsize=64)
def _guarded_lines(path: str) -> frozenset[int]:
    """The lines of `path` whose `if`, `while` or conditional expression tests `not is_tracing(...) and ...`."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    return frozenset(node.test.lineno for node in ast.walk(tree)
                     if isinstance(node, (ast.If, ast.While, ast.IfExp)) and _skipped_when_traced(node.test))


def once_at_trace(findings: list[Finding], stack: str, cwd: Path) -> list[Finding]:
    """On the xla stack, a tensor test the model's code skips whenever it is traced (`if not is_tracing(mask) and
    (mask[:, -1] == 0).all():`) is no per-step read: `torch_neuronx.trace` runs the model once, so the value is
    read once, at trace time, and the compiled graph keeps the branch the example took. The code's own guard says
    its traced path needs no such check (torch.export took it here). Reported as info, saying so."""
    if stack != "xla":
        return findings
    out = []
    for f in findings:
        if f.code == TensorControlFlow.code and f.severity > Severity.INFO and \
                f.line in _guarded_lines(str(cwd / f.path)):
            f = replace(f, severity=Severity.INFO, message=(
                f"{f.message}; but the code skips this test whenever it is traced (`not is_tracing(...)`), and "
                "`torch_neuronx.trace` runs the model once: the value is read once, at trace time, not per step"))
        out.append(f)
    return out
