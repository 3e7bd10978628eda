"""`portcheck server` end to end: the real server over stdio, driven by a real LSP client (pytest-lsp). One server
serves the module's tests (a start costs a second of CPU); the crash and cancellation tests share one of their own,
with checks changed in it."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from portcheck.knowledge import load
from portcheck.report.links import first_url

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "fixtures" / "examples" / "train_gpu.py"
SERVER = [sys.executable, "-m", "portcheck", "server"]
WAIT = 60  # seconds: the machine may be busy; a healthy server answers in well under one

# One server for the module: its tests on one xdist worker, in one event loop.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("lsp-server")]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workspace")


async def _start(client: LanguageClient, root: Path) -> None:
    registered: list[types.Registration] = []

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(client: LanguageClient, params: types.RegistrationParams) -> None:  # as VS Code: accepted
        registered.extend(params.registrations)

    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="workspace")],
        initialization_options={"portcheck": {"target": "trn2"}}))


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER), scope="module")
async def client(lsp_client: LanguageClient, workspace: Path):
    await _start(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


def _scan(path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "portcheck", "scan", "--no-cache", *options, path.name],
                          cwd=path.parent, capture_output=True, text=True)


async def _diagnostics(client: LanguageClient, uri: str, wanted=lambda found: True) -> list[types.Diagnostic]:
    """The diagnostics published for `uri` once `wanted` holds for them (waiting for the next publish until then)."""
    async def settled() -> list[types.Diagnostic]:
        while uri not in client.diagnostics or not wanted(client.diagnostics[uri]):
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return list(client.diagnostics[uri])

    return await asyncio.wait_for(settled(), WAIT)


def _open(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=path.read_text() if text is None else text)))
    return uri


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        [types.TextDocumentContentChangeWholeDocument(text=text)]))


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """The edits applied as an editor applies them (positions in UTF-16 units of the text before the edits)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(p: types.Position) -> int:
        return starts[min(p.line, len(lines))] + p.character if p.line < len(lines) else len(text)

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


async def _with_noqa(client: LanguageClient, uri: str, path: Path, diagnostic: types.Diagnostic) -> str:
    """The file's text after the one `# noqa` quick fix the server offers for `diagnostic`."""
    offered = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), diagnostic.range, types.CodeActionContext(diagnostics=[diagnostic])))
    (noqa,) = [a for a in offered or [] if isinstance(a, types.CodeAction) and "noqa" in a.title]
    assert noqa.edit is not None and noqa.edit.changes is not None
    return _apply(path.read_text(), list(noqa.edit.changes[uri]))


def _key(d: types.Diagnostic) -> tuple[object, ...]:
    return (d.code, d.range.start.line + 1, d.range.start.character + 1, d.range.end.line + 1,
            d.range.end.character + 1, d.message)


async def test_diagnostics_are_what_scan_reports(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "train_gpu.py"
    shutil.copy(EXAMPLE, path)
    found = await _diagnostics(client, _open(client, path))
    scanned = json.loads(_scan(path, "--format", "json").stdout)["findings"]
    assert sorted(map(_key, found)) == sorted((f["code"], f["line"], f["column"], f["end_line"], f["end_column"],
                                               f["message"]) for f in scanned)
    assert len(found) >= 5
    severities = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
                  "info": types.DiagnosticSeverity.Information}
    by_place = {_key(d): d for d in found}
    for f in scanned:
        shown = by_place[(f["code"], f["line"], f["column"], f["end_line"], f["end_column"], f["message"])]
        assert shown.severity == severities[f["severity"]] and shown.source == "portcheck"
        assert shown.code_description is not None
        assert shown.code_description.href == first_url(load().rules[f["code"]].source)  # SARIF's helpUri


def _scanned(path: Path, *options: str) -> list[tuple[object, ...]]:
    found = json.loads(_scan(path, "--format", "json", *options).stdout)["findings"]
    return sorted((f["code"], f["line"], f["column"], f["end_line"], f["end_column"], f["message"]) for f in found)


