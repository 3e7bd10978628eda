"""How a host read or copy (PC701, PC702) is worded for where it happens, and its severity there."""

from __future__ import annotations

from portcheck.findings import Severity
from portcheck.static.check import Context
from portcheck.static.host_sync.place import evaluating

_GRAPH_CUT = ("on PyTorch/XLA it is an implicit graph cut (the pending graph is compiled and run to produce the "
              "value)")
_TRACE = "and `torch_neuronx.trace` bakes the example's value into the graph"
_NATIVE = ("it waits for the device and ends TorchNeuron's eager op fusion there, and under "
           "`torch.compile(backend=\"neuron\")` it is a graph break (an error with `fullgraph=True`)")
_NATIVE_STEP = "it waits for the device and ends TorchNeuron's eager op fusion there"


def place_words(place: str) -> str:
    """Where a read is, in a message's words: "forward", "helper" (code a forward calls), "step-helper" (code a
    training step calls), "elsewhere", else a training loop's own body."""
    return {"forward": "inside `forward`", "helper": "in code the model's `forward` calls",
            "step-helper": "in code a training step calls",
            "elsewhere": "in code a model or a step may call"}.get(place, "every training step")


def read_message(ctx: Context, what: str, place: str, fix_xla: str, fix_native: str,
             graph_break: bool = False) -> tuple[str, Severity | None]:
    """`graph_break`: the read is a data access that `torch.compile` graph-breaks on (`.item()`, `.tolist()`). Only
    when the model is not training (`place.evaluating`), the read is info: evaluation metrics, which a deployed
    model's inference may still run."""
    if evaluating(ctx):
        return (f"{what} only when the model is not training: an evaluation metric, no "
                "per-step cost in training; where inference runs this branch, keep it after the compiled model"), \
            Severity.INFO
    where = place_words(place)
    helper = place == "step-helper"
    place = {"helper": "forward", "step-helper": "step"}.get(place, place)
    if helper and ctx.inference_only:
        # a chip that does not train: PC607 reports the training; its step's reads are not the port's problem
        return f"{what} {where}: training does not run on {ctx.chip} (PC607), so this read is not reached there", \
            Severity.INFO
    if ctx.stack == "xla":
        cut = f"{_GRAPH_CUT} {_TRACE}" if place == "forward" else _GRAPH_CUT
        return f"{what} {where}: {cut}; {fix_xla}", None
    native = _NATIVE if place == "forward" and graph_break else _NATIVE_STEP
    return f"{what} {where}: {native}; {fix_native}", Severity.INFO


__all__ = ["place_words", "read_message"]
