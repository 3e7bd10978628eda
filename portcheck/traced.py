"""The values of a trace: the user's line behind a graph node, the sizes of an attention, and what `portcheck trace`
reports besides its findings — how the graph was captured, the op inventory with each op's status per chip, the
shape probe, the model and `torch_neuronx.analyze`'s verdict. (A traced finding names its rule class, so it lives
with the rules: `portcheck.rules.TracedFinding`.)

Plain frozen dataclasses. The child process writes them as JSON and the parent reads them back
(`portcheck/dynamic/outcome.py`); the reports write them (`to_json`). In between, code reads attributes. No torch,
no engine, no other portcheck module: every layer may import this one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True)
class Place:
    """A line of the user's source: the innermost frame of theirs behind a graph node or an exception."""

    file: str  # absolute
    line: int
    function: str = ""

    def to_json(self) -> JSON:
        return {"file": self.file, "line": self.line, "function": self.function}

    @classmethod
    def from_json(cls, data: JSON | None) -> Place | None:
        return cls(data["file"], int(data.get("line") or 1), data.get("function", "")) if data else None


@dataclass(frozen=True)
class AttentionShape:
    """The sizes of an attention the graph computes (SDPA, or a hand-written softmax(QKᵀ)V); None where the graph
    does not say."""

    heads: int | None
    head_dim: int | None
    seq_q: int | None
    seq_k: int | None
    causal: bool | None = None  # SDPA's is_causal; None for hand-written attention

    def to_json(self) -> JSON:
        return {"heads": self.heads, "head_dim": self.head_dim, "seq_q": self.seq_q, "seq_k": self.seq_k,
                "causal": self.causal}

    @classmethod
    def from_json(cls, data: JSON | None) -> AttentionShape | None:
        if not data:
            return None
        return cls(data.get("heads"), data.get("head_dim"), data.get("seq_q"), data.get("seq_k"), data.get("causal"))


@dataclass(frozen=True)
class Step:
    """One rung of the capture ladder (torch.export, torch._dynamo.explain, ...) and how it went."""

    method: str
    ok: bool
    seconds: float  # rounded to milliseconds
    nodes: int = 0
    detail: str = ""

    @classmethod
    def timed(cls, method: str, ok: bool, seconds: float, nodes: int = 0, detail: str = "") -> Step:
        return cls(method, ok, round(seconds, 3), nodes, detail)

    def to_json(self) -> JSON:
        return {"method": self.method, "ok": self.ok, "seconds": self.seconds, "nodes": self.nodes,
                "detail": self.detail}

    @classmethod
    def from_json(cls, data: JSON) -> Step:
        return cls(data["method"], data["ok"], data["seconds"], data.get("nodes", 0), data.get("detail", ""))


@dataclass(frozen=True)
class GraphFacts:
    """The analysed graph: which step gave it, its size, its graph breaks, and the facts `advise` sizes with."""

    method: str = ""  # the step whose ATen graphs were analysed; "" when none gave any
    nodes: int = 0
    graph_breaks: int = 0
    int64: tuple[str, ...] | None = None  # where int64 tensors appear; None: not exported, unknown
    peak_activation_bytes: int = 0
    memory_detail: str | None = None  # why the memory facts are missing, when reading them failed
    seconds: float | None = None  # the whole child's time, building included

    def to_json(self) -> JSON:
        out: JSON = {"method": self.method, "nodes": self.nodes, "graph_breaks": self.graph_breaks,
                     "int64": None if self.int64 is None else list(self.int64),
                     "peak_activation_bytes": self.peak_activation_bytes}
        if self.memory_detail is not None:
            out["memory_detail"] = self.memory_detail
        if self.seconds is not None:
            out["seconds"] = self.seconds
        return out

    @classmethod
    def from_json(cls, data: JSON) -> GraphFacts:
        int64 = data.get("int64")
        return cls(data.get("method", ""), data.get("nodes", 0), data.get("graph_breaks", 0),
                   None if int64 is None else tuple(int64), data.get("peak_activation_bytes", 0),
                   data.get("memory_detail"), data.get("seconds"))


@dataclass(frozen=True)
class ShapeAxis:
    """An input axis the shape probe asked export to keep dynamic, and what export made of it."""

    input: str  # a keyword name, or "args[0]"
    axis: int
    label: str  # "batch", "seq", "decoder_seq", or the --dynamic label
    size: int  # the example's size
    dynamic: bool | None = None  # None: export failed, or the axis was not found
    min: int | None = None
    max: int | None = None  # None: no upper bound export could see
    probed: int | None = None  # the size portcheck's probe gave the axis instead of the example's (1 -> 2)
    # For an axis export fixed: the model run eagerly with the axis (and every axis of its label) at `other`.
    other: int | None = None
    runs_at_other: bool | None = None  # None: not tried, or the run failed at the example's size as well
    pinned_at: Place | None = None  # where that run raised: the line that pins the size
    pinned_by: str = ""  # what it raised, one line

    def to_json(self) -> JSON:
        out: JSON = {"input": self.input, "axis": self.axis, "label": self.label, "size": self.size,
                     "dynamic": self.dynamic, "min": self.min, "max": self.max}
        if self.probed is not None:
            out["probed"] = self.probed
        if self.other is not None:
            out.update(other=self.other, runs_at_other=self.runs_at_other, pinned_by=self.pinned_by,
                       pinned_at=self.pinned_at.to_json() if self.pinned_at else None)
        return out

    @classmethod
    def from_json(cls, data: JSON) -> ShapeAxis:
        return cls(data["input"], data["axis"], data["label"], data["size"], data.get("dynamic"), data.get("min"),
                   data.get("max"), data.get("probed"), data.get("other"), data.get("runs_at_other"),
                   Place.from_json(data.get("pinned_at")), data.get("pinned_by", ""))


