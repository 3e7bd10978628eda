"""What the child process of `portcheck trace` sends the parent: the capture steps, the traced findings, the op
inventory, the shape probe, the facts about the model and its graph that `advise` sizes a plan with — or the error
that stopped it. The child writes a `TraceOutcome` as JSON (`to_json`) and the parent reads it back (`from_json`);
everything else works on the dataclasses. No torch here: the parent imports it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from portcheck.dynamic.ran import RanCode
from portcheck.rules import TracedFinding
from portcheck.traced import JSON, AnalyzeVerdict, GraphFacts, Place, ShapeProbe, Step


@dataclass(frozen=True)
class OpCount:
    """One ATen op of the child's inventory, over every graph it analysed."""

    op: str
    count: int
    dtypes: tuple[str, ...]  # of its tensor inputs, sorted
    place: Place | None = None  # the first user line that calls it
    decomposes_to: tuple[str, ...] | None = None  # a composite op's parts; None for one that is not
    operand_dtypes: tuple[str, ...] = ()  # of its first tensor operand (`self`), sorted
    over_limit: bool = False  # a call exceeded an argument limit of rules/ops.toml (topk's k, sort's size)
    overloads: tuple[str, ...] = ()  # torch's overload names of its calls, sorted ("Scalar", "default")

    def to_json(self) -> JSON:
        return {"op": self.op, "count": self.count, "dtypes": list(self.dtypes),
                "place": self.place.to_json() if self.place else None,
                "decomposes_to": None if self.decomposes_to is None else list(self.decomposes_to),
                "operand_dtypes": list(self.operand_dtypes), "over_limit": self.over_limit,
                "overloads": list(self.overloads)}

    @classmethod
    def from_json(cls, data: JSON) -> OpCount:
        parts = data.get("decomposes_to")
        return cls(data["op"], data["count"], tuple(data.get("dtypes", ())), Place.from_json(data.get("place")),
                   None if parts is None else tuple(parts), tuple(data.get("operand_dtypes", ())),
                   bool(data.get("over_limit", False)), tuple(data.get("overloads", ())))


@dataclass(frozen=True)
class InputFact:
    """One example input of the model, in call order: a tensor's dtype, shape and value range, a plain value, or
    a value of a type a bring-up script cannot recreate."""

    name: str  # a keyword, forward's parameter name for a positional input, or "args[i]"
    positional: bool
    kind: Literal["tensor", "constant", "unsupported"]
    dtype: str = ""  # a tensor's, without "torch."
    shape: tuple[int, ...] = ()
    low: int | float | bool | None = None  # a tensor's smallest and largest values (None on meta, or empty)
    high: int | float | bool | None = None
    constant: bool | int | float | str | None = None  # a plain value
    unsupported: str = ""  # the type name of any other value
    # Where the value sits inside a dict or list input (added_cond_kwargs={"text_embeds": ...}): its keys and indices
    # from the outside in; () for an input that is the value itself.
    key: tuple[str | int, ...] = ()

    def to_json(self) -> JSON:
        out: JSON = {"name": self.name, "positional": self.positional}
        if self.key:
            out["key"] = list(self.key)
        if self.kind == "tensor":
            out.update(dtype=self.dtype, shape=list(self.shape), low=self.low, high=self.high)
        elif self.kind == "constant":
            out["constant"] = self.constant
        else:
            out["unsupported"] = self.unsupported
        return out

    @classmethod
    def from_json(cls, data: JSON) -> InputFact:
        name, positional = data["name"], data["positional"]
        key = tuple(data.get("key") or ())
        if "dtype" in data:
            return cls(name, positional, "tensor", data["dtype"], tuple(data["shape"]), data["low"], data["high"],
                       key=key)
        if "constant" in data:
            return cls(name, positional, "constant", constant=data["constant"], key=key)
        return cls(name, positional, "unsupported", unsupported=data["unsupported"], key=key)


@dataclass(frozen=True)
class ConfigFacts:
    """The numbers of a transformers config (its text part's sizes for multimodal ones, the whole model's model_type
    and architectures, its encoder tower's numbers) under transformers' usual names, with the types transformers
    gives them; None where the config has none."""

    model_type: str | None = None
    architectures: list[str] | None = None
    is_encoder_decoder: bool | None = None
    is_decoder: bool | None = None
    num_hidden_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    num_local_experts: int | None = None
    num_experts: int | None = None
    num_experts_per_tok: int | None = None
    torch_dtype: str | None = None
    dtype: str | None = None
    image_size: int | list[int] | None = None
    patch_size: int | list[int] | None = None
    tower: str | None = None  # a multimodal model's "vision" or "audio" encoder tower
    tower_layers: int | None = None
    tower_hidden: int | None = None
    tower_heads: int | None = None
    tower_intermediate: int | None = None

    def to_json(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, data: JSON) -> ConfigFacts:
        return cls(**data)


