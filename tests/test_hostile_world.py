"""Hostile world, second round (issue 32): git configuration that names programs, symlinked fix targets, forged
caches, quadratic files, orphaned models. Each case failed before the change it names; the README's "What bad
input gets" table has a row per class."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = "import torch\n\nx = torch.zeros(3).cuda()\n"


def portcheck(*args: str, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "portcheck", *args], cwd=cwd, capture_output=True, input=stdin,
                          timeout=timeout, env=env)


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
