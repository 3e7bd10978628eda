"""Child side: the capture ladder. torch.export (non-strict) to ATen first; where it fails, the reason
becomes a finding at the user's line, torch._dynamo.explain lists the graph breaks, torch.compile with an
AOTAutograd recorder still yields the ATen graphs between the breaks, and torch.fx.symbolic_trace is the
last resort. Every step's outcome is reported."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from portcheck.dynamic.graph import DATA_DEPENDENT, data_dependent_message
from portcheck.dynamic.load import Loaded
from portcheck.dynamic.rules import ExportFailure, GraphBreak
from portcheck.dynamic.sourcemap import exception_place, frames_place, one_line
from portcheck.rules import TracedFinding
from portcheck.static.dynamic_shape.control_flow import TensorControlFlow
from portcheck.static.dynamic_shape.nms import UnbackedSize
from portcheck.traced import Step

_DYNAMIC_OPERATOR = re.compile(r"Dynamic shape operator.*?`?aten\.(\w+)\.")


@dataclass
class Capture:
    method: str = ""  # the step whose ATen graphs are analysed; "" when none gave any
    graphs: list[torch.fx.Graph] = field(default_factory=list)
    program: torch.export.ExportedProgram | None = None
    steps: list[Step] = field(default_factory=list)
    graph_breaks: int = 0
    findings: list[TracedFinding] = field(default_factory=list)


def _data_dependent(exc: BaseException) -> bool:
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return isinstance(exc, GuardOnDataDependentSymNode) or "data-dependent" in str(exc) or \
        "data dependent" in str(exc)


@contextlib.contextmanager
def full_stack_traces() -> Iterator[None]:
    """Non-strict export keeps only the frames of `forward` methods in a node's stack trace, so an op in a
    helper (`eager_attention_forward`, a function in another file) points at the forward that called it.
    For portcheck the helper's line is the place to change: keep every frame from the first forward on.
    (A private hook of torch; where it is missing, export's own stack traces are used.)"""
    from torch.fx.experimental import proxy_tensor

    tracer = getattr(proxy_tensor, "_ModuleStackTracer", None)
    original = getattr(tracer, "_filter_traceback_frames", None)
    if tracer is None or original is None:
        yield
        return

    def keep_all(self: Any, summary: Any) -> Any:
        saved = getattr(self, "_record_forward_stack_traces_only", False)
        self._record_forward_stack_traces_only = False
        try:
            return original(self, summary)
        finally:
            self._record_forward_stack_traces_only = saved

    tracer._filter_traceback_frames = keep_all
    try:
        yield
    finally:
        tracer._filter_traceback_frames = original


def capture(loaded: Loaded) -> Capture:
    result = Capture()
    started = time.perf_counter()
    try:
        with torch.no_grad(), full_stack_traces():
            program = torch.export.export(loaded.model, loaded.args, loaded.kwargs, strict=False)
    except Exception as exc:
        result.steps.append(Step.timed("torch.export", False, time.perf_counter() - started, detail=one_line(exc)))
        _export_failure(exc, result)
    else:
        result.program = program
        result.graphs = [program.graph]
        result.method = "torch.export"
        result.steps.append(Step.timed("torch.export", True, time.perf_counter() - started, len(program.graph.nodes)))
        return result
    _explain(loaded, result)
    if loaded.device != "meta":
        _aot(loaded, result)
    if not result.graphs:
        _fx(loaded, result)
    return result


def _export_failure(exc: BaseException, result: Capture) -> None:
    rule = TensorControlFlow if _data_dependent(exc) else ExportFailure
    result.findings.append(TracedFinding(rule, exception_place(exc), reason=one_line(exc)))


def _explain(loaded: Loaded, result: Capture) -> None:
    started = time.perf_counter()
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            explanation = torch._dynamo.explain(loaded.model)(*loaded.args, **loaded.kwargs)
    except Exception as exc:
        result.steps.append(Step.timed("torch._dynamo.explain", False, time.perf_counter() - started,
                                 detail=one_line(exc)))
        return
    nodes = sum(len(g.graph.nodes) for g in explanation.graphs)
    # A break where the frame ends (an `if` on a tensor, then return) leaves one graph and a count of 0,
    # but its reason is listed: count the reasons.
    result.graph_breaks = max(explanation.graph_break_count, len(explanation.break_reasons))
    result.steps.append(Step.timed("torch._dynamo.explain", True, time.perf_counter() - started, nodes,
                             f"{explanation.graph_count} graphs, {result.graph_breaks} graph breaks"))
    seen = set()
    for reason in explanation.break_reasons:
        place = frames_place(list(reason.user_stack or []))
        key = (place, reason.reason)
        if key in seen:
            continue
        seen.add(key)
        text = " ".join(str(reason.reason).split())
        result.findings.append(TracedFinding(GraphBreak, place, reason=text[:300]))
        operator = _DYNAMIC_OPERATOR.search(text)
        if operator and f"aten::{operator[1]}" in DATA_DEPENDENT:
            name = f"aten::{operator[1]}"
            result.findings.append(TracedFinding(DATA_DEPENDENT[name], place,
                                                 data_dependent_message(name, UnbackedSize, []), op=name))


def _aot(loaded: Loaded, result: Capture) -> None:
    """torch.compile with a backend that records the ATen graphs AOTAutograd hands a compiler — what
    `torch.compile(backend="neuron")` receives — without compiling anything."""
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs: list[torch.fx.Graph] = []

    def record(gm: torch.fx.GraphModule, example_inputs: Sequence[torch.Tensor | int | torch.SymInt | None]) -> Any:
        graphs.append(gm.graph)
        return make_boxed_func(gm.forward)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
        return aot_module_simplified(gm, example_inputs, fw_compiler=record)

    started = time.perf_counter()
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.compile(loaded.model, backend=backend)(*loaded.args, **loaded.kwargs)
    except Exception as exc:
        result.steps.append(Step.timed("torch.compile+aot_autograd", False, time.perf_counter() - started,
                                 detail=one_line(exc)))
        return
    finally:
        torch._dynamo.reset()
    result.graphs = graphs
    result.method = "torch.compile+aot_autograd"
    result.steps.append(Step.timed("torch.compile+aot_autograd", True, time.perf_counter() - started,
                             sum(len(g.nodes) for g in graphs), f"{len(graphs)} ATen graphs"))


def _fx(loaded: Loaded, result: Capture) -> None:
    started = time.perf_counter()
    try:
        traced = torch.fx.symbolic_trace(loaded.model)
    except Exception as exc:
        result.steps.append(Step.timed("torch.fx.symbolic_trace", False, time.perf_counter() - started,
                                 detail=one_line(exc)))
        return
    result.steps.append(Step.timed("torch.fx.symbolic_trace", True, time.perf_counter() - started,
                             len(traced.graph.nodes), "torch-level graph; no ATen ops to check"))
