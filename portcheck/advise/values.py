"""The values of a plan: what `portcheck advise` is asked (AdviseOptions) and what it answers (a Plan, with the
reason and source of each choice, its findings and its serving path). Plain dataclasses: the steps that fill a
plan (portcheck/advise/flags.py, serving.py, ...) and the reports import them, never the planner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portcheck.advise.cost import Cost, CostOptions
from portcheck.advise.fleet import Fleet
from portcheck.advise.model import ModelShape
from portcheck.advise.sizing import Memory, Throughput, Workload, context_rows, has_kv_cache

if TYPE_CHECKING:
    from portcheck.knowledge import Instance
    from portcheck.rules import Rule

# The source of a figure that is portcheck's own: every Neuron citation of a plan is rules/ data.
PORTCHECK = "portcheck's estimate (not a Neuron figure)"


@dataclass(frozen=True)
class AdviseOptions:
    chip: str
    stack: str
    task: str = "inference"
    batch: int = 1
    seq_len: int = 0  # 0: from the model
    dtype: str = "bf16"
    tp: int = 0  # 0: choose
    prefer: str = "accuracy"
    lnc: int = 0  # 0: the chip's default
    sdk: str = ""  # the Neuron SDK release whose facts apply ("": the newest the data knows)
    dp: int = 1  # model copies (data-parallel replicas)
    attention_dp: int = 1  # attention data parallelism inside the tensor-parallel group (trn2)
    context_batch: int = 1  # sequences a decoder's context encoding runs at once (vLLM Neuron's ctx_batch_size)
    kv_dtype: str = ""  # the KV cache's dtype ("": the compute dtype)
    compile_only: bool = False  # the script compiles on a host without Neuron devices, where the path allows it
    cost: CostOptions = field(default_factory=CostOptions)  # prices, throughputs and the GPU baseline (cost.py)
    runner: str = "auto"  # vLLM's runner: "pooling" (embedding), "generate", or "auto" (the checkpoint's files)


@dataclass(frozen=True)
class Reason:
    """Why the plan holds one of its choices (a figure, a flag, an environment variable), and the source."""

    item: str  # what it explains: "tp_degree", "--auto-cast none", "NEURON_CC_FLAGS", ...
    why: str
    source: str  # the documents it rests on, or portcheck's own estimate

    def to_json(self) -> dict[str, str]:
        return {"item": self.item, "why": self.why, "source": self.source}


@dataclass(frozen=True)
class PlanFinding:
    """A finding of the plan's arithmetic (PC8xx): its rule and its message; commands.py places it at the model."""

    rule: type[Rule]
    message: str


@dataclass(frozen=True)
class LncAlternative:
    """The plan at trn2's other logical-core size: the degree, chips and per-core share it would take."""

    lnc: int
    tp_degree: int
    chips: int
    per_core_gib: float  # rounded to MiB
    budget_per_core_gib: float

    def to_json(self) -> dict[str, int | float]:
        return {"lnc": self.lnc, "tp_degree": self.tp_degree, "chips": self.chips, "per_core_gib": self.per_core_gib,
                "budget_per_core_gib": self.budget_per_core_gib}


@dataclass
class Plan:
    chip: str
    stack: str
    task: str
    workload: Workload
    model: ModelShape
    memory: Memory | None = None
    tp_degree: int = 0
    cores: int = 0
    chips: int = 0
    lnc: int | None = None
    instance: Instance | None = None
    compile_instance: Instance | None = None  # a larger host to compile on, when the instance's is small
    replicas: int = 0
    dp: int = 1
    throughput: Throughput | None = None  # the throughput-oriented configuration, when it differs
    compiler_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    buckets: list[int] = field(default_factory=list)
    dynamic_batch: bool = False
    reasons: list[Reason] = field(default_factory=list)
    findings: list[PlanFinding] = field(default_factory=list)
    alternatives: list[LncAlternative] = field(default_factory=list)
    serving: Serving | None = None  # the serving path and its artifact's settings (serving.py)
    fleet: Fleet | None = None  # several instances hold one copy (fleet.py)
    cost: Cost | None = None  # price per hour, per million tokens, against a GPU baseline (cost.py)

    @property
    def instance_count(self) -> int:
        return self.fleet.count if self.fleet else (1 if self.instance else 0)

    def interconnect(self) -> dict[str, str | None] | None:
        """The link between the plan's chips, and between its instances where there are several."""
        if self.instance is None:
            return None
        return {"within_instance": self.instance.interconnect or None,
                "between_instances": self.fleet.between if self.fleet else None}

    def reason(self, item: str, why: str, source: str) -> None:
        self.reasons.append(Reason(item, why, source))

    def to_json(self) -> dict[str, Any]:
        """The plan in `portcheck advise --format json`."""
        return {
            "instance": self.instance.name if self.instance else None,
            "compile_instance": self.compile_instance.name if self.compile_instance else None,
            "tp_degree": self.tp_degree or None, "cores": self.cores or None, "chips": self.chips or None,
            "lnc": self.lnc, "replicas": self.replicas or None, "dp": self.dp,
            "attention_dp": self.workload.attention_dp, "task": self.task,
            "workload": {"batch": self.workload.batch, "seq_len": self.workload.seq, "dtype": self.workload.dtype,
                         "kv_cache_dtype": self.workload.cache_dtype if has_kv_cache(self.model, self.workload)
                         else None, "context_batch": context_rows(self.model, self.workload)},
            "throughput": self.throughput.to_json() if self.throughput else None,
            "memory": {"tp_degree": self.memory.tp, **self.memory.as_dict()} if self.memory else None,
            "compiler_args": list(self.compiler_args), "env": dict(self.env), "buckets": list(self.buckets),
            "dynamic_batch": self.dynamic_batch, "reasons": [r.to_json() for r in self.reasons],
            "alternatives": [a.to_json() for a in self.alternatives],
            "serving": self.serving.to_json() if self.serving else None,
            "instance_count": self.instance_count or None, "interconnect": self.interconnect(),
            "fleet": self.fleet.to_json() if self.fleet else None,
            "cost": self.cost.to_json() if self.cost else None,
        }



@dataclass
class Serving:
    """The plan's serving path and what its artifact passes."""

    path: str
    title: str
    natively: bool  # the path lists the model's architecture (else: the stack's generic path)
    known: bool = True  # the architecture is known (not a model given as numbers only)
    task: str = ""  # optimum-neuron's --task
    options: dict[str, Any] = field(default_factory=dict)  # the path's settings: vllm/optimum arguments, NeuronConfig
    compile_only: bool = False
    compile_env: dict[str, str] = field(default_factory=dict)
    compile_only_refused: str = ""  # why --compile-only cannot be done on this path
    compile_host_gib: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "title": self.title, "natively": self.natively, "architecture_known": self.known,
                "task": self.task or None,
                "options": dict(self.options), "compile_only": self.compile_only,
                "compile_only_refused": self.compile_only_refused or None, "compile_env": dict(self.compile_env),
                "compile_host_gib": round(self.compile_host_gib, 1)}
