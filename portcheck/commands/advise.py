"""`portcheck advise`: the plan for a model (traced, given as numbers, or both), its findings and its script."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portcheck.commands.trace import run_model, trace
from portcheck.config import ConfigError, Settings
from portcheck.findings import Finding, ScanResult, fingerprinted

if TYPE_CHECKING:
    from portcheck.advise.values import AdviseOptions as PlanOptions
    from portcheck.advise.values import Plan
    from portcheck.dynamic.outcome import TraceOutcome
    from portcheck.dynamic.request import TraceRequest


@dataclass(frozen=True)
class AdviseOptions:
    """`portcheck advise`: the settings (their target is the plan's), the plan's own options, and the model: run
    from its request, given as numbers, or both (numbers override what the trace found)."""

    settings: Settings
    cwd: Path
    plan: PlanOptions
    numbers: dict[str, Any] = field(default_factory=dict)
    request: TraceRequest | None = None
    shown: str = ""  # the model as the command line named it
    timeout: float = 300.0
    script: bool = False  # also write the bring-up script


@dataclass
class AdviseOutcome:
    plan: Plan
    result: ScanResult
    script: str | None = None  # the bring-up script's text


def advise_refusal(settings: Settings, task: str) -> str | None:
    """Why no plan can be made for the target and task at the chosen release, before any model is built."""
    from portcheck.advise.plan import plan_refusal
    from portcheck.advise.values import AdviseOptions as PlanOptions

    return plan_refusal(PlanOptions(settings.chip, settings.stack, task, sdk=settings.sdk))


def advise(options: AdviseOptions, step: Callable[[str], None] | None = None,
           traced: TraceOutcome | None = None) -> AdviseOutcome:
    """The plan for the model's shape (from the trace, the numbers given, or both), its findings and script. The
    model is run here (`step` told of each step) unless `traced` holds its trace already (report's models)."""
    from portcheck.advise.cost import check
    from portcheck.advise.model import from_trace, with_numbers
    from portcheck.advise.plan import make_plan

    settings, cwd, request = options.settings, options.cwd, options.request
    if refusal := advise_refusal(settings, options.plan.task):
        raise ConfigError(refusal)  # before the model is built: the plan could not be made
    check(options.plan.cost, options.plan.task)
    if traced is None and request is not None:
        traced = run_model(request, cwd, options.timeout, options.shown, step)
    if step is not None:
        step(f"planning for {settings.chip}")
    try:
        shape = with_numbers(from_trace(traced) if traced else None, options.numbers)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from None
    if not shape.params:
        raise ConfigError("the model has no parameters to size: give --params")
    plan = make_plan(shape, options.plan)
    findings = trace(traced, settings, cwd, static=False).findings if traced else []
    findings += _plan_findings(plan, settings, traced, cwd)
    result = ScanResult(settings.target, files=0, findings=findings)
    script = None
    if options.script:
        from portcheck.advise.script import bringup_script

        odd = [f"{i.name} ({i.unsupported})" for i in shape.inputs if i.kind == "unsupported"]
        if odd:
            raise ConfigError(f"--emit-script: the script cannot recreate the input(s) {', '.join(odd)}; give the "
                              "model tensors and plain values (numbers, strings, booleans, None)")
        assert request is not None  # a script is asked for only with a model to compile (cli: --emit-script)
        script = bringup_script(plan, request, cwd)
    return AdviseOutcome(plan, result, script)


def target_list(text: str | None) -> tuple[str | None, ...]:
    """`advise --target trn2,trn3`: the chips named, each one the data knows and none twice; (None,): the
    configuration's target."""
    from portcheck.knowledge import load

    if text is None:
        return (None,)
    chips = tuple(load().chips)
    named = tuple(part.strip() for part in text.split(","))
    if unknown := [c for c in named if c not in chips]:
        raise ConfigError(f"--target: unknown target {unknown[0]!r}; choose from {', '.join(chips)} (several "
                          "joined by commas: trn2,trn3)")
    if len(set(named)) < len(named):
        raise ConfigError(f"--target {text}: names a target twice")
    return named


def advise_targets(every: list[AdviseOptions], step: Callable[[str], None] | None = None) -> list[AdviseOutcome]:
    """The model planned for each target: one target as `advise` always did; several side by side, the model run
    once and planned from its one trace for each."""
    if len(every) == 1:
        return [advise(every[0], step)]
    first = every[0]
    if first.script:
        raise ConfigError("--emit-script writes one target's bring-up script: give one --target")
    if first.plan.cost.price_per_hour:
        raise ConfigError("--price-per-hour prices one instance: with several targets, give each instance's price "
                          "in the config's prices table")
    for options in every:  # every refusal before the model is built
        if refusal := advise_refusal(options.settings, options.plan.task):
            raise ConfigError(refusal)
    traced = run_model(first.request, first.cwd, first.timeout, first.shown, step) if first.request else None
    return [advise(options, step, traced) for options in every]


def comparison(outcomes: list[AdviseOutcome]) -> dict[str, Any] | None:
    """Several targets' plans side by side and which the data favours (advise/compare.py); None for one."""
    from portcheck.advise.compare import compare

    return compare([o.plan for o in outcomes]).to_json() if len(outcomes) > 1 else None


def _plan_findings(plan: Plan, settings: Settings, traced: TraceOutcome | None, cwd: Path) -> list[Finding]:
    """PC8xx findings anchor at the model: its --hf-config file or build callable, or nowhere for numbers."""
    from portcheck.dynamic.results import shown_path

    place = traced.model.build_place if traced and traced.model else None
    path = shown_path(place.file, cwd) if place and place.file else ""
    line = place.line if place and path else 0
    out = []
    for item in plan.findings:
        info = item.rule.info()
        if info.code not in settings.enabled:
            continue
        out.append(Finding.of(info, item.message, path, line, 1 if path else 0, line, 1 if path else 0,
                              evidence=("plan",)))
    return fingerprinted(out, [], path)