async def test_the_settings_are_the_projects_under_the_editors(client: LanguageClient, workspace: Path) -> None:
    folder = workspace / "configured"
    folder.mkdir()
    (folder / "portcheck.toml").write_text('ignore = ["PC105"]\n')
    path = folder / "configured_case.py"
    shutil.copy(EXAMPLE, path)
    uri = _open(client, path)
    found = await _diagnostics(client, uri)
    assert sorted(map(_key, found)) == _scanned(path) and "PC105" not in {d.code for d in found}
    inf2 = _scanned(path, "--target", "inf2")
    assert inf2 != _scanned(path)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"portcheck": {"target": "inf2"}}))
    await _diagnostics(client, uri, lambda now: sorted(map(_key, now)) == inf2)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"portcheck": {"target": "trn9"}}))  # a mistake: one line on the document, as scan says it
    (wrong,) = await _diagnostics(client, uri, lambda now: len(now) == 1)
    assert "unknown target 'trn9'" in wrong.message
    # a client that only says "changed": the server asks for its `portcheck` section (workspace/configuration)
    client.set_configuration({"target": "trn2"}, section="portcheck")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await _diagnostics(client, uri, lambda now: sorted(map(_key, now)) == _scanned(path))
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    assert await _diagnostics(client, uri, lambda now: not now) == []


async def test_a_dependency_file_gets_what_scan_reports_for_it(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "deps" / "requirements.txt"
    path.parent.mkdir()
    path.write_text("torch==2.1.0+cu121\nnumpy\n")
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri, language_id="pip-requirements", version=1, text=path.read_text())))
    found = await _diagnostics(client, uri)
    assert sorted(map(_key, found)) == _scanned(path) != []
    text = await _with_noqa(client, uri, path, found[0])
    assert text.splitlines()[0] == "torch==2.1.0+cu121  # noqa: PC725"
    _change(client, uri, 2, text)
    assert await _diagnostics(client, uri, lambda now: not now) == []


async def test_a_fix_applied_removes_its_finding_and_fix_all_writes_what_scan_fix_does(
        client: LanguageClient, workspace: Path) -> None:
    path = workspace / "fixing.py"
    shutil.copy(EXAMPLE, path)
    text = path.read_text()
    uri = _open(client, path)
    found = await _diagnostics(client, uri)
    target = next(d for d in found if d.code == "PC101")
    offered = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), target.range, types.CodeActionContext(diagnostics=[target])))
    fixes = [a for a in offered or [] if isinstance(a, types.CodeAction) and a.title.endswith("(PC101)")]
    assert fixes and fixes[0].is_preferred and fixes[0].edit is not None and fixes[0].edit.changes is not None
    unsafe = next(d for d in found if d.code == "PC110")  # its fix renames the variable: unsafe
    offered_unsafe = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), unsafe.range, types.CodeActionContext(diagnostics=[unsafe])))
    (marked,) = [a for a in offered_unsafe or [] if isinstance(a, types.CodeAction) and "(PC110" in a.title]
    assert marked.title.endswith("(PC110, unsafe: check the result)") and not marked.is_preferred
    text = _apply(text, list(fixes[0].edit.changes[uri]))
    _change(client, uri, 2, text)
    after = await _diagnostics(client, uri, lambda now: _key(target) not in map(_key, now))
    assert len(after) == len(found) - 1

    # every safe fix at once: the same file `scan --fix` writes
    offered = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), types.Range(types.Position(0, 0), types.Position(0, 0)),
        types.CodeActionContext(diagnostics=[], only=["source.fixAll.portcheck"])))
    (fix_all,) = [a for a in offered or [] if isinstance(a, types.CodeAction)]
    assert fix_all.kind == "source.fixAll.portcheck" and fix_all.edit and fix_all.edit.changes
    fixed = _apply(text, list(fix_all.edit.changes[uri]))
    path.write_text(text)
    assert _scan(path, "--fix").returncode in (0, 1)
    assert fixed == path.read_text() != text
    _change(client, uri, 3, fixed)
    left = await _diagnostics(client, uri, lambda now: len(now) < len(after))
    scanned = json.loads(_scan(path, "--format", "json").stdout)["findings"]
    assert sorted(d.code for d in left) == sorted(f["code"] for f in scanned)


