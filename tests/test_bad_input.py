"""Bad scan input (issue 9): every case ends as findings for the good files and an `errors` entry with a one-line
reason for the bad one, the right exit code, and never a traceback."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_command

GOOD = "import torch\n\nx = torch.zeros(3).cuda()\n"


def scan(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return run_command(["scan", "--format", "json", *args], cwd=cwd, input=stdin, text=False, timeout=300)


def report_of(done: subprocess.CompletedProcess) -> dict:
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return json.loads(done.stdout)


CASES = {
    # name: (file bytes, expected: "finding" on the cuda line, "clean", or an error message fragment)
    "syntax-error.py": (b"def f(:\n    pass\n", "syntax error"),
    "python2.py": (b"import torch\nprint 'hello'\nx = torch.zeros(3).cuda()\n", "syntax error"),
    "latin1-no-cookie.py": (b"s = '\xe9'\nx = torch.zeros(3).cuda()\n", "utf-8"),
    "latin1-cookie.py": (b"# -*- coding: latin-1 -*-\ns = '\xe9'\nimport torch\nx = torch.zeros(3).cuda()\n",
                         "finding"),
    "bom.py": (b"\xef\xbb\xbfimport torch\nx = torch.zeros(3).cuda()\n", "finding"),
    "crlf.py": (b"import torch\r\n\r\nx = torch.zeros(3).cuda()\r\n", "finding"),
    "mixed-endings.py": (b"import torch\r\n\nx = torch.zeros(3).cuda()\r\n", "finding"),
    "tabs.py": (b"import torch\n\ndef f():\n\treturn torch.zeros(3).cuda()\n", "finding"),
    "nul-bytes.py": (b"import torch\x00\nx = 1\n", "binary"),
    "binary.py": (bytes(range(256)) * 4, "binary"),
    "empty.py": (b"", "clean"),
    "only-comments.py": (b"# x = torch.zeros(3).cuda()\n'''torch.zeros(3).cuda()'''\n", "clean"),
    "deep-nesting.py": (b"x = " + b"(" * 3000 + b"1" + b")" * 3000 + b"\n", "nested"),
    "long-expression.py": (b"x = " + b"+".join([b"a"] * 200_000) + b"\n", "nested"),
}


@pytest.fixture(scope="module")
def scanned(tmp_path_factory) -> tuple[Path, dict, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("bad")
    (root / "good.py").write_text(GOOD)
    for name, (data, _) in CASES.items():
        (root / name).write_bytes(data)
    done = scan(".", cwd=root)
    return root, report_of(done), done


@pytest.mark.xdist_group("bad-input-scanned")  # one worker, one after another: the module's one scan
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_bad_file_is_one_error_entry_and_the_rest_is_analysed(scanned, name):
    _, report, done = scanned
    assert done.returncode == 1
    expected = CASES[name][1]
    errors = {e["path"]: e["message"] for e in report["errors"]}
    findings = {f["path"] for f in report["findings"]}
    assert "good.py" in findings
    if expected == "finding":
        assert name in findings and name not in errors
    elif expected == "clean":
        assert name not in findings and name not in errors
    else:
        assert name in errors and expected in errors[name], errors.get(name)
        assert "\n" not in errors[name]


def test_symlink_loops_unreadable_files_and_odd_names(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "up").symlink_to(tmp_path)  # a directory loop
    (tmp_path / "with space.py").write_text(GOOD)
    (tmp_path / "naïve_模型.py").write_text(GOOD)
    locked = tmp_path / "locked.py"
    locked.write_text(GOOD)
    locked.chmod(0)
    try:
        done = scan(".", cwd=tmp_path)
        report = report_of(done)
    finally:
        locked.chmod(0o644)
    assert done.returncode == 1
    assert {f["path"] for f in report["findings"]} >= {"with space.py", "naïve_模型.py"}
    if os.geteuid() != 0:  # root reads any file
        assert any(e["path"] == "locked.py" and "cannot read" in e["message"] for e in report["errors"])


def test_a_file_deleted_while_the_scan_runs(tmp_path):
    from portcheck.static.engine import FileJob, analyse_file

    gone = tmp_path / "gone.py"
    job = FileJob(path="gone.py", chip="trn2", stack="native", enabled=frozenset({"PC101"}), location=str(gone))
    result = analyse_file(job)  # listed, then deleted before it was read
    (error,) = result.errors
    assert error.path == "gone.py" and error.message.startswith("cannot read")


def test_stdin_with_bad_bytes(tmp_path):
    done = scan("-", "--stdin-filename", "piped.py", cwd=tmp_path, stdin=b"\xff\xfe x = 1\n")
    report = report_of(done)
    assert done.returncode == 1 and report["errors"][0]["path"] == "piped.py"


def test_fix_killed_at_random_moments_leaves_every_file_wholly_old_or_wholly_new(tmp_path):
    """SIGKILL a `--fix` run over many files at random moments, again and again: after each kill every file is
    the original or the fixed text, byte for byte, and a last run finishes the job."""
    source = (Path(__file__).resolve().parent.parent / "fixtures" / "fix" / "PC101" / "method.in.py").read_bytes()
    originals = {f"m{i:03}.py": source + f"\n# file {i}\n".encode() + b"x = 1\n" * (i % 7) for i in range(120)}
    expected = tmp_path / "expected"
    work = tmp_path / "work"
    for directory in (expected, work):
        directory.mkdir()
        for name, data in originals.items():
            (directory / name).write_bytes(data)
    command = [sys.executable, "-m", "portcheck", "scan", "--fix", "--no-cache", "--exit-zero", "-j", "2", "."]
    subprocess.run(command, cwd=expected, capture_output=True, timeout=300, check=True)
    fixed = {name: (expected / name).read_bytes() for name in originals}
    assert all(fixed[name] != originals[name] for name in originals)

    rng = random.Random(20261203)
    kills = 0
    for _ in range(10):
        process = subprocess.Popen(command, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        time.sleep(rng.uniform(0.2, 2.5))
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # the scan and its workers, mid-write or not
            kills += 1
        process.wait()
        for name in originals:
            assert (work / name).read_bytes() in (originals[name], fixed[name]), f"{name} is half-written"
        left = [p.name for p in work.iterdir() if p.name not in originals]
        # A killed process cannot remove its temporary file: only the writer's own `.<name>.<random>.tmp` may stay.
        assert all(n.startswith(".m") and n.endswith(".tmp") for n in left), left
        for name in left:
            (work / name).unlink()
    assert kills >= 3  # most rounds were killed mid-run, not after the scan had finished
    subprocess.run(command, cwd=work, capture_output=True, timeout=300, check=True)
    assert {name: (work / name).read_bytes() for name in originals} == fixed


def _generated(size: int) -> str:
    """Code as an exporter writes it: thousands of small layer functions and constant tables."""
    parts = ['"""Generated: layer definitions exported from a training framework."""\nimport torch\n\n']
    total, index = len(parts[0]), 0
    while total < size:
        table = ", ".join(str((index * 7 + k) % 1000) for k in range(24))
        block = (f"def layer_{index}(x, w):\n    # layer {index}\n    y = torch.relu(x @ w) + {index}\n"
                 f"    return y.cuda() if {index} % 2 else y.float()\n\n\nTABLE_{index} = [{table}]\n\n")
        parts.append(block)
        total += len(block)
        index += 1
    return "".join(parts)


def test_a_file_over_the_size_limit_is_an_error_entry_and_the_limit_is_configurable(tmp_path):
    (tmp_path / "generated.py").write_text(_generated(10_000_000))
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "small.py").write_text(_generated(20_000))
    for _ in range(2):  # the second run has a cache: a too-large file is still reported, never cached
        done = scan("--max-file-size", "5", ".", cwd=tmp_path)
        report = report_of(done)
        assert done.returncode == 1
        (error,) = report["errors"]
        assert error["path"] == "generated.py"
        assert error["message"].startswith("too large to analyse: 9.5 MB, over the 5 MB limit")
        assert "max-file-size" in error["message"]
        assert [f["line"] for f in report["findings"] if f["path"] == "good.py"] == [3]
        assert len([f for f in report["findings"] if f["path"] == "small.py"]) > 50
    tight = report_of(scan("--max-file-size", "0.01", "good.py", "small.py", cwd=tmp_path))
    assert [e["path"] for e in tight["errors"]] == ["small.py"]
    (tmp_path / "pyproject.toml").write_text("[tool.portcheck]\nmax-file-size = 0.01\n")
    assert [e["path"] for e in report_of(scan("good.py", "small.py", cwd=tmp_path))["errors"]] == ["small.py"]
    (tmp_path / "pyproject.toml").write_text("[tool.portcheck]\nmax-file-size = true\n")
    wrong = scan("good.py", cwd=tmp_path)
    assert wrong.returncode == 2 and b"pyproject.toml:2: 'max-file-size' must be a positive number" in wrong.stderr


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc (Linux)")
def test_killing_a_scan_ends_its_workers_too(tmp_path):
    for index in range(6):
        (tmp_path / f"big{index}.py").write_text(_generated(1_500_000))
    process = subprocess.Popen([sys.executable, "-m", "portcheck", "scan", "--no-cache", "-j", "2", "."],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while len(workers) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        workers = _children(process.pid)
    assert len(workers) >= 2, "the scan never started its workers"
    process.kill()  # the scan alone, as a CI runner or an editor would stop it
    process.wait()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], "workers outlived the scan"
