"""The report's decision summary, one a target: go or no-go and why, the rules that block the port most, where the
findings sit (the device step against the code around it, as the call graph placed them), whether each model's
plan fits, and the work: the sites each fix takes care of and those left to a person. Counted per finding of the
target (the JSON report's findings), never per wording; no hours are guessed."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from portcheck.findings import DEVICE_STEP, Applicability, Finding, ScanResult, Severity
from portcheck.knowledge import RuleInfo
from portcheck.report.links import Link, source_links
from portcheck.report.models import ModelView

TOP_BLOCKERS = 5

# Where code runs (findings.RUNS) as the page names it, the device step first.
PLACES = {
    "model": "model code (a module's forward reaches it)",
    "step": "training step (a training step reaches it)",
    "host": "data pipeline (host side)",
    "module": "module level (set-up, scripts)",
    "other": "functions no forward, step or pipeline reaches (set-up, tools, utilities)",
    "not-neuron": "CUDA-only or other vendors' paths (do not run on Neuron)",
    "": "not placed (no call graph for the file)",
}


@dataclass(frozen=True)
class Blocker:
    """One rule's errors on a target."""

    code: str
    name: str
    count: int
    files: int
    safe: int  # sites `--fix` takes care of
    unsafe: int  # sites `--unsafe-fixes` takes care of
    manual: int  # sites left to a person
    remedy: str
    sources: list[Link]
    anchor: str  # the first of its findings on the page


@dataclass(frozen=True)
class Place:
    key: str  # findings.RUNS, or ""
    label: str
    errors: int
    warnings: int
    infos: int
    device: bool  # the device step (model code), not the infrastructure around it


@dataclass(frozen=True)
class ManualWork:
    code: str
    name: str
    sites: int
    files: int


@dataclass(frozen=True)
class ModelFit:
    shown: str
    verdict: str  # "fits", "over the budget", "no plan", "not traced"
    fits: bool
    detail: str  # on what: the instance, the memory per core; or why not


@dataclass
class Decision:
    chip: str
    target: str
    go: bool
    reason: str
    errors: int
    warnings: int
    infos: int
    files: int  # scanned
    files_affected: int
    could_not_analyse: int
    blockers: list[Blocker] = field(default_factory=list)
    blocking_rules: int = 0  # rules with an error on this target
    places: list[Place] = field(default_factory=list)
    device: tuple[int, int] = (0, 0)  # (errors, warnings) in the device step
    infrastructure: tuple[int, int] = (0, 0)  # (errors, warnings) elsewhere
    models: list[ModelFit] = field(default_factory=list)
    safe_fixes: int = 0
    unsafe_fixes: int = 0
    manual: list[ManualWork] = field(default_factory=list)  # errors and warnings no fix takes care of, by rule
    manual_sites: int = 0
    work_files: int = 0  # files with an error or a warning: the files the port touches


def decide(result: ScanResult, rules: Mapping[str, RuleInfo], models: Sequence[ModelView], target: str,
           anchor_of: Callable[[Finding], str]) -> Decision:
    """The decision for one target from its scan (every finding counted once) and the models traced."""
    findings = result.findings
    counts = Counter(f.severity for f in findings)
    fits = [_fit(model, result.target.chip) for model in models]
    decision = Decision(
        result.target.chip, target, False, "", counts[Severity.ERROR], counts[Severity.WARNING],
        counts[Severity.INFO], result.files, len({f.path for f in findings}), len(result.errors), models=fits)
    errors = [f for f in findings if f.severity == Severity.ERROR]
    by_rule: dict[str, list[Finding]] = defaultdict(list)
    for f in errors:
        by_rule[f.code].append(f)
    ranked = sorted(by_rule.items(), key=lambda item: (-len(item[1]), item[0]))
    for code, found in ranked[:TOP_BLOCKERS]:
        fixes = Counter(f.fix.applicability if f.fix else "" for f in found)
        info = rules.get(code)
        decision.blockers.append(Blocker(
            code, found[0].name, len(found), len({f.path for f in found}), fixes[Applicability.SAFE],
            fixes[Applicability.UNSAFE], fixes[""], remedy(info, found), source_links(info.source) if info else [],
            anchor_of(found[0])))
    decision.blocking_rules = len(ranked)
    by_place: dict[str, Counter[Severity]] = defaultdict(Counter)
    for f in findings:
        by_place[f.runs][f.severity] += 1
    for key, label in PLACES.items():
        if key in by_place:
            c = by_place[key]
            decision.places.append(Place(key, label, c[Severity.ERROR], c[Severity.WARNING], c[Severity.INFO],
                                         key in DEVICE_STEP))
    device = [p for p in decision.places if p.device]
    decision.device = (sum(p.errors for p in device), sum(p.warnings for p in device))
    decision.infrastructure = (decision.errors - decision.device[0], decision.warnings - decision.device[1])
    fixes = Counter(f.fix.applicability for f in findings if f.fix is not None)
    decision.safe_fixes, decision.unsafe_fixes = fixes[Applicability.SAFE], fixes[Applicability.UNSAFE]
    manual: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        if f.severity > Severity.INFO and f.fix is None:
            manual[f.code].append(f)
    decision.manual = sorted((ManualWork(code, found[0].name, len(found), len({f.path for f in found}))
                              for code, found in manual.items()), key=lambda m: (-m.sites, m.code))
    decision.manual_sites = sum(m.sites for m in decision.manual)
    decision.work_files = len({f.path for f in findings if f.severity > Severity.INFO})
    decision.go, decision.reason = _verdict(decision)
    return decision


