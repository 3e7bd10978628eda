"""The lines `portcheck trace` adds under its findings for people: how the graph was captured, and the op
inventory's verdict per chip. (The JSON report carries all of it, op by op.)"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TextIO

from portcheck.escape import printable
from portcheck.findings import ScanResult
from portcheck.traced import GraphFacts

# How the summary names each status: falling back to the CPU (a source says so) is not unknown (no source).
_VERDICTS = {"supported": "supported", "restricted": "restricted", "cpu-fallback": "fall back to the CPU",
             "unsupported": "unsupported", "unknown": "unknown (no source)"}


@contextlib.contextmanager
def step_progress(output_format: str) -> Iterator[Callable[[str], None] | None]:
    """The steps of `trace`, `advise` and `report`'s models on stderr, one line each: a spinner on the one under
    way, a tick and its time on those done. None where progress is not shown (see _shown_progress); gone once the
    command ends."""
    if not _shown_progress(output_format):
        yield None
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(finished_text="[green]✓[/green]"), TextColumn("{task.description}"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        under_way: list[TaskID] = []

        def step(doing: str) -> None:
            for task in under_way:
                bar.update(task, total=1, completed=1)
            under_way[:] = [bar.add_task(escape(printable(doing)), total=None)]
            bar.refresh()  # a step shorter than the refresh period is shown too

        yield step


def _shown_progress(output_format: str = "concise") -> bool:
    """Progress goes to a person at a terminal: not when stderr is piped, in CI, or for a machine format."""
    return output_format in ("concise", "full", "table", "html", "markdown") and not os.environ.get("CI") and \
        sys.stderr.isatty()


@contextlib.contextmanager
def file_progress(output_format: str, what: str = "scanning") -> Iterator[Callable[[int, int, str], None] | None]:
    """A progress bar on stderr (files done / in all, the current file) while files are analysed; None where
    progress is not shown (see _shown_progress). It is gone once the scan ends. It stays hidden while the files are
    still being found (no `0/?`) and for a scan of one file."""
    if not _shown_progress(output_format):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[current]}", style="dim"))
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=None, current="", visible=False)

        def advance(done: int, total: int, path: str) -> None:
            bar.update(task, completed=done, total=total, current=printable(path)[-60:], visible=total > 1)

        yield advance


def write_trace_summary(result: ScanResult, stream: TextIO) -> None:
    trace = result.trace
    if trace is None:
        return
    for step in trace.steps:
        outcome = f"ok, {step.nodes} nodes" if step.ok else f"failed: {step.detail}"
        stream.write(f"capture: {step.method}: {outcome} ({step.seconds:.1f} s)\n")
    ops = trace.ops
    if ops:
        chips = list(ops[0].status)
        for chip in chips:
            counts = Counter(op.status[chip] for op in ops)
            order = [s for s in _VERDICTS if s in counts] + sorted(s for s in counts if s not in _VERDICTS)
            verdict = ", ".join(f"{counts[status]} {_VERDICTS.get(status, status)}" for status in order)
            stream.write(f"ops on {chip}: {len(ops)} distinct ATen ops: {verdict}\n")
    scope = trace.scope
    if scope is not None:
        witness = {"eager run": "lines an eager run of the model ran",
                   "graph stack traces": "lines in the graph's stack traces (no eager run on the meta device)"}
        seen = witness.get(scope.witness, "none: nothing recorded what ran")
        stream.write(f"static: {len(scope.files)} file{'s' if len(scope.files) != 1 else ''} read; yours whole, "
                     f"libraries' findings only on {seen}\n")
    model, graph = trace.model, trace.graph or GraphFacts()
    if model is not None:
        note = model.use_cache_note()
        stream.write(f"model: {model.class_name}, {model.parameters:,} parameters, built on {model.device}; graph: "
                     f"{graph.method or 'none'}, {graph.nodes} nodes, {graph.graph_breaks} graph breaks, "
                     f"{graph.seconds or 0:.1f} s{'; ' + note if note else ''}\n")
        if model.dtype:
            stream.write(f"dtype: {model.dtype}\n")
        if model.quantization:
            stream.write(f"quantization: {model.quantization}\n")
