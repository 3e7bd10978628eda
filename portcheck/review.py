"""`portcheck review`: the findings on the lines a change adds or modifies — from `git diff` between a base and a
head (or the working tree) — and, with --post, a GitHub pull-request review with them."""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import re
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portcheck.config import ConfigError, Settings
from portcheck.errors import GitError, PostError
from portcheck.escape import printable
from portcheck.findings import (
    DEFAULT_MAX_FILE_BYTES,
    FileError,
    FileTooLarge,
    ScanResult,
    Target,
    python_lines,
    read_bounded,
)
from portcheck.gitrun import GitMissing, popen_git, run_git

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Change:
    """What a diff adds: per file (its path from the repository root, at the head), the hunks of added or
    modified lines as (first, last) line numbers."""

    root: Path
    head: str  # a commit, or "" for the working tree
    head_sha: str
    hunks: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    limit: int = DEFAULT_MAX_FILE_BYTES  # bytes of a file read at most (the scan's max-file-size)
    _read: dict[str, bytes] = field(default_factory=dict, repr=False)

    def source(self, path: str) -> bytes:
        """The file as it is at the head, or in the working tree (b"" if it cannot be read), read once: scanning
        and every suggestion in the file share it. FileTooLarge past `limit`, found before anything is read."""
        if path not in self._read:
            if self.head:
                self._read[path] = git_show(self.head, path, self.root, self.limit)
            else:
                try:
                    self._read[path] = read_bounded(str(self.root / path), self.limit)
                except OSError:
                    self._read[path] = b""
        return self._read[path]

    def hunk_of(self, path: str, first: int, last: int) -> tuple[int, int] | None:
        """The first hunk of `path` that overlaps lines first..last."""
        return next((h for h in self.hunks.get(path, ()) if h[0] <= last and first <= h[1]), None)


def git(args: list[str], cwd: Path) -> str:
    """git's output, with bytes that are not UTF-8 kept as surrogates (a path, a line of a latin-1 file)."""
    try:
        done = run_git(args, cwd)
    except (GitMissing, FileNotFoundError):
        raise GitError("portcheck review needs git on the PATH") from None
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", errors="replace")
        message = (stderr.strip().splitlines() or ["failed"])[-1].removeprefix("fatal: ")
        verb = next((a for a in args if not a.startswith("-") and "=" not in a), "")
        raise GitError(f"git {verb}: {message}")
    return done.stdout.decode("utf-8", errors="surrogateescape")


def _commit(ref: str, option: str, cwd: Path) -> str:
    done = run_git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd, timeout=60)
    if done.returncode != 0:
        raise ConfigError(f"{option} {ref}: no such commit here (a shallow clone? with actions/checkout, set "
                          "fetch-depth: 0)")
    return done.stdout.decode("utf-8", errors="replace").strip()


def changed_lines(base: str, head: str | None, cwd: Path) -> Change:
    """Added and modified lines of Python files between the merge base of `base` and `head` (the working tree
    when head is None); renamed files under their new name, new files whole. The diff's form is pinned
    (prefixes, quoting, paths from the root) whatever the user's git configuration says."""
    try:
        root = Path(git(["rev-parse", "--show-toplevel"], cwd).strip())
    except GitError:
        raise GitError("portcheck review runs inside a git repository") from None
    _commit(base, "--base", cwd)
    sha = _commit(head or "HEAD", "--head", cwd)
    span = [f"{base}...{head}"] if head else ["--merge-base", base]
    change = Change(root, head or "", sha)
    args = ["-c", "core.quotepath=on", "diff", "--no-color", "--unified=0", "-M", "--diff-filter=AMR",
            "--src-prefix=a/", "--dst-prefix=b/", "--no-relative", *span, "--", ":(glob)**/*.py", ":(glob)**/*.pyi"]
    current: str | None = None
    in_header = submodule = False
    for line in _diff_lines(args, root):
        if line.startswith("diff --git "):
            current, in_header, submodule = None, True, False
        elif in_header and line.startswith(("new file mode ", "new mode ", "index ")):
            # a submodule (a commit, not a file) named `lib.py`, or a symlink `p.py` (its target could be any file of
            # this machine: a review reads the working tree, and posts what it finds)
            submodule = submodule or line.endswith((" 160000", " 120000"))
        elif in_header and line.startswith("+++ "):
            name = _unquote(line[4:].rstrip("\t"))  # git ends a name holding a space with a tab
            python = name.startswith("b/") and name.endswith((".py", ".pyi")) and not submodule
            current = name[2:] if python else None
            if current is not None:
                change.hunks.setdefault(current, [])
        elif match := HUNK.match(line):
            in_header = False
            start, count = int(match.group(1)), int(match.group(2) or 1)
            if current is not None and count:
                change.hunks[current].append((start, start + count - 1))
    return change


