"""A whole scan: paths -> candidate files -> per-file analysis -> one ScanResult in a stable order."""

from __future__ import annotations

from pathlib import Path

from portcheck.config import Settings
from portcheck.findings import ScanResult, Target
from portcheck.static.discover import discover, is_excluded, relative_to_root
from portcheck.static.engine import FileJob, analyse_file


def scan_paths(paths: list[str], settings: Settings, cwd: Path) -> ScanResult:
    candidates = discover(paths, settings, cwd)
    jobs = [
        FileJob(path=c.display, chip=settings.chip, stack=settings.stack,
                enabled=settings.enabled_for(relative_to_root(c.location, settings)),
                location=str(c.location))
        for c in candidates
    ]
    return _run(jobs, settings)


def scan_stdin(data: bytes, filename: str | None, settings: Settings, cwd: Path) -> ScanResult:
    display = filename or "-"
    location = (cwd / filename) if filename else cwd / "-"
    if filename and settings.force_exclude and is_excluded(location, settings):
        return ScanResult(target=Target(settings.chip, settings.stack))
    job = FileJob(path=display, chip=settings.chip, stack=settings.stack,
                  enabled=settings.enabled_for(relative_to_root(location, settings)), data=data)
    return _run([job], settings)


def _run(jobs: list[FileJob], settings: Settings) -> ScanResult:
    result = ScanResult(target=Target(settings.chip, settings.stack), files=len(jobs))
    for job in jobs:
        outcome = analyse_file(job)
        result.findings.extend(outcome.findings)
        result.errors.extend(outcome.errors)
    result.findings.sort(key=lambda f: f.sort_key)
    result.errors.sort(key=lambda e: (e.path, e.line or 0))
    return result

