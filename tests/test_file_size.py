"""`max-file-size` holds for every way a file reaches the static pass: a scan, a fix of files or of stdin, a
diff of stdin, and a review. Each file's job is made by one factory (`Settings.job`), which carries the limit."""

import os
import subprocess
from pathlib import Path

from conftest import run_command

# A fixable finding on the first line, then padding to about 3 KB: over a 0.002 MB (2 KiB) limit.
BIG = "import torch\nx = torch.zeros(3).cuda()\n" + "".join(f"y{i} = {i}\n" for i in range(400))
LIMIT = ["--max-file-size", "0.002"]
ENV = {**os.environ, "NO_COLOR": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def portcheck(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return run_command(args, cwd=cwd, input=stdin, env=ENV, timeout=120)


def test_the_big_file_is_over_the_limit_and_has_a_fixable_finding(tmp_path):
    (tmp_path / "big.py").write_text(BIG)
    assert len(BIG.encode()) > 0.002 * 2**20
    found = portcheck("scan", "--isolated", "--no-cache", "big.py", cwd=tmp_path)
    assert "PC101" in found.stdout


def test_scan_and_fix_of_files_report_the_file_and_write_nothing(tmp_path):
    (tmp_path / "big.py").write_text(BIG)
    for extra in ([], ["--fix"], ["--diff"], ["--fix", "--unsafe-fixes"]):
        done = portcheck("scan", "--isolated", "--no-cache", *LIMIT, *extra, "big.py", cwd=tmp_path)
        assert done.returncode == 1, (extra, done.stdout, done.stderr)
        assert "too large to analyse" in done.stdout + done.stderr, extra
        assert "PC101" not in done.stdout, extra
        assert (tmp_path / "big.py").read_text() == BIG, extra


def test_stdin_scan_fix_and_diff_honour_the_limit(tmp_path):
    scanned = portcheck("scan", "--isolated", *LIMIT, "-", cwd=tmp_path, stdin=BIG)
    assert scanned.returncode == 1 and "too large to analyse" in scanned.stdout
    for extra in (["--fix"], ["--diff"]):
        done = portcheck("scan", "--isolated", *LIMIT, *extra, "-", "--stdin-filename", "big.py", cwd=tmp_path,
                         stdin=BIG)
        assert done.returncode == 1, (extra, done.stdout, done.stderr)
        assert "big.py: error: too large to analyse: " in done.stderr, (extra, done.stderr)
        # --fix gives the input back unchanged (an editor filter keeps its buffer, issue 32); --diff has no diff
        assert done.stdout == ("" if extra == ["--diff"] else BIG.decode() if isinstance(BIG, bytes) else BIG), extra


def test_review_honours_the_configured_limit(tmp_path):
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=tmp_path,
                              check=True, capture_output=True, text=True, env=ENV).stdout.strip()

    git("init", "-q", "-b", "main")
    (tmp_path / "pyproject.toml").write_text("[tool.portcheck]\nmax-file-size = 0.002\n")
    (tmp_path / "big.py").write_text("x = 1\n")
    git("add", ".")
    git("commit", "-qm", "base")
    base = git("rev-parse", "HEAD")
    (tmp_path / "big.py").write_text(BIG)
    git("commit", "-qam", "grow")
    for head in ([], ["--head", "HEAD"]):  # the working tree, and a commit read with git
        done = portcheck("review", "--base", base, *head, "--format", "json", cwd=tmp_path)
        assert done.returncode == 1, (head, done.stdout, done.stderr)
        assert "too large to analyse" in done.stdout and "PC101" not in done.stdout, head
