"""`portcheck server`: the language server, when its extra is installed."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from portcheck.errors import UserError

if TYPE_CHECKING:
    from portcheck.config import Settings
    from portcheck.dynamic.request import TraceRequest
    from portcheck.findings import ScanResult


def serve() -> None:
    """Run the language server on stdio; without pygls, one line saying how to install it."""
    if importlib.util.find_spec("pygls") is None or importlib.util.find_spec("lsprotocol") is None:
        raise UserError("the language server needs pygls and lsprotocol: pip install 'portcheck[server]'")
    from portcheck.server import serve as run

    run(trace_model)


def trace_model(request: TraceRequest, cwd: Path, timeout: float, shown: str, settings: Settings,
                step: Callable[[str], None]) -> ScanResult:
    """`portcheck trace` for the editor's `portcheck.trace`: the model run in trace's child process, its findings
    without the static pass's (the server shows those already); a UserError's one line if it cannot be traced."""
    from portcheck.commands.trace import run_model, trace

    return trace(run_model(request, cwd, timeout, shown, step), settings, cwd, static=False)