@dataclass(frozen=True)
class ModelFacts:
    """The model the child built: what the trace report names, where it was built, and what `advise` sizes."""

    class_name: str  # module.QualifiedName
    parameters: int
    device: str  # "cpu" or "meta"
    source_file: str = ""
    max_positions: int = 0  # the longest sequence its config allows; 0: none known
    build_place: Place | None = None  # the build callable, or the --hf-config file
    config: ConfigFacts = ConfigFacts()
    modules: tuple[str, ...] = ()  # module class names
    inputs: tuple[InputFact, ...] = ()
    example_batch: int = 0
    example_seq: int = 0
    config_use_cache: bool | None = None  # the config's own use_cache; None: it sets none
    traced_use_cache: bool | None = None  # False: traced with the cache off (at construction and call)
    dtype: str = ""  # the dtype traced in, and why (dynamic/dtype.py)
    quantization: str = ""  # what the config's quantization_config means on Neuron, or ""

    def to_json(self) -> JSON:
        return {"class": self.class_name, "parameters": self.parameters, "device": self.device,
                "source_file": self.source_file, "max_positions": self.max_positions,
                "build_place": self.build_place.to_json() if self.build_place else None,
                "config": self.config.to_json(), "modules": list(self.modules),
                "inputs": [i.to_json() for i in self.inputs], "example_batch": self.example_batch,
                "example_seq": self.example_seq, "config_use_cache": self.config_use_cache,
                "traced_use_cache": self.traced_use_cache, "dtype": self.dtype, "quantization": self.quantization}

    @classmethod
    def from_json(cls, data: JSON) -> ModelFacts:
        return cls(data.get("class", "model"), int(data.get("parameters") or 0), data.get("device", ""),
                   data.get("source_file") or "", int(data.get("max_positions") or 0),
                   Place.from_json(data.get("build_place")), ConfigFacts.from_json(data.get("config") or {}),
                   tuple(data.get("modules") or ()), tuple(InputFact.from_json(i) for i in data.get("inputs") or ()),
                   int(data.get("example_batch") or 0), int(data.get("example_seq") or 0),
                   data.get("config_use_cache"), data.get("traced_use_cache"), data.get("dtype", ""),
                   data.get("quantization", ""))


@dataclass(frozen=True)
class StageError:
    """What stopped the child, at which stage (setup, build, trace, request, internal), and where in the user's
    code when it was there."""

    stage: str
    message: str
    place: Place | None = None
    traceback: str = ""  # an internal error's, for PORTCHECK_DEBUG

    def to_json(self) -> JSON:
        return {"stage": self.stage, "message": self.message, "place": self.place.to_json() if self.place else None,
                "traceback": self.traceback}

    @classmethod
    def from_json(cls, data: JSON) -> StageError:
        return cls(data.get("stage", ""), data.get("message") or "the trace failed", Place.from_json(data.get("place")),
                   data.get("traceback", ""))


@dataclass
class TraceOutcome:
    """The child's whole result. Built up as the child goes (so not frozen); an error ends it where it stands."""

    error: StageError | None = None
    steps: list[Step] = field(default_factory=list)
    findings: list[TracedFinding] = field(default_factory=list)
    ops: list[OpCount] = field(default_factory=list)  # most called first
    shapes: ShapeProbe | None = None
    model: ModelFacts | None = None
    graph: GraphFacts | None = None
    neuron_analyze: AnalyzeVerdict | None = None
    ran: RanCode | None = None  # the lines that ran (dynamic/ran.py)

    def to_json(self) -> JSON:
        return {
            "error": self.error.to_json() if self.error else None,
            "steps": [s.to_json() for s in self.steps],
            "findings": [f.to_json() for f in self.findings],
            "ops": [o.to_json() for o in self.ops],
            "shapes": self.shapes.to_json() if self.shapes else None,
            "model": self.model.to_json() if self.model else None,
            "graph": self.graph.to_json() if self.graph else None,
            "neuron_analyze": self.neuron_analyze.to_json() if self.neuron_analyze else None,
            "ran": self.ran.to_json() if self.ran else None,
        }

    @classmethod
    def from_json(cls, data: JSON) -> TraceOutcome:
        def part(key: str) -> Any:
            return data.get(key) or None

        error, shapes, model, graph, verdict = (part(k) for k in ("error", "shapes", "model", "graph",
                                                                  "neuron_analyze"))
        return cls(
            error=StageError.from_json(error) if error else None,
            steps=[Step.from_json(s) for s in data.get("steps") or ()],
            findings=[TracedFinding.from_json(f) for f in data.get("findings") or ()],
            ops=[OpCount.from_json(o) for o in data.get("ops") or ()],
            shapes=ShapeProbe.from_json(shapes) if shapes else None,
            model=ModelFacts.from_json(model) if model else None,
            graph=GraphFacts.from_json(graph) if graph else None,
            neuron_analyze=AnalyzeVerdict.from_json(verdict) if verdict else None,
            ran=RanCode.from_json(data["ran"]) if data.get("ran") else None,
        )


__all__ = ["ConfigFacts", "InputFact", "ModelFacts", "OpCount", "StageError", "TraceOutcome"]
