"""`portcheck report`: a scan per target, each model traced once and planned per target, and the page."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portcheck.commands.advise import AdviseOptions, advise, advise_refusal
from portcheck.commands.scan import LinesFor, Progress, ScanOptions, scan
from portcheck.commands.trace import run_model, trace
from portcheck.config import Settings
from portcheck.findings import Finding, ScanResult
from portcheck.report.models import ModelRun, ModelTarget
from portcheck.report.page import Project

if TYPE_CHECKING:
    from portcheck.dynamic.request import TraceRequest


def report_page(results: list[ScanResult], paths: list[str], lines_for: LinesFor, baseline: Path | None,
                output_format: str, models: list[ModelRun] | None = None, project: Project | None = None,
                history: list[dict[str, Any]] | None = None) -> str:
    """`portcheck report`: the page for the scans of one tree, one result per target, and the models traced;
    `history`: every run recorded, this one last."""
    import functools
    import io

    from portcheck.report.models import model_views
    from portcheck.report.page import build_page, fix_preview, write_html, write_markdown_report

    lines_for = functools.lru_cache(maxsize=None)(lines_for)  # each file read once for frames, tiles and fixes

    def fix_diff(finding: Finding) -> str:
        if not finding.fix:
            return ""
        shown = project.relative(finding.path) if project else finding.path
        return fix_preview(shown, lines_for(finding.path), finding.fix.edits)

    change = None
    if baseline is not None and results:
        from portcheck.baseline import compare_with_baseline

        change = compare_with_baseline(results[0].findings, baseline)
    page = build_page(results, paths, lines_for, fix_diff, change, model_views(models or []), project, history)
    buffer = io.StringIO()
    (write_html if output_format == "html" else write_markdown_report)(page, buffer)
    return buffer.getvalue()


@dataclass(frozen=True)
class ReportOptions:
    """`portcheck report`: the scans (one settings a target), and the models to trace and plan for each target."""

    scans: tuple[Settings, ...]
    cwd: Path
    paths: tuple[str, ...]
    output_format: str  # html or markdown
    baseline: Path | None = None
    jobs: int | None = None
    use_cache: bool = True
    models: tuple[tuple[TraceRequest, str], ...] = ()  # each model's request and the spec that named it
    model_targets: tuple[Settings, ...] = ()  # trace's settings, one a target
    timeout: float = 300.0
    history: Path | None = None  # append this run's counts, draw the trend of every run recorded


@dataclass
class ReportOutcome:
    text: str  # the page
    warnings: list[str] = field(default_factory=list)
    record: Callable[[], None] = lambda: None  # appends this run to --history: called once the page is written


def report(options: ReportOptions, scanning: Callable[[str], AbstractContextManager[Progress | None]],
           stepping: Callable[[], AbstractContextManager[Callable[[str], None] | None]]) -> ReportOutcome:
    """The page: a scan per target, then each model traced once and planned per target. `scanning(what)` and
    `stepping()` show the progress (cli.py's bars)."""
    import datetime
    import functools

    from portcheck.commands.history import append_history, commit_of, project_of, read_history
    from portcheck.escape import printable
    from portcheck.report.trend import run_record

    history_text, runs = read_history(options.history) if options.history else ("", [])  # refused before the work
    project, root = project_of(list(options.paths), options.cwd)
    results, warnings = [], []
    lines_for: LinesFor = lambda _: []  # noqa: E731  # replaced by the first scan's
    for settings in options.scans:
        with scanning(f"scanning for {settings.chip}") as progress:
            outcome = scan(ScanOptions(settings, options.cwd, options.paths, jobs=options.jobs,
                                       use_cache=options.use_cache, progress=progress))
        warnings += outcome.warnings
        results.append(outcome.result)
        lines_for = outcome.lines_for
    models = []
    if options.models:
        with stepping() as step:
            for request, spec in options.models:
                run = report_model(request, spec, options.model_targets, options.cwd, options.timeout, step)
                if run.error:
                    warnings.append(f"{printable(spec)}: {printable(run.error)}")
                models.append(run)
    recorded = None
    if options.history:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        recorded = run_record(results, now, commit_of(root))
        runs.append(recorded)
    text = report_page(results, list(options.paths), lines_for, options.baseline, options.output_format, models,
                       project, runs if options.history else None)
    done = ReportOutcome(text, warnings)
    if options.history and recorded is not None:
        done.record = functools.partial(append_history, options.history, history_text, recorded)
    return done


def report_model(request: TraceRequest, shown: str, targets: Sequence[Settings], cwd: Path, timeout: float,
                 step: Callable[[str], None] | None = None) -> ModelRun:
    """`portcheck report --model`: one trace in the child process, then its report and the plan per target. A
    model that cannot be built or traced, or planned for, is said so on the page, not an error of the report."""
    from portcheck.advise.cost import CostOptions
    from portcheck.advise.values import AdviseOptions as PlanOptions
    from portcheck.errors import UserError

    try:
        traced = run_model(request, cwd, timeout, shown, step)
    except UserError as exc:
        return ModelRun(shown, str(exc))
    run = ModelRun(shown)
    for settings in targets:
        if step is not None:
            step(f"{shown}: checking the ops and planning for {settings.chip}")
        entry = ModelTarget(settings.chip, trace(traced, settings, cwd, static=False))
        entry.refusal = advise_refusal(settings, "inference") or ""
        if not entry.refusal:
            plan = PlanOptions(settings.chip, settings.stack, sdk=settings.sdk,
                               cost=CostOptions(prices=settings.prices))
            try:
                outcome = advise(AdviseOptions(settings, cwd, plan, request=request), traced=traced)
                entry.plan, entry.plan_findings = outcome.plan, outcome.result.findings
            except UserError as exc:
                entry.refusal = str(exc)
        run.targets.append(entry)
    return run
