"""Snapshot tests of everything portcheck prints: every `scan` format, `--statistics`, `--diff`, `rules`, `rule`,
`advise` and `review`'s own formats, stored by syrupy in tests/__snapshots__/test_snapshots.ambr so that a change
to any output shows up as a diff to review.

The inputs are fixed copies of fixture files in a temporary directory that is the working directory, so paths are
relative; what still varies from run to run (portcheck's version, the temporary directory, commit hashes) is
replaced by a placeholder before the comparison. After an intended output change:

    python -m pytest tests/test_snapshots.py --snapshot-update

and review the diff of the .ambr file with the change.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from portcheck import __version__
from portcheck.cli import main
from portcheck.config import FORMATS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# train_gpu.py: errors and warnings, safe and unsafe fixes; compile.py (in a subdirectory): errors, warnings and
# infos, safe fixes whose edits overlap.
INPUTS = {
    "train_gpu.py": FIXTURES / "examples" / "train_gpu.py",
    "compile/compile.py": FIXTURES / "static" / "compile" / "compile.py",
}
SCAN = ("scan", "--isolated", "--no-cache")
ADVISE = ("advise", "--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32", "--seq-len", "4096",
          "--target", "inf2", "--isolated")
VERSION = re.compile(rf"(?<![\w.]){re.escape(__version__)}(?![\w.])")
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.com",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
}


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch, tmp_path):
    """No colour, a fixed width, no configuration or cache outside the test's directory."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("PORTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def inputs(tmp_path, monkeypatch) -> Path:
    """The fixed input files in a fresh directory, which becomes the working directory."""
    work = tmp_path / "work"
    for name, source in INPUTS.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, work / name)
    monkeypatch.chdir(work)
    return work


def normalise(text: str, *directories: Path) -> str:
    """Placeholders for what differs between runs: the temporary directories and portcheck's version."""
    for directory in directories:
        for form in {directory, directory.resolve()}:
            text = text.replace(form.as_uri(), "file://<tmp>").replace(str(form), "<tmp>")
    return VERSION.sub("<version>", text)


def run(capsys, *args: str) -> tuple[int, str, str]:
    """portcheck's CLI in this process: its exit code, stdout and stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("output_format", FORMATS)
def test_scan(output_format, inputs, capsys, snapshot):
    code, out, err = run(capsys, *SCAN, "--format", output_format)
    assert (code, err) == (1, "")
    if output_format == "sarif":
        out = _trim_sarif(out)
    assert normalise(out, inputs) == snapshot


def _trim_sarif(out: str) -> str:
    """SARIF carries every rule's documentation twice (help text and markdown): keep it for the rules that fired
    (`portcheck rule` has its own snapshots) and a placeholder for the rest, after checking that the output is
    exactly the indented JSON dump that is re-made here."""
    log = json.loads(out)
    assert json.dumps(log, indent=2, ensure_ascii=False) + "\n" == out
    for run_ in log["runs"]:
        fired = {r["ruleId"] for r in run_["results"]}
        for rule in run_["tool"]["driver"]["rules"]:
            if rule["id"] not in fired:
                assert rule["help"]["text"] == rule["help"]["markdown"] and rule["help"]["text"]
                placeholder = f"<portcheck rule {rule['id']}>"
                rule["help"] = {"text": placeholder, "markdown": placeholder}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def test_scan_statistics(inputs, capsys, snapshot):
    code, out, err = run(capsys, *SCAN, "--statistics")
    assert (code, err) == (1, "")
    assert normalise(out, inputs) == snapshot


def test_scan_diff(inputs, capsys, snapshot):
    before = {name: (inputs / name).read_bytes() for name in INPUTS}
    code, out, err = run(capsys, *SCAN, "--diff")
    assert code == 1
    assert normalise(out, inputs) == snapshot(name="stdout")
    assert normalise(err, inputs) == snapshot(name="stderr")
    assert {name: (inputs / name).read_bytes() for name in INPUTS} == before  # --diff writes nothing


@pytest.mark.parametrize("output_format", ["table", "json"])
def test_rules(output_format, inputs, capsys, snapshot):
    code, out, err = run(capsys, "rules", "--format", output_format)
    assert (code, err) == (0, "")
    assert normalise(out, inputs) == snapshot


# A static rule with a fix, a rule only `portcheck trace` reports, and one only `portcheck advise` reports.
@pytest.mark.parametrize("code", ["PC101", "PC316", "PC801"])
def test_rule(code, inputs, capsys, snapshot):
    exit_code, out, err = run(capsys, "rule", code)
    assert (exit_code, err) == (0, "")
    assert normalise(out, inputs) == snapshot


@pytest.mark.parametrize("output_format", ["table", "json"])
def test_advise(output_format, inputs, capsys, snapshot):
    code, out, err = run(capsys, *ADVISE, "--format", output_format)
    assert (code, err) == (1, "")  # PC801: a 7B model needs two NeuronCore-v2 cores
    assert normalise(out, inputs) == snapshot


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture
def change(tmp_path, monkeypatch) -> tuple[Path, str, str]:
    """A repository whose second commit edits a line of train.py (one of its unchanged lines has findings too)
    and adds compile/compile.py: the repository, the base commit and the head commit."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    train = INPUTS["train_gpu.py"].read_text()
    (repo / "train.py").write_text(train)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "base", cwd=repo)
    base = git("rev-parse", "HEAD", cwd=repo)
    edited = train.replace("model = TinyLM().cuda()", "model = TinyLM(hidden=128).cuda()")
    assert edited != train
    (repo / "train.py").write_text(edited)
    (repo / "compile").mkdir()
    shutil.copyfile(INPUTS["compile/compile.py"], repo / "compile" / "compile.py")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "head", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo)
    monkeypatch.chdir(repo)
    return repo, base, head


@pytest.mark.parametrize("output_format", ["markdown", "github-review"])
def test_review(output_format, change, capsys, snapshot):
    repo, base, head = change
    code, out, err = run(capsys, "review", "--base", base, "--head", head, "--format", output_format, "--isolated")
    assert (code, err) == (1, "")
    if output_format == "github-review":
        assert json.loads(out)["commit_id"] == head
    out = out.replace(head, "<head-sha>").replace(base, "<base-sha>")
    assert normalise(out, repo) == snapshot
