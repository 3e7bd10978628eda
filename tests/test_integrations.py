"""Where portcheck runs: SARIF checked against the SARIF 2.1.0 schema (tests/sarif-schema-2.1.0.json, the OASIS
schema: oasis-tcs/sarif-spec, sarif-2.1/schema/sarif-schema-2.1.0.json), GitHub workflow commands, reviewdog's
rdjson, baselines, and the pre-commit hook run by the real `pre-commit` tool on a temporary git repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_command

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).with_name("sarif-schema-2.1.0.json")

BAD = """import torch

x = torch.zeros(3).cuda()
y = torch.ones(3).cuda()  # noqa: PC101
values = torch.nonzero(x)
"""


def portcheck(*args: str, cwd: Path, stdin: str | None = None, env: dict | None = None):
    return run_command(args, cwd=cwd, input=stdin, env=env, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text(BAD)
    (tmp_path / "models" / "clean.py").write_text("import torch\n\nx = torch.zeros(3)\n")
    return tmp_path


def test_sarif_validates_and_carries_rules_fixes_fingerprints_and_suppressions(project):
    jsonschema = pytest.importorskip("jsonschema")
    done = portcheck("scan", ".", "--format", "sarif", "--target", "inf2", cwd=project)
    assert done.returncode == 1, done.stderr
    log = json.loads(done.stdout)
    jsonschema.validate(log, json.loads(SCHEMA.read_text()))
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} >= {"PC101", "PC201", "PC801"}
    for rule in rules:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["help"]["markdown"].startswith(f"# {rule['id']}")
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    assert run["automationDetails"]["id"] == "portcheck/inf2-xla/"
    by_line = {r["locations"][0]["physicalLocation"]["region"]["startLine"]: r for r in run["results"]}
    cuda = by_line[3]
    assert cuda["ruleId"] == "PC101" and cuda["level"] == "error"
    assert rules[cuda["ruleIndex"]]["id"] == "PC101"
    assert cuda["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "models/net.py",
                                                                             "uriBaseId": "SRCROOT"}
    assert cuda["partialFingerprints"]["portcheck/v1"]
    (change,) = cuda["fixes"][0]["artifactChanges"]
    import_edit, call_edit = change["replacements"]  # the xla fix adds `import torch_xla` and rewrites the call
    assert import_edit["insertedContent"]["text"] == "import torch_xla\n"
    assert import_edit["deletedRegion"] == {"startLine": 2, "startColumn": 1, "endLine": 2, "endColumn": 1}
    assert call_edit["insertedContent"]["text"] == "torch.zeros(3).to(torch_xla.device())"
    assert call_edit["deletedRegion"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 26}
    assert by_line[4]["suppressions"] == [{"kind": "inSource", "justification": "a portcheck / noqa comment"}]
    assert "suppressions" not in by_line[5] and by_line[5]["ruleId"] == "PC201"


def test_two_targets_upload_side_by_side(project):
    ids = {json.loads(portcheck("scan", ".", "--format", "sarif", "--target", t, cwd=project).stdout)["runs"][0]
           ["automationDetails"]["id"] for t in ("inf2", "trn2")}
    assert ids == {"portcheck/inf2-xla/", "portcheck/trn2-native/"}


def test_github_workflow_commands_escape_and_say_what_is_not_shown(tmp_path):
    lines = ["import torch"] + [f"x{i} = torch.zeros(3).cuda()" for i in range(12)]
    (tmp_path / "many, files: here.py").write_text("\n".join(lines) + "\n")
    done = portcheck("scan", ".", "--format", "github", cwd=tmp_path)
    assert done.returncode == 1
    commands = done.stdout.splitlines()
    # first, so it is shown: the summary of what GitHub's 10-a-kind limit hides
    assert commands[0] == ("::warning title=portcheck::GitHub shows 10 annotations of each kind a step: "
                           "2 of 12 errors are only in this log (upload --format sarif to code scanning for all "
                           "of them)")
    errors = [c for c in commands if c.startswith("::error ")]
    assert len(errors) == 12
    first = errors[0]
    # properties escape `,` and `:`; the title names the rule
    assert first.startswith("::error file=many%2C files%3A here.py,line=2,col=")
    assert ",endLine=2,endColumn=" in first and ",title=PC101 cuda-tensor-placement::" in first
    multi = tmp_path / "multi.py"
    multi.write_text("import torch\n\nx = torch.zeros(\n    3,\n).cuda()\n")
    (line,) = portcheck("scan", "multi.py", "--format", "github", cwd=tmp_path).stdout.splitlines()
    assert line.startswith("::error file=multi.py,line=3,endLine=5,title=PC101")  # no columns across lines


def test_a_silenced_finding_and_its_live_twin_have_different_fingerprints(tmp_path):
    (tmp_path / "twins.py").write_text("import torch\n\n\ndef f(t):\n    return t.cuda()\n\n\n"
                                       "def g(t):\n    return t.cuda()  # noqa: PC101\n")
    log = json.loads(portcheck("scan", ".", "--format", "sarif", cwd=tmp_path).stdout)
    results = log["runs"][0]["results"]
    assert len(results) == 2 and sum("suppressions" in r for r in results) == 1
    assert len({r["partialFingerprints"]["portcheck/v1"] for r in results}) == 2


def test_github_data_escapes_newlines_and_percent():
    from portcheck.report.github import _data, _property

    assert _data("100% done\nnext\r") == "100%25 done%0Anext%0D"
    assert _property("a:b,c") == "a%3Ab%2Cc"


def test_rdjson_is_reviewdogs_diagnostic_result_with_suggestions(project):
    done = portcheck("scan", ".", "--format", "rdjson", cwd=project)
    report = json.loads(done.stdout)
    assert report["source"]["name"] == "portcheck"
    cuda = next(d for d in report["diagnostics"] if d["code"]["value"] == "PC101")
    assert cuda["location"]["path"] == "models/net.py"
    assert cuda["location"]["range"]["start"] == {"line": 3, "column": 5}
    assert cuda["severity"] == "ERROR"
    (suggestion,) = cuda["suggestions"]  # one, over the finding's whole lines, as reviewdog wants
    assert suggestion == {"range": {"start": {"line": 3, "column": 1}, "end": {"line": 4, "column": 1}},
                          "text": 'x = torch.zeros(3).to("neuron")\n'}
    inf2 = json.loads(portcheck("scan", ".", "--format", "rdjson", "--target", "inf2", cwd=project).stdout)
    cuda_xla = next(d for d in inf2["diagnostics"] if d["code"]["value"] == "PC101")
    assert "suggestions" not in cuda_xla  # its fix also adds `import torch_xla` elsewhere: not one suggestion
    assert all(set(d) >= {"message", "location", "severity"} for d in report["diagnostics"])


def test_rdjson_columns_count_utf8_bytes(tmp_path):
    (tmp_path / "m.py").write_text('import torch\n\nnote = "é"; x = torch.zeros(3).cuda()\n')
    report = json.loads(portcheck("scan", ".", "--format", "rdjson", cwd=tmp_path).stdout)
    (cuda,) = [d for d in report["diagnostics"] if d["code"]["value"] == "PC101"]
    # `torch.zeros(3).cuda()` starts at character 17 but byte 18: "é" is two bytes in UTF-8
    assert cuda["location"]["range"]["start"] == {"line": 3, "column": 18}
    sarif = json.loads(portcheck("scan", ".", "--format", "sarif", cwd=tmp_path).stdout)
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "PC101"]
    assert result["locations"][0]["physicalLocation"]["region"]["startColumn"] == 17  # SARIF: code points


def test_a_baseline_reports_only_new_findings_and_survives_edits_above(project):
    written = portcheck("scan", ".", "--write-baseline", "baseline.json", cwd=project)
    assert written.returncode == 0 and "wrote 2 finding(s)" in written.stderr
    quiet = portcheck("scan", ".", "--baseline", "baseline.json", cwd=project)
    assert quiet.returncode == 0 and "2 baselined findings not shown" in quiet.stdout
    net = project / "models" / "net.py"
    net.write_text('"""Docstring added above."""\n\n' + BAD + "z = torch.ones(1).cuda()\n")
    new = portcheck("scan", ".", "--baseline", "baseline.json", "--format", "json", cwd=project)
    report = json.loads(new.stdout)
    assert new.returncode == 1
    assert [(f["code"], f["line"]) for f in report["findings"]] == [("PC101", 8)]
    assert report["summary"]["baselined"] == 2


def test_a_copy_added_above_a_baselined_finding_is_the_one_reported(tmp_path):
    body = "import torch\n\n\ndef f(t):\n    return t.cuda()\n"
    (tmp_path / "a.py").write_text(body)
    assert portcheck("scan", ".", "--write-baseline", "b.json", cwd=tmp_path).returncode == 0
    (tmp_path / "a.py").write_text("import torch\n\n\ndef g(t):\n    return t.cuda()\n" + body[12:])
    report = json.loads(portcheck("scan", ".", "--baseline", "b.json", "--format", "json", cwd=tmp_path).stdout)
    assert [f["line"] for f in report["findings"]] == [5]  # the new copy; the old one (now line 9) is known


@pytest.mark.parametrize("content, message", [("{not json", "not a portcheck baseline"),
                                               ('{"kind": "other"}', "not a portcheck baseline")])
def test_a_bad_baseline_is_one_line_and_exit_2(project, content, message):
    (project / "baseline.json").write_text(content)
    done = portcheck("scan", ".", "--baseline", "baseline.json", cwd=project)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    missing = portcheck("scan", ".", "--baseline", "nowhere.json", cwd=project)
    assert missing.returncode == 2 and "no such baseline file" in missing.stderr


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_pre_commit_hook_fails_on_findings_and_passes_once_fixed(tmp_path):
    pre_commit = Path(sys.executable).with_name("pre-commit")
    if not pre_commit.exists():
        pytest.skip("pre-commit is not installed (pip install -e '.[dev]')")
    head = git("rev-parse", "HEAD", cwd=ROOT).strip()
    if git("status", "--porcelain", "--", "portcheck", "rules", "pyproject.toml", ".pre-commit-hooks.yaml",
           cwd=ROOT).strip():
        pytest.skip("the hook installs the committed checkout: commit portcheck/ first")
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    git("config", "user.email", "dev@example.com", cwd=repo)
    git("config", "user.name", "dev", cwd=repo)
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {ROOT}\n  rev: {head}\n  hooks:\n  - id: portcheck\n")
    (repo / "train.py").write_text("import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    (repo / "notes.txt").write_text("torch.zeros(3).cuda() in a text file is not Python\n")
    git("add", ".", cwd=repo)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    failing = subprocess.run([str(pre_commit), "run", "--all-files"], cwd=repo, capture_output=True, text=True,
                             env=env, timeout=600)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "train.py:3:" in failing.stdout and "PC101" in failing.stdout and "notes.txt" not in failing.stdout
    (repo / "train.py").write_text('import torch\n\nmodel = torch.nn.Linear(2, 2).to("neuron")\n')
    passing = subprocess.run([str(pre_commit), "run", "--all-files"], cwd=repo, capture_output=True, text=True,
                             env=env, timeout=600)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "Passed" in passing.stdout
    # the opt-in fixing hook rewrites the file: pre-commit fails the run that changed it, passes the next
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {ROOT}\n  rev: {head}\n  hooks:\n  - id: portcheck-fix\n")
    (repo / "train.py").write_text("import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    fixing = subprocess.run([str(pre_commit), "run", "--all-files"], cwd=repo, capture_output=True, text=True,
                            env=env, timeout=600)
    assert fixing.returncode == 1 and "files were modified by this hook" in fixing.stdout
    assert (repo / "train.py").read_text() == 'import torch\n\nmodel = torch.nn.Linear(2, 2).to("neuron")\n'
    again = subprocess.run([str(pre_commit), "run", "--all-files"], cwd=repo, capture_output=True, text=True,
                           env=env, timeout=600)
    assert again.returncode == 0, again.stdout
    # the hook's environment has portcheck without torch
    venvs = list((tmp_path / "cache").glob("repo*/py_env-*/bin/python"))
    assert venvs
    probe = subprocess.run([str(venvs[0]), "-c", "import portcheck, importlib.util as u; "
                            "print(u.find_spec('torch') is None)"], capture_output=True, text=True)
    assert probe.stdout.strip() == "True"
