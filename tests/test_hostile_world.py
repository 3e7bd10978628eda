"""Hostile world, second round (issue 32): git configuration that names programs, symlinked fix targets, forged
caches, quadratic files, orphaned models. Each case failed before the change it names; the README's "What bad
input gets" table has a row per class."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FakeGitHub, run_command

GOOD = "import torch\n\nx = torch.zeros(3).cuda()\n"


def portcheck(*args: str, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
              timeout: float = 300, fresh: bool = False) -> subprocess.CompletedProcess:
    return run_command(args, cwd=cwd, input=stdin, text=False, timeout=timeout, env=env, fresh=fresh)


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _git("init", "-q", "-b", "main", cwd=root)
    _git("config", "user.email", "dev@example.com", cwd=root)
    _git("config", "user.name", "dev", cwd=root)
    return root


# ---- git configuration that names a program ---------------------------------------------------------------------


def _marker_program(tmp_path: Path, name: str) -> tuple[Path, str]:
    marker = tmp_path / f"ran-{name}"
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(0o755)
    return marker, str(script)


# (attribute line, config entries): each names a program git would run when it reads or diffs a .py file
PROGRAMS = {
    "filter-clean": ("*.py filter=evil", {"filter.evil.clean": "{p}"}),
    "filter-required": ("*.py filter=evil", {"filter.evil.clean": "{p}", "filter.evil.required": "true"}),
    "filter-process": ("*.py filter=evil", {"filter.evil.process": "{p}"}),
    "filter-odd-name": ("*.py filter=e=v.il", {"filter.e=v.il.clean": "{p}"}),
    "textconv": ("*.py diff=evil", {"diff.evil.textconv": "{p}"}),
    "diff-command": ("*.py diff=evil", {"diff.evil.command": "{p}"}),
    "diff-external": ("", {"diff.external": "{p}"}),
}


@pytest.mark.parametrize("case", sorted(PROGRAMS))
@pytest.mark.parametrize("head", ["worktree", "commit"])
def test_review_runs_nothing_the_repository_configures(tmp_path, case, head):
    attributes, config = PROGRAMS[case]
    repo = _repo(tmp_path / "repo")
    marker, program = _marker_program(tmp_path, case)
    (repo / "a.py").write_text("x = 1\n")
    (repo / ".gitattributes").write_text(attributes + "\n")
    _git("add", ".", cwd=repo)
    _git("commit", "-q", "-m", "base", cwd=repo)
    (repo / "a.py").write_text("x = 1\n" + GOOD)
    args = ["review", "--isolated", "--base", "HEAD", "--format", "json"]
    if head == "commit":  # committed before the configuration names the program
        _git("commit", "-q", "-am", "change", cwd=repo)
        args = ["review", "--isolated", "--base", "HEAD~1", "--head", "HEAD", "--format", "json"]
    for key, value in config.items():
        _git("config", key, value.format(p=program), cwd=repo)
    done = portcheck(*args, cwd=repo)
    assert not marker.exists(), f"review ran the repository's {case}"
    assert done.returncode == 1, done.stderr.decode()
    assert [f["code"] for f in json.loads(done.stdout)["findings"]] == ["PC101"]


def test_scan_runs_no_filter_the_repository_configures(tmp_path):
    repo = _repo(tmp_path / "repo")
    marker, program = _marker_program(tmp_path, "scan")
    (repo / ".gitattributes").write_text("* filter=evil\n")
    (repo / "a.py").write_text(GOOD)
    _git("add", ".", cwd=repo)
    _git("commit", "-q", "-m", "base", cwd=repo)
    _git("config", "filter.evil.process", program, cwd=repo)
    _git("config", "filter.evil.clean", program, cwd=repo)
    done = portcheck("scan", "--isolated", "--no-cache", ".", cwd=repo)
    assert done.returncode == 1 and b"PC101" in done.stdout, done.stderr
    assert not marker.exists()


def test_every_git_call_goes_through_one_place():
    """No module starts git but portcheck/gitrun.py, so the hardening there covers every call."""
    package = Path(__file__).resolve().parent.parent / "portcheck"
    callers = sorted(path.relative_to(package).as_posix() for path in package.rglob("*.py")
                     if path.name != "gitrun.py" and '"git"' in path.read_text())
    assert callers == []


# ---- writes: never outside the tree, never through a symlink, never over what the user could not write -----------


def test_fix_of_a_directory_never_writes_through_a_committed_symlink(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.py").write_text(GOOD)
    project = tmp_path / "project"
    project.mkdir()
    (project / "real.py").write_text(GOOD)
    (project / "evil.py").symlink_to("../outside/victim.py")  # what a clone's committed symlink is
    (project / "inside.py").symlink_to("real.py")
    done = portcheck("scan", "--isolated", "--no-cache", "--fix", "--format", "json", "project", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert (outside / "victim.py").read_text() == GOOD
    assert (project / "evil.py").is_symlink() and (project / "inside.py").is_symlink()
    assert "cuda" not in (project / "real.py").read_text()
    # the link out of the tree is left out, never read nor written; inside.py is real.py
    assert report["errors"] == []
    assert {e["path"]: e["reason"] for e in report["left_out"]} == {"project/evil.py": "symlink out of the tree"}


@pytest.fixture
def nobody(tmp_path):
    """A directory owned by an unprivileged user, and a context to act as that user in this process (root only)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    import contextlib
    import shutil
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="portcheck-nobody-", dir="/tmp"))
    os.chown(home, 65534, 65534)

    @contextlib.contextmanager
    def acting() -> object:
        os.setegid(65534)
        os.seteuid(65534)
        try:
            yield
        finally:
            os.seteuid(0)
            os.setegid(0)

    yield home, acting
    shutil.rmtree(home)


