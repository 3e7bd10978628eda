"""Every git command portcheck starts goes through `run_git` (or `popen_git`) here: the scanned repository (a clone,
an extracted archive) comes with its own .git/config and .gitattributes, and nothing they name may run.

What a repository's configuration can make git run, and what turns each off on the command line (settings on the
command line win over every config file):
- core.fsmonitor, hooks (core.hooksPath), the pager: `SAFETY`;
- filter.<name>.clean / .smudge / .process, which .gitattributes (in the tree, in info/attributes or in
  core.attributesFile) applies when git reads the working tree: every driver the configuration names is read with
  `git config --get-regexp` (reading configuration runs nothing) and emptied, and marked not required;
- diff.external, diff.<name>.command and diff.<name>.textconv: `--no-ext-diff --no-textconv` on every command that
  diffs or shows (and GIT_EXTERNAL_DIFF is not passed on);
- a lazy fetch in a partial clone (remote.<name>.uploadpack, ext:: URLs): no transport is allowed;
- signature checks (log.showSignature runs gpg.program): off.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO

SAFETY = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat",
          "-c", "core.untrackedCache=false", "-c", "log.showSignature=false", "--no-pager")
DIFFING = frozenset({"diff", "show", "log", "diff-tree", "diff-index", "diff-files"})
DROPPED = ("GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS")  # the user's own, but they would run a program on our diff


class GitMissing(Exception):
    """git is not on the PATH."""


def environment() -> dict[str, str]:
    """No prompts, no pager, no editor, no optional locks, no network."""
    env = {key: value for key, value in os.environ.items() if key not in DROPPED}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_EDITOR": "true",
                "GIT_OPTIONAL_LOCKS": "0", "GIT_ALLOW_PROTOCOL": "", "GIT_NO_LAZY_FETCH": "1"})
    return env


def _executable() -> str:
    git = shutil.which("git")
    if git is None:
        raise GitMissing("git is not on the PATH")
    return git


def filter_drivers(cwd: Path) -> list[str]:
    """The filter drivers the configuration seen from `cwd` names (every scope, includes followed)."""
    try:
        done = subprocess.run([_executable(), *SAFETY, "config", "--null", "--get-regexp", r"^filter\."], cwd=cwd,
                              capture_output=True, timeout=60, env=environment(), check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    names = set()
    for entry in done.stdout.split(b"\0"):
        key = entry.split(b"\n", 1)[0].decode("utf-8", errors="surrogateescape")
        section, _, rest = key.partition(".")
        name, dot, _variable = rest.rpartition(".")
        if section.lower() == "filter" and dot:
            names.add(name)
    return sorted(names)


def _without_filters(env: dict[str, str], cwd: Path) -> dict[str, str]:
    """`env` with every filter driver emptied, as command-line configuration (GIT_CONFIG_COUNT: a driver's name may
    hold `=`, which `-c` would split at)."""
    pairs = [(f"filter.{name}.{variable}", value) for name in filter_drivers(cwd)
             for variable, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))]
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    for index, (key, value) in enumerate(pairs, start=count):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    if pairs:
        env["GIT_CONFIG_COUNT"] = str(count + len(pairs))
    return env


def command(args: Sequence[str]) -> list[str]:
    """The command line for `git ARGS`: `SAFETY` first, and after the subcommand of one that diffs or shows, no
    external diff and no textconv."""
    git = _executable()
    args = list(args)
    options_with_values = ("-c", "-C")
    verb = next((i for i, a in enumerate(args)
                 if not a.startswith("-") and (i == 0 or args[i - 1] not in options_with_values)), None)
    if verb is not None and args[verb] in DIFFING:
        args[verb + 1:verb + 1] = ["--no-ext-diff", "--no-textconv"]
    return [git, *SAFETY, *args]


def run_git(args: Sequence[str], cwd: Path, *, input: bytes | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    """Run `git ARGS` in `cwd` with nothing from the repository's configuration able to start a program; output as
    bytes (a diff or a name need not be UTF-8). Raises GitMissing, OSError or subprocess.SubprocessError."""
    return subprocess.run(command(args), cwd=cwd, input=input, capture_output=True, timeout=timeout,
                          env=_without_filters(environment(), cwd), check=False)


def popen_git(args: Sequence[str], cwd: Path, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    """`run_git`, but its output read as it comes (a diff may be as large as the files it holds); what git says
    on stderr goes to the file `stderr`, so that it never blocks on a full pipe."""
    return subprocess.Popen(command(args), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=stderr, env=_without_filters(environment(), cwd))