async def test_a_noqa_quick_fix_silences_the_finding(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "noqa.py"
    path.write_text("import torch\n\nx = torch.ones(3).cuda()  # keep: a comment of the user's\n")
    uri = _open(client, path)
    (found,) = await _diagnostics(client, uri)
    text = await _with_noqa(client, uri, path, found)
    assert text.splitlines()[2] == "x = torch.ones(3).cuda()  # keep: a comment of the user's  # noqa: PC101"
    _change(client, uri, 2, text)
    assert await _diagnostics(client, uri, lambda now: not now) == []


async def test_ranges_count_utf16_units_as_the_protocol_does(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "emoji.py"
    path.write_text("import torch\n\nlabel = '\U0001F600'; x = torch.ones(3).cuda()\n")
    (found,) = await _diagnostics(client, _open(client, path))
    (scanned,) = json.loads(_scan(path, "--format", "json").stdout)["findings"]
    # the emoji is one code point (portcheck's columns) and two UTF-16 units (the protocol's)
    assert (found.range.start.character, found.range.end.character) == (scanned["column"], scanned["end_column"])


async def test_hover_shows_the_rules_page_with_links_and_the_command_returns_it(
        client: LanguageClient, workspace: Path) -> None:
    path = workspace / "hover.py"
    path.write_text("import torch\n\nx = torch.ones(3).cuda()\n")
    uri = _open(client, path)
    (found,) = await _diagnostics(client, uri)
    shown = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri),
                                                                      found.range.start))
    assert shown is not None and isinstance(shown.contents, types.MarkupContent)
    page = shown.contents.value
    printed = subprocess.run([sys.executable, "-m", "portcheck", "rule", "PC101"], capture_output=True, text=True,
                             check=True).stdout
    assert page.startswith("# PC101 ") and "## Why it matters on Neuron" in page and "](https://" in page
    assert [line for line in page.splitlines() if not line.startswith("Source:")] == [
        line for line in printed.splitlines() if not line.startswith("Source:")]
    command = await client.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.rule", ["pc101"]))
    assert command == page
    nothing = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri),
                                                                        types.Position(0, 0)))
    assert nothing is None


async def test_a_syntax_error_and_a_file_over_the_size_limit_are_one_diagnostic(
        client: LanguageClient, workspace: Path) -> None:
    path = workspace / "broken.py"
    path.write_text("import torch\nx = torch.ones(3).cuda(\n")
    (found,) = await _diagnostics(client, _open(client, path))
    assert found.message.startswith("syntax error") and found.severity == types.DiagnosticSeverity.Error
    assert _scan(path).stdout.startswith(f"broken.py:{found.range.start.line + 1}: error: syntax error")
    large = workspace / "small_limit" / "big.py"
    large.parent.mkdir()
    (large.parent / "portcheck.toml").write_text("max-file-size = 0.001\n")  # one kilobyte
    large.write_text("import torch\n" + "x = torch.ones(3).cuda()\n" * 100)
    (found,) = await _diagnostics(client, _open(client, large))
    assert "limit" in found.message or "larger" in found.message or "MB" in found.message, found.message


