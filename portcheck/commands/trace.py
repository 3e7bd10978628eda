"""`portcheck trace`: the model run in the child process, and its report for a target."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from portcheck.config import ConfigError, Settings
from portcheck.findings import ScanResult

if TYPE_CHECKING:
    from portcheck.dynamic.outcome import TraceOutcome
    from portcheck.dynamic.request import TraceRequest


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
