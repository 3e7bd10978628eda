"""The models on `portcheck report`'s page: for each model and target, what its trace captured (the capture
steps, the op inventory by Neuron status, graph breaks, dynamic axes) and advise's plan (instance, parallelism,
serving path, compiler flags, environment, memory per core against the budget, and the reasons).

Built from the typed results `trace` and `advise` return (a ScanResult with its TraceResult, a Plan), not from their
JSON. Only the plan's table is drawn from the plan's JSON form (`Plan.to_json()`, what the output formats show), so a
field advise adds (a multi-instance plan, a cost) shows up there without a change here: the fields this module
knows get their label and their place; every other plain field is listed after them under its own name
(tests/test_report_page.py checks that every label names a field of the plan)."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portcheck.escape import printable
from portcheck.findings import Finding, ScanResult
from portcheck.report.links import Link, source_links

if TYPE_CHECKING:
    from portcheck.advise.values import Plan

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
    """One model on one target, as `trace` and `advise` return it."""

    chip: str
    trace: ScanResult  # the trace's result for this target: its findings, and what it captured (`.trace`)
    plan: Plan | None = None  # advise's plan, or None when no plan could be made
    plan_findings: list[Finding] = field(default_factory=list)  # advise's findings (the trace's and the plan's)
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
        traced = run.targets[0].trace.trace if run.targets else None
        if traced is not None:
            if traced.model is not None:
                view.name = printable(traced.model.class_name.rsplit(".", 1)[-1])
                view.parameters = traced.model.parameters
            view.steps = [(printable(s.method), s.ok, s.nodes, s.seconds, printable(s.detail)) for s in traced.steps]
        view.targets = [_target_view(t) for t in run.targets]
        views.append(view)
    return views


def _target_view(entry: ModelTarget) -> TargetView:
    result, chip = entry.trace, entry.chip
    traced = result.trace
    sdk = f", Neuron SDK {result.target.sdk}" if result.target.sdk else ""
    ops = traced.ops if traced is not None else ()
    by_status: dict[str, list[str]] = {}
    for op in ops:
        by_status.setdefault(op.status.get(chip, "unknown"), []).append(printable(op.op))
    order = [s for s in OP_STATUSES if s in by_status] + sorted(s for s in by_status if s not in OP_STATUSES)
    statuses = [(status, OP_STATUSES.get(status, status), len(by_status[status]), sorted(by_status[status]))
                for status in order]
    graph = traced.graph if traced is not None else None
    shapes = traced.shapes if traced is not None else None
    axes = [f"{a.input}:{a.axis} ({a.label or 'axis'}, traced at {a.size})"
            for a in (shapes.axes if shapes is not None else ()) if a.dynamic]
    findings = [ModelFinding(f.code, f.name, f.severity.label, printable(f.message),
                             printable(f"{f.path}:{f.line}" if f.path else ""))
                for f in (entry.plan_findings if entry.plan is not None else result.findings)]
    severities = Counter(f.severity for f in findings)
    return TargetView(
        chip=chip, target=f"{chip} ({result.target.stack} stack{sdk})", ops=statuses, op_total=len(ops),
        graph_breaks=graph.graph_breaks if graph else 0, method=printable(graph.method if graph else "") or "none",
        nodes=graph.nodes if graph else 0, dynamic_axes=[printable(a) for a in axes], findings=findings,
        plan=plan_view(entry.plan) if entry.plan is not None else None, refusal=printable(entry.refusal),
        errors=severities["error"], warnings=severities["warning"])


def plan_view(plan: Plan) -> PlanView:
    """advise's plan as the page shows it."""
    serving = plan.serving
    shown_serving = (serving.title or serving.path) if serving is not None else ""
    if serving is not None and not serving.natively:
        shown_serving += " (a custom port)" if serving.known else " (architecture unknown)"
    return PlanView(
        rows=plan_rows(plan.to_json()), serving=printable(shown_serving),
        compiler_args=printable(" ".join(plan.compiler_args)),
        env=[(printable(k), printable(v)) for k, v in plan.env.items()],
        memory=memory_chart(plan.memory.as_dict()) if plan.memory is not None else None,
        reasons=[Reason(printable(r.item), printable(r.why), source_links(r.source)) for r in plan.reasons])


def plan_rows(plan: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The plan's table, from its JSON form (`Plan.to_json()`): the workload, the fields PLAN_LABELS names with
    their labels, then every other plain field under its own name."""
    rows = [(label, _FORMATS.get(key, _shown)(plan[key])) for key, label in PLAN_LABELS.items()
            if key in plan and plan[key] not in (None, "", [], {})]
    rows += [(key.replace("_", " "), _shown(value)) for key, value in plan.items()
             if key not in PLAN_LABELS and key not in _OWN_PLACE and value not in (None, "", [], {})]
    workload = plan.get("workload") or {}
    if workload:
        rows.insert(0, ("workload", _shown(workload)))
    return rows


def memory_chart(sized: Mapping[str, float]) -> MemoryChart:
    """Memory per core as a stacked bar against the budget: one part per size the plan gives (`Memory.as_dict()`:
    GiB rounded as advise reports them)."""
    per_core, budget = sized["per_core_gib"], sized["budget_per_core_gib"]
    sizes = [(key.removesuffix("_gib"), value) for key, value in sized.items() if key not in _MEMORY_TOTALS]
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


__all__ = ["PLAN_LABELS", "MemoryChart", "ModelRun", "ModelTarget", "ModelView", "PlanView", "TargetView",
           "memory_chart", "model_views", "plan_rows", "plan_view"]
