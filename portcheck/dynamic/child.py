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
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from portcheck.dynamic.capture import Capture
    from portcheck.dynamic.load import Loaded


def _limit_memory(limit: int) -> None:
    if limit > 0:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _write(path: Path, result: dict[str, Any]) -> None:
    temporary = path.with_name(path.name + ".part")
    temporary.write_text(json.dumps(result), encoding="utf-8")
    os.replace(temporary, path)


def run(request_path: Path) -> dict[str, Any]:
    from portcheck.dynamic.request import TraceRequest

    request = TraceRequest.from_json(request_path.read_text(encoding="utf-8"))
    _limit_memory(request.memory_limit)
    started = time.perf_counter()
    result: dict[str, Any] = {"error": None, "steps": [], "findings": [], "ops": [], "shapes": None, "model": None}
    try:
        import torch
    except ImportError:
        result["error"] = {"stage": "setup", "message": "torch is not installed: pip install 'portcheck[trace]'"}
        return result
    from portcheck.dynamic.capture import capture, one_line
    from portcheck.dynamic.load import ModelError, load_model, max_positions
    from portcheck.dynamic.sourcemap import exception_place

    torch.manual_seed(0)
    try:
        loaded = load_model(request)
    except ModelError as exc:
        result["error"] = {"stage": "build", "message": str(exc)}
        return result
    except (Exception, SystemExit) as exc:
        place = exception_place(exc)
        result["error"] = {"stage": "build", "message": f"building the model raised {one_line(exc)}",
                           "place": place.as_dict() if place else None}
        return result
    result["model"] = {"class": f"{type(loaded.model).__module__}.{type(loaded.model).__qualname__}",
                       "parameters": loaded.parameters, "device": loaded.device,
                       "source_file": loaded.source_file, "max_positions": max_positions(loaded.config),
                       "build_place": loaded.build_place}
    result["model"].update(_model_facts(loaded))
    try:
        taken = capture(loaded)
    except (Exception, SystemExit) as exc:
        place = exception_place(exc)
        result["error"] = {"stage": "trace", "message": f"tracing the model raised {one_line(exc)}",
                           "place": place.as_dict() if place else None}
        return result
    result["steps"] = [s.as_dict() for s in taken.steps]
    result["findings"] = list(taken.findings)
    result["graph"] = {"method": taken.method, "nodes": sum(len(g.nodes) for g in taken.graphs),
                       "graph_breaks": taken.graph_breaks}
    from portcheck.dynamic.facts import graph_memory

    try:
        result["graph"].update(graph_memory(taken.program))
    except Exception as exc:  # sizing facts for `advise`: never worth the trace
        result["graph"].update(int64=None, peak_activation_bytes=0, memory_detail=one_line(exc))
    _analyse(taken, result)
    if request.shapes and taken.program is not None:
        from portcheck.dynamic.shapes import find_axes, probe_shapes

        try:
            axes = find_axes(loaded, request.dynamic)
        except ValueError as exc:
            result["error"] = {"stage": "request", "message": str(exc)}
            return result
        if axes:
            try:
                result["shapes"] = probe_shapes(loaded, axes)
            except Exception as exc:  # the probe is extra evidence: its failure is reported, not fatal
                result["shapes"] = {"ok": False, "seconds": 0.0, "detail": one_line(exc), "axes": []}
            result["steps"].append({"method": "torch.export (Dim.AUTO)", "ok": result["shapes"]["ok"],
                                    "seconds": result["shapes"]["seconds"], "nodes": 0,
                                    "detail": result["shapes"]["detail"]})
    if request.neuron_analyze:
        _neuron_analyze(loaded, result)
    result["graph"]["seconds"] = round(time.perf_counter() - started, 3)
    return result


def _model_facts(loaded: Loaded) -> dict[str, Any]:
    from portcheck.dynamic.facts import config_facts, module_classes

    inputs = [i for i in loaded.inputs if "dtype" in i]
    tokens = next((i for i in inputs if len(i["shape"]) == 2 and "int" in i["dtype"]), None)
    first = tokens or next((i for i in inputs if i["shape"]), None)
    return {"config": config_facts(loaded.config), "modules": module_classes(loaded.model),
            "inputs": list(loaded.inputs),
            "example_batch": first["shape"][0] if first else 0,
            "example_seq": tokens["shape"][1] if tokens else 0}


def _analyse(taken: Capture, result: dict[str, Any]) -> None:
    from portcheck.dynamic.graph import analyse_graph, decomposition

    merged: dict[str, dict[str, Any]] = {}
    for graph in taken.graphs:
        report = analyse_graph(graph)
        result["findings"] += report.findings
        for name, use in report.ops.items():
            entry = merged.get(name)
            if entry is None:
                merged[name] = entry = {"op": name, "count": 0, "dtypes": [], "place": None,
                                        "decomposes_to": decomposition(use)}
            entry["count"] += use.count
            entry["dtypes"] = sorted(set(entry["dtypes"]) | use.dtypes)
            if entry["place"] is None and use.place is not None:
                entry["place"] = use.place.as_dict()
    result["ops"] = sorted(merged.values(), key=lambda e: (-e["count"], e["op"]))


def _neuron_analyze(loaded: Loaded, result: dict[str, Any]) -> None:
    """On a Neuron host: torch_neuronx.analyze's own verdict, merged as findings (PC316)."""
    try:
        import torch_neuronx
    except ImportError as exc:
        result["neuron_analyze"] = {"ok": False, "detail": f"torch_neuronx is not importable ({exc})"}
        return
    try:
        verdict = torch_neuronx.analyze(loaded.model, loaded.args or tuple(loaded.kwargs.values()))
    except Exception as exc:
        result["neuron_analyze"] = {"ok": False, "detail": f"torch_neuronx.analyze raised {exc!r}"[:300]}
        return
    unsupported = verdict.get("unsupported_operators", []) if isinstance(verdict, dict) else []
    result["neuron_analyze"] = {"ok": True, "support_percentage": verdict.get("support_percentage"),
                                "unsupported": unsupported}
    for entry in unsupported:
        result["findings"].append({"code": "PC316", "place": None, "message": "", "detail": {
            "kind": "analyze", "op": entry.get("kind", "?"), "failure_at": entry.get("failureAt", ""),
            "call": str(entry.get("call", ""))[:300]}})


def main() -> int:
    request_path, result_path = Path(sys.argv[1]), Path(sys.argv[2])
    try:
        result = run(request_path)
    except MemoryError:
        result = {"error": {"stage": "trace", "message": "ran out of memory (the --memory-limit cap); try "
                            "--device meta"}}
    except BaseException as exc:
        result = {"error": {"stage": "internal", "message": f"{type(exc).__name__}: {exc}"[:300],
                            "traceback": traceback.format_exc()[-2000:]}}
    _write(result_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
