"""`portcheck server`: the protocol's side. Documents are analysed on one thread, the latest text of each only: a
change waits `DEBOUNCE` seconds for the next keystroke, texts replaced before their turn are dropped unanalysed,
and an analysis whose text changes (or whose document closes) is stopped: its process killed if the text is in
it (analyst.py), else before its next step; what it found is never shown. The static pass only reads the text:
nothing of the user's is imported or run, and torch is never loaded."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import PositionCodec

from portcheck import __version__
from portcheck.errors import UserError
from portcheck.findings import FileError, FileResult, Finding, python_lines
from portcheck.server.analyst import Analyst, Cancelled, Token
from portcheck.server.convert import SOURCE, diagnostic, error_diagnostic
from portcheck.server.folder import EditorOptions, Folder, analysable
from portcheck.server.tracing import SOURCE as TRACE_SOURCE
from portcheck.server.tracing import TraceModel, Tracer

DEBOUNCE = 0.05  # seconds without a change before a changed document is analysed
CONFIG_NAMES = ("pyproject.toml", "portcheck.toml")


@dataclass(frozen=True)
class Job:
    version: int | None
    text: str | None  # None: the document was closed, or (`disk`) the file changed on disk
    when: float
    disk: str = ""  # "created", "changed" or "deleted": a file that is not open changed on disk


@dataclass(frozen=True)
class Shown:
    """What an open document's diagnostics were made from (code actions and hover read it)."""

    version: int | None
    lines: list[str]
    result: FileResult
    diagnostics: list[types.Diagnostic]


