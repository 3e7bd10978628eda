"""Dependency files (requirements*.txt, pyproject.toml, environment.yml): discovered by a directory scan, read with
positions, bad ones reported as error entries, and the selection and suppression settings applied to them."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_command

from portcheck.knowledge import load
from portcheck.static.compile.environments import pinned_series, satisfiable
from portcheck.static.engine import analyse_text
from portcheck.static.manifests import kind, read

ALL = frozenset(load().rules)


def scan(*args: str, cwd: Path) -> tuple[dict, subprocess.CompletedProcess]:
    done = run_command(["scan", "--no-cache", "--format", "json", *args], cwd=cwd, text=False, timeout=300)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return json.loads(done.stdout), done


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("deps")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("ignored/\n")
    (root / "requirements.txt").write_text("numpy\ntorch==2.1.2\ntorch-neuronx==2.14.*\n")
    (root / "requirements").mkdir()
    (root / "requirements" / "serve.txt").write_text("torch-neuronx==2.14.*\ntorch-xla==2.9.0  # noqa: PC724\n")
    (root / "pyproject.toml").write_text('[project]\nname = "m"\nversion = "1"\ndependencies = [\n'
                                         '    "numpy",\n    "torch-neuronx==2.9.0.2.*",\n]\n')
    (root / "environment.yml").write_text("name: e\ndependencies:\n  - python=3.11\n  - pytorch=2.1\n"
                                          "  - pip:\n    - torch-neuronx==2.14.*\n")
    (root / "broken").mkdir()
    (root / "broken" / "pyproject.toml").write_text('[project]\ndependencies = ["torch"\n')
    (root / "broken" / "requirements.txt").write_bytes(b"torch\x00==2.1\n")
    (root / "ignored").mkdir()
    (root / "ignored" / "requirements.txt").write_text("torch==1.0\ntorch-neuronx==2.14.*\n")
    (root / "notes.txt").write_text("torch==1.0\n")  # not a dependency file
    return root


def test_a_directory_scan_reads_the_dependency_files_with_positions(project):
    report, done = scan("--isolated", ".", cwd=project)
    assert done.returncode == 1
    found = sorted((f["path"], f["line"], f["column"], f["code"]) for f in report["findings"])
    assert found == [
        ("environment.yml", 4, 5, "PC725"),
        ("pyproject.toml", 6, 6, "PC725"),
        ("requirements.txt", 2, 1, "PC725"),
    ]
    assert {e["path"]: e["line"] for e in report["errors"]} == {"broken/pyproject.toml": None,
                                                               "broken/requirements.txt": 1}
    assert all(len(e["message"].splitlines()) == 1 for e in report["errors"])
    assert report["summary"]["files"] == 6  # ignored/ is git-ignored, notes.txt is no dependency file
    requirement = next(f for f in report["findings"] if f["path"] == "requirements.txt")
    assert (requirement["end_line"], requirement["end_column"]) == (2, 13)
    assert requirement["severity"] == "error" and requirement["fingerprint"]


def test_selection_per_file_ignores_and_suppression_apply_to_dependency_files(project):
    report, _ = scan("--isolated", "--ignore", "PC725", ".", cwd=project)
    assert report["findings"] == []
    report, _ = scan("--isolated", "--select", "PC724", "requirements", cwd=project)
    assert report["findings"] == []  # its PC724 is suppressed by the noqa comment on that requirement line
    (project / "portcheck.toml").write_text('per-file-ignores = { "requirements.txt" = ["PC725"] }\n')
    try:
        report, _ = scan("requirements.txt", "environment.yml", cwd=project)
    finally:
        (project / "portcheck.toml").unlink()
    assert [f["path"] for f in report["findings"]] == ["environment.yml"]


def test_sarif_and_github_outputs_carry_the_dependency_file_position(project):
    done = subprocess.run([sys.executable, "-m", "portcheck", "scan", "--isolated", "--no-cache", "--format", "sarif",
                           "environment.yml"], cwd=project, capture_output=True, timeout=300)
    location = json.loads(done.stdout)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "environment.yml"
    assert location["region"]["startLine"] == 4 and location["region"]["startColumn"] == 5
    done = subprocess.run([sys.executable, "-m", "portcheck", "scan", "--isolated", "--no-cache", "--format", "github",
                           "requirements.txt"], cwd=project, capture_output=True, timeout=300)
    assert "file=requirements.txt,line=2,col=1" in done.stdout.decode()


def test_dependency_file_names():
    assert [kind(p) for p in ("requirements.txt", "a/requirements-dev.txt", "requirements/serve.txt",
                              "pyproject.toml", "env/environment.yaml", "notes.txt", "setup.py")] == [
        "requirements", "requirements", "requirements", "pyproject", "conda", None, None]


def test_requirements_lines_options_and_continuations():
    text = "-r base.txt\n--hash=sha256:00\ntorch[opt] >= 2.1, < 3 ; python_version > '3.9' \\\n  # c\n" \
           "pkg @ https://x/y.whl\ngit+https://x/y.git\n  torch-neuronx===2.14.3.1\n"
    found = [(r.name, r.spec, r.line, r.column) for r in read(text, "requirements.txt").requirements]
    assert found == [("torch", ">=2.1,<3", 3, 1), ("torch-neuronx", "===2.14.3.1", 7, 3)]


def test_conda_specs_read_as_pip_requirements():
    text = ("name: x\nchannels: [conda-forge]\ndependencies:\n  - conda-forge::pytorch=2.1.0=py3.11_0\n"
            "  - pytorch 2.13.*\n  - numpy>=1.26\n  - pip:\n      - torch-neuronx==2.14.*\nprefix: /opt\n"
            "  - ignored=1.0\n")
    found = [(r.name, r.spec, r.line, r.group) for r in read(text, "environment.yml").requirements]
    assert found == [("torch", "==2.1.0.*", 4, "dependencies"), ("torch", "==2.13.*", 5, "dependencies"),
                     ("numpy", ">=1.26", 6, "dependencies"), ("torch-neuronx", "==2.14.*", 8, "pip")]


@pytest.mark.parametrize(("spec", "series", "holds"), [
    (">=2.1", "2.13", True), ("<2.10", "2.13", False), ("==2.9.*", "2.9", True), ("==2.9.*", "2.13", False),
    ("~=2.13.0", "2.13", True), ("~=2.13.0", "2.14", False), ("!=2.13.*", "2.13", False), (">2.13", "2.13", True),
    ("==2.14.0+cpu", "2.14", True), ("===2.1", "2.13", False), ("<=2.13.0", "2.13", True), ("garbage", "2.13", True),
])
def test_specifiers(spec, series, holds):
    assert satisfiable(spec, series) is holds


def test_pinned_series():
    assert [pinned_series(s) for s in ("==2.14.3.*", "~=2.9.0", "===2.13.3.1", ">=2.1", "==2.9,<3", "")] == [
        "2.14", "2.9", "2.13", None, None, None]


@pytest.mark.parametrize("name", ["requirements.txt", "pyproject.toml", "environment.yml"])
def test_random_text_never_raises(name):
    rng = random.Random(18)
    pieces = ["torch", "==", "2.1", "[", "]", '"', "'", "#", " noqa: PC725", "\n", "  - ", "pip:", "dependencies:",
              "[project]", "dependencies = [", ",", "\\", ";", "=", "*", "~=", "\t", "é", "-r x"]
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        result = analyse_text(text, name, "trn2", "native", ALL)
        assert all(len(e.message.splitlines()) == 1 for e in result.errors)
