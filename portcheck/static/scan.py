"""A whole scan: paths -> candidate files -> per-file analysis -> one ScanResult in a stable order."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

from portcheck.cache import Cache, content_hash
from portcheck.config import Settings
from portcheck.findings import FileError, FileJob, FileResult, FileTooLarge, LeftOut, ScanResult, Target
from portcheck.static.discover import Candidate, discover, is_excluded


@dataclass(frozen=True)
class Fixing:
    """How a scan fixes: `write` the files (--fix) or only show the `diff`; `unsafe` fixes too."""

    write: bool
    unsafe: bool
    diff: bool


Progress = Callable[[int, int, str], None]  # (files done, files in all, the file just done)


def scan_paths(paths: list[str], settings: Settings, cwd: Path, fixing: Fixing | None = None,
               jobs: int | None = None, cache: Cache | None = None, progress: Progress | None = None) -> ScanResult:
    warnings: list[str] = []
    left_out: list[LeftOut] = []
    candidates = discover(paths, settings, cwd, warnings, left_out)
    left_out += oversized(candidates, settings)
    file_jobs = [settings.job(c.display, c.location, unreadable=c.unreadable) for c in candidates]
    whole = not any((cwd / path).is_file() for path in paths)  # folders only: the call graph sees the project
    result = _fix(file_jobs, settings, fixing, jobs) if fixing is not None else run_jobs(file_jobs, settings, jobs,
                                                                                          cache, progress, whole)
    result.warnings.extend(warnings)
    result.left_out = sorted(left_out, key=lambda item: item.path)
    return result


def oversized(candidates: list[Candidate], settings: Settings) -> list[LeftOut]:
    """The files over the size limit: each is still a job (an error entry says so, as before), and left out."""
    out = []
    for candidate in candidates:
        try:
            size = os.stat(candidate.location).st_size
        except OSError:
            continue
        if size > settings.max_file_bytes:
            out.append(LeftOut(candidate.display, "over the size limit",
                               f"{size / 2**20:.1f} MB, over {settings.max_file_bytes / 2**20:g} MB"))
    return out


def scan_stdin(data: bytes, filename: str | None, settings: Settings, cwd: Path) -> ScanResult:
    display = filename or "-"
    location = (cwd / filename) if filename else cwd / "-"
    if filename and settings.force_exclude and is_excluded(location, settings):
        return ScanResult(target=Target(settings.chip, settings.stack, settings.sdk))
    job = settings.job(display, location, data)
    return run_jobs([job], settings)


A = TypeVar("A")
R = TypeVar("R")


WORKERS_PER_CORE = 4


def _in_parallel(function: Callable[[A], R], jobs: list[A], workers: int | None) -> Iterator[R]:
    """`function` over `jobs` in a pool of processes (one per core by default); in this process when there is
    one job or one worker, so a single file pays no start-up. `-j` is capped at four processes a core: more only
    costs memory (`-j 100000` started 201 processes and took 6.4 GB)."""
    workers = min(workers or os.cpu_count() or 1, WORKERS_PER_CORE * (os.cpu_count() or 1))
    if workers <= 1 or len(jobs) <= 1:
        yield from map(function, jobs)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), initializer=_die_with_parent,
                             initargs=(os.getpid(),)) as pool:
        # Small chunks, so that no worker is left with a long tail while the others wait.
        yield from pool.map(function, jobs, chunksize=max(1, min(4, len(jobs) // (workers * 8))))


def _die_with_parent(parent: int) -> None:
    """Pool workers end when the scan ends, even when it is killed (Linux's parent-death signal; elsewhere a
    worker finishes the file it is on). Without it a killed scan leaves a worker parsing a huge file."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the scan was gone before the signal was armed
        os._exit(1)


def run_jobs(jobs: list[FileJob], settings: Settings, workers: int | None = 1, cache: Cache | None = None,
             progress: Progress | None = None, whole: bool = False) -> ScanResult:
    result = ScanResult(target=Target(settings.chip, settings.stack, settings.sdk), files=len(jobs))
    outcomes = analysed_files(jobs, workers, cache, progress)
    if outcomes:  # what one file's findings mean can depend on the others: the project's call graph
        from portcheck.static.semantic.graph import apply

        outcomes, notice = apply(outcomes, whole)
        if notice:
            result.warnings.append(notice)
    return _gathered(result, outcomes)


