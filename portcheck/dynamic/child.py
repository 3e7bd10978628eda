"""The child process of `portcheck trace`: `python -m portcheck.dynamic.child REQUEST.json RESULT.json`.

It runs the user's model code, so it runs apart: the parent caps its memory and time and survives whatever
happens here. The result is written to a temporary file and renamed, so the parent reads all or nothing."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from portcheck.dynamic.outcome import ModelFacts, OpCount, StageError, TraceOutcome
from portcheck.rules import TracedFinding
from portcheck.traced import AnalyzeVerdict, GraphFacts, Place, ShapeProbe, Step

if TYPE_CHECKING:
    from portcheck.dynamic.capture import Capture
    from portcheck.dynamic.load import Loaded


def _limit_memory(limit: int) -> None:
    if limit > 0:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


_STEP: list[Path] = []  # where the parent reads the step under way (for its progress display)


def _step(doing: str) -> None:
    """Tell the parent which step is under way: a line added to a file it polls."""
    for path in _STEP:
        with contextlib.suppress(OSError), path.open("a", encoding="utf-8") as steps:
            steps.write(doing + "\n")


def _write(path: Path, outcome: TraceOutcome) -> None:
    temporary = path.with_name(path.name + ".part")
    temporary.write_text(json.dumps(outcome.to_json()), encoding="utf-8")
    os.replace(temporary, path)


def run(request_path: Path) -> TraceOutcome:
    from portcheck.dynamic.request import TraceRequest

    request = TraceRequest.from_json(request_path.read_text(encoding="utf-8"))
    _limit_memory(request.memory_limit)
    started = time.perf_counter()
    result = TraceOutcome()
    try:
        import torch
    except ImportError:
        result.error = StageError("setup", "torch is not installed: pip install 'portcheck[trace]'")
        return result
    from portcheck.dynamic.capture import capture
    from portcheck.dynamic.load import ModelError, load_model, run_eagerly
    from portcheck.dynamic.sourcemap import exception_place, one_line

    torch.manual_seed(0)
    _step("building the model")
    try:
        loaded = load_model(request)
    except ModelError as exc:
        result.error = StageError("build", str(exc))
        return result
    except (Exception, SystemExit) as exc:
        result.error = StageError("build", f"building the model raised {one_line(exc)}", exception_place(exc))
        return result
    from portcheck.dynamic.ran import Recorder

    recorder = Recorder()  # which lines of the model's code ran, in the one eager run and in the graphs
    _step("running it once")
    try:
        with contextlib.nullcontext() if loaded.device == "meta" else recorder.recording():
            eager = run_eagerly(loaded)  # the one eager run: bad inputs stop here, in one line
    except ModelError as exc:
        result.error = StageError("inputs", str(exc), exc.place)
        return result
    except SystemExit as exc:
        result.error = StageError("inputs", f"running the model raised {one_line(exc)}", exception_place(exc))
        return result
    result.model = _model_facts(loaded)
    _step("capturing its graph")
    try:
        taken = capture(loaded)
    except (Exception, SystemExit) as exc:
        result.error = StageError("trace", f"tracing the model raised {one_line(exc)}", exception_place(exc))
        return result
    from portcheck.dynamic.asserts import rejected_inputs

    if why := rejected_inputs(loaded, taken.program):  # on meta: the model's own check, deferred by export
        result.error = StageError("inputs", why)
        return result
    recorder.add_graphs(taken.graphs)
    result.ran = recorder.result()
    result.steps = [eager, *taken.steps] if eager is not None and not eager.ok else list(taken.steps)
    result.findings = list(taken.findings)
    graph = GraphFacts(taken.method, sum(len(g.nodes) for g in taken.graphs), taken.graph_breaks)
    from portcheck.dynamic.facts import graph_memory

    try:
        memory = graph_memory(taken.program)
        graph = replace(graph, int64=memory.int64, peak_activation_bytes=memory.peak_activation_bytes)
    except Exception as exc:  # sizing facts for `advise`: never worth the trace
        graph = replace(graph, int64=None, peak_activation_bytes=0, memory_detail=one_line(exc))
    _analyse(taken, result)
    if request.shapes and taken.program is not None:
        from portcheck.dynamic.shapes import find_axes, probe_shapes

        try:
            axes = find_axes(loaded, request.dynamic)
        except ValueError as exc:
            result.error = StageError("request", str(exc))
            return result
        if axes:
            _step("probing dynamic shapes")
            try:
                result.shapes = probe_shapes(loaded, axes)
            except Exception as exc:  # the probe is extra evidence: its failure is reported, not fatal
                result.shapes = ShapeProbe(False, 0.0, one_line(exc))
            result.steps.append(Step("torch.export (Dim.AUTO)", result.shapes.ok, result.shapes.seconds,
                                     result.shapes.nodes, result.shapes.detail))
    if request.neuron_analyze:
        _step("torch_neuronx.analyze")
        _neuron_analyze(loaded, result)
    result.graph = replace(graph, seconds=round(time.perf_counter() - started, 3))
    return result


def _model_facts(loaded: Loaded) -> ModelFacts:
    from portcheck.dynamic.facts import config_facts, module_classes
    from portcheck.dynamic.inputs import max_positions

    model = loaded.model
    tensors = [i for i in loaded.inputs if i.kind == "tensor"]
    tokens = next((i for i in tensors if len(i.shape) == 2 and "int" in i.dtype), None)
    first = tokens or next((i for i in tensors if i.shape), None)
    return ModelFacts(f"{type(model).__module__}.{type(model).__qualname__}", loaded.parameters, loaded.device,
                      loaded.source_file, max_positions(loaded.config, model), loaded.build_place,
                      config_facts(loaded.config), module_classes(model), loaded.inputs,
                      example_batch=first.shape[0] if first else 0, example_seq=tokens.shape[1] if tokens else 0,
                      config_use_cache=loaded.config_use_cache, traced_use_cache=loaded.traced_use_cache,
                      dtype=loaded.dtype, quantization=loaded.quantization)


def _analyse(taken: Capture, result: TraceOutcome) -> None:
    from portcheck.dynamic.graph import analyse_graph, decomposition
    from portcheck.dynamic.rules import EXPORT_ONLY

    counts: dict[str, int] = {}
    dtypes: dict[str, set[str]] = {}
    places: dict[str, Place | None] = {}
    parts: dict[str, tuple[str, ...] | None] = {}
    operands: dict[str, set[str]] = {}
    over_limit: set[str] = set()
    overloads: dict[str, set[str]] = {}
    for graph in taken.graphs:
        report = analyse_graph(graph)
        result.findings += report.findings
        for name, use in report.ops.items():
            if name not in counts:
                counts[name], dtypes[name], places[name] = 0, set(), None
                decomposed = [EXPORT_ONLY[name]] if name in EXPORT_ONLY else decomposition(use)
                parts[name] = None if decomposed is None else tuple(decomposed)
            counts[name] += use.count
            dtypes[name] |= use.dtypes
            operands.setdefault(name, set()).update(use.operand_dtypes)
            overloads.setdefault(name, set()).update(use.overloads)
            if use.over_limit:
                over_limit.add(name)
            if places[name] is None and use.place is not None:
                places[name] = use.place
    ops = [OpCount(name, counts[name], tuple(sorted(dtypes[name])), places[name], parts[name],
                   tuple(sorted(operands[name])), name in over_limit, tuple(sorted(overloads[name])))
           for name in counts]
    result.ops = sorted(ops, key=lambda e: (-e.count, e.op))


def _neuron_analyze(loaded: Loaded, result: TraceOutcome) -> None:
    """On a Neuron host: torch_neuronx.analyze's own verdict, merged as findings (PC316)."""
    from portcheck.dynamic.rules import TracedUnsupportedOp

    try:
        import torch_neuronx
    except ImportError as exc:
        result.neuron_analyze = AnalyzeVerdict(False, f"torch_neuronx is not importable ({exc})")
        return
    try:
        verdict = torch_neuronx.analyze(loaded.model, loaded.args or tuple(loaded.kwargs.values()))
    except Exception as exc:
        result.neuron_analyze = AnalyzeVerdict(False, f"torch_neuronx.analyze raised {exc!r}"[:300])
        return
    unsupported = verdict.get("unsupported_operators", []) if isinstance(verdict, dict) else []
    result.neuron_analyze = AnalyzeVerdict(True, support_percentage=verdict.get("support_percentage"),
                                           unsupported=tuple(unsupported))
    for entry in unsupported:
        result.findings.append(TracedFinding(TracedUnsupportedOp, None, op=entry.get("kind", "?"),
                                             failure_at=entry.get("failureAt", "")))


