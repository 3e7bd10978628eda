"""`portcheck advise`'s report: a table for people, JSON (schema 1 plus `model` and `plan`) for programs."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any, TextIO

from portcheck import __version__
from portcheck.findings import ScanResult
from portcheck.report.json import SCHEMA_VERSION, finding_dict

if TYPE_CHECKING:
    from portcheck.advise.values import Plan


def plan_report(plan: Plan, result: ScanResult) -> dict[str, Any]:
    model = plan.model
    return {
        "schema_version": SCHEMA_VERSION,
        "portcheck_version": __version__,
        "target": {"chip": plan.chip, "stack": plan.stack},
        "model": {"name": model.name, "source": model.source, "kind": model.kind, "parameters": model.params,
                  "layers": model.layers or None, "hidden": model.hidden or None, "heads": model.heads or None,
                  "kv_heads": (model.kv_heads or model.heads) or None,
                  "head_dim": model.attention_head_dim or None, "intermediate": model.intermediate or None,
                  "max_positions": model.max_positions or None, "int64_in_graph": model.int64_in_graph,
                  "peak_activation_bytes": model.peak_activation_bytes or None,
                  "example_batch": model.example_batch or None,
                  "dynamic_axes": list(model.dynamic_axes)},
        "plan": plan.to_json(),
        "findings": [finding_dict(f) for f in result.findings],
        "summary": {"findings": len(result.findings),
                    "by_severity": dict(sorted(Counter(f.severity.label for f in result.findings).items()))},
    }


def write_plan(plan: Plan, result: ScanResult, output_format: str, stream: TextIO, color: bool) -> None:
    if output_format == "json":
        json.dump(plan_report(plan, result), stream, indent=2, ensure_ascii=False)
        stream.write("\n")
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=stream, force_terminal=color, no_color=not color, width=120, highlight=False)
    model = plan.model
    title = (f"{model.name}: {model.params / 1e9:.2f} B parameters" if model.params >= 1e8 else
             f"{model.name}: {model.params:,} parameters")
    console.print(f"[bold]{title}[/bold] → {plan.chip} ({plan.stack} stack), {plan.task}, batch "
                  f"{plan.workload.batch}, sequence {plan.workload.seq}, {plan.workload.dtype}")
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("setting")
    table.add_column("value", overflow="fold")
    memory = plan.memory
    fleet = plan.fleet
    rows = [
        ("instance", plan.instance.name if plan.instance else "none fits"),
        ("instances", f"{fleet.count} × {fleet.instance.name} ({fleet.name}, {fleet.chips} chips): {fleet.across} "
         "between them" if fleet else str(plan.instance_count or "-")),
        ("interconnect", _interconnect(plan)),
        ("tensor parallelism", str(plan.tp_degree or "-") + (
            f" per instance ({fleet.tp * fleet.count} over the {fleet.count} instances)" if fleet and
            fleet.tensor_across else f" per instance ({fleet.across} across them)" if fleet else "")),
        ("cores / chips", f"{plan.cores or '-'} / {plan.chips or '-'}"
         + (f" (LNC={plan.lnc})" if plan.lnc else "")),
        ("replicas on the instance", str(plan.replicas or "-")),
        ("compile instance", plan.compile_instance.name if plan.compile_instance else "the instance"),
    ]
    if plan.dp > 1 or plan.workload.attention_dp > 1:
        rows.append(("data parallelism", f"{plan.dp} model copies"
                     + (f", attention DP {plan.workload.attention_dp}" if plan.workload.attention_dp > 1 else "")))
    if plan.serving is not None:
        note = "" if plan.serving.natively else " (not a listed architecture: a custom port)" if \
            plan.serving.known else " (architecture unknown: give --hf-config)"
        rows.append(("serving path", plan.serving.title + note))
    if memory is not None:
        parts = [f"weights {memory.weights:.2f}", f"KV cache {memory.kv_cache:.2f}",
                 f"activations {memory.activations:.2f}"]
        if memory.gradients or memory.optimizer:
            parts += [f"gradients {memory.gradients:.2f}", f"optimizer {memory.optimizer:.2f}"]
        parts.append(f"overhead {memory.overhead:.2f}")
        rows.append(("memory per core (GiB)", f"{memory.per_core:.2f} of {memory.budget:g}: " + ", ".join(parts)))
    rows += [
        ("compiler args", " ".join(plan.compiler_args)),
        ("environment", " ".join(f"{k}={_quote(v)}" for k, v in plan.env.items()) or "-"),
        ("sequence buckets", ", ".join(map(str, plan.buckets)) or "-"),
        ("dynamic batch", "yes" if plan.dynamic_batch else "no"),
    ]
    rows += _cost_rows(plan)
    for alternative in plan.alternatives:
        rows.append((f"at LNC={alternative.lnc}", f"tp {alternative.tp_degree} on {alternative.chips} "
                     f"chip(s), {alternative.per_core_gib:.2f} of {alternative.budget_per_core_gib:g} GiB "
                     "per core"))
    for name, value in rows:
        table.add_row(name, escape(value))
    console.print(table)
    if plan.throughput is not None and memory is not None and plan.instance is not None:
        side = Table(show_header=True, header_style="bold", expand=False, title="minimum and throughput-oriented")
        for column in ("", "minimum", "throughput"):
            side.add_column(column)
        best = plan.throughput
        for name, low, high in (
                ("tp × dp", f"{plan.tp_degree} × {plan.dp}", f"{best.tp} × {best.dp}"),
                ("batch per copy", str(plan.workload.batch), str(best.batch)),
                ("sequences in flight", str(plan.dp * plan.workload.batch), str(best.dp * best.batch)),
                ("instance", plan.instance.name, best.instance.name),
                ("GiB per core", f"{memory.per_core:.2f} of {memory.budget:g}",
                 f"{best.memory.per_core:.2f} of {best.memory.budget:g}")):
            side.add_row(name, low, high)
        console.print(side)
    console.print("[bold]why[/bold] (full sources in --format json)")
    for reason in plan.reasons:
        console.print(f"  [bold]{escape(reason.item)}[/bold]: {escape(reason.why)} "
                      f"[dim]({escape(_short(reason.source))})[/dim]", soft_wrap=True)
    for f in result.findings:
        where = f"{f.path}:{f.line}: " if f.path else ""
        style = {"error": "red", "warning": "yellow"}.get(f.severity.label, "cyan")
        console.print(f"{escape(where)}[{style}]{f.code}[/{style}] {f.severity.label}: {escape(f.message)}",
                      soft_wrap=True)


def _interconnect(plan: Plan) -> str:
    links = plan.interconnect()
    if not links:
        return "-"
    within = f"within an instance: {links['within_instance'] or 'not documented'}"
    return within + (f"; between instances: {links['between_instances']}" if links["between_instances"] else "")


def _cost_rows(plan: Plan) -> list[tuple[str, str]]:
    cost = plan.cost
    if cost is None:
        return []
    if cost.usd_per_hour is None:
        return [("cost per hour", cost.price.origin)]
    each = cost.price.usd_per_hour or 0.0
    rows = [("cost per hour", f"${cost.usd_per_hour:,.2f} ({cost.count} × ${each:,.2f}, {cost.price.origin}"
             + (f", {cost.price.date}" if cost.price.date else "") + ")")]
    if cost.usd_per_million_tokens is not None:
        rows.append(("cost per million tokens", f"${cost.usd_per_million_tokens:,.4f} at {cost.tokens_per_second:g} "
                     "tokens/s (--tokens-per-second)"))
    baseline = cost.baseline
    if baseline is not None:
        theirs, ratio = baseline.usd_per_million_tokens, cost.tokens_per_dollar_ratio
        rows.append((f"vs {baseline.instance}", f"${theirs:,.4f} per million tokens at {baseline.tokens_per_second:g} "
                     f"tokens/s: {ratio:.2f}× its tokens per dollar (${baseline.price.usd_per_hour:,.2f} an hour, "
                     f"{baseline.price.dated})" if theirs is not None and ratio is not None
                     else baseline.price.origin))
    return rows


def _quote(value: str) -> str:
    return f"'{value}'" if " " in value else value


def _short(source: str) -> str:
    """The first document a reason cites, without its remarks."""
    first = source.split(";")[0].strip()
    return first.split(" (")[0]