def test_fix_never_replaces_what_the_user_could_not_write(nobody):
    from portcheck.static.rewrite import replace_if_unchanged

    home, acting = nobody
    fixed = GOOD.replace(".cuda()", '.to("neuron")')
    cases = {"readonly.py": (65534, 0o444), "roots.py": (0, 0o644), "roots_shared.py": (0, 0o666)}
    for name, (owner, mode) in cases.items():
        (home / name).write_text(GOOD)
        os.chown(home / name, owner, owner)
        os.chmod(home / name, mode)
    with acting():
        problems = {name: replace_if_unchanged(home / name, fixed, "utf-8", GOOD.encode()) for name in cases}
    for name, (owner, mode) in cases.items():
        info = (home / name).stat()
        assert (home / name).read_text() == GOOD, name
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (owner, mode), name
        assert problems[name] and problems[name].startswith("not fixed: "), problems
    assert "permission denied" in problems["readonly.py"] and "another user" in problems["roots_shared.py"]


def test_output_onto_another_users_file_keeps_its_owner(nobody):
    from portcheck.atomic import write_text
    from portcheck.errors import UserError

    home, acting = nobody
    (home / "shared.txt").write_text("old\n")
    os.chmod(home / "shared.txt", 0o666)  # root's, writable by everyone: a shell's `>` writes it in place
    (home / "locked.txt").write_text("old\n")
    os.chmod(home / "locked.txt", 0o644)
    with acting():
        write_text(home / "shared.txt", "new\n")
        with pytest.raises(UserError, match="permission denied"):
            write_text(home / "locked.txt", "new\n")
    assert (home / "shared.txt").read_text() == "new\n" and (home / "shared.txt").stat().st_uid == 0
    assert (home / "locked.txt").read_text() == "old\n"


# ---- linear time: the work counted, not timed (benchmarks/quadratic.py has the times) ------------------------------


def _nodes_entered(monkeypatch, text: str, path: str = "m.py") -> int:
    """How many nodes every tree walk of the analysis entered (the walks behind each finding included)."""
    import libcst

    from portcheck.knowledge import load
    from portcheck.static import walk as walk_module
    from portcheck.static.engine import analyse_text

    original = walk_module.walk
    count = 0

    def counting(root, enter, leave=None, **options):
        def counted(node):
            nonlocal count
            count += 1
            return enter(node)

        return original(root, counted, leave, **options)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("portcheck") and getattr(module, "walk", None) is original:
            monkeypatch.setattr(module, "walk", counting)
    visit = libcst.CSTVisitor.on_visit

    def visiting(self, node):  # and libcst's own visitors (a statement read whole for each finding: 5 min for 1,800)
        nonlocal count
        count += 1
        return visit(self, node)

    monkeypatch.setattr(libcst.CSTVisitor, "on_visit", visiting)
    result = analyse_text(text, path, "trn2", "native", frozenset(load().rules))
    assert result.findings and not result.errors
    return count


CROWDED = {
    "one call": "x.cuda()",  # cuda_path walked the whole statement for every finding
    "guarded": "x.cuda() if torch.cuda.is_available() else x",  # each probe expression searched for each finding
    "device type": "torch.device('cuda')",  # the statement searched for `.type` read of each call
    "reflection": "getattr(torch.cuda, 'memory_allocated')",  # the statement searched for the call of each
}


