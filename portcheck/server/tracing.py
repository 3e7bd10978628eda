"""`portcheck.trace`: `portcheck trace` asked for from the editor, the one way the server runs the user's code. The
model is built and traced by the command line's own trace (commands/trace.py, handed to the server by
commands/server.py: its child process, its time limit, its one-line errors; torch is loaded there, never in the
server). Its findings come back as diagnostics on the lines they name, and stay until the file is edited or the
trace is run again."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portcheck.config import ConfigError, Settings
from portcheck.dynamic.request import DynamicAxis, InputSpec, TraceRequest, hf_option, memory_size
from portcheck.findings import Finding, ScanResult

TRACE_COMMAND = "portcheck.trace"
DEFAULT_TIMEOUT = 300.0  # seconds, as `portcheck trace --timeout`
SOURCE = "portcheck trace"
_OPTIONS: dict[str, type | tuple[type, ...]] = {
    "model": str, "hf_config": str, "input": list, "dynamic": list, "device": str, "timeout": (int, float),
    "memory_limit": str, "hf_option": list, "dtype": str}
_DEVICES = ("auto", "cpu", "meta")
_DTYPES = ("", "float32", "bfloat16", "float16")

# The command line's trace: (request, working directory, time limit, the model as named, settings, each step) ->
# its findings, without the static pass's (the server shows those already); a UserError's one line if it fails.
TraceModel = Callable[[TraceRequest, Path, float, str, Settings, Callable[[str], None]], ScanResult]


@dataclass(frozen=True)
class Ask:
    """What the command asks for: the request for the trace's child, its time limit, the model as named."""

    request: TraceRequest
    timeout: float
    shown: str

    @property
    def model_path(self) -> Path | None:
        """The model's file or configuration as named (relative to the workspace folder unless absolute)."""
        spec = self.request.model
        location = spec.rpartition(":")[0] or spec if spec else self.request.hf_config
        return Path(location) if location.endswith((".py", ".json")) or "/" in location else None


@dataclass(frozen=True)
class Traced:
    """A trace's findings by the absolute path of the file each names."""

    by_file: dict[Path, list[Finding]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {"findings": sum(map(len, self.by_file.values())),
                "files": {path.as_uri(): len(found) for path, found in sorted(self.by_file.items())}}


def ask(arguments: Sequence[object], default_memory: int) -> Ask:
    """The command's arguments: a model spec (`path/to/file.py:build`, relative to the workspace folder), or an
    object with `model` (or `hf_config`) and any of trace's options by their command-line names (`input`,
    `dynamic`, `device`, `timeout`, `memory_limit`, `hf_option`, `dtype`). ConfigError (one line) if not."""
    given = arguments[0] if arguments else None
    if isinstance(given, str):
        given = {"model": given}
    if not isinstance(given, dict) or bool(given.get("model")) == bool(given.get("hf_config")):
        raise ConfigError(f"{TRACE_COMMAND} needs a model: [\"path/to/file.py:build\"], or [{{\"model\": "
                          "\"path/to/file.py:build\", \"timeout\": 120}] (or \"hf_config\" instead of \"model\")")
    for key, value in given.items():
        kind = _OPTIONS.get(key)
        if kind is None:
            raise ConfigError(f"{TRACE_COMMAND}: unknown option {key!r}; known: {', '.join(_OPTIONS)}")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ConfigError(f"{TRACE_COMMAND}: {key!r} has the wrong type ({type(value).__name__})")
    timeout = float(given.get("timeout", DEFAULT_TIMEOUT))
    if not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"{TRACE_COMMAND}: timeout must be more than 0 seconds, not {timeout:g}")
    device, dtype = given.get("device", "auto"), given.get("dtype", "")
    if device not in _DEVICES or dtype not in _DTYPES:
        raise ConfigError(f"{TRACE_COMMAND}: device is one of {', '.join(_DEVICES)}; dtype one of "
                          f"{', '.join(_DTYPES[1:])}")
    limit = given.get("memory_limit")
    request = TraceRequest(
        model=given.get("model", ""), hf_config=given.get("hf_config", ""),
        inputs=tuple(InputSpec.parse(str(i)) for i in given.get("input", [])),
        dynamic=tuple(DynamicAxis.parse(str(d)) for d in given.get("dynamic", [])), device=device,
        memory_limit=memory_size(limit) if limit else default_memory,
        hf_options=dict(hf_option(str(o)) for o in given.get("hf_option", [])), dtype=dtype)
    return Ask(request, timeout, request.model or request.hf_config)


class Tracer:
    """One trace at a time: a second asked for while one runs is refused (each builds a whole model)."""

    def __init__(self, trace_model: TraceModel | None) -> None:
        self.trace_model = trace_model
        self._lock = threading.Lock()

    def run(self, asked: Ask, cwd: Path, settings: Settings, step: Callable[[str], None]) -> Traced:
        """Run the model's code in the trace's child process, in `cwd` (the workspace folder), and gather the
        findings by file; a UserError (one line) if it cannot be traced."""
        if self.trace_model is None:
            raise ConfigError("this server was started without the trace (run it as `portcheck server`)")
        if not self._lock.acquire(blocking=False):
            raise ConfigError("a trace is already running: wait for it to end")
        try:
            result = self.trace_model(asked.request, cwd, asked.timeout, asked.shown, settings, step)
        finally:
            self._lock.release()
        traced = Traced()
        for finding in result.findings:
            traced.by_file.setdefault((cwd / finding.path).resolve(), []).append(finding)
        return traced