DIFF_DEADLINE = 120.0  # seconds for the whole diff
_LINE_PIECE = 2**16  # bytes of a diff line read at a time: only headers are kept, and they are short


def _diff_lines(args: list[str], root: Path) -> Iterator[str]:
    """The headers and hunk lines of `git diff ARGS`, as they come: an added line's text is skipped, never held
    (a 200 MB file in a pull request costs a read, not its size in memory), and lines split at \\n only (the
    diff is bytes: a latin-1 line or a U+2028 in it is no line break and no error)."""
    with tempfile.TemporaryFile() as errors:
        try:
            process = popen_git(args, root, stderr=errors)
        except (GitMissing, FileNotFoundError):
            raise GitError("portcheck review needs git on the PATH") from None
        timer = threading.Timer(DIFF_DEADLINE, process.kill)
        timer.start()
        try:
            assert process.stdout is not None
            at_start = True
            while piece := process.stdout.readline(_LINE_PIECE):
                starts, at_start = at_start, piece.endswith(b"\n")
                if starts and (not piece.startswith((b"+", b"-", b" ")) or piece.startswith((b"+++ ", b"--- "))):
                    yield piece.rstrip(b"\n").decode("utf-8", errors="surrogateescape")
            code = process.wait()
        finally:
            timer.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
        if code != 0:
            errors.seek(0)
            stderr = errors.read(ERROR_LIMIT).decode("utf-8", errors="replace")
            reason = "no answer within 120 s" if code < 0 else (stderr.strip().splitlines() or ["failed"])[-1]
            raise GitError(f"git diff: {reason.removeprefix('fatal: ')}")


ERROR_LIMIT = 2**16


def _unquote(name: str) -> str:
    """git quotes paths with unusual characters ("b/na\\303\\257ve.py")."""
    if name.startswith('"') and name.endswith('"'):
        raw = name[1:-1].encode("latin-1").decode("unicode_escape").encode("latin-1")
        return raw.decode("utf-8", errors="surrogateescape")  # a name that is not UTF-8 keeps its bytes
    return name


def review(change: Change, settings: Settings) -> ScanResult:
    """Scan the changed files as they are at the head, as `scan` would (excludes, per-file ignores), and keep
    the findings that touch a changed line. Paths are the repository root's, as GitHub wants them."""
    from portcheck.static.discover import is_excluded
    from portcheck.static.engine import analyse_file
    from portcheck.static.semantic.graph import apply

    result = ScanResult(Target(settings.chip, settings.stack, settings.sdk))
    change.limit = settings.max_file_bytes
    outcomes = []
    for path, hunks in sorted(change.hunks.items()):
        location = change.root / path
        if not hunks or is_excluded(location, settings):
            continue
        try:
            data = change.source(path) if change.head else None
        except FileTooLarge as exc:
            result.files += 1
            result.errors.append(FileError(path, str(exc)))
            continue
        outcomes.append(analyse_file(settings.job(path, location, data)))
    for outcome in apply(outcomes)[0]:  # the call graph of the changed files
        result.files += 1
        result.errors.extend(outcome.errors)
        result.findings.extend(f for f in outcome.findings
                               if change.hunk_of(outcome.path, f.line, f.end_line))
    result.findings.sort(key=lambda f: f.sort_key)
    return result


