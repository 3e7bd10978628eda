"""The application layer: `scan`, `fix_stdin`, `trace`, `advise` and `review` take typed options and return typed
results. No argument parsing and no printing here (cli.py does both); the files a command is asked to change
(`--fix`) are its work, the reports it renders are cli.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portcheck.config import ConfigError, Settings
from portcheck.findings import FileError, FileTooLarge, Finding, ScanResult, Target, fingerprinted, python_lines
from portcheck.report.models import ModelRun, ModelTarget

if TYPE_CHECKING:
    from portcheck.advise.cost import CostOptions
    from portcheck.advise.values import Plan
    from portcheck.dynamic.outcome import TraceOutcome
    from portcheck.dynamic.request import TraceRequest
    from portcheck.review import Change
    from portcheck.static.scan import Fixing

LinesFor = Callable[[str], list[str]]


def source_lines(cwd: Path, stdin_text: str | None = None) -> LinesFor:
    """For code frames and suggestions: a file's lines (relative to `cwd`), or stdin's."""
    def lines_for(path: str) -> list[str]:
        if stdin_text is not None:
            return python_lines(stdin_text)
        try:
            return python_lines((cwd / path).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return []

    return last_file_kept(lines_for)


def last_file_kept(lines_for: LinesFor) -> LinesFor:
    """`lines_for`, keeping the last file's lines: the reports ask for a file's lines once per finding, and findings
    come file by file, so each file is read and split once (not once per finding) and one file is held at a time."""
    kept: dict[str, list[str]] = {}

    def cached(path: str) -> list[str]:
        if path not in kept:
            kept.clear()
            kept[path] = lines_for(path)
        return kept[path]

    return cached


# ---- scan ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanOptions:
    settings: Settings
    cwd: Path
    paths: tuple[str, ...] = (".",)
    stdin: bytes | None = None  # the source, when the path is "-"
    stdin_filename: str | None = None
    fixing: Fixing | None = None
    jobs: int | None = None
    cache_dir: str | None = None
    use_cache: bool = True
    baseline: Path | None = None  # report only findings this baseline does not hold
    progress: Callable[[int, int, str], None] | None = None  # told after each file is analysed


@dataclass
class ScanOutcome:
    result: ScanResult
    lines_for: LinesFor
    warnings: list[str] = field(default_factory=list)


def scan(options: ScanOptions) -> ScanOutcome:
    """Scan (and with `fixing`, fix) files or stdin; then leave out what the baseline holds."""
    from portcheck.static.scan import scan_paths, scan_stdin

    settings, cwd = options.settings, options.cwd
    if options.jobs is not None and options.jobs < 1:
        raise ConfigError(f"--jobs must be 1 or more, not {options.jobs}")
    warnings: list[str] = []
    if options.stdin is not None:
        result = scan_stdin(options.stdin, options.stdin_filename, settings, cwd)
        lines_for = source_lines(cwd, options.stdin.decode("utf-8", errors="replace"))
    else:
        cache = None
        if options.fixing is None:
            from portcheck.cache import Cache, CacheRefused, directory_for

            try:
                directory = directory_for(options.cache_dir, not options.use_cache, settings.root)
            except CacheRefused as exc:
                directory = None
                warnings.append(str(exc))
            cache = Cache(directory if directory.is_absolute() else cwd / directory) if directory else None
        result = scan_paths(list(options.paths), settings, cwd, options.fixing, jobs=options.jobs, cache=cache,
                            progress=options.progress)
        if cache is not None and cache.problem:
            warnings.append(cache.problem)
        warnings.extend(result.warnings)
        lines_for = source_lines(cwd)
    if options.baseline is not None:
        from portcheck.baseline import apply_baseline, read_baseline

        apply_baseline(result, read_baseline(options.baseline))
    return ScanOutcome(result, lines_for, warnings)


@dataclass
class StdinFix:
    result: ScanResult
    text: str  # the fixed source (the source itself when nothing changed)
    diff: str  # the unified diff from the source to `text`
    changed: bool
    untouched: bytes | None = None  # the input, to be given back byte for byte (an excluded file)


def fix_stdin(data: bytes, filename: str | None, settings: Settings, cwd: Path, fixing: Fixing) -> StdinFix:
    """`portcheck scan --fix -`: the fixed source and what is left, for stdin's text."""
    from portcheck.static.discover import is_excluded
    from portcheck.static.engine import failed
    from portcheck.static.rewrite import FixOutcome, fix_text, unified_diff
    from portcheck.static.source import SourceError, decode

    display = filename or "-"
    target = Target(settings.chip, settings.stack, settings.sdk)
    if filename and settings.force_exclude and is_excluded(cwd / filename, settings):
        # excluded (--force-exclude): given back byte for byte, as `scan -` reports nothing for it
        return StdinFix(ScanResult(target, fixing=True), "", "", False, untouched=data)
    job = settings.job(display, cwd / (filename or "-"), data)
    try:
        job.read()
        source = decode(data)
    except (FileTooLarge, SourceError) as exc:
        # binary, not UTF-8, over the limit: an error entry and the input given back byte for byte, as for a syntax
        # error (an editor that pipes its buffer through `--fix -` must not get it back empty)
        message = exc.message if isinstance(exc, SourceError) else str(exc)
        result = ScanResult(target, 1, errors=[FileError(display, message)], fixing=True)
        return StdinFix(result, "", "", False, untouched=data)
    try:
        outcome = fix_text(source.text, job, fixing.unsafe)
    except Exception as exc:  # RecursionError, MemoryError, a bug: an error entry, the text given back unchanged
        outcome = FixOutcome(failed(display, exc))
    text = outcome.text if outcome.text is not None else source.text
    result = ScanResult(Target(settings.chip, settings.stack, settings.sdk), 1, list(outcome.result.findings),
                        list(outcome.result.errors), outcome.fixed, True)
    return StdinFix(result, text, unified_diff(display, source.text, text), outcome.text is not None)


