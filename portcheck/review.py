"""`portcheck review`: the findings on the lines a change adds or modifies — from `git diff` between a base and a
head (or the working tree) — and, with --post, a GitHub pull-request review with them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from portcheck.config import ConfigError, Settings
from portcheck.findings import ScanResult, Target

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Change:
    """What a diff adds: per file (its path at the head), the added or modified line numbers."""

    head: str  # a commit, or "" for the working tree
    head_sha: str
    lines: dict[str, set[int]] = field(default_factory=dict)


def git(args: list[str], cwd: Path) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise ConfigError("portcheck review needs git on the PATH") from None
    if done.returncode != 0:
        message = (done.stderr.strip().splitlines() or ["git failed"])[-1]
        raise ConfigError(f"git {' '.join(args[:2])}: {message}")
    return done.stdout


def changed_lines(base: str, head: str | None, cwd: Path) -> Change:
    """Added and modified lines of Python files between the merge base of `base` and `head` (the working tree
    when head is None); renamed files under their new name, new files whole."""
    git(["rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], cwd)
    target = head or "HEAD"
    sha = git(["rev-parse", "--verify", f"{target}^{{commit}}"], cwd).strip()
    span = [f"{base}...{head}"] if head else ["--merge-base", base]
    diff = git(["diff", "--no-color", "--no-ext-diff", "--unified=0", "-M", "--diff-filter=AMR", *span, "--"], cwd)
    change = Change(head or "", sha)
    current: str | None = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:].rstrip("\t")  # git ends a name holding a space with a tab
            current = None if name == "/dev/null" else _unquote(name).removeprefix("b/")
            if current is not None and not current.endswith((".py", ".pyi")):
                current = None
            if current is not None:
                change.lines.setdefault(current, set())
        elif current is not None and (match := HUNK.match(line)):
            start, count = int(match.group(1)), int(match.group(2) or 1)
            change.lines[current].update(range(start, start + count))
    return change


def _unquote(name: str) -> str:
    """git quotes paths with unusual characters ("b/na\\303\\257ve.py")."""
    if name.startswith('"') and name.endswith('"'):
        raw = name[1:-1].encode("latin-1").decode("unicode_escape").encode("latin-1")
        return raw.decode("utf-8", errors="replace")
    return name


def review(change: Change, settings: Settings, cwd: Path) -> ScanResult:
    """Scan the changed files as they are at the head and keep the findings that touch a changed line."""
    from portcheck.static.engine import FileJob, analyse_file

    result = ScanResult(Target(settings.chip, settings.stack))
    root = Path(git(["rev-parse", "--show-toplevel"], cwd).strip())
    for path, lines in sorted(change.lines.items()):
        if not lines:
            continue
        location = root / path
        display = os.path.relpath(location, cwd)
        data = git_show(change.head, path, root) if change.head else None
        job = FileJob(path=display, chip=settings.chip, stack=settings.stack,
                      enabled=settings.enabled_for(path), location=str(location), data=data)
        outcome = analyse_file(job)
        result.files += 1
        result.errors.extend(outcome.errors)
        result.findings.extend(f for f in outcome.findings if lines & set(range(f.line, f.end_line + 1)))
    result.findings.sort(key=lambda f: f.sort_key)
    return result


def git_show(head: str, path: str, root: Path) -> bytes:
    done = subprocess.run(["git", "show", f"{head}:{path}"], cwd=root, capture_output=True, timeout=120)
    if done.returncode != 0:
        raise ConfigError(f"git show {head}:{path}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


# --- posting to GitHub -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Destination:
    api: str
    repository: str
    number: int
    token: str


def destination(pr: int | None) -> Destination:
    """Where --post sends the review, from the environment GitHub Actions sets (the token only from there)."""
    token = os.environ.get("GITHUB_TOKEN", "")
    repository = os.environ.get("GITHUB_REPOSITORY", "")
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    if not token:
        raise ConfigError("--post needs GITHUB_TOKEN in the environment")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repository):
        raise ConfigError("--post needs GITHUB_REPOSITORY (owner/name) in the environment")
    if pr is None:
        event = os.environ.get("GITHUB_EVENT_PATH", "")
        try:
            payload = json.loads(Path(event).read_text(encoding="utf-8")) if event else {}
            pr = int((payload.get("pull_request") or {}).get("number") or payload.get("number") or 0) or None
        except (OSError, ValueError, AttributeError):
            pr = None
        if pr is None:
            raise ConfigError("--post needs the pull request: --pr N, or GITHUB_EVENT_PATH of a pull_request event")
    return Destination(api, repository, pr, token)


def post_review(body: dict, where: Destination) -> str:
    """POST the review; the URL of the review made, or one line saying why not (the token never appears)."""
    url = f"{where.api}/repos/{where.repository}/pulls/{where.number}/reviews"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {where.token}", "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json", "User-Agent": "portcheck"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise ConfigError(_http_problem(exc, where)) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"could not reach {where.api}: {reason}") from None
    except ValueError:
        return url
    return str(answer.get("html_url") or url)


def _http_problem(exc: urllib.error.HTTPError, where: Destination) -> str:
    try:
        detail = json.loads(exc.read() or b"{}").get("message", "")
    except (ValueError, OSError, AttributeError):
        detail = ""
    detail = detail.replace(where.token, "***") if where.token else detail
    meaning = {401: "the token was refused (GITHUB_TOKEN expired or wrong)",
               403: "the token may not write reviews here (permissions: pull-requests: write)",
               404: f"no pull request {where.number} in {where.repository} that this token can see",
               422: "GitHub could not place the review (a comment outside the diff, or a stale commit)"}
    text = meaning.get(exc.code, "GitHub refused the review")
    return f"posting the review failed: HTTP {exc.code}: {text}" + (f" ({detail})" if detail else "")