def git_show(head: str, path: str, root: Path, limit: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """The blob at `head:path`, its size asked first: FileTooLarge past `limit`, before anything is read."""
    spec = f"{head}:{path}"
    sized = run_git(["cat-file", "-s", spec], root)
    if sized.returncode != 0:
        raise GitError(f"git show {spec}: {sized.stderr.decode(errors='replace').strip()}")
    size = int(sized.stdout.strip() or 0)
    if size > limit:
        raise FileTooLarge(size, limit)
    done = run_git(["cat-file", "blob", spec], root)
    if done.returncode != 0:
        raise GitError(f"git show {spec}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def lines_at_head(change: Change, path: str) -> list[str]:
    try:
        return python_lines(change.source(path).decode("utf-8", errors="replace"))
    except FileTooLarge:
        return []


# --- posting to GitHub -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Destination:
    api: str
    repository: str
    number: int
    token: str = field(repr=False)


def destination(pr: int | None) -> Destination:
    """Where --post sends the review, from the environment GitHub Actions sets (the token only from there)."""
    token = os.environ.get("GITHUB_TOKEN", "")
    repository = os.environ.get("GITHUB_REPOSITORY", "")
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    if not token:
        raise ConfigError("--post needs GITHUB_TOKEN in the environment")
    if not token.isprintable() or any(c.isspace() for c in token):
        raise ConfigError("GITHUB_TOKEN is malformed (it holds whitespace or control characters)")
    if not _api_allowed(api):
        raise ConfigError(f"GITHUB_API_URL must be an https:// URL, not {api!r}")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repository) or {".", ".."} & set(repository.split("/")):
        raise ConfigError("--post needs GITHUB_REPOSITORY (owner/name) in the environment")
    if pr is None:
        event = os.environ.get("GITHUB_EVENT_PATH", "")
        try:
            payload = json.loads(Path(event).read_text(encoding="utf-8")) if event else {}
            number = (payload.get("pull_request") or {}).get("number") or payload.get("number")
            # 1e400 reads as inf, -5 and 5.5 are no pull request: only a positive JSON integer is one.
            pr = number if type(number) is int and number > 0 else None
        except (OSError, ValueError, AttributeError):
            pr = None
        if pr is None:
            raise ConfigError("--post needs the pull request: --pr N, or GITHUB_EVENT_PATH of a pull_request event")
    return Destination(api, repository, pr, token)


def _api_allowed(api: str) -> bool:
    """https:// anywhere; plain http:// only to this machine (a test server), judged on the parsed host."""
    try:
        parts = urllib.parse.urlsplit(api)
        host = parts.hostname or ""
        parts.port  # noqa: B018 -- raises ValueError on a malformed port
    except ValueError:
        return False
    if parts.scheme == "https":
        return bool(host)
    if parts.scheme != "http":
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


POST_DEADLINE = 120.0  # seconds for the whole exchange: a server that trickles its answer is not waited for
ANSWER_LIMIT = 2**20  # bytes of an answer read: a review's answer is a few KB


def post_review(body: dict[str, Any], where: Destination) -> str:
    """POST the review; the URL of the review made, or one line saying why not (the token never appears)."""
    url = f"{where.api}/repos/{where.repository}/pulls/{where.number}/reviews"
    outcome: list[str | PostError] = []

    def exchange() -> None:
        try:
            outcome.append(_post(url, body, where))
        except PostError as exc:
            outcome.append(exc)

    # The socket timeout bounds each read; only a deadline on the whole exchange bounds a trickle.
    worker = threading.Thread(target=exchange, daemon=True)
    worker.start()
    worker.join(POST_DEADLINE)
    if not outcome:
        raise PostError(f"could not post to {where.api}: no complete answer within {POST_DEADLINE:g} s")
    if isinstance(outcome[0], PostError):
        raise outcome[0]
    return outcome[0]


def _post(url: str, body: dict[str, Any], where: Destination) -> str:
    try:
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
            "Authorization": f"Bearer {where.token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json", "User-Agent": "portcheck"})
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=60) as response:
            payload = response.read(ANSWER_LIMIT)
    except urllib.error.HTTPError as exc:
        raise PostError(_http_problem(exc, where)) from None
    except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException, ValueError) as exc:
        reason = str(getattr(exc, "reason", exc)).replace(where.token, "***")
        raise PostError(f"could not reach {where.api}: {reason}") from None
    try:
        answer = json.loads(payload or b"{}")
    except (ValueError, RecursionError):
        return url
    link = answer.get("html_url") if isinstance(answer, dict) else None
    # the token never printed, even when a server echoes it back in the URL
    return printable(link.replace(where.token, "***"))[:2000] if isinstance(link, str) and link else url


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect would resend the token to another place: refuse it (it surfaces as an HTTPError)."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _http_problem(exc: urllib.error.HTTPError, where: Destination) -> str:
    try:
        detail = json.loads(exc.read(ANSWER_LIMIT) or b"{}").get("message", "")
    except (ValueError, OSError, AttributeError, RecursionError):
        detail = ""
    detail = printable(detail)[:300] if isinstance(detail, str) else ""
    detail = detail.replace(where.token, "***") if where.token else detail
    meaning = {401: "the token was refused (GITHUB_TOKEN expired or wrong)",
               403: "the token may not write reviews here (permissions: pull-requests: write)",
               404: f"no pull request {where.number} in {where.repository} that this token can see",
               422: "GitHub could not place the review (a comment outside the diff, or a stale commit)"}
    text = meaning.get(exc.code, "GitHub refused the review")
    return f"posting the review failed: HTTP {exc.code}: {text}" + (f" ({detail})" if detail else "")
