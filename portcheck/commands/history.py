"""`portcheck report --history FILE`: the runs recorded so far, one JSON object a line, and this run appended. The
file is read (and refused, one line, exit 2, when it is not a history) before anything is scanned, and written
whole, atomically, after the page: a failed run leaves it as it was. The commit comes from git through
portcheck/gitrun.py (no hook, filter or pager of the scanned repository can run)."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from portcheck.atomic import write_text
from portcheck.config import ConfigError, common_parent
from portcheck.findings import FileTooLarge, read_bounded
from portcheck.gitrun import GitMissing, run_git
from portcheck.report.page import Project

HISTORY_LIMIT = 64 * 2**20


def read_history(path: Path) -> tuple[str, list[dict[str, Any]]]:
    """The file's text and its runs, oldest first; none for a file that does not exist yet."""
    try:
        text = read_bounded(str(path), HISTORY_LIMIT).decode("utf-8")
    except FileNotFoundError:
        return "", []
    except FileTooLarge:
        raise ConfigError(f"{path}: not a portcheck history (over {HISTORY_LIMIT // 2**20} MiB)") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the history ({exc})") from None
    runs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            run = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"{path}:{number}: not a portcheck history line ({exc})") from None
        if not _is_run(run):
            raise ConfigError(f"{path}:{number}: not a portcheck history line (written by report --history)")
        runs.append(run)
    return text, runs


def _is_run(run: Any) -> bool:
    if not isinstance(run, dict) or not isinstance(run.get("targets"), dict):
        return False
    for counts in run["targets"].values():
        if not isinstance(counts, dict) or not all(
                isinstance(counts.get(key, 0), int) and not isinstance(counts.get(key, 0), bool)
                for key in ("errors", "warnings", "infos")):
            return False
        prints = counts.get("fingerprints", [])
        if not isinstance(prints, list) or not all(isinstance(p, str) for p in prints):
            return False
    return True


def append_history(path: Path, text: str, run: dict[str, Any]) -> None:
    """The file as it was, and this run's line after it, written whole."""
    if text and not text.endswith("\n"):
        text += "\n"
    write_text(path, text + json.dumps(run, sort_keys=True) + "\n")


def commit_of(directory: Path) -> str | None:
    """HEAD's commit when `directory` is in a git work tree, else None."""
    try:
        done = run_git(["rev-parse", "--verify", "-q", "HEAD"], directory, timeout=30)
    except (GitMissing, OSError, subprocess.SubprocessError):
        return None
    head = done.stdout.decode("ascii", errors="replace").strip()
    return head if done.returncode == 0 and len(head) in (40, 64) else None


def project_of(paths: list[str], cwd: Path) -> tuple[Project, Path]:
    """The project the paths are in: named by its pyproject.toml's [project] name, else by its folder; and the
    prefix its files' paths start with as the scan names them (relative to the working directory)."""
    import os

    start = common_parent(paths, cwd)
    root = start if start.is_dir() else start.parent
    name = ""
    try:
        with open(root / "pyproject.toml", "rb") as handle:
            declared = tomllib.load(handle).get("project", {}).get("name")
        name = declared if isinstance(declared, str) else ""
    except (OSError, ValueError, AttributeError):
        pass
    name = name or root.name or str(root)
    relative = Path(os.path.relpath(root, cwd)).as_posix() if root != cwd else "."
    return Project(name, "" if relative == "." else relative + "/"), root


__all__ = ["append_history", "commit_of", "project_of", "read_history"]
