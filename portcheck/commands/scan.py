"""`portcheck scan`: the files found, analysed (or fixed) and reported; `scan --fix -` on stdin's text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from portcheck.config import ConfigError, Settings, project_root
from portcheck.findings import FileError, FileTooLarge, LeftOut, ScanResult, python_lines

if TYPE_CHECKING:
    from portcheck.static.scan import Fixing


LinesFor = Callable[[str], list[str]]
Progress = Callable[[int, int, str], None]  # files done, files in all, the current one


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
    progress: Progress | None = None  # told after each file is analysed


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
                directory = directory_for(options.cache_dir, not options.use_cache,
                                          project_root(settings, list(options.paths), cwd))
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

        apply_baseline(result, read_baseline(options.baseline, {f.stem for f in result.findings}))
    return ScanOutcome(result, lines_for, warnings)


def show_files(paths: list[str], settings: Settings, cwd: Path) -> tuple[str, list[str]]:
    """`scan --show-files`: every file a scan would read, one a line, and every file or folder it leaves out with
    why (`path  (left out: reason, detail)`), in path order; nothing is read or analysed. And the warnings."""
    from portcheck.escape import printable
    from portcheck.static.discover import discover
    from portcheck.static.scan import oversized

    if "-" in paths:
        raise ConfigError("--show-files lists the files a scan reads; '-' (stdin) is not one")
    warnings: list[str] = []
    left_out: list[LeftOut] = []
    candidates = discover(paths, settings, cwd, warnings, left_out)
    left_out += oversized(candidates, settings)
    too_large = {item.path for item in left_out}
    rows = [(c.display, "") for c in candidates if c.display not in too_large]
    rows += [(item.path, f"  (left out: {item.reason}{', ' + item.detail if item.detail else ''})")
             for item in left_out]
    return "".join(printable(path) + note + "\n" for path, note in sorted(rows)), warnings


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
    target = settings.target
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
    result = ScanResult(settings.target, 1, list(outcome.result.findings),
                        list(outcome.result.errors), outcome.fixed, True)
    return StdinFix(result, text, unified_diff(display, source.text, text), outcome.text is not None)