@pytest.mark.parametrize("shape", [*CROWDED, "top level"])
def test_the_work_per_finding_does_not_grow_with_the_findings_around_it(monkeypatch, shape):
    def text(n: int) -> str:
        if shape in CROWDED:
            return "import torch\n\nf(" + ", ".join([CROWDED[shape]] * n) + ")\n"
        return "import torch\n\n" + "torch.zeros(1).cuda()\n" * n  # every statement above, for every finding

    small, large = _nodes_entered(monkeypatch, text(200)), _nodes_entered(monkeypatch, text(800))
    assert large < 5 * small, (small, large)  # linear: 4x; quadratic: 16x


def test_a_crowded_statement_in_a_function_with_an_optional_parameter_stays_linear(monkeypatch):
    """Each finding of a function with a parameter defaulting to None asks whether it is the fallback of an
    expression for that parameter (`d or ...`): read up the statement's one map of parents, not by listing the
    statement's children again for every finding (1,500 findings in one statement took 58 s that way)."""
    import libcst as cst

    from portcheck.knowledge import load
    from portcheck.static.engine import analyse_text

    original = cst.CSTNode.children
    count = 0

    def counting(node):
        nonlocal count
        count += 1
        return original.fget(node)

    monkeypatch.setattr(cst.CSTNode, "children", property(counting))

    def reads(n: int) -> int:
        nonlocal count
        count = 0
        text = "import torch\n\ndef g(x, d=None):\n    return f(" + ", ".join(["x.cuda()"] * n) + ")\n"
        result = analyse_text(text, "m.py", "trn2", "native", frozenset(load().rules))
        assert result.findings and not result.errors
        return count

    small, large = reads(100), reads(400)
    assert large < 5 * max(small, 1), (small, large)  # linear: 4x (or none at all); quadratic: 16x


def test_scopes_for_fingerprints_read_each_line_once(monkeypatch):
    from portcheck import findings

    class Counting:
        calls = 0

        def match(self, line: str):
            Counting.calls += 1
            return pattern.match(line)

    pattern = findings._SCOPE
    monkeypatch.setattr(findings, "_SCOPE", Counting())
    lines = ["torch==2.1.2"] * 2000  # a requirements file: every finding at the top level
    made = [findings.Finding("PC725", "n", "compile", findings.Severity.INFO, "m", "requirements.txt", i, 1, i, 13)
            for i in range(1, 2001)]
    findings.fingerprinted(made, lines, "requirements.txt")
    assert Counting.calls <= len(lines)


@pytest.mark.parametrize("output", ["full", "rdjson"])
def test_reports_read_a_file_once_not_once_per_finding(tmp_path, monkeypatch, output):
    import importlib
    import io

    commands = importlib.import_module("portcheck.commands.scan")  # the module (the package exports a function)
    from portcheck.findings import ScanResult, Target
    from portcheck.report import render
    from portcheck.static.engine import analyse_text

    reads = 0
    original = commands.python_lines

    def counting(text: str) -> list[str]:
        nonlocal reads
        reads += 1
        return original(text)

    monkeypatch.setattr(commands, "python_lines", counting)
    (tmp_path / "m.py").write_text("import torch\n\n" + "torch.zeros(1).cuda()\n" * 50)
    outcome = analyse_text((tmp_path / "m.py").read_text(), "m.py", "trn2", "native", frozenset({"PC101"}))
    result = ScanResult(Target("trn2", "native"), files=1)
    result.findings.extend(outcome.findings)
    assert len(result.findings) == 50
    render(result, output, io.StringIO(), color=False, statistics=False, lines_for=commands.source_lines(tmp_path))
    assert reads == 1


# ---- review: bytes, not text; sizes before reads -------------------------------------------------------------------


def _committed_repo(tmp_path: Path) -> Path:
    repo = _repo(tmp_path / "repo")
    (repo / "base.py").write_text("x = 1\n")
    _git("add", ".", cwd=repo)
    _git("commit", "-q", "-m", "base", cwd=repo)
    return repo


