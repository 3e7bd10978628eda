"""Hostile files, output paths, repositories and models (issue 21): no crash, no hang, nothing from the scanned tree
run, nothing replaced that must not be. Each case failed before the change it names; the README's "What bad input
gets" table has a row per class."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = "import torch\n\nx = torch.zeros(3).cuda()\n"


def portcheck(*args: str, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
              stack: int | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    def limit_stack() -> None:
        assert stack is not None
        resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))

    return subprocess.run([sys.executable, "-m", "portcheck", *args], cwd=cwd, capture_output=True, input=stdin,
                          timeout=timeout, env=env, preexec_fn=limit_stack if stack else None)


def report_of(done: subprocess.CompletedProcess) -> dict:
    assert b"Traceback" not in done.stderr and done.returncode >= 0, done.stderr.decode()
    return json.loads(done.stdout)


def errors_of(report: dict) -> dict[str, str]:
    return {e["path"]: e["message"] for e in report["errors"]}


def chain(terms: int, operator: str = "and") -> str:
    return "y = " + f" {operator} ".join(["a"] * terms) + f" {operator} b\n"


# ---- libcst's native recursion ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nested_tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nested")
    (root / "good.py").write_text(GOOD)
    (root / "and_10000.py").write_text(chain(10_000))  # 60 KB: overflowed an 8 MiB stack (SIGSEGV)
    (root / "or_60000.py").write_text(chain(60_000, "or"))  # overflows even the parse thread's stack
    (root / "dotted_import.py").write_text("import " + ".".join(["a"] * 20_000) + "\n")  # flat in ast
    # nested chains add up along a path: 7,000 `or` links then 7,000 `and` links inside the last operand
    (root / "nested.py").write_text("y = " + " or ".join(["a"] * 7_000) + " or (" + chain(7_000)[4:-1] + ")\n")
    return root


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_chains_libcst_would_crash_on_are_error_entries_and_the_rest_survives(nested_tree, jobs):
    done = portcheck("scan", "--isolated", "--no-cache", "--format", "json", "-j", jobs, ".", cwd=nested_tree)
    report = report_of(done)
    assert done.returncode == 1
    assert [f["path"] for f in report["findings"]] == ["good.py"]
    errors = errors_of(report)
    for name in ("or_60000.py", "dotted_import.py", "nested.py"):
        assert errors[name].startswith("too deeply nested for the parser: "), errors
        assert "the limit is 10,000" in errors[name]
    assert "and_10000.py" not in errors or "too deeply nested" in errors["and_10000.py"]


def test_the_parse_does_not_depend_on_the_callers_stack_size(nested_tree, tmp_path):
    """A 1 MiB `ulimit -s` overflowed at about 900 `and` terms on the main thread; the parse has its own stack."""
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "chain.py").write_text("import torch\n" + chain(5_000) + "z = torch.zeros(1).cuda()\n")
    done = portcheck("scan", "--isolated", "--no-cache", "--format", "json", "-j", "1", ".", cwd=tmp_path,
                     stack=2**20)
    report = report_of(done)
    assert {f["path"] for f in report["findings"]} >= {"good.py"}
    assert all("deeply nested" in m for m in errors_of(report).values())


@pytest.mark.parametrize("mode", ["--diff", "--fix"])
def test_fix_and_diff_go_on_past_a_file_too_deep_to_fix(tmp_path, mode):
    (tmp_path / "a_good.py").write_text(GOOD)
    # compiles and parses, but the fix's Python side recurses too deep on it: that file's error entry only
    (tmp_path / "b_deep.py").write_text("import torch\nx = torch.zeros(3).cuda()\n" + chain(9_000))
    (tmp_path / "c_crash.py").write_text(chain(60_000))
    (tmp_path / "d_good.py").write_text(GOOD)
    done = portcheck("scan", "--isolated", "--no-cache", mode, ".", cwd=tmp_path)
    assert b"Traceback" not in done.stderr and done.returncode == 1, done.stderr.decode()
    said = (done.stdout + done.stderr).decode()
    assert "b_deep.py: error: too deeply nested" in said and "c_crash.py:1: error: too deeply nested" in said
    assert "2 fixed, 0 remaining." in said or "2 to fix, 0 remaining." in said
    if mode == "--fix":
        assert "cuda" not in (tmp_path / "d_good.py").read_text()


def test_fix_from_stdin_too_deep_is_an_error_entry_and_the_text_comes_back(tmp_path):
    source = ("import torch\nx = torch.zeros(3).cuda()\n" + chain(9_000)).encode()
    done = portcheck("scan", "--isolated", "--fix", "-", cwd=tmp_path, stdin=source)
    assert b"Traceback" not in done.stderr and done.returncode == 1
    assert done.stdout == source and b"-: error: too deeply nested" in done.stderr


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})


def test_review_and_the_pre_commit_hook_survive_a_crashing_file(tmp_path):
    _git("init", "-q", "-b", "main", cwd=tmp_path)
    (tmp_path / "base.py").write_text("x = 1\n")
    _git("add", ".", cwd=tmp_path)
    _git("commit", "-q", "-m", "base", cwd=tmp_path)
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "crash.py").write_text(chain(60_000))
    _git("add", ".", cwd=tmp_path)
    done = portcheck("review", "--isolated", "--base", "main", "--format", "json", cwd=tmp_path)
    report = report_of(done)
    assert [f["path"] for f in report["findings"]] == ["good.py"]
    assert errors_of(report)["crash.py"].startswith("too deeply nested for the parser")
    # pre-commit passes the staged files explicitly, with --force-exclude (.pre-commit-hooks.yaml)
    hook = portcheck("scan", "--isolated", "--force-exclude", "--format", "json", "good.py", "crash.py",
                     cwd=tmp_path)
    assert [f["path"] for f in report_of(hook)["findings"]] == ["good.py"]
