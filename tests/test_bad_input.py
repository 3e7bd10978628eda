"""Bad scan input (issue 9): every case ends as findings for the good files and an `errors` entry with a one-line
reason for the bad one, the right exit code, and never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = "import torch\n\nx = torch.zeros(3).cuda()\n"


def scan(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "portcheck", "scan", "--format", "json", *args], cwd=cwd,
                          capture_output=True, input=stdin, timeout=300)


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