@pytest.mark.parametrize("head", ["worktree", "commit"])
def test_review_reads_a_diff_that_is_not_utf8(tmp_path, head):
    repo = _committed_repo(tmp_path)
    (repo / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\ns = 'caf\xe9'\n"
                                    b"y = torch.zeros(1).cuda()\n")
    (repo / "NOTES.txt").write_bytes(b"caf\xe9\n")
    _git("add", ".", cwd=repo)
    args = ["review", "--isolated", "--base", "HEAD", "--format", "json"]
    if head == "commit":
        _git("commit", "-q", "-m", "latin", cwd=repo)
        args = ["review", "--isolated", "--base", "HEAD~1", "--head", "HEAD", "--format", "json"]
    done = portcheck(*args, cwd=repo)
    assert done.returncode == 1 and b"internal error" not in done.stderr, done.stderr
    assert [(f["path"], f["line"]) for f in json.loads(done.stdout)["findings"]] == [("latin.py", 4)]


def test_review_splits_the_diff_at_line_feeds_only(tmp_path):
    repo = _committed_repo(tmp_path)
    (repo / "m.py").write_text("import torch\n" + "x = 1\n" * 40 + "y = torch.zeros(1).cuda()\n")
    _git("add", ".", cwd=repo)
    _git("commit", "-q", "-m", "m", cwd=repo)
    # an added comment holding U+2028 and a fake hunk header: str.splitlines made it a hunk of line 43
    (repo / "m.py").write_text("# a\u2028@@ -1 +43 @@\n" + (repo / "m.py").read_text())
    done = portcheck("review", "--isolated", "--base", "HEAD", "--format", "json", cwd=repo)
    assert done.returncode == 0 and json.loads(done.stdout)["findings"] == [], done.stdout