@dataclass(frozen=True)
class ShapeProbe:
    """The second export, with the batch and sequence axes dynamic (`Dim.AUTO`)."""

    ok: bool
    seconds: float
    detail: str = ""
    axes: tuple[ShapeAxis, ...] = ()
    nodes: int = 0  # of the exported graph

    def to_json(self) -> JSON:
        return {"ok": self.ok, "seconds": self.seconds, "detail": self.detail,
                "axes": [a.to_json() for a in self.axes], "nodes": self.nodes}

    @classmethod
    def from_json(cls, data: JSON) -> ShapeProbe:
        return cls(data["ok"], data["seconds"], data.get("detail", ""),
                   tuple(ShapeAxis.from_json(a) for a in data.get("axes", [])), data.get("nodes", 0))


@dataclass(frozen=True)
class AnalyzeVerdict:
    """`torch_neuronx.analyze` on a Neuron host (`--neuron-analyze`): its support figure and the operators it
    reports unsupported, as it gives them; or why it could not run."""

    ok: bool
    detail: str = ""  # why not, when not ok
    support_percentage: float | None = None
    unsupported: tuple[JSON, ...] = ()  # torch_neuronx's own entries (kind, failureAt, call, ...)

    def to_json(self) -> JSON:
        if not self.ok:
            return {"ok": False, "detail": self.detail}
        return {"ok": True, "support_percentage": self.support_percentage, "unsupported": list(self.unsupported)}

    @classmethod
    def from_json(cls, data: JSON) -> AnalyzeVerdict:
        return cls(data["ok"], data.get("detail", ""), data.get("support_percentage"),
                   tuple(data.get("unsupported") or ()))


@dataclass(frozen=True)
class OpStatus:
    """One ATen op of the inventory: how often the graph calls it, with which input dtypes, its status per chip,
    what it decomposes into (a composite op) and the first user line that calls it."""

    op: str
    count: int
    dtypes: tuple[str, ...]
    status: Mapping[str, str]  # chip -> "supported", "restricted", "cpu-fallback", "unsupported" or "unknown"
    decomposes_to: tuple[str, ...] | None = None
    first_at: str | None = None  # "path:line", the path as reports show it

    def to_json(self) -> JSON:
        return {"op": self.op, "count": self.count, "dtypes": list(self.dtypes), "status": dict(self.status),
                "decomposes_to": None if self.decomposes_to is None else list(self.decomposes_to),
                "first_at": self.first_at}


@dataclass(frozen=True)
class TracedModel:
    """The model as the trace report names it."""

    class_name: str  # module.QualifiedName
    parameters: int
    device: str  # "cpu" or "meta"
    inputs: tuple[JSON, ...] = ()  # each example input as traced: name, dtype, shape (see InputFact.to_json)
    config_use_cache: bool | None = None  # the config's own use_cache; None: it sets none
    traced_use_cache: bool | None = None  # False: traced with the cache off
    dtype: str = ""  # the dtype traced in, and why: "bfloat16: the config's torch_dtype"
    quantization: str = ""  # what the config's quantization_config means on Neuron, or ""

    def use_cache_note(self) -> str:
        """"config ships use_cache=true; traced with use_cache=False", or "" when the cache was not touched."""
        if self.traced_use_cache is None:
            return ""
        traced = f"traced with use_cache={self.traced_use_cache}"
        if self.config_use_cache is None:
            return traced
        return f"config ships use_cache={str(self.config_use_cache).lower()}; {traced}"

    def to_json(self) -> JSON:
        return {"class": self.class_name, "parameters": self.parameters, "device": self.device,
                "inputs": list(self.inputs),
                "use_cache": None if self.traced_use_cache is None and self.config_use_cache is None else
                {"config": self.config_use_cache, "traced": self.traced_use_cache, "note": self.use_cache_note()},
                "dtype": self.dtype, "quantization": self.quantization}


@dataclass(frozen=True)
class StaticScope:
    """The files whose static findings a trace report merged: the user's are read whole, a library's only on the
    lines that ran, as `witness` saw them ("eager run", "graph stack traces", or "" when nothing said)."""

    files: tuple[str, ...]  # as reports show them
    witness: str

    def to_json(self) -> JSON:
        return {"files": list(self.files), "witness": self.witness}


@dataclass(frozen=True)
class TraceResult:
    """What `portcheck trace` adds to a ScanResult: the reports write it beside the findings."""

    graph: GraphFacts | None  # None only for a result without a graph (a child that stopped early)
    steps: tuple[Step, ...] = ()
    ops: tuple[OpStatus, ...] = ()
    shapes: ShapeProbe | None = None
    model: TracedModel | None = None
    neuron_analyze: AnalyzeVerdict | None = None
    scope: StaticScope | None = None  # None: the static pass was off (--no-static)

    def to_json(self) -> JSON:
        """The trace's part of the JSON report (schema 1's extra keys)."""
        return {
            "graph": {**(self.graph.to_json() if self.graph is not None else {}),
                      "steps": [s.to_json() for s in self.steps]},
            "ops": [op.to_json() for op in self.ops],
            "shapes": self.shapes.to_json() if self.shapes is not None else None,
            "model": self.model.to_json() if self.model is not None else {},
            "neuron_analyze": self.neuron_analyze.to_json() if self.neuron_analyze is not None else None,
            "static_scope": self.scope.to_json() if self.scope is not None else None,
        }


__all__ = ["AnalyzeVerdict", "AttentionShape", "GraphFacts", "OpStatus", "Place", "ShapeAxis", "ShapeProbe",
           "StaticScope", "Step", "TraceResult", "TracedModel"]
