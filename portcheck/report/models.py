"""The models on `portcheck report`'s page: for each model and target, what its trace captured (the capture
steps, the op inventory by Neuron status, graph breaks, dynamic axes) and advise's plan (instance, parallelism,
serving path, compiler flags, environment, memory per core against the budget, and the reasons).

Built from the same JSON `trace --format json` and `advise --format json` write, so a field advise adds (a
multi-instance plan, a cost) shows up in the plan's table without a change here: the fields this module knows get
their label and their place; every other plain field of the plan is listed after them under its own name."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from portcheck.escape import printable
from portcheck.report.links import Link, source_links

# The op statuses in the order the page lists them, with how it names each (the trace summary's words).
OP_STATUSES = {"supported": "supported", "cpu-fallback": "CPU fallback", "restricted": "restricted",
               "unsupported": "unsupported", "unknown": "unknown (no source)"}

# The plan's fields the page names itself, in its order; any other plain field follows under its own key.
PLAN_LABELS = {
    "instance": "instance", "tp_degree": "tensor parallelism (TP)", "dp": "data parallelism (DP)",
    "attention_dp": "attention DP", "cores": "NeuronCores", "chips": "chips", "lnc": "logical core size (LNC)",
    "replicas": "replicas on the instance", "compile_instance": "compile instance", "task": "task",
    "buckets": "sequence buckets", "dynamic_batch": "dynamic batch", "throughput": "throughput-oriented plan",
    "instance_count": "instances", "fleet": "across instances", "interconnect": "interconnect", "cost": "cost",
}
# Shown in their own parts of the page, not as rows.
_OWN_PLACE = {"memory", "reasons", "compiler_args", "env", "serving", "workload", "alternatives"}

# Okabe and Ito's palette again: a memory part's colour, told apart with any common colour-vision deficiency;
# the legend names each part with its size too.
MEMORY_COLOURS = {"weights": "#0072B2", "kv_cache": "#E69F00", "activations": "#009E73", "gradients": "#CC79A7",
                  "optimizer": "#56B4E9", "overhead": "#999999"}
_MEMORY_TOTALS = {"per_core_gib", "budget_per_core_gib"}



@dataclass
class ModelTarget:
    """One model on one target, as `trace --format json` and `advise --format json` report it."""

    chip: str
    trace: dict[str, Any]  # the trace's JSON report for this target (its op statuses, findings, graph, shapes)
    plan: dict[str, Any] | None = None  # advise's JSON report, or None when no plan could be made
    refusal: str = ""  # why there is no plan


@dataclass
class ModelRun:
    shown: str  # the model as the command line named it
    error: str = ""  # why it could not be built or traced
    targets: list[ModelTarget] = field(default_factory=list)


@dataclass(frozen=True)
class MemoryPart:
    name: str  # "KV cache"
    gib: float
    colour: str
    x: float  # where it starts in the chart, and how wide it is, in the chart's units (0 to 100)
    width: float


@dataclass(frozen=True)
class MemoryChart:
    parts: list[MemoryPart]
    per_core: float
    budget: float
    budget_x: float  # where the budget's line sits (0 to 100)

    @property
    def fits(self) -> bool:
        return self.per_core <= self.budget


@dataclass(frozen=True)
class Reason:
    item: str
    why: str
    sources: list[Link]


@dataclass(frozen=True)
class ModelFinding:
    code: str
    name: str
    severity: str
    message: str
    where: str


@dataclass
class PlanView:
    rows: list[tuple[str, str]]  # (label, value)
    serving: str
    compiler_args: str
    env: list[tuple[str, str]]
    memory: MemoryChart | None
    reasons: list[Reason]


@dataclass
class TargetView:
    chip: str
    target: str  # "trn2 (native stack, Neuron SDK 2.34)"
    ops: list[tuple[str, str, int, list[str]]]  # (status, its name, how many distinct ops, the ops)
    op_total: int
    graph_breaks: int
    method: str
    nodes: int
    dynamic_axes: list[str]
    findings: list[ModelFinding]
    plan: PlanView | None
    refusal: str  # why there is no plan
    errors: int = 0
    warnings: int = 0


@dataclass
class ModelView:
    shown: str  # as the command line named it
    anchor: str
    name: str = ""  # the model's class
    parameters: int = 0
    error: str = ""
    steps: list[tuple[str, bool, int, float, str]] = field(default_factory=list)  # (method, ok, nodes, s, detail)
    targets: list[TargetView] = field(default_factory=list)

    def side_by_side(self) -> list[tuple[str, list[str]]]:
        """The model's facts and plan as rows, one column per target (markdown's table)."""
        rows: dict[str, list[str]] = {}

        def put(label: str, at: int, value: str) -> None:
            rows.setdefault(label, [""] * len(self.targets))[at] = value

        for at, t in enumerate(self.targets):
            put("ops (distinct)", at, f"{t.op_total}: " + ", ".join(f"{n} {name}" for _, name, n, _ in t.ops))
            put("graph", at, f"{t.method}, {t.nodes} nodes, {t.graph_breaks} graph breaks")
            put("dynamic axes", at, "; ".join(t.dynamic_axes) or "none")
            if t.plan is None:
                put("plan", at, f"none: {t.refusal}")
                continue
            for label, value in t.plan.rows:
                put(label, at, value)
            put("serving path", at, t.plan.serving or "-")
            put("compiler flags", at, t.plan.compiler_args)
            put("environment", at, " ".join(f"{k}={v}" for k, v in t.plan.env) or "-")
            if t.plan.memory is not None:
                m = t.plan.memory
                put("memory per core (GiB)", at, f"{m.per_core:.2f} of {m.budget:g}"
                    f"{'' if m.fits else ' (over the budget)'}: "
                    + ", ".join(f"{part.name} {part.gib:.2f}" for part in m.parts))
        return list(rows.items())


def model_views(runs: Sequence[ModelRun]) -> list[ModelView]:
    views = []
    for run in runs:
        anchor = f"model-{hashlib.sha256(run.shown.encode(errors='surrogateescape')).hexdigest()[:12]}"
        view = ModelView(printable(run.shown), anchor, error=printable(run.error))
        if run.targets:
            trace = run.targets[0].trace
            model = trace.get("model") or {}
            view.name = printable(str(model.get("class", "")).rsplit(".", 1)[-1])
            view.parameters = int(model.get("parameters") or 0)
            view.steps = [(printable(s["method"]), bool(s["ok"]), int(s.get("nodes") or 0),
                           float(s.get("seconds") or 0), printable(s.get("detail") or ""))
                          for s in (trace.get("graph") or {}).get("steps", [])]
        view.targets = [_target_view(t) for t in run.targets]
        views.append(view)
    return views


def _target_view(entry: ModelTarget) -> TargetView:
    trace, chip = entry.trace, entry.chip
    target = trace["target"]
    sdk = f", Neuron SDK {target['sdk']}" if target.get("sdk") else ""
    by_status: dict[str, list[str]] = {}
    for op in trace.get("ops", []):
        by_status.setdefault(op["status"].get(chip, "unknown"), []).append(printable(op["op"]))
    order = [s for s in OP_STATUSES if s in by_status] + sorted(s for s in by_status if s not in OP_STATUSES)
    ops = [(status, OP_STATUSES.get(status, status), len(by_status[status]), sorted(by_status[status]))
           for status in order]
    graph = trace.get("graph") or {}
    shapes = trace.get("shapes") or {}
    axes = [f"{a['input']}:{a['axis']} ({a.get('label') or 'axis'}, traced at {a.get('size')})"
            for a in shapes.get("axes", []) if a.get("dynamic")]
    findings_json = (entry.plan or trace)["findings"]
    findings = [ModelFinding(f["code"], f["name"], f["severity"], printable(f["message"]),
                             printable(f"{f['path']}:{f['line']}" if f.get("path") else ""))
                for f in findings_json]
    severities = Counter(f.severity for f in findings)
    return TargetView(
        chip=chip, target=f"{chip} ({target['stack']} stack{sdk})", ops=ops, op_total=len(trace.get("ops", [])),
        graph_breaks=int(graph.get("graph_breaks") or 0), method=printable(str(graph.get("method") or "none")),
        nodes=int(graph.get("nodes") or 0), dynamic_axes=[printable(a) for a in axes], findings=findings,
        plan=plan_view(entry.plan["plan"]) if entry.plan else None, refusal=printable(entry.refusal),
        errors=severities["error"], warnings=severities["warning"])


def plan_view(plan: Mapping[str, Any]) -> PlanView:
    """advise's plan (its JSON) as the page shows it."""
    rows = [(label, _FORMATS.get(key, _shown)(plan[key])) for key, label in PLAN_LABELS.items()
            if key in plan and plan[key] not in (None, "", [], {})]
    rows += [(key.replace("_", " "), _shown(value)) for key, value in plan.items()
             if key not in PLAN_LABELS and key not in _OWN_PLACE and value not in (None, "", [], {})]
    workload = plan.get("workload") or {}
    if workload:
        rows.insert(0, ("workload", _shown(workload)))
    serving = plan.get("serving") or {}
    shown_serving = str(serving.get("title") or serving.get("path") or "")
    if serving and not serving.get("natively", True):
        shown_serving += " (a custom port)" if serving.get("architecture_known") else " (architecture unknown)"
    memory = plan.get("memory")
    return PlanView(
        rows=rows, serving=printable(shown_serving), compiler_args=printable(" ".join(plan.get("compiler_args", []))),
        env=[(printable(k), printable(str(v))) for k, v in (plan.get("env") or {}).items()],
        memory=memory_chart(memory) if memory else None,
        reasons=[Reason(printable(r["item"]), printable(r["why"]), source_links(r.get("source", "")))
                 for r in plan.get("reasons", [])])


