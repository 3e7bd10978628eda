"""The protocol's requests and notifications, each handed to the server: documents opened, changed, saved and
closed; settings; code actions; hover; and the commands (`portcheck.rule` returns a rule's page)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.uris import to_fs_path

from portcheck.errors import UserError
from portcheck.server import actions, tracing
from portcheck.server.app import CONFIG_NAMES, PortcheckServer, editor_options, say
from portcheck.server.folder import Folder
from portcheck.server.tracing import TRACE_COMMAND

RULE_COMMAND = "portcheck.rule"
STATS_COMMAND = "portcheck.stats"


def make_server(trace_model: tracing.TraceModel | None = None) -> PortcheckServer:
    """The server, with the command line's trace for `portcheck.trace` (commands/server.py hands it over)."""
    server = PortcheckServer(trace_model)

    @server.feature(types.INITIALIZE)
    def initialize(ls: PortcheckServer, params: types.InitializeParams) -> None:
        ls.options = editor_options(params.initialization_options) or ls.options
        folders = params.workspace_folders or []
        uris = [folder.uri for folder in folders] or ([params.root_uri] if params.root_uri else [])
        ls.roots = [Path(path) for uri in uris if (path := to_fs_path(uri))]

    @server.feature(types.INITIALIZED)
    async def initialized(ls: PortcheckServer, params: types.InitializedParams) -> None:
        ls.start_worker()
        given = ls.options
        await _watch_files(ls)
        await _read_configuration(ls)
        if ls.options != given:
            ls.reanalyse_all()  # a document opened meanwhile was analysed under the initialization options

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def folders_changed(ls: PortcheckServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        removed = {event.uri for event in params.event.removed}
        kept = [root for root in ls.roots if root.as_uri() not in removed]
        ls.roots = kept + [Path(path) for event in params.event.added if (path := to_fs_path(event.uri))]
        ls.reanalyse_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def files_changed(ls: PortcheckServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(Path(to_fs_path(change.uri) or "").name in CONFIG_NAMES for change in params.changes):
            ls.reanalyse_all()  # a configuration changed on disk
        ls.files_changed([(change.uri, CHANGES[change.type]) for change in params.changes])

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration_changed(ls: PortcheckServer, params: types.DidChangeConfigurationParams) -> None:
        given = editor_options(params.settings)
        if given is not None:
            ls.options = given
        else:
            await _read_configuration(ls)
        ls.reanalyse_all()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: PortcheckServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, at_once=True)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: PortcheckServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.traced.pop(params.text_document.uri, None)  # the trace ran the text before the edit: its lines moved
        ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: PortcheckServer, params: types.DidSaveTextDocumentParams) -> None:
        if Path(to_fs_path(params.text_document.uri) or "").name in CONFIG_NAMES:
            ls.reanalyse_all()  # a configuration saved: every open file's settings may have changed
        else:
            ls.schedule(params.text_document.uri, at_once=True)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PortcheckServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.traced.pop(params.text_document.uri, None)
        ls.schedule(params.text_document.uri, closed=True)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: PortcheckServer, params: None) -> None:
        ls.stop()

    @server.thread()  # fixing every finding of a large file takes seconds: not on the protocol's thread
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, actions.FIX_ALL]))
    def code_action(ls: PortcheckServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return _code_actions(ls, params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: PortcheckServer, params: types.HoverParams) -> types.Hover | None:
        shown = ls.shown.get(params.text_document.uri)
        document = ls.workspace.get_text_document(params.text_document.uri)
        if shown is None or shown.version != document.version:
            return None
        traced = tuple(ls.traced.get(params.text_document.uri, ()))  # a trace's findings have their rule's page too
        result = replace(shown.result, findings=shown.result.findings + traced)
        return actions.hover(result, shown.lines, ls.workspace.position_codec, params.position)

    @server.command(RULE_COMMAND)
    def rule(ls: PortcheckServer, *arguments: object) -> str:
        code = str(arguments[0]).upper() if arguments else ""
        page = actions.rule_markdown(code)
        if page is None:
            raise JsonRpcInvalidParams(f"unknown rule {code!r}: `portcheck rules` lists them")
        return page

    @server.command(TRACE_COMMAND)
    async def trace(ls: PortcheckServer, *arguments: object) -> dict[str, object]:
        """`portcheck trace` on a model, in the trace's own child process: its findings as diagnostics."""
        return await _trace(ls, arguments)

    @server.command(STATS_COMMAND)
    def stats(ls: PortcheckServer, *arguments: object) -> dict[str, int | bool]:
        """How many analyses the server began, how many a change made stale and how many of those it stopped, how
        many analysis processes it started, and whether torch is loaded (the tests check that fast typing queues
        no stale analyses, that a stale one stops, and that nothing imported torch)."""
        return {"analyses": ls.analyses, "superseded": ls.superseded, "cancelled": ls.cancelled,
                "children": ls.analyst.started, "torch": "torch" in sys.modules}

    return server


CHANGES = {types.FileChangeType.Created: "created", types.FileChangeType.Changed: "changed",
           types.FileChangeType.Deleted: "deleted"}
WATCHED = ("**/*.py", "**/*.pyi", "**/requirements*.txt", "**/requirements/*.txt", "**/pyproject.toml",
           "**/portcheck.toml", "**/environment.yml", "**/environment.yaml")


async def _watch_files(ls: PortcheckServer) -> None:
    """Ask the client to say when the files scan reads change on disk, where it can."""
    workspace = ls.client_capabilities.workspace
    watching = workspace.did_change_watched_files if workspace is not None else None
    if watching is None or not watching.dynamic_registration:
        return
    options = types.DidChangeWatchedFilesRegistrationOptions(
        watchers=[types.FileSystemWatcher(glob_pattern=pattern) for pattern in WATCHED])
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=[types.Registration(
            id="portcheck-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options)]))
    except Exception as exc:  # the files opened still count; changes on disk are read when a document opens
        say(ls, f"could not watch the files: {exc}")


async def _read_configuration(ls: PortcheckServer) -> None:
    """The `portcheck` section of the client's settings, where the client has settings to ask for."""
    workspace = ls.client_capabilities.workspace
    if workspace is None or not workspace.configuration:
        return
    try:
        answer = await ls.workspace_configuration_async(types.ConfigurationParams(
            items=[types.ConfigurationItem(section="portcheck")]))
    except Exception as exc:  # a client that cannot answer: the initialization options stand
        say(ls, f"could not read the editor's settings: {exc}")
        return
    given = editor_options(answer[0] if answer else None)
    if given is not None:
        ls.options = given


async def _trace(ls: PortcheckServer, arguments: Sequence[object]) -> dict[str, object]:
    from portcheck.dynamic.runner import default_memory_limit

    try:
        asked = tracing.ask(arguments, default_memory_limit())
    except UserError as exc:
        raise JsonRpcInvalidParams(str(exc)) from None
    model = asked.model_path
    # the workspace folder holding the model (a relative spec: the first folder): the command line's cwd
    folders = [r for r in ls.roots if model is not None and model.is_absolute() and model.is_relative_to(r)]
    cwd = max(folders, key=lambda r: len(r.parts)) if folders else ls.roots[0] if ls.roots else Path.cwd()
    loop = asyncio.get_running_loop()

    def step(doing: str) -> None:
        loop.call_soon_threadsafe(say, ls, f"trace: {doing}")

    try:
        settings = Folder(cwd, ls.options, whole=False).settings_for(cwd / (model or "."), "trace")
        traced = await loop.run_in_executor(None, ls.tracer.run, asked, cwd, settings, step)
    except UserError as exc:  # the command line's one line: the model's error, the time limit, a crash
        say(ls, f"trace failed: {exc}")
        raise JsonRpcException(f"portcheck trace: {exc}", code=types.LSPErrorCodes.RequestFailed) from None
    ls.show_traced({path.as_uri(): found for path, found in traced.by_file.items()})
    return traced.summary()


def _code_actions(ls: PortcheckServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    shown = ls.shown.get(uri)
    document = ls.workspace.get_text_document(uri)
    only = params.context.only
    codec = ls.workspace.position_codec
    found: list[types.CodeAction] = []
    if shown is not None and shown.version == document.version:  # a stale result's positions are not the text's
        found = actions.code_actions(uri, shown.result, shown.lines, codec, params.range, only)
    if actions.wants_fix_all(only):
        location = Path(to_fs_path(uri) or uri)
        folder = ls.folder_for(location)
        try:
            fixed = actions.fix_all(uri, document.source, location, folder.display(location),
                                    folder.settings_for(location), codec)
        except UserError:
            fixed = None  # the settings' mistake is already on the document
        if fixed is not None:
            found.append(fixed)
    return found