class PortcheckServer(LanguageServer):
    def __init__(self, trace_model: TraceModel | None = None) -> None:
        super().__init__("portcheck", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.options = EditorOptions()
        self.roots: list[Path] = []
        self.folders: dict[Path, Folder] = {}
        self.pending: dict[str, Job] = {}
        self.shown: dict[str, Shown] = {}
        self.uris: dict[tuple[Path, str], str] = {}  # (folder root, display path) -> the open document's URI
        self.texts: dict[str, tuple[int | None, str]] = {}
        self.condition = threading.Condition()
        self.analysing: str | None = None
        self.token: Token | None = None  # the running analysis's: a change of its document cancels it
        self.running: Job | None = None  # what it analyses
        self.analyst = Analyst()
        self.analyses = 0  # analyses begun (the tests read it through a command)
        self.superseded = 0  # analyses whose text changed before they ended (their findings not shown)
        self.cancelled = 0  # of those, the ones stopped before they ended
        self.tracer = Tracer(trace_model)
        self.traced: dict[str, list[Finding]] = {}  # URI -> the last trace's findings in the file, until it is edited
        self.loop: asyncio.AbstractEventLoop | None = None
        self._worker: threading.Thread | None = None
        self._stopping = False
        self._told: dict[Path, str] = {}

    # ---- scheduling (the protocol's thread) -------------------------------------------------------------

    def start_worker(self) -> None:
        if self._worker is None:
            self.analyst.start()
            self.loop = asyncio.get_running_loop()
            self._worker = threading.Thread(target=self._work, name="portcheck-analysis", daemon=True)
            self._worker.start()

    def schedule(self, uri: str, closed: bool = False, at_once: bool = False) -> None:
        """Analyse the document's current text: after the debounce, or `at_once` (opened, saved)."""
        path = to_fs_path(uri)
        if path is None or not analysable(Path(path)):
            return
        when = time.monotonic() - (DEBOUNCE if at_once else 0.0)
        if closed:
            job = Job(None, None, when)
        else:
            document = self.workspace.get_text_document(uri)
            job = Job(document.version, document.source, when)
        with self.condition:
            self.pending[uri] = job
            same = at_once and self.running is not None and self.running.text == job.text  # saved as it is
            if self.analysing == uri and self.token is not None and not same:
                self.token.cancel()  # its text is stale: stopped now, not when it ends
            self.condition.notify()

    def files_changed(self, changes: list[tuple[str, str]]) -> None:
        """Files changed on disk (a checkout, another program): those not open are read again, so what the call
        graph says of the open ones follows."""
        with self.condition:
            for uri, what in changes:
                path = to_fs_path(uri)
                if path is not None and analysable(Path(path)) and uri not in self.texts and uri not in self.pending:
                    self.pending[uri] = Job(None, None, time.monotonic(), disk=what)
            self.condition.notify()

    def show_traced(self, traced: dict[str, list[Finding]]) -> None:
        """A trace's findings shown, and the previous trace's taken away: an open document is published again by
        the analysis thread (its own findings with them), a file not open gets them alone."""
        before, self.traced = self.traced, traced
        for uri in sorted(set(before) | set(traced)):
            if uri in self.workspace.text_documents:
                self.schedule(uri, at_once=True)
                continue
            try:
                lines = python_lines(Path(to_fs_path(uri) or uri).read_text(encoding="utf-8", errors="replace"))
            except OSError:
                lines = []
            self._send(uri, None, traced_diagnostics(traced.get(uri, []), [], lines, self.workspace.position_codec))

    def reanalyse_all(self) -> None:
        """Settings changed: every folder's settings and results are read again."""
        with self.condition:
            self.folders = {}
            self.shown = {}
        for uri in list(self.texts):
            self.schedule(uri)

    def stop(self) -> None:
        with self.condition:
            self._stopping = True
            self.condition.notify()
        self.analyst.stop()

    # ---- the analysis thread -------------------------------------------------------------------------

    def _work(self) -> None:
        """The analysis thread: the latest text of each changed document, one at a time."""
        # the engine and the rules loaded now, while the editor opens its first file, not after; should that fail,
        # the first analysis says why, on its document
        with contextlib.suppress(Exception):
            import portcheck.static.engine  # noqa: F401
        while not self._stopping:
            taken = self._next()
            if taken is None:
                continue
            uri, job, token = taken
            try:
                self._run(uri, job, token)
            except Cancelled:
                self.cancelled += 1
            except Exception as exc:  # a bug of the server's own: said on the document, and the server goes on
                if job.text is not None:
                    failure = FileResult(uri, errors=(FileError(uri, f"internal error: {type(exc).__name__}: "
                                                                     f"{exc}"),))
                    self._publish(uri, job.version, job.text, failure)
            finally:
                with self.condition:
                    self.analysing, self.token, self.running = None, None, None
                    if uri in self.pending and self.pending[uri].text is not None:
                        self.superseded += 1  # its text changed meanwhile: what it found was not shown

    def _next(self) -> tuple[str, Job, Token] | None:
        with self.condition:
            while not self._stopping:
                if not self.pending:
                    self.condition.wait()
                    continue
                uri, job = min(self.pending.items(), key=lambda item: item[1].when)
                delay = job.when + DEBOUNCE - time.monotonic()
                if delay > 0 and job.text is not None:
                    self.condition.wait(delay)
                    continue
                del self.pending[uri]
                self.analysing, self.token, self.running = uri, Token(), job
                return uri, job, self.token
        return None

    def folder_for(self, location: Path) -> Folder:
        roots = [root for root in self.roots if location.is_relative_to(root)]
        root = max(roots, key=lambda r: len(r.parts)) if roots else location.parent
        if root not in self.folders:
            self.folders[root] = Folder(root, self.options, whole=bool(roots))
        return self.folders[root]

    def _run(self, uri: str, job: Job, token: Token) -> None:
        location = Path(to_fs_path(uri) or uri)
        folder = self.folder_for(location)
        display = folder.display(location)
        if job.disk:
            if uri in self.texts or not folder.whole or not folder.indexed:
                return  # the open document's text wins; a lone file's directory, or a folder not read, waits
            if job.disk == "created":
                folder.index()
            else:
                folder.reread(location)
        elif job.text is None:
            self.uris.pop((folder.root, display), None)
            self.texts.pop(uri, None)
            self.shown.pop(uri, None)
            folder.close(location)
            self._send(uri, None, [])
        else:
            self.uris[(folder.root, display)] = uri
            self.texts[uri] = (job.version, job.text)
            self.analyses += 1
            opened = display not in folder.open
            try:
                folder.analyse(location, job.text, self.analyst, token, cached=opened)
            except UserError as exc:  # the configuration or the editor's settings: one line on the document
                problem = FileError(display, f"portcheck settings: {exc}")
                self._publish(uri, job.version, job.text, FileResult(display, errors=(problem,)))
                return
            token.check()  # each step only for a text still current
            if opened or not folder.indexed:
                self._settle(folder)  # this file first, as `portcheck scan FILE` sees it; then its project
                token.check()
                folder.index()
                token.check()
        self._settle(folder)

    def _settle(self, folder: Folder) -> None:
        """Every open document of the folder published again where the call graph changed what it shows."""
        settled = folder.settle()
        if folder.notice is not None and folder.notice != self._told.get(folder.root):
            self._told[folder.root] = folder.notice  # the call graph's bound, a refused cache: said once
            if self.loop is not None:
                self.loop.call_soon_threadsafe(say, self, folder.notice)
        for display, result in settled.items():
            uri = self.uris.get((folder.root, display))
            if uri is not None and uri in self.texts:
                version, text = self.texts[uri]
                self._publish(uri, version, text, result)

    def _publish(self, uri: str, version: int | None, text: str, result: FileResult) -> None:
        with self.condition:
            if uri in self.pending and self.pending[uri].text is not None:
                return  # a newer text is on its way: this one would flash stale findings
        lines = python_lines(text)
        codec = self.workspace.position_codec
        shown = [error_diagnostic(e, lines, codec) for e in result.errors]
        shown += [diagnostic(f, lines, codec) for f in result.findings]
        shown += traced_diagnostics(self.traced.get(uri, []), result.findings, lines, codec)
        before = self.shown.get(uri)
        self.shown[uri] = Shown(version, lines, result, shown)
        if before is None or before.diagnostics != shown or before.version != version:
            self._send(uri, version, shown)

    def _send(self, uri: str, version: int | None, shown: list[types.Diagnostic]) -> None:
        params = types.PublishDiagnosticsParams(uri=uri, diagnostics=shown, version=version)
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.text_document_publish_diagnostics, params)


def editor_options(given: Any) -> EditorOptions | None:
    """target / stack / sdk from initializationOptions or the `portcheck` configuration section (either may
    nest them under "portcheck"); None when there is nothing of ours."""
    if isinstance(given, dict) and isinstance(given.get("portcheck"), dict):
        given = given["portcheck"]
    if not isinstance(given, dict):
        return None
    values = {key: str(given[key]) if given.get(key) not in (None, "") else None for key in ("target", "stack", "sdk")}
    return EditorOptions(**values)


def traced_diagnostics(traced: list[Finding], found: Sequence[Finding], lines: list[str],
                       codec: PositionCodec) -> list[types.Diagnostic]:
    """A trace's findings in a file, but those the static pass reports already (the same rule on the line)."""
    static = {(f.code, f.line) for f in found}
    return [diagnostic(f, lines, codec, TRACE_SOURCE) for f in traced if (f.code, f.line) not in static]


def say(server: PortcheckServer, message: str) -> None:
    server.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=f"{SOURCE}: {message}"))
