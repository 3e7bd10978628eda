"""`portcheck review`: real git repositories in temporary directories, and a real HTTP server on 127.0.0.1 standing
in for GitHub's API, checking every request it gets."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import FakeGitHub, run_command

TOKEN = "ghs_secret-token-123"

OLD = "import torch\n\nx = torch.zeros(3).cuda()\n"
MOVED = "import torch\n\n\ndef f(t):\n    return t.cuda()\n"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def portcheck(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_command(args, cwd=cwd, env=env, timeout=120)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "models").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=root)
    git("config", "user.email", "dev@example.com", cwd=root)
    git("config", "user.name", "dev", cwd=root)
    (root / "models" / "old.py").write_text(OLD)
    (root / "models" / "moved.py").write_text(MOVED)
    (root / "README.md").write_text("x.cuda() in prose\n")
    git("add", ".", cwd=root)
    git("commit", "-q", "-m", "base", cwd=root)
    git("checkout", "-q", "-b", "feature", cwd=root)
    (root / "models" / "old.py").write_text(OLD + "y = torch.ones(3).cuda()\n")  # one added line
    git("mv", "models/moved.py", "models/renamed.py", cwd=root)
    (root / "models" / "renamed.py").write_text(MOVED + "\n\ndef g(t):\n    return torch.nonzero(t)\n")
    (root / "models" / "new file.py").write_text("import torch\n\nz = torch.randn(2).cuda()\n")
    (root / "README.md").write_text("x.cuda() in prose, again\n")
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "feature", cwd=root)
    return root


def test_only_added_and_changed_lines_are_reported(repo):
    done = portcheck("review", "--base", "main", "--head", "feature", "--format", "json", cwd=repo)
    assert done.returncode == 1, done.stderr
    found = sorted((f["path"], f["line"], f["code"]) for f in json.loads(done.stdout)["findings"])
    assert found == [
        ("models/new file.py", 3, "PC101"),   # a new file: every line is new
        ("models/old.py", 4, "PC101"),         # the added line, not line 3's older finding
        ("models/renamed.py", 9, "PC201"),     # renamed: only the lines added under the new name
    ]


def test_the_working_tree_is_the_default_head(repo):
    (repo / "models" / "old.py").write_text(OLD + "w = torch.empty(1).cuda()\n")
    done = portcheck("review", "--base", "feature", "--format", "json", cwd=repo)
    assert [(f["path"], f["line"]) for f in json.loads(done.stdout)["findings"]] == [("models/old.py", 4)]
    clean = portcheck("review", "--base", "HEAD", cwd=repo)
    git("checkout", "--", ".", cwd=repo)
    assert portcheck("review", "--base", "HEAD", cwd=repo).returncode == 0
    assert clean.returncode == 1


def test_github_review_body_with_suggestions(repo):
    done = portcheck("review", "--base", "main", "--head", "feature", "--format", "github-review", cwd=repo)
    body = json.loads(done.stdout)
    assert body["commit_id"] == git("rev-parse", "feature", cwd=repo).strip()
    assert body["event"] == "COMMENT"
    assert "| category | errors | warnings | info |" in body["body"]
    assert "trn2 (native stack, Neuron SDK 2.34)" in body["body"]
    comments = {(c["path"], c["line"]): c for c in body["comments"]}
    assert set(comments) == {("models/new file.py", 3), ("models/old.py", 4), ("models/renamed.py", 9)}
    assert all(c["side"] == "RIGHT" for c in comments.values())
    old = comments[("models/old.py", 4)]["body"]
    assert old.startswith("**PC101** `cuda-tensor-placement`")
    assert old.endswith('```suggestion\ny = torch.ones(3).to("neuron")\n```')
    assert "```suggestion" not in comments[("models/renamed.py", 9)]["body"]  # no safe fix for nonzero


def test_markdown_for_one_comment(repo):
    done = portcheck("review", "--base", "main", "--head", "feature", "--format", "markdown", "--target", "inf2",
                     cwd=repo)
    assert done.stdout.startswith(
        "**portcheck**: 3 finding(s) on the changed lines for inf2 (xla stack, Neuron SDK 2.34).")
    assert "| `models/old.py:4` | PC101 `cuda-tensor-placement` | error |" in done.stdout


def test_a_bad_base_is_one_line(repo):
    done = portcheck("review", "--base", "no-such-branch", cwd=repo)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def env_for(api: str, tmp_path: Path, **extra) -> dict:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    env = {**os.environ, "GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "owner/repo", "GITHUB_API_URL": api,
           "GITHUB_EVENT_PATH": str(event)}
    env.update(extra)
    return env


def test_post_sends_the_review_github_expects(repo, github, tmp_path):
    done = portcheck("review", "--base", "main", "--head", "feature", "--post", cwd=repo,
                     env=env_for(github, tmp_path))
    assert done.returncode == 1, done.stderr
    assert "posted a review with 3 comment(s): https://github.example/o/r/pull/7#review-1" in done.stderr
    (request,) = FakeGitHub.requests
    assert request["path"] == "/repos/owner/repo/pulls/7/reviews"
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["accept"] == "application/vnd.github+json" and headers["x-github-api-version"] == "2022-11-28"
    expected = json.loads(portcheck("review", "--base", "main", "--head", "feature", "--format", "github-review",
                                    cwd=repo).stdout)
    assert request["body"] == expected
    assert TOKEN not in done.stdout + done.stderr


def test_post_takes_the_pr_from_the_argument(repo, github, tmp_path):
    env = env_for(github, tmp_path)
    del env["GITHUB_EVENT_PATH"]
    done = portcheck("review", "--base", "main", "--head", "feature", "--post", "--pr", "12", cwd=repo, env=env)
    assert done.returncode == 1 and FakeGitHub.requests[0]["path"] == "/repos/owner/repo/pulls/12/reviews"


@pytest.mark.parametrize("status, words", [(401, "token was refused"), (403, "may not write reviews"),
                                           (404, "no pull request 7 in owner/repo"),
                                           (422, "could not place the review")])
def test_github_errors_are_one_line_without_the_token(repo, github, tmp_path, status, words):
    FakeGitHub.status = status
    done = portcheck("review", "--base", "main", "--head", "feature", "--post", cwd=repo,
                     env=env_for(github, tmp_path))
    assert done.returncode == 2
    assert f"HTTP {status}" in done.stderr and words in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert TOKEN not in done.stdout + done.stderr and "***" in done.stderr  # GitHub's message, token masked


def test_network_errors_and_missing_settings_are_one_line(repo, tmp_path):
    closed = "http://127.0.0.1:9"  # discard port: nothing listens
    done = portcheck("review", "--base", "main", "--head", "feature", "--post", cwd=repo,
                     env=env_for(closed, tmp_path))
    assert done.returncode == 2 and "could not reach http://127.0.0.1:9" in done.stderr
    assert TOKEN not in done.stderr
    env = env_for(closed, tmp_path)
    del env["GITHUB_TOKEN"]
    missing = portcheck("review", "--base", "main", "--head", "feature", "--post", cwd=repo, env=env)
    assert missing.returncode == 2 and "needs GITHUB_TOKEN" in missing.stderr
    no_head = portcheck("review", "--base", "main", "--post", cwd=repo, env=env_for(closed, tmp_path))
    assert no_head.returncode == 2 and "--post needs --head" in no_head.stderr
    odd = portcheck("review", "--base", "main", "--head", "feature", "--post", cwd=repo,
                    env=env_for(closed, tmp_path, GITHUB_TOKEN="abc\ndef"))
    assert odd.returncode == 2 and "GITHUB_TOKEN is malformed" in odd.stderr and "abc" not in odd.stderr


def test_paths_are_the_repositorys_from_a_subdirectory_too(repo):
    done = portcheck("review", "--base", "main", "--head", "feature", "--format", "github-review",
                     cwd=repo / "models")
    assert {c["path"] for c in json.loads(done.stdout)["comments"]} == {
        "models/new file.py", "models/old.py", "models/renamed.py"}


def test_the_diff_is_read_the_same_whatever_the_git_configuration(repo):
    for setting in ("diff.mnemonicPrefix=true", "diff.noprefix=true", "diff.relative=true", "core.quotepath=off"):
        key, value = setting.split("=")
        git("config", key, value, cwd=repo)
        done = portcheck("review", "--base", "main", "--head", "feature", "--format", "json", cwd=repo / "models")
        assert len(json.loads(done.stdout)["findings"]) == 3, (setting, done.stderr)
        git("config", "--unset", key, cwd=repo)


def test_a_line_starting_with_plus_signs_is_code_not_a_header(repo):
    source = "import torch\n\n++ 1\n" + "pad = 0\n" * 5 + "late = torch.zeros(1).cuda()\n"
    (repo / "models" / "plus.py").write_text(source)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "plus", cwd=repo)
    done = portcheck("review", "--base", "HEAD~1", "--head", "HEAD", "--format", "json", cwd=repo)
    assert [(f["path"], f["line"]) for f in json.loads(done.stdout)["findings"]] == [("models/plus.py", 9)]


def test_a_base_that_moved_on_is_compared_from_the_merge_base(repo):
    git("checkout", "-q", "main", cwd=repo)
    (repo / "models" / "base_only.py").write_text("import torch\n\nb = torch.zeros(1).cuda()\n")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "main moves on", cwd=repo)
    git("checkout", "-q", "feature", cwd=repo)
    done = portcheck("review", "--base", "main", "--head", "feature", "--format", "json", cwd=repo)
    assert "models/base_only.py" not in {f["path"] for f in json.loads(done.stdout)["findings"]}


def test_excludes_and_per_file_ignores_apply(repo):
    (repo / "pyproject.toml").write_text('[tool.portcheck]\nextend-exclude = ["models/new file.py"]\n'
                                         '[tool.portcheck.per-file-ignores]\n"models/old.py" = ["PC101"]\n')
    done = portcheck("review", "--base", "main", "--head", "feature", "--format", "json", cwd=repo)
    assert [f["path"] for f in json.loads(done.stdout)["findings"]] == ["models/renamed.py"]


def test_a_comment_stays_on_the_changed_lines_of_a_long_statement(repo):
    call = "x = torch.zeros(\n" + "".join(f"    {i},\n" for i in range(8)) + ").cuda()\n"
    (repo / "models" / "long.py").write_text("import torch\n\n" + call)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "long", cwd=repo)
    (repo / "models" / "long.py").write_text("import torch\n\n" + call.replace("    4,", "    40,"))
    git("commit", "-q", "-am", "edit one line", cwd=repo)
    done = portcheck("review", "--base", "HEAD~1", "--head", "HEAD", "--format", "github-review", cwd=repo)
    (comment,) = json.loads(done.stdout)["comments"]
    assert comment["line"] == 8 and "start_line" not in comment  # only line 8 changed; the finding spans 3-11
    assert "```suggestion" not in comment["body"]  # its fix rewrites lines outside the diff


def test_non_ascii_file_names_that_git_quotes(repo):
    (repo / "models" / "naïve.py").write_text("import torch\n\nq = torch.zeros(1).cuda()\n")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "naive", cwd=repo)
    done = portcheck("review", "--base", "HEAD~1", "--head", "HEAD", "--format", "json", cwd=repo)
    assert [(f["path"], f["line"]) for f in json.loads(done.stdout)["findings"]] == [("models/naïve.py", 3)]


def test_suggestions_for_deleted_lines_and_code_holding_backticks():
    from portcheck.findings import Edit, Finding, Fix, Severity
    from portcheck.report.review import _comment, fixed_lines

    def finding(line: int, edit: Edit) -> Finding:
        return Finding("PC106", "cuda-noop-call", "cuda-api", Severity.WARNING, "drop it", "m.py", line, 1, line,
                       20, fix=Fix("safe", "Remove the call", (edit,)))

    lines = ["import torch", "", "torch.cuda.empty_cache()", 'doc = "```"; x.cuda()']
    deleted = finding(3, Edit(3, 1, 4, 1, ""))
    assert fixed_lines(deleted, lines) == ""
    assert _comment(deleted, lines).endswith("```suggestion\n```")  # an empty suggestion deletes the line
    fenced = finding(4, Edit(4, 14, 4, 22, 'x.to("neuron")'))
    assert _comment(fenced, lines).endswith('````suggestion\ndoc = "```"; x.to("neuron")\n````')
    outside = finding(3, Edit(1, 1, 1, 1, "import torch_xla\n"))
    assert fixed_lines(outside, lines) is None