async def test_fast_typing_does_not_queue_stale_analyses(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "keystrokes.py"
    body = EXAMPLE.read_text()
    uri = _open(client, path, body)
    await _diagnostics(client, uri)
    before = (await client.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats")))
    for version in range(2, 42):  # forty keystrokes, faster than the debounce
        _change(client, uri, version, body + "\n" * (version % 3) + f"y{version} = 1\n")
    final = body + "z = torch.zeros(2).cuda()\n"
    _change(client, uri, 42, final)
    found = await _diagnostics(client, uri, lambda now: any(d.range.start.line == len(final.splitlines()) - 1
                                                            for d in now))
    after = await client.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats"))
    assert after["analyses"] - before["analyses"] <= 5  # not one per keystroke
    path.write_text(final)
    assert len(found) == len(json.loads(_scan(path, "--format", "json").stdout)["findings"])
    assert after["torch"] is False  # the server never imports torch


async def test_the_trace_command_runs_the_model_in_the_traces_child_and_shows_its_findings(
        client: LanguageClient, workspace: Path) -> None:
    path = workspace / "traced" / "fft.py"
    path.parent.mkdir()
    shutil.copy(ROOT / "fixtures" / "models" / "fft.py", path)
    uri = _open(client, path)
    static = {(d.code, d.range.start.line + 1) for d in await _diagnostics(client, uri)}
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "portcheck.trace", ["traced/fft.py:build"]))
    found = await _diagnostics(client, uri, lambda now: any(d.source == "portcheck trace" for d in now))
    # what `portcheck trace` finds in the workspace folder, less what the static pass shows on the line already
    done = subprocess.run([sys.executable, "-m", "portcheck", "trace", "traced/fft.py:build", "--no-static",
                           "--format", "json", "--target", "trn2"], cwd=workspace, capture_output=True, text=True)
    cli = json.loads(done.stdout)["findings"]
    assert answer == {"findings": len(cli), "files": {uri: len(cli)}}
    assert sorted((d.code, d.range.start.line + 1, d.message) for d in found if d.source == "portcheck trace") == \
        sorted((f["code"], f["line"], f["message"]) for f in cli if (f["code"], f["line"]) not in static) != []
    stats = await client.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats"))
    assert stats["torch"] is False  # the model ran in the trace's child process, not in the server
    only_traced = next(d for d in found if d.source == "portcheck trace" and (d.code, d.range.start.line + 1)
                       not in static and not any(o.source == "portcheck" and o.range == d.range for o in found))
    shown = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri),
                                                                      only_traced.range.start))
    assert shown is not None and isinstance(shown.contents, types.MarkupContent)
    assert f"# {only_traced.code} " in shown.contents.value  # its rule's page, as for a static finding
    # an edit moves lines the trace never saw: its findings go, the static ones stay
    _change(client, uri, 2, "\n" + path.read_text())
    after = await _diagnostics(client, uri, lambda now: all(d.source == "portcheck" for d in now))
    assert {(d.code, d.range.start.line) for d in after} == static
    # a model that never returns is stopped at the time limit; a wrong argument is refused: one line each
    with pytest.raises(Exception, match=r"portcheck trace: the model did not finish building and tracing within "
                                        r"1 s"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.trace", [
            {"model": f"{ROOT / 'fixtures' / 'models' / 'bad' / 'hangs.py'}:build", "timeout": 1}]))
    with pytest.raises(Exception, match="'timeout' has the wrong type"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.trace", [
            {"model": "traced/fft.py:build", "timeout": "soon"}]))


MODEL = """\
import torch
from env import has_gpu

def f():
    if has_gpu():
        torch.cuda.synchronize()
"""


async def test_a_change_in_one_file_republishes_the_files_that_depend_on_it(
        client: LanguageClient, workspace: Path) -> None:
    project = workspace / "project"
    project.mkdir()
    (project / "env.py").write_text("import torch\n\ndef has_gpu():\n    return torch.cuda.is_available()\n")
    (project / "model.py").write_text(MODEL)
    model = _open(client, project / "model.py")
    # first as `scan model.py` sees it, then with the project read: under a CUDA guard, through env.py's probe
    (found,) = await _diagnostics(client, model, lambda now: any(d.severity == types.DiagnosticSeverity.Information
                                                                 for d in now))
    assert found.code == "PC105"
    env = _open(client, project / "env.py")
    _change(client, env, 2, "def has_gpu():\n    return True\n")  # no probe any more
    (found,) = await _diagnostics(client, model, lambda now: any(d.severity == types.DiagnosticSeverity.Error
                                                                 for d in now))
    assert found.code == "PC105"
    # closed unsaved, env.py counts as it is on disk again: a probe
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(env)))
    await _diagnostics(client, model, lambda now: [d.severity for d in now] == [types.DiagnosticSeverity.Information])
    # changed on disk (another program, a checkout): the client's file watcher says so
    (project / "env.py").write_text("def has_gpu():\n    return True\n")
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        [types.FileEvent(uri=env, type=types.FileChangeType.Changed)]))
    await _diagnostics(client, model, lambda now: [d.severity for d in now] == [types.DiagnosticSeverity.Error])