# ---- report ---------------------------------------------------------------------------------------------------


def report_page(results: list[ScanResult], paths: list[str], lines_for: LinesFor, baseline: Path | None,
                output_format: str, models: list[ModelRun] | None = None) -> str:
    """`portcheck report`: the page for the scans of one tree, one result per target, and the models traced."""
    import functools
    import io

    from portcheck.report.models import model_views
    from portcheck.report.page import build_page, fix_preview, write_html, write_markdown_report

    lines_for = functools.lru_cache(maxsize=None)(lines_for)  # each file read once for frames, tiles and fixes

    def fix_diff(finding: Finding) -> str:
        return fix_preview(finding.path, lines_for(finding.path), finding.fix.edits) if finding.fix else ""

    change = None
    if baseline is not None and results:
        from portcheck.baseline import compare_with_baseline

        change = compare_with_baseline(results[0].findings, baseline)
    page = build_page(results, paths, lines_for, fix_diff, change, model_views(models or []))
    buffer = io.StringIO()
    (write_html if output_format == "html" else write_markdown_report)(page, buffer)
    return buffer.getvalue()


def report_model(request: TraceRequest, shown: str, targets: list[Settings], cwd: Path, timeout: float,
                 step: Callable[[str], None] | None = None) -> ModelRun:
    """`portcheck report --model`: one trace in the child process, then its report and the plan per target. A
    model that cannot be built or traced, or planned for, is said so on the page, not an error of the report."""
    from portcheck.errors import UserError
    from portcheck.report.advise import plan_report
    from portcheck.report.json import report_dict

    try:
        traced = run_model(request, cwd, timeout, shown, step)
    except UserError as exc:
        return ModelRun(shown, str(exc))
    run = ModelRun(shown)
    for settings in targets:
        if step is not None:
            step(f"{shown}: checking the ops and planning for {settings.chip}")
        entry = ModelTarget(settings.chip, report_dict(trace(traced, settings, cwd, static=False)))
        entry.refusal = advise_refusal(settings, "inference") or ""
        if not entry.refusal:
            try:
                outcome = advise(AdviseOptions(settings, cwd, {}), traced, request)
                entry.plan = plan_report(outcome.plan, outcome.result)
            except UserError as exc:
                entry.refusal = str(exc)
        run.targets.append(entry)
    return run


# ---- trace --------------------------------------------------------------------------------------------------


