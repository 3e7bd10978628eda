"""A workspace folder as the server sees it: the settings scan would use for each file (the nearest pyproject.toml or
portcheck.toml, under the editor's target, stack and SDK release), each file's own result (an open document's
text, every other file's bytes on disk through scan's cache), and the call graph applied over all of them, so a
change in one file settles the findings of the files that depend on it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from portcheck.cache import Cache, CacheRefused, directory_for
from portcheck.config import Layer, Settings, find_config, read_config, resolve
from portcheck.findings import FileResult
from portcheck.server.analyst import Analyst, Token
from portcheck.static.discover import SUFFIXES, discover, is_excluded
from portcheck.static.manifests import kind
from portcheck.static.scan import analysed_files
from portcheck.static.semantic.graph import apply

MAX_INDEXED = 5_000  # past this many files the folder is not read whole: findings are settled per open file


@dataclass(frozen=True)
class EditorOptions:
    """What the client's settings or initialization options say (None: what the configuration or scan says)."""

    target: str | None = None
    stack: str | None = None
    sdk: str | None = None

    def layer(self) -> Layer:
        return Layer(origin="the editor's portcheck settings", target=self.target, stack=self.stack, sdk=self.sdk)


def analysable(path: Path) -> bool:
    """A file scan reads: Python source, or a dependency file (requirements*.txt, pyproject.toml, environment.yml)."""
    return path.suffix in SUFFIXES or kind(path.as_posix()) is not None


class Folder:
    """One workspace folder (or, for a file outside every folder, the file's own directory). Used from the
    server's analysis thread only."""

    def __init__(self, root: Path, options: EditorOptions, whole: bool = True) -> None:
        self.root = root
        self.options = options
        self.whole = whole  # a workspace folder, read whole; not a lone file's directory (it may be one's home)
        self.raw: dict[str, FileResult] = {}  # display path -> the file's own result, before the call graph
        self.final: dict[str, FileResult] = {}  # display path -> what scan would report for it
        self.open: set[str] = set()
        self.discovered: set[str] = set()  # what `scan .` in the folder reads
        self.indexed = False
        self.notice: str | None = None  # the call graph's or the cache's one line, when it has one
        self._settings: dict[tuple[Path | None, float, str], Settings] = {}
        self._cache: Cache | None = None
        self._cache_made = False

    def display(self, location: Path) -> str:
        """The path as scan run in the folder shows it."""
        try:
            return location.relative_to(self.root).as_posix()
        except ValueError:
            return location.as_posix()

    def settings_for(self, location: Path, command: str = "scan") -> Settings:
        """As `portcheck scan FILE` (or `command`) resolves them: the configuration nearest above the file, then
        the editor's options where scan would take the command line's (a mistake in either raises ConfigError)."""
        config = find_config(location.parent)
        try:
            stamp = os.stat(config).st_mtime if config else 0.0
        except OSError:
            stamp = 0.0
        key = (config, stamp, command)
        if key not in self._settings:
            layers = [read_config(config)] if config else []
            layers.append(self.options.layer())
            root = config.parent.resolve() if config else self.root
            self._settings = {key: resolve(layers, root, config, command)}  # one entry: a changed file replaces it
        return self._settings[key]

    def cache(self, settings: Settings) -> Cache | None:
        """scan's cache for this project (`.portcheck_cache` at its root, or $PORTCHECK_CACHE_DIR); None when scan
        would go without one."""
        if not self._cache_made:
            self._cache_made = True
            try:
                directory = directory_for(None, False, settings.root if settings.config_path else self.root)
            except CacheRefused as exc:
                self.notice, directory = str(exc), None
            self._cache = Cache(directory) if directory is not None else None
        return self._cache

    def analyse(self, location: Path, text: str, analyst: Analyst, token: Token, cached: bool = True) -> FileResult:
        """An open document's own result, from its text, analysed by `analyst`'s process (Cancelled when `token`
        says the text is stale). `cached`: the cache answers when the text is what scan saw, and keeps the
        result (worth it as a file opens, not for each edit: a miss, and an entry written)."""
        settings = self.settings_for(location)
        display = self.display(location)
        if settings.force_exclude and is_excluded(location, settings):
            result = FileResult(display)  # excluded: scan reports nothing for it either
        else:
            job = settings.job(display, location, text.encode("utf-8", errors="surrogatepass"))
            cache = self.cache(settings) if cached else None
            result = analyst.analyse(job, cache.directory if cache is not None else None, token)
        self.open.add(display)
        self.raw[display] = result
        return result

    def close(self, location: Path) -> None:
        """A closed document counts with its bytes on disk again (if `scan .` reads it)."""
        display = self.display(location)
        self.open.discard(display)
        self.raw.pop(display, None)
        self.final.pop(display, None)
        self.reread(location)

    def reread(self, location: Path) -> None:
        """A file that changed on disk (not an open document, whose text wins): read again if `scan .` reads it,
        forgotten if it is gone."""
        display = self.display(location)
        if display in self.open or not self.indexed:
            return
        if not location.exists():
            self.raw.pop(display, None)
            self.discovered.discard(display)
        elif display in self.discovered:
            settings = self.settings_for(location)
            self.raw.update((r.path, r) for r in analysed_files([settings.job(display, location)], 1,
                                                                  self.cache(settings)))

    def index(self) -> None:
        """Read the folder's other files as `portcheck scan .` in it would (its excludes, .gitignore, the tests
        setting), so the call graph sees the whole project: on the first open, and again when another document is
        opened (files made since are read; those known are kept). Unchanged files come from the cache."""
        if not self.whole:
            self.indexed = True  # a file outside every workspace folder: judged alone, as `scan FILE` judges it
            return
        settings = self.settings_for(self.root / "__init__.py")
        warnings: list[str] = []
        found = discover(["."], settings, self.root, warnings)
        self.discovered = {c.display for c in found}
        candidates = [c for c in found if c.display not in self.raw]
        if len(candidates) + len(self.raw) > MAX_INDEXED:
            self.notice = (f"the folder holds more than the {MAX_INDEXED:,} files the server reads: findings are "
                           "judged per open file")
            self.indexed = True
            return
        jobs = [settings.job(c.display, c.location, unreadable=c.unreadable) for c in candidates]
        for result in analysed_files(jobs, 1, self.cache(settings)):
            self.raw.setdefault(result.path, result)
        self.indexed = True

    def settle(self) -> dict[str, FileResult]:
        """The call graph applied over every file known: each open file's result as scan would report it."""
        whole = bool(self.discovered) and self.discovered <= set(self.raw)  # every file of the folder is in view
        outcomes, notice = apply(list(self.raw.values()), whole)
        self.notice = notice or self.notice
        self.final = {result.path: result for result in outcomes if result.path in self.open}
        return self.final