async def test_a_file_outside_the_workspace_folders_is_judged_alone(
        client: LanguageClient, tmp_path_factory: pytest.TempPathFactory) -> None:
    # its directory may be anyone's home: never walked, the file judged as `portcheck scan FILE` judges it
    outside = tmp_path_factory.mktemp("outside")
    (outside / "env.py").write_text("import torch\n\ndef has_gpu():\n    return torch.cuda.is_available()\n")
    (outside / "model.py").write_text(MODEL)
    model = _open(client, outside / "model.py")
    (found,) = await _diagnostics(client, model)
    (outside / "after.py").write_text("import torch\n\nx = torch.ones(3).cuda()\n")
    await _diagnostics(client, _open(client, outside / "after.py"))  # the analysis thread is past model.py's
    assert found.code == "PC105" and [d.severity for d in client.diagnostics[model]] == [
        types.DiagnosticSeverity.Error]
    assert _scanned(outside / "model.py") == [_key(found)]


# The server with two checks changed, in every process it starts (a sitecustomize on its PYTHONPATH): every check
# that reports PC105 raising, what a bug in a check does; and a check that, on a name SLOW_CHECK, says it began
# (a file `began-PID` in $SIGNALS) and waits for a file `go` there (30 seconds at most), then says it ended, and
# on a name END_PROCESS ends its process with SIGSEGV, what a crash of libcst's native parser would do.
HOOKS = textwrap.dedent("""\
    import dataclasses, os, signal, time
    from pathlib import Path

    import libcst as cst
    from portcheck.static import engine
    from portcheck.static.check import CHECKS, Check

    def crash(node, ctx):
        raise RuntimeError("injected crash")

    def slow(node, ctx):
        if node.value == "END_PROCESS":
            os.kill(os.getpid(), signal.SIGSEGV)
        if node.value == "SLOW_CHECK":
            signals = Path(os.environ["SIGNALS"])
            (signals / f"began-{os.getpid()}").write_text("")
            deadline = time.monotonic() + 30
            while not (signals / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            (signals / f"ended-{os.getpid()}").write_text("")

    CHECKS[:] = [dataclasses.replace(c, fn=crash) if "PC105" in c.codes else c for c in CHECKS]
    CHECKS.append(Check(slow, (cst.Name,), frozenset({"PC303"}), ("SLOW_CHECK", "END_PROCESS")))
    """)
PUBLISHED: dict[str, list[types.PublishDiagnosticsParams]] = {}  # every publication the hooked server made


def _recording_client() -> LanguageClient:
    def publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        PUBLISHED.setdefault(params.uri, []).append(params)

    client = LanguageClient(converter_factory=default_converter)
    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})
    return client


HOOKED_HOME = Path(tempfile.mkdtemp(prefix="portcheck-test-hooks-"))  # the hooks, the signals, the cache
atexit.register(shutil.rmtree, HOOKED_HOME, True)
(HOOKED_HOME / "sitecustomize.py").write_text(HOOKS)
(HOOKED_HOME / "signals").mkdir()
HOOKED_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HOOKED_HOME), *filter(None, [os.environ.get(
    "PYTHONPATH")])]), "SIGNALS": str(HOOKED_HOME / "signals"), "PORTCHECK_CACHE_DIR": str(HOOKED_HOME / "cache")}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=HOOKED_ENV,
                                              client_factory=_recording_client), scope="module")