def memory_chart(memory: Mapping[str, Any]) -> MemoryChart:
    """Memory per core as a stacked bar against the budget: one part per `*_gib` the plan sizes."""
    per_core, budget = float(memory.get("per_core_gib") or 0), float(memory.get("budget_per_core_gib") or 0)
    sizes = [(key.removesuffix("_gib"), float(value)) for key, value in memory.items()
             if key.endswith("_gib") and key not in _MEMORY_TOTALS and isinstance(value, int | float)]
    scale = max(per_core, budget, sum(gib for _, gib in sizes), 1e-9) / 100
    parts, x = [], 0.0
    for name, gib in sizes:
        width = gib / scale
        parts.append(MemoryPart(name.replace("kv_cache", "KV cache").replace("_", " "), gib,
                                MEMORY_COLOURS.get(name, "#000000"), round(x, 3), round(width, 3)))
        x += width
    return MemoryChart(parts, per_core, budget, round(budget / scale, 3))


def _cost(cost: Any) -> str:
    """advise's cost: the plan's price per hour and where it is from, per million tokens when measured."""
    if not isinstance(cost, dict):
        return _shown(cost)
    price = cost.get("price") or {}
    if cost.get("usd_per_hour") is None:
        return printable(str(price.get("from") or "no price"))
    dated = f", {price['date']}" if price.get("date") else ""
    text = (f"${cost['usd_per_hour']:,.2f} per hour ({cost.get('instance_count') or 1} × {cost.get('instance')} at "
            f"${price.get('usd_per_hour') or 0:,.3f}, from {price.get('from')}{dated})")
    if cost.get("usd_per_million_tokens") is not None:
        text += (f"; ${cost['usd_per_million_tokens']:,.4f} per million tokens at "
                 f"{cost.get('tokens_per_second'):g} tokens/s")
    baseline = cost.get("baseline") or {}
    if cost.get("tokens_per_dollar_ratio") is not None and baseline:
        text += f"; {cost['tokens_per_dollar_ratio']:g}× the tokens per dollar of {baseline.get('instance')}"
    return printable(text)


def _fleet(fleet: Any) -> str:
    """advise's plan across instances: how many of which, split how, over what."""
    if not isinstance(fleet, dict):
        return _shown(fleet)
    text = (f"{fleet.get('name') or fleet.get('layout')}: {fleet.get('instance_count')} × {fleet.get('instance')}, "
            f"TP {fleet.get('tp_degree_per_instance')} per instance ({fleet.get('tp_degree_total')} in all), "
            f"{fleet.get('chips')} chips")
    if not fleet.get("documented", True):
        text += f" (not documented: {_shown(fleet.get('missing'))})"
    return printable(text)


_FORMATS = {"cost": _cost, "fleet": _fleet}


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {_shown(v)}" for k, v in value.items() if v not in (None, "", []))
    return printable(str(value))


__all__ = ["MemoryChart", "ModelView", "PlanView", "TargetView", "memory_chart", "model_views", "plan_view"]