# VmHWM, not ru_maxrss: the latter keeps the high-water mark of the process this one was forked from (pytest's)
PEAK = """import sys
from portcheck.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
peak = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
sys.stderr.write(f"\\npeak {peak}\\n")
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak memory from /proc (Linux)")
@pytest.mark.parametrize("head", ["worktree", "commit"])
def test_review_asks_a_file_size_before_reading_it(tmp_path, head):
    repo = _committed_repo(tmp_path)
    big = b"import torch\n" + b"x = torch.zeros(1).cuda()\n" * 3_000_000  # 78 MB
    (repo / "big.py").write_bytes(big)
    _git("add", "big.py", cwd=repo)
    (repo / "portcheck.toml").write_text("max-file-size = 1\n")
    args = ["review", "--base", "HEAD", "--format", "json"]
    if head == "commit":
        _git("commit", "-q", "-m", "big", cwd=repo)
        args = ["review", "--base", "HEAD~1", "--head", "HEAD", "--format", "json"]
    done = subprocess.run([sys.executable, "-c", PEAK, *args], cwd=repo, capture_output=True, timeout=300)
    report = json.loads(done.stdout)
    assert [e["path"] for e in report["errors"]] == ["big.py"] and "too large" in report["errors"][0]["message"]
    peak_kb = int(done.stderr.rsplit(b"peak ", 1)[1])
    assert peak_kb < 150_000, peak_kb  # the diff and the blob were each read whole: 365 MB


# ---- the results cache: a cache that came with the files is not trusted; entries are checked like input -----------


def _cache_env(tmp_path: Path) -> dict[str, str]:
    """This test's own machine key, and no cache directory from the environment."""
    env = {k: v for k, v in os.environ.items() if k != "PORTCHECK_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    return env


def test_a_committed_cache_whose_v1_is_a_symlink_receives_no_writes(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    (project / ".portcheck_cache").mkdir(parents=True)
    (project / ".portcheck_cache" / "v1").symlink_to(outside)  # only .portcheck_cache itself was checked
    (project / "m.py").write_text(GOOD)
    done = portcheck("scan", "--isolated", "m.py", cwd=project, env=_cache_env(tmp_path))
    assert done.returncode == 1 and b"PC101" in done.stdout, done.stderr
    assert list(outside.iterdir()) == [] and b"not made by portcheck on this machine" in done.stderr
    named = tmp_path / "named"  # a directory the user names is trusted, but a link in it is not followed
    named.mkdir()
    (named / "v1").symlink_to(outside)
    done = portcheck("scan", "--isolated", "--cache-dir", str(named), "m.py", cwd=project, env=_cache_env(tmp_path))
    assert done.returncode == 1 and b"PC101" in done.stdout and b"symlink" in done.stderr, done.stderr
    assert list(outside.iterdir()) == []


def test_a_forged_committed_cache_entry_does_not_make_a_file_clean(tmp_path):
    from portcheck.cache import content_hash

    project = tmp_path / "project"
    project.mkdir()
    (project / "m.py").write_text(GOOD)
    made = portcheck("scan", "--isolated", "--cache-dir", str(tmp_path / "real"), "m.py", cwd=project,
                     env=_cache_env(tmp_path))
    assert made.returncode == 1
    (entry,) = (tmp_path / "real" / "v1").glob("*.json")  # the key a real run uses for this file
    forged = {"content": content_hash(GOOD.encode()),
              "result": {"path": "m.py", "findings": [], "suppressed": [], "errors": []}}
    (project / ".portcheck_cache" / "v1").mkdir(parents=True)
    (project / ".portcheck_cache" / "v1" / entry.name).write_text(json.dumps(forged))
    (project / ".portcheck_cache" / "ORIGIN").write_text("0" * 64)  # a mark cannot be forged without the key
    done = portcheck("scan", "--isolated", "m.py", cwd=project, env=_cache_env(tmp_path))
    assert done.returncode == 1 and b"PC101" in done.stdout, (done.stdout, done.stderr)


def test_the_cache_made_here_is_used_and_trusted(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "m.py").write_text(GOOD)
    first = portcheck("scan", "--isolated", "m.py", cwd=project, env=_cache_env(tmp_path))
    (entry,) = (project / ".portcheck_cache" / "v1").glob("*.json")
    data = json.loads(entry.read_text())
    data["result"]["findings"][0][4] = "from the cache"
    entry.write_text(json.dumps(data))
    second = portcheck("scan", "--isolated", "m.py", cwd=project, env=_cache_env(tmp_path))
    assert first.returncode == second.returncode == 1 and b"from the cache" in second.stdout, second.stderr
    other_key = portcheck("scan", "--isolated", "m.py", cwd=project, env={**_cache_env(tmp_path),
                                                                      "XDG_CACHE_HOME": str(tmp_path / "elsewhere")})
    assert b"from the cache" not in other_key.stdout and b"not made by portcheck" in other_key.stderr


def test_cache_positions_outside_the_file_are_a_miss(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "m.py").write_text(GOOD)
    cache = tmp_path / "c"
    args = ("scan", "--isolated", "--cache-dir", str(cache), "--format", "full", "m.py")
    portcheck(*args, cwd=project, env=_cache_env(tmp_path))
    (entry,) = (cache / "v1").glob("*.json")
    data = json.loads(entry.read_text())
    data["result"]["findings"][0][7] = 6_000_000_000  # the column: a code frame of gigabytes
    data["result"]["findings"][0][9] = 6_000_000_001
    entry.write_text(json.dumps(data))
    done = portcheck(*args, cwd=project, env=_cache_env(tmp_path), timeout=60)
    assert done.returncode == 1 and b"m.py:3:5" in done.stdout and len(done.stdout) < 20_000, done.stderr[-500:]


# ---- trace: a FIFO for the step file, the parent's death -----------------------------------------------------------


FIFO_MODEL = """import os, sys, time
import torch


def build():
    step = os.path.join(os.path.dirname(sys.argv[2]), "step")
    if os.path.exists(step):
        os.remove(step)
    os.mkfifo(step)  # the parent, polling for steps, opened it for reading and waited for a writer for ever
    time.sleep(600)
    return torch.nn.Linear(2, 2), (torch.zeros(1, 2),)
"""

RUN_WITH_STEPS = """import sys, time
from pathlib import Path
from portcheck.dynamic.request import TraceRequest
from portcheck.dynamic.runner import TraceError, run_child

started = time.monotonic()
try:
    run_child(TraceRequest(model="model.py:build", shapes=False), Path.cwd(), 5, step=lambda doing: None)
except TraceError as exc:
    print(f"{time.monotonic() - started:.1f} {exc}")
"""


def test_trace_with_progress_honours_the_timeout_when_the_step_file_is_a_fifo(tmp_path):
    (tmp_path / "model.py").write_text(FIFO_MODEL)
    done = subprocess.run([sys.executable, "-c", RUN_WITH_STEPS], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    seconds, _, message = done.stdout.partition(" ")
    assert "within 5 s" in message and float(seconds) < 60, (done.stdout, done.stderr[-2000:])


SPINNING_MODEL = """import os, sys
import torch


def build():
    with open({where!r}, "w") as handle:
        handle.write(f"{{os.getpid()}} {{os.path.dirname(sys.argv[2])}}")
    while True:
        pass
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc (Linux)")
@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGHUP"])
def test_the_model_process_ends_when_trace_is_killed(tmp_path, signal_name):
    import signal
    import time

    where = tmp_path / "model-pid"
    (tmp_path / "model.py").write_text(SPINNING_MODEL.format(where=str(where)))
    trace = subprocess.Popen([sys.executable, "-m", "portcheck", "trace", "--isolated", "--no-shapes", "--timeout",
                              "600", "model.py:build"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (where.exists() and " " in where.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        pid_text, scratch = where.read_text().split(" ", 1)
        model = int(pid_text)
        assert _alive(model)
        trace.send_signal(getattr(signal, signal_name))
        trace.wait(timeout=30)
        deadline = time.monotonic() + 15
        while _alive(model) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(model), "the model's process outlived portcheck trace"
        deadline = time.monotonic() + 5
        while Path(scratch).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(scratch).exists(), "its scratch directory was left"
    finally:
        trace.kill()
        trace.wait()
        with open(where) if where.exists() else open(os.devnull) as handle:
            text = handle.read()
        if text.split(" ")[0].isdigit() and _alive(int(text.split(" ")[0])):
            os.kill(int(text.split(" ")[0]), 9)


# ---- low: one line instead of an internal error; bounds on what comes from outside --------------------------------


@pytest.mark.parametrize("args", [
    ("trace", "--memory-limit", "infG", "m.py:build"),
    ("trace", "--memory-limit", "1e30G", "m.py:build"),
    ("trace", "--memory-limit", "0", "m.py:build"),  # silently removed the cap
    ("trace", "--memory-limit=-5G", "m.py:build"),
    ("advise", "--params", "1.7e308", "--layers", "32", "--hidden", "4096", "--heads", "32"),
    ("scan", "--baseline", "huge-int.json", "m.py"),
], ids=["inf", "1e30G", "zero", "negative", "params", "baseline-int"])
def test_numbers_from_outside_are_bounded_before_use(tmp_path, args):
    (tmp_path / "m.py").write_text(GOOD)
    (tmp_path / "huge-int.json").write_text('{"kind": "portcheck-baseline", "findings": [{"stem": "x", "line": '
                                            + "9" * 5000 + "}]}")
    done = portcheck(*args[:1], "--isolated", *args[1:], cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and b"internal error" not in done.stderr and b"Traceback" not in done.stderr, \
        done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # argparse printed its usage first
    assert (b"baseline" if args[0] == "scan" else b"--params" if args[0] == "advise" else b"--memory-limit") \
        in done.stderr, done.stderr


def test_symlink_loops_named_on_the_command_line_are_an_error_entry(tmp_path):
    (tmp_path / "loop.py").symlink_to("loop.py")
    (tmp_path / "m.py").write_text(GOOD)
    done = portcheck("scan", "--isolated", "--no-cache", "--format", "json", "loop.py", "m.py", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and [e["path"] for e in report["errors"]] == ["loop.py"], done.stderr
    assert [f["path"] for f in report["findings"]] == ["m.py"]


@pytest.mark.parametrize("size", ["1e13", "10000"])
def test_a_huge_max_file_size_is_no_limit_not_an_allocation(tmp_path, size):
    import resource

    def small_address_space() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))  # read(10000 MB) allocated it first

    (tmp_path / "m.py").write_text(GOOD)
    done = subprocess.run([sys.executable, "-m", "portcheck", "scan", "--isolated", "--no-cache", "--max-file-size",
                           size, "m.py"], cwd=tmp_path, capture_output=True, timeout=120,
                          preexec_fn=small_address_space)
    assert done.returncode == 1 and b"PC101" in done.stdout, done.stderr


def test_jobs_are_capped(monkeypatch):
    import concurrent.futures

    from portcheck.static import scan

    seen = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers=None, initializer=None, initargs=()):
            seen.append(max_workers)
            super().__init__(max_workers=1)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Recording)
    assert list(scan._in_parallel(abs, list(range(-500, 0)), 100_000)) == list(range(500, 0, -1))
    assert seen and seen[0] <= scan.WORKERS_PER_CORE * (os.cpu_count() or 1)


MODEL_RAISING = """import torch


def build():
    raise ValueError("bad \\x1b]0;pwned\\x07 \\x1b[2J config")
"""


def test_a_models_exception_text_reaches_the_terminal_escaped(tmp_path):
    (tmp_path / "model.py").write_text(MODEL_RAISING)
    done = portcheck("trace", "--isolated", "--no-shapes", "model.py:build", cwd=tmp_path)
    assert done.returncode == 2 and b"bad " in done.stderr, done.stderr
    assert b"\x1b" not in done.stderr and b"\x07" not in done.stderr and b"\\x1b" in done.stderr


def test_diff_on_a_terminal_escapes_the_codes_control_characters(tmp_path):
    import pty

    (tmp_path / "m.py").write_text('import torch\n\nx = torch.zeros(3).cuda()  # "\x1b[2J"\n')
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "portcheck", "scan", "--isolated", "--no-cache", "--diff",
                               "m.py"], cwd=tmp_path, stdout=secondary, stderr=subprocess.PIPE, timeout=120)
        os.close(secondary)
        shown = b""
        while True:
            try:
                piece = os.read(primary, 65536)
            except OSError:
                break
            if not piece:
                break
            shown += piece
    finally:
        os.close(primary)
    assert done.returncode == 1 and b'to("neuron")' in shown, (shown, done.stderr)
    assert b"\x1b" not in shown and b"\\x1b[2J" in shown
    piped = portcheck("scan", "--isolated", "--no-cache", "--diff", "m.py", cwd=tmp_path)
    assert b"\x1b[2J" in piped.stdout  # piped, the exact diff a patch needs


@pytest.mark.parametrize("data", [b"\x00\x01binary", b"x = 'caf\xe9'\n", b"x = 1\n" * 400_000],
                         ids=["binary", "latin-1", "over the limit"])
def test_fix_from_stdin_gives_back_what_it_cannot_fix(tmp_path, data):
    done = portcheck("scan", "--isolated", "--max-file-size", "1", "--fix", "-", "--stdin-filename", "m.py",
                     cwd=tmp_path, stdin=data)
    assert done.stdout == data and done.returncode == 1, done.stderr  # an editor filter keeps its buffer
    assert b"m.py" in done.stderr


EVIL_CLASS = '''import torch

Evil = type('Evil"""\\nopen("PWNED", "w").write("x")\\n"""', (torch.nn.Linear,), {})


def build():
    return Evil(2, 2), (torch.zeros(1, 2),)
'''


def test_emit_script_keeps_a_models_class_name_inside_the_docstring(tmp_path):
    import ast

    (tmp_path / "model.py").write_text(EVIL_CLASS)
    done = portcheck("advise", "--isolated", "model.py:build", "--emit-script", "bringup.py", "--exit-zero",
                     cwd=tmp_path)
    script = (tmp_path / "bringup.py").read_text()
    tree = ast.parse(script)
    assert '"""' in (ast.get_docstring(tree) or ""), done.stderr  # the name, quotes and all, inside the docstring
    assert not any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) for node in tree.body[1:4])


RESULT_WRITER = """import os, sys


def build():
    result = sys.argv[2]
    if {kind!r} == "nested":
        open(result, "w").write("[" * 100_000 + "]" * 100_000)
    else:
        with open(result, "wb") as handle:
            handle.truncate(300 * 2**20)  # sparse: nothing on disk, 300 MiB to a reader
    os._exit(0)  # the child never writes its own result over it
"""


@pytest.mark.parametrize("kind", ["nested", "huge"])
def test_a_result_file_the_model_wrote_is_one_line(tmp_path, kind):
    (tmp_path / "model.py").write_text(RESULT_WRITER.format(kind=kind))
    done = portcheck("trace", "--isolated", "--no-shapes", "model.py:build", cwd=tmp_path)
    assert done.returncode == 2 and b"internal error" not in done.stderr, done.stderr
    assert (b"nested too deeply" if kind == "nested" else b"over 256 MiB") in done.stderr, done.stderr


def test_post_never_prints_the_token_a_server_echoes(github):
    from portcheck import review

    FakeGitHub.echo_token = True
    shown = review.post_review({"body": "x"}, review.Destination(github, "o/r", 7, "ghs_s3cret"))
    assert "ghs_s3cret" not in shown and "***" in shown


@pytest.mark.parametrize("output", ["json", "json-lines", "rdjson", "sarif", "github-review"])
def test_file_names_that_are_not_utf8_stay_valid_unicode_in_json(tmp_path, output):
    name = os.fsdecode(b"b\xff.py")
    repo = _committed_repo(tmp_path)
    (repo / name).write_text(GOOD)
    _git("add", ".", cwd=repo)
    _git("commit", "-q", "-m", "odd name", cwd=repo)
    if output == "github-review":
        done = portcheck("review", "--isolated", "--base", "HEAD~1", "--head", "HEAD", "--format", output, cwd=repo)
    else:
        done = portcheck("scan", "--isolated", "--no-cache", "--format", output, ".", cwd=repo)
    assert done.returncode in (0, 1), done.stderr
    text = done.stdout.decode("utf-8")
    documents = [json.loads(line) for line in text.splitlines()] if output == "json-lines" else [json.loads(text)]
    json.dumps(documents, ensure_ascii=False).encode("utf-8")  # no lone surrogate anywhere: a UTF-8 reader takes it
    assert "b\\\\xff.py" in json.dumps(documents, ensure_ascii=False) or output == "sarif"  # the name, escaped


ESCAPING_MODEL = """import os
import torch


def build():
    first = os.fork()
    if first == 0:
        os.setsid()  # its own session: not in the model's process group
        if os.fork() == 0:
            with open({where!r}, "w") as handle:
                handle.write(str(os.getpid()))
            os.execve("/bin/sleep", ["sleep", "300"], {{}})  # a clean environment: no run token to find it by
        os._exit(0)
    os.waitpid(first, 0)
    return torch.nn.Linear(2, 2), (torch.zeros(1, 2),)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc (Linux)")
def test_a_process_with_a_clean_environment_and_its_own_session_is_swept(tmp_path):
    import time

    where = tmp_path / "escaped-pid"
    (tmp_path / "model.py").write_text(ESCAPING_MODEL.format(where=str(where)))
    done = portcheck("trace", "--isolated", "--no-shapes", "model.py:build", "--exit-zero", cwd=tmp_path,
                     fresh=True)  # the child as portcheck starts it, not forked from a test's zygote
    assert done.returncode == 0, done.stderr
    escaped = int(where.read_text())
    try:
        deadline = time.monotonic() + 10
        while _alive(escaped) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(escaped), "a process the model started outlived the trace"
    finally:
        if _alive(escaped):
            os.kill(escaped, 9)


# ---- .gitignore that git cannot apply: said, not silently dropped ------------------------------------------------


def test_a_fifo_gitignore_is_one_warning_not_a_stall(tmp_path):
    import time

    repo = _committed_repo(tmp_path)
    (repo / "sub").mkdir()
    (repo / "sub" / "m.py").write_text(GOOD)
    os.mkfifo(repo / "sub" / ".gitignore")  # git opens it and waits for a writer: 60 s, then nothing ignored
    started = time.monotonic()
    done = portcheck("scan", "--isolated", "--no-cache", ".", cwd=repo, timeout=120)
    assert time.monotonic() - started < 30, "the scan waited on the FIFO"
    assert done.returncode == 1 and b"PC101" in done.stdout, done.stderr
    assert b".gitignore not applied" in done.stderr and b"not a regular file" in done.stderr


def test_a_repository_git_refuses_is_one_warning(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the repository to another user")
    repo = _committed_repo(tmp_path)
    (repo / ".gitignore").write_text("generated.py\n")
    (repo / "generated.py").write_text(GOOD)
    for directory, dirs, files in os.walk(repo):
        for name in [*dirs, *files, "."]:
            os.lchown(os.path.join(directory, name), 65534, 65534)
    env = {**os.environ, "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}  # no safe.directory from elsewhere
    done = portcheck("scan", "--isolated", "--no-cache", ".", cwd=repo, env=env)
    assert b"git refused" in done.stderr and b".gitignore not applied" in done.stderr, done.stderr


@pytest.mark.parametrize("terms", [7_000, 9_990])
def test_chains_up_to_the_limit_are_analysed(tmp_path, terms):
    """README: chains up to 10,000 links are analysed; 7,000 to 9,999 were an error entry (the walks recursed past
    Python's limit on the caller's stack)."""
    (tmp_path / "chain.py").write_text("import torch\ny = " + " and ".join(["a"] * terms) + " and x.cuda()\n")
    done = portcheck("scan", "--isolated", "--no-cache", "--format", "json", "chain.py", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert report["errors"] == [] and [f["code"] for f in report["findings"]] == ["PC101"], done.stderr


def test_trace_goes_on_past_a_cache_that_came_with_the_files(tmp_path):
    """A `.portcheck_cache` portcheck did not make here is not trusted: `trace` runs without it, as `scan` does,
    instead of an internal error."""
    import shutil

    from tests.conftest import ROOT, run_portcheck

    shutil.copy(ROOT / "fixtures" / "models" / "clean_mlp.py", tmp_path / "model.py")
    (tmp_path / "pyproject.toml").write_text("[tool.portcheck]\n")  # the project root: where the cache would be
    (tmp_path / ".portcheck_cache" / "v1").mkdir(parents=True)
    done = run_portcheck("trace", "model.py:build", "--format", "json", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert "internal error" not in done.stderr