def analysed_files(jobs: list[FileJob], workers: int | None = 1, cache: Cache | None = None,
                   progress: Progress | None = None) -> list[FileResult]:
    """Each file's own result, from the cache where its bytes have not changed, before the call graph is applied
    (the language server keeps these, and applies the graph again when one file changes)."""
    outcomes: list[FileResult] = []
    pending: list[tuple[FileJob, str | None, str | None]] = []  # the job, its cache key, its content hash
    for job in jobs:
        if cache is None:
            pending.append((job, None, None))
            continue
        try:
            data = job.read()
        except (OSError, FileTooLarge):
            # Analysing it says why it cannot be read, or that it is too large, whatever a cache with another
            # limit says.
            pending.append((job, None, None))
            continue
        content, key = content_hash(data), cache.key(job.path, job.chip, job.stack, job.enabled, job.sdk)
        cached = cache.get(key, content, job.path, len(data))
        if cached is not None:
            outcomes.append(cached)
        else:
            pending.append((replace(job, data=data, location=None), key, content))
    analysed: Iterable[FileResult] = ()
    if pending:  # libcst and the rules load only when some file is not in the cache
        from portcheck.static.engine import analyse_file

        pending.sort(key=lambda item: -_size(item[0]))  # largest first: the pool ends together
        analysed = _in_parallel(analyse_file, [job for job, _, _ in pending], workers)
    for (_, put_key, put_content), outcome in zip(pending, analysed, strict=True):
        outcomes.append(outcome)
        if progress is not None:
            progress(len(outcomes), len(jobs), outcome.path)
        if cache is not None and put_key is not None and put_content is not None and _cacheable(outcome):
            cache.put(put_key, put_content, outcome)
    return outcomes


def _gathered(result: ScanResult, outcomes: list[FileResult]) -> ScanResult:
    """The files' results in one report, in a stable order whatever order the pool returned them in."""
    for outcome in outcomes:
        # a finding only the call graph could keep (Finding.requires) never reaches a report unsettled
        result.findings.extend(f for f in outcome.findings if not f.requires)
        result.errors.extend(outcome.errors)
        result.suppressed.extend(outcome.suppressed)
    result.findings.sort(key=lambda f: f.sort_key)
    result.suppressed.sort(key=lambda f: f.sort_key)
    result.errors.sort(key=lambda e: (e.path, e.line or 0))
    return result


def _size(job: FileJob) -> int:
    if job.data is not None:
        return len(job.data)
    try:
        return os.stat(job.location or job.path).st_size
    except OSError:
        return 0


def _cacheable(outcome: FileResult) -> bool:
    """A result is the file's for good, except where portcheck itself failed on it."""
    return not any(e.message.startswith("internal error") for e in outcome.errors)


def _fix(jobs: list[FileJob], settings: Settings, fixing: Fixing, workers: int | None = 1) -> ScanResult:
    from portcheck.static.rewrite import fix_file, replace_if_unchanged, unified_diff

    result = ScanResult(target=Target(settings.chip, settings.stack, settings.sdk), files=len(jobs), fixing=True)
    diffs, finals = [], []
    for job, (outcome, data, encoding) in zip(jobs, _in_parallel(partial(fix_file, unsafe=fixing.unsafe), jobs,
                                                                  workers), strict=True):
        final = outcome.result
        if outcome.text is not None and data is not None:
            if fixing.diff:
                diffs.append(unified_diff(job.path, outcome.original, outcome.text))
                result.fixed.extend(outcome.fixed)
            elif fixing.write:
                problem = replace_if_unchanged(Path(job.location or job.path), outcome.text, encoding, data)
                if problem is None:
                    result.fixed.extend(outcome.fixed)
                else:
                    final = FileResult(job.path, (outcome.first or final).findings,
                                       (FileError(job.path, problem),))
        finals.append(final)
    result.fixed.sort(key=lambda f: f.sort_key)
    result.diff = "".join(diffs)
    return _gathered(result, finals)