def run_model(request: TraceRequest, cwd: Path, timeout: float, shown: str,
              step: Callable[[str], None] | None = None) -> TraceOutcome:
    """Run the model's code in the child process: what it found, or a UserError saying why not. `step` is told
    each step the child starts (building the model, running it, capturing the graph, ...)."""
    from portcheck.dynamic.results import shown_path
    from portcheck.dynamic.runner import run_child
    from portcheck.report.concise import terminal_path

    outcome = run_child(request, cwd, timeout,
                        None if step is None else lambda doing: step(f"{shown}: {doing}"))
    error = outcome.error
    if error is not None:
        message = error.message
        if error.place is not None and error.place.file:
            message = f"{terminal_path(shown_path(error.place.file, cwd))}:{error.place.line}: {message}"
        if "allocate" in message or "out of memory" in message:
            message += " (try --device meta)"
        raise ConfigError(message)
    return outcome


def trace(outcome: TraceOutcome, settings: Settings, cwd: Path, *, static: bool = True) -> ScanResult:
    """The trace's findings (with the static pass over the model's files unless `static` is off)."""
    from portcheck.dynamic.results import build_report

    return build_report(outcome, settings, cwd, static=static)


# ---- advise -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdviseOptions:
    settings: Settings
    cwd: Path
    numbers: dict[str, Any]
    task: str = "inference"
    batch: int = 1
    seq_len: int = 0
    dtype: str = "bf16"
    tp: int = 0
    prefer: str = "accuracy"
    lnc: int = 0
    script: bool = False  # also write the bring-up script
    dp: int = 1  # model copies
    attention_dp: int = 1
    context_batch: int = 1
    kv_dtype: str = ""
    compile_only: bool = False  # the script only compiles (a host without Neuron devices)
    cost: CostOptions | None = None  # prices, throughputs and the GPU baseline (advise/cost.py)


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


def advise(options: AdviseOptions, traced: TraceOutcome | None, request: TraceRequest | None) -> AdviseOutcome:
    """The plan for the model's shape (from the trace, the numbers given, or both), its findings and script."""
    from portcheck.advise.cost import CostOptions
    from portcheck.advise.model import from_trace, with_numbers
    from portcheck.advise.plan import make_plan
    from portcheck.advise.values import AdviseOptions as PlanOptions

    settings, cwd = options.settings, options.cwd
    try:
        shape = with_numbers(from_trace(traced) if traced else None, options.numbers)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from None
    if not shape.params:
        raise ConfigError("the model has no parameters to size: give --params")
    plan = make_plan(shape, PlanOptions(settings.chip, settings.stack, options.task, options.batch, options.seq_len,
                                        options.dtype, options.tp, options.prefer, options.lnc, settings.sdk,
                                        options.dp, options.attention_dp, options.context_batch, options.kv_dtype,
                                        compile_only=options.compile_only,
                                        cost=options.cost or CostOptions(prices=settings.prices)))
    findings = trace(traced, settings, cwd, static=False).findings if traced else []
    findings += _plan_findings(plan, settings, traced, cwd)
    result = ScanResult(Target(settings.chip, settings.stack, settings.sdk), files=0, findings=findings)
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
        out.append(Finding(info.code, info.name, info.category, info.severity, item.message, path, line,
                           1 if path else 0, line, 1 if path else 0, evidence=("plan",)))
    return fingerprinted(out, [], path)


# ---- review -------------------------------------------------------------------------------------------------


@dataclass
class ReviewOutcome:
    result: ScanResult
    change: Change
    lines_for: LinesFor


def review(base: str, head: str | None, settings: Settings, cwd: Path) -> ReviewOutcome:
    """The findings on the lines the change from `base` to `head` (or the working tree) adds or modifies."""
    import functools

    from portcheck.review import changed_lines, lines_at_head
    from portcheck.review import review as review_change

    change = changed_lines(base, head, cwd)
    lines_for = last_file_kept(functools.partial(lines_at_head, change))
    return ReviewOutcome(review_change(change, settings), change, lines_for)


__all__ = [
    "AdviseOptions", "AdviseOutcome", "ModelRun", "ModelTarget", "ReviewOutcome", "ScanOptions", "ScanOutcome",
    "StdinFix", "advise", "advise_refusal", "fix_stdin", "report_model", "review", "run_model", "scan",
    "source_lines", "trace",
]