def _verdict(d: Decision) -> tuple[bool, str]:
    blocked_models = [m for m in d.models if not m.fits]
    if d.errors:
        top = d.blockers[0]
        where = (f"; {d.device[0]} in the device step, {d.infrastructure[0]} in the code around it"
                 if any(p.key for p in d.places) else "")
        rules = f"{d.blocking_rules} rule{'s' if d.blocking_rules != 1 else ''}"
        return False, (f"{d.errors} blocker{'s' if d.errors != 1 else ''} (errors) from {rules}{where}; the most: "
                       f"{top.code} {top.name} ({top.count})")
    if blocked_models:
        first = blocked_models[0]
        return False, f"no blocker in the code; {len(blocked_models)} model(s) not ready: {first.shown} {first.verdict}"
    if d.could_not_analyse:
        return False, f"no blocker found, but {d.could_not_analyse} file(s) could not be analysed"
    if d.warnings:
        return True, f"no blocker; {d.warnings} warning{'s' if d.warnings != 1 else ''} to review"
    return True, "no blocker and no warning"


def _fit(model: ModelView, chip: str) -> ModelFit:
    if model.error:
        return ModelFit(model.shown, "not traced", False, model.error)
    target = next((t for t in model.targets if t.chip == chip), None)
    if target is None or target.plan is None:
        return ModelFit(model.shown, "no plan", False, target.refusal if target else "not planned for this target")
    rows = dict(target.plan.rows)
    on = rows.get("instance", "")
    memory = target.plan.memory
    if memory is None:
        return ModelFit(model.shown, "planned", not target.errors, f"on {on}" if on else "")
    detail = f"on {on}: {memory.per_core:.2f} of {memory.budget:g} GiB per core" if on else \
        f"{memory.per_core:.2f} of {memory.budget:g} GiB per core"
    if target.errors:
        detail += f"; {target.errors} error(s) in the graph or the plan"
    return ModelFit(model.shown, "fits" if memory.fits else "over the budget", memory.fits and not target.errors,
                    detail)


# What says what to do: a sentence or clause that starts with an imperative, or says what to do instead.
_VERBS = ("use|pass|name|probe|replace|drop|port|move|keep|pad|cast|run|remove|leave|train|check|set|select|wrap|"
          "call|compile|strip|shard|split|write|give|add|make sure|emulate|rewrite|fix")
_IMPERATIVE = re.compile(rf"^(?:{_VERBS})\b", re.IGNORECASE)
_ADVICE = re.compile(r"\b(instead|advises?|recommends?|the fix is|guidance is|way forward)\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"])")


def remedy(info: RuleInfo | None, found: Sequence[Finding]) -> str:
    """The rule's remedy in one line, from what portcheck already says (never made up here): its fix's title; else
    the clause of the first finding's message that says what to do (`...; use torch.where(...)`); else the first
    sentence of the catalog's Neuron note that does; else where its documentation is."""
    titled = next((f.fix.title for f in found if f.fix is not None), "")
    if titled:
        return titled
    for f in found[:1]:
        clause = next((c.strip() for c in reversed(f.message.split("; ")[1:]) if _IMPERATIVE.match(c.strip())), "")
        if clause:
            return clause[0].upper() + clause[1:]
    if info is None:
        return ""
    sentences = _SENTENCE.split(info.neuron.strip())
    said = next((s for s in sentences if _IMPERATIVE.match(s) or _ADVICE.search(s)), "")
    return said or f"`portcheck rule {info.code}` explains it"


__all__ = ["PLACES", "Blocker", "Decision", "ManualWork", "ModelFit", "Place", "decide", "remedy"]