async def hooked(lsp_client: LanguageClient, workspace: Path):
    await _start(lsp_client, workspace / "hooked")
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the hooked server's tests write their files: outside its workspace folder, so each file is judged alone
    and analysed only by the analysis process. In the folder, the server reads the other files in its own process
    after a publish: a file written by the next test could reach the changed checks there, and block or end it."""
    return tmp_path_factory.mktemp("alone")


async def test_a_crash_in_a_check_is_a_diagnostic_and_the_server_lives_on(hooked: LanguageClient,
                                                                         alone: Path) -> None:
    folder = alone
    (folder / "crash.py").write_text("import torch\n\ntorch.cuda.synchronize()\n")
    (found,) = await _diagnostics(hooked, _open(hooked, folder / "crash.py"))
    assert found.message == "internal error: RuntimeError: injected crash"
    (folder / "fine.py").write_text("import torch\n\nx = torch.ones(3, dtype=torch.float64)\n")
    (found,) = await _diagnostics(hooked, _open(hooked, folder / "fine.py"))
    assert found.code == "PC303"  # the server goes on


async def test_a_crash_of_the_analysis_process_is_a_diagnostic_and_another_starts(hooked: LanguageClient,
                                                                                  alone: Path) -> None:
    folder = alone
    (folder / "segfault.py").write_text("import torch\n\nEND_PROCESS = 1\n")
    before = await hooked.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats"))
    (found,) = await _diagnostics(hooked, _open(hooked, folder / "segfault.py"))
    assert found.message == "internal error: the analysis process was killed by SIGSEGV"
    assert found.severity == types.DiagnosticSeverity.Error
    (folder / "after.py").write_text("import torch\n\nx = torch.ones(3, dtype=torch.float64)\n")
    (found,) = await _diagnostics(hooked, _open(hooked, folder / "after.py"))
    assert found.code == "PC303"  # the next process analyses the next file
    after = await hooked.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats"))
    assert after["children"] - before["children"] == 1 and after["cancelled"] == before["cancelled"]


def _clear_signals() -> Path:
    signals = HOOKED_HOME / "signals"
    for made in signals.iterdir():
        made.unlink()
    return signals


async def _signal(name: str) -> Path:
    """The file the slow check makes (`began-*`), once it is there."""
    async def made() -> Path:
        while not (found := sorted((HOOKED_HOME / "signals").glob(name))):
            await asyncio.sleep(0.01)
        return found[0]

    return await asyncio.wait_for(made(), WAIT)


async def test_an_edit_stops_the_analysis_of_the_text_it_replaces(hooked: LanguageClient, alone: Path) -> None:
    folder = alone
    path = folder / "slow.py"
    path.write_text("import torch\n\nSLOW_CHECK = 1\nx = torch.ones(3, dtype=torch.float64)\n")
    _clear_signals()
    before = await hooked.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats"))
    uri = _open(hooked, path)
    began = await _signal("began-*")  # the analysis of the first text is inside the slow check
    pid = int(began.name.removeprefix("began-"))
    _change(hooked, uri, 2, "import torch\n\ny = torch.ones(3, dtype=torch.float64)\n")
    (found,) = await _diagnostics(hooked, uri, lambda now: [d.range.start.line for d in now] == [2])
    assert found.code == "PC303"
    after = await hooked.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats"))
    # the stale analysis was stopped where it was, inside the check: its process is gone, the check never ended
    assert not (HOOKED_HOME / "signals" / f"ended-{pid}").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert after["cancelled"] - before["cancelled"] == 1 and after["children"] - before["children"] == 1
    assert after["analyses"] - before["analyses"] == 2
    # and only the new text's findings were ever published for the document
    assert [p.version for p in PUBLISHED[uri]] == [2]
    # the next text is analysed by the new process as usual; the slow check there is let go at once
    (HOOKED_HOME / "signals" / "go").write_text("")
    _change(hooked, uri, 3, "import torch\n\nSLOW_CHECK = 2\n\nz = torch.ones(3, dtype=torch.float64)\n")
    await _diagnostics(hooked, uri, lambda now: [d.range.start.line for d in now] == [4])
    assert [p.version for p in PUBLISHED[uri]] == [2, 3]


async def test_saving_the_text_being_analysed_does_not_stop_it(hooked: LanguageClient, alone: Path) -> None:
    path = alone / "saved.py"
    path.write_text("import torch\n\nSLOW_CHECK = 1\nx = torch.ones(3, dtype=torch.float64)\n")
    signals = _clear_signals()
    before = await hooked.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats"))
    uri = _open(hooked, path)
    pid = int((await _signal("began-*")).name.removeprefix("began-"))
    hooked.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
    await hooked.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats"))  # the save is in
    (signals / "go").write_text("")
    (found,) = await _diagnostics(hooked, uri)
    assert found.code == "PC303" and (signals / f"ended-{pid}").exists()  # the same text: its analysis went on
    after = await hooked.workspace_execute_command_async(types.ExecuteCommandParams("portcheck.stats"))
    assert after["cancelled"] == before["cancelled"] and after["children"] == before["children"]
