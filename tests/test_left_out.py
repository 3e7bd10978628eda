"""What a scan leaves out, and why: excluded folders, tests, build output, files git ignores, files over the size
limit. `scan --show-files` lists them (as `ruff check --show-files` lists what it checks), the summary line counts
them, the JSON report holds them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_command

CODE = "import torch\nx = torch.zeros(3).cuda()\n"


def portcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_command(args, cwd=cwd, timeout=120)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ("pkg/a.py", "tests/test_a.py", "build/b.py", ".venv/lib/c.py", "dist/__init__.py",
                 "vendor/v.py", ".git/hooks/h.py", "pkg/__pycache__/x.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(CODE)
    return tmp_path


def test_show_files_lists_what_is_read_and_what_is_left_out_with_why(tree: Path) -> None:
    (tree / "pkg" / "big.py").write_text("x = 1\n" * 200_000)  # 1.1 MB
    done = portcheck("scan", "--isolated", "--show-files", "--max-file-size", "1", "--extend-exclude", "vendor", ".",
                     cwd=tree)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        ".venv/  (left out: excluded, .venv)",
        "build/  (left out: build output, build)",
        "dist/__init__.py",  # a dist/ that is a package is source, not build output
        "pkg/a.py",
        "pkg/big.py  (left out: over the size limit, 1.1 MB, over 1 MB)",
        "tests/  (left out: tests, tests = \"exclude\")",
        "vendor/  (left out: excluded, vendor)",
    ]  # .git/ and __pycache__/ never hold source: not worth a line
    assert not (tree / ".portcheck_cache").exists()  # nothing was analysed


def test_the_summary_line_and_the_json_count_what_was_left_out(tree: Path) -> None:
    done = portcheck("scan", "--isolated", "--no-cache", ".", cwd=tree)
    assert done.stdout.splitlines()[-1].endswith(
        "3 files left out (1 build output, 1 excluded, 1 tests): --show-files lists them."), done.stdout
    report = json.loads(portcheck("scan", "--isolated", "--no-cache", "--format", "json", ".", cwd=tree).stdout)
    assert [(item["path"], item["reason"]) for item in report["left_out"]] == [
        (".venv/", "excluded"), ("build/", "build output"), ("tests/", "tests")]
    included = portcheck("scan", "--isolated", "--no-cache", "--tests", "include", "--format", "json", ".", cwd=tree)
    assert "tests/" not in [item["path"] for item in json.loads(included.stdout)["left_out"]]


def test_files_git_ignores_and_files_excluded_by_force_exclude_are_named(tmp_path: Path) -> None:
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "made.py").write_text(CODE)
    (tmp_path / "keep.py").write_text(CODE)
    (tmp_path / ".gitignore").write_text("gen/\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    done = portcheck("scan", "--isolated", "--show-files", ".", cwd=tmp_path)
    assert done.stdout.splitlines() == ["gen/made.py  (left out: ignored by git)", "keep.py"], done.stdout
    forced = portcheck("scan", "--isolated", "--show-files", "--force-exclude", "--extend-exclude", "keep.py",
                       "keep.py", cwd=tmp_path)
    assert forced.stdout == "keep.py  (left out: excluded, keep.py)\n", forced.stdout


def test_nothing_left_out_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(CODE)
    done = portcheck("scan", "--isolated", "--no-cache", ".", cwd=tmp_path)
    assert "left out" not in done.stdout
    assert "left_out" not in json.loads(portcheck("scan", "--isolated", "--no-cache", "--format", "json", ".",
                                                  cwd=tmp_path).stdout)


def test_show_files_on_stdin_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "portcheck", "scan", "--show-files", "-"], cwd=tmp_path, input=CODE,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert "'-' (stdin) is not one" in done.stderr