def _watch_parent(scratch: Path) -> None:
    """If `portcheck trace` dies (SIGKILL, a closed terminal) before this process ends, end it all here: remove the
    scratch directory, kill every process the model started (its token, as the parent's sweep does) and this
    process group. A thread that looks every 0.2 s, from the start: the parent may already be gone."""
    import shutil
    import signal
    import threading

    from portcheck.dynamic.runner import _RUN_VARIABLE, PARENT_VARIABLE, sweep

    try:
        parent = int(os.environ.get(PARENT_VARIABLE, ""))
    except ValueError:
        return
    token = os.environ.get(_RUN_VARIABLE, "")

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        shutil.rmtree(scratch, ignore_errors=True)
        if token:
            sweep(token)
        os.killpg(os.getpgrp(), signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="portcheck-parent-watch", daemon=True).start()


def main() -> int:
    request_path, result_path = Path(sys.argv[1]), Path(sys.argv[2])
    _watch_parent(result_path.parent)
    _STEP.append(result_path.with_name("step"))
    try:
        result = run(request_path)
    except MemoryError:
        result = TraceOutcome(StageError("trace", "ran out of memory (the --memory-limit cap); try --device meta"))
    except BaseException as exc:
        result = TraceOutcome(StageError("internal", f"{type(exc).__name__}: {exc}"[:300],
                                         traceback=traceback.format_exc()[-2000:]))
    _write(result_path, result)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # the result is written: a thread the model left running must not keep the process alive
