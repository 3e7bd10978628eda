"""Which files a scan reads: the paths given, directories walked for *.py / *.pyi and the dependency files
(requirements*.txt, pyproject.toml, environment.yml: portcheck.static.manifests), minus excludes and
what git ignores. Explicit files are always read unless --force-exclude (how pre-commit passes files)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from portcheck.config import TEST_PATTERNS, ConfigError, Settings, path_matches
from portcheck.escape import printable
from portcheck.findings import LeftOut
from portcheck.gitrun import GitMissing, run_git
from portcheck.static.manifests import kind

SUFFIXES = (".py", ".pyi")

@dataclass(frozen=True)
class Candidate:
    location: Path  # where to read it
    display: str  # how reports name it: relative to the working directory
    unreadable: str = ""  # a directory the walk could not list (permissions, a path over the system's limit)


def display_path(path: Path, cwd: Path) -> str:
    try:
        return Path(os.path.relpath(path, cwd)).as_posix()
    except ValueError:  # another drive on Windows
        return path.as_posix()


def relative_to_root(path: Path, settings: Settings) -> str:
    """The path as exclude and per-file-ignores patterns see it: relative to the config's directory."""
    return settings.relative(path)


def is_excluded(path: Path, settings: Settings) -> bool:
    return exclusion(path, settings) is not None


def exclusion(path: Path, settings: Settings, relative: str | None = None, parents_checked: bool = False) -> str | None:
    """The first exclude pattern that matches the path, or None (`parents_checked`: see path_matches)."""
    relative = relative_to_root(path, settings) if relative is None else relative
    return next((pattern for pattern in settings.exclude if path_matches(relative, pattern, parents_checked)), None)


def is_test_file(relative: str, location: Path | None = None, parents_checked: bool = False) -> bool:
    """A test file or folder by pytest's conventions (`test_*.py`, `*_test.py`, `conftest.py`, `tests/`). A file
    that is one by its name alone (`test_time_augmentation.py` in a model package) is a test only where its code
    says so too: it imports pytest or unittest (read from `location`, when given). So is a package's test support
    (`testing/`, `test_utils/`, `testing_utils.py`: decorators that skip tests, assertions, test cases) that
    imports pytest or unittest."""
    parts = relative.replace("\\", "/").split("/")
    if not any(path_matches(relative, pattern, parents_checked) for pattern in TEST_PATTERNS):
        return location is not None and parts[-1].endswith(".py") and bool(
            any(part in _SUPPORT_FOLDERS for part in parts[:-1]) or _SUPPORT_FILE.fullmatch(parts[-1])) and (
            _imports_a_test_framework(location))
    if location is None or not parts[-1].endswith(".py") or parts[-1] == "conftest.py" or any(
            path_matches(folder, pattern) for folder in parts[:-1] for pattern in TEST_PATTERNS):
        return True
    return _imports_a_test_framework(location)


_SUPPORT_FOLDERS = frozenset({"testing", "test_utils", "testing_utils"})
_SUPPORT_FILE = re.compile(r"(\w+_)?(testing|testing_utils|test_utils)\.py")
_TEST_FRAMEWORK = re.compile(rb"^[ \t]*(?:import|from)[ \t]+(?:pytest|unittest)\b", re.MULTILINE)


def _imports_a_test_framework(location: Path) -> bool:
    try:
        with open(location, "rb") as handle:
            head = handle.read(256 * 1024)
    except OSError:
        return True  # unreadable: leave it to the test setting, as before
    return _TEST_FRAMEWORK.search(head) is not None


def _build_output(path: Path, settings: Settings) -> bool:
    """`build/` or `dist/` left out by the default excludes is build output only when it is no Python package:
    a `dist/` holding an `__init__.py` is importable source and is scanned."""
    folder = next((p for p in (path, *path.parents) if p.name in _BUILD_FOLDERS), None)
    return not (folder is not None and (folder / "__init__.py").is_file()
                and not any(path_matches(relative_to_root(path, settings), p) for p in settings.exclude
                            if p not in _BUILD_FOLDERS))


_BUILD_FOLDERS = frozenset({"build", "dist"})
# Excluded folders that never hold source (version control, caches): not worth a line among what was left out.
_NEVER_SOURCE = frozenset({".git", ".hg", ".svn", ".bzr", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytype",
                           ".portcheck_cache", ".pants.d"})


def discover(paths: list[str], settings: Settings, cwd: Path, warnings: list[str] | None = None,
             left_out: list[LeftOut] | None = None) -> list[Candidate]:
    """The files to read; `warnings` hears what could not be honoured (a .gitignore git could not apply), `left_out`
    the files and folders passed over, with why."""
    warnings = [] if warnings is None else warnings
    passed: list[LeftOut] = [] if left_out is None else left_out

    def leave(path: Path, reason: str, detail: str = "") -> None:
        if path.name not in _NEVER_SOURCE:
            passed.append(LeftOut(display_path(path, cwd) + ("/" if path.is_dir() else ""), reason, detail))
    explicit: list[Path] = []
    walked: list[Path] = []
    unlisted: dict[Path, str] = {}
    for raw in paths:
        path = Path(raw)
        if not path.is_absolute():
            path = cwd / path
        if not os.path.lexists(path):
            raise ConfigError(f"{raw}: no such file or directory")
        if path.is_dir():
            if settings.force_exclude and (pattern := exclusion(path, settings)) is not None:
                leave(path, "excluded", pattern)
                continue
            walked.extend(_walk(path, settings, unlisted, leave))
        else:
            # With --force-exclude (how pre-commit passes files), a test file is left out like a walked one.
            if settings.force_exclude and (pattern := exclusion(path, settings)) is not None:
                leave(path, "excluded", pattern)
            elif settings.force_exclude and settings.tests == "exclude" and is_test_file(
                    relative_to_root(path, settings), path):
                leave(path, "tests", 'tests = "exclude"')
            else:
                explicit.append(path)
    if settings.respect_gitignore:
        before = walked + explicit
        walked = _drop_gitignored(walked, warnings)
        if settings.force_exclude:
            explicit = _drop_gitignored(explicit, warnings)
        kept = set(walked + explicit)
        for path in before:
            if path not in kept:
                leave(path, "ignored by git")
    seen: set[Path] = set()
    found = []
    # A file and a symlink to it are one file, read under the file's own name (a fix never writes through a link).
    for path in sorted(explicit + walked, key=os.path.islink):
        key = path.resolve() if path.exists() else path
        if key in seen:
            continue
        seen.add(key)
        found.append(Candidate(path, display_path(path, cwd)))
    for path, why in unlisted.items():
        found.append(Candidate(path, display_path(path, cwd), unreadable=f"a directory that cannot be listed: {why}"))
    found.sort(key=lambda c: c.display)
    return found


def _walk(top: Path, settings: Settings, unlisted: dict[Path, str],
          leave: Callable[[Path, str, str], None]) -> list[Path]:
    """The files under `top` to read; a directory that cannot be listed goes into `unlisted` (path: why), so
    that the scan reports it instead of passing over what it holds; what is passed over is told to `leave`."""
    out = []

    def unlistable(exc: OSError) -> None:
        unlisted[Path(exc.filename or top)] = exc.strerror or str(exc)

    # A test folder named on the command line (`portcheck scan tests/`) is read whatever the setting.
    skip_tests = settings.tests == "exclude" and not is_test_file(top.resolve().as_posix())

    # The folders walked into (none matched): below the first level, a path's parents need no second look, and its
    # place relative to the config's root is its folder's and its name (realpath is one lstat a level).
    relatives: dict[Path, str] = {}

    def skipped(path: Path) -> bool:
        try:
            mode = os.lstat(path).st_mode
        except OSError:  # a name past the system's limit: the walk reports the folder it cannot list
            mode = 0
        parent = relatives.get(path.parent)
        below = parent is not None and not stat.S_ISLNK(mode)
        relative = f"{parent}/{path.name}" if below else relative_to_root(path, settings)
        pattern = exclusion(path, settings, relative, below)
        if pattern is not None and _build_output(path, settings):
            leave(path, "build output" if pattern in _BUILD_FOLDERS else "excluded", pattern)
            return True
        if skip_tests and is_test_file(path.relative_to(top).as_posix(), path, below):
            leave(path, "tests", 'tests = "exclude"')
            return True
        if stat.S_ISDIR(mode):
            relatives[path] = relative
        return False

    inside = os.path.join(os.path.realpath(top), "")

    def out_of_tree(path: Path) -> bool:
        """A committed symlink to a file outside the folder walked (`x.py -> ~/.config/secrets.py`): not read, or
        its code would be shown in frames, annotations and a pull request's review."""
        if not os.path.islink(path) or os.path.realpath(path).startswith(inside):
            return False
        leave(path, "symlink out of the tree", printable(os.readlink(path)))
        return True

    # followlinks=False: a symlinked directory loop cannot trap the walk.
    for directory, dirnames, filenames in os.walk(top, onerror=unlistable):
        base = Path(directory)
        dirnames[:] = sorted(d for d in dirnames if not skipped(base / d))
        for name in sorted(filenames):
            if name.endswith(SUFFIXES) or kind((base / name).as_posix()) is not None:
                path = base / name
                if not skipped(path) and not out_of_tree(path):
                    out.append(path)
    return out


def _work_tree(path: Path) -> Path | None:
    for directory in path.parents:
        if (directory / ".git").exists():
            return directory
    return None


def _odd_ignore_file(tree: Path, members: list[Path]) -> Path | None:
    """A .gitignore (or .git/info/exclude) git would read for `members` that is not a regular file: git opens a
    FIFO and waits for a writer (a 60 s stall, then nothing ignored)."""
    directories = {tree}
    for member in members:
        directories.update(p for p in member.absolute().parents if p == tree or tree in p.parents)
    for candidate in [tree / ".git" / "info" / "exclude", *(d / ".gitignore" for d in sorted(directories))]:
        try:
            mode = os.lstat(candidate).st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            return candidate
    return None


def _drop_gitignored(paths: list[Path], warnings: list[str]) -> list[Path]:
    if not paths:
        return paths
    by_tree: dict[Path, list[Path]] = {}
    outside = []
    for path in paths:
        tree = _work_tree(path.absolute())
        if tree is None:
            outside.append(path)
        else:
            by_tree.setdefault(tree, []).append(path)
    kept = list(outside)
    for tree, members in by_tree.items():
        odd = _odd_ignore_file(tree, members)
        if odd is not None:
            warnings.append(f"{printable(str(odd))} is not a regular file (a FIFO, device or socket): .gitignore not "
                            f"applied in {printable(str(tree))}")
            kept.extend(members)
            continue
        listing = b"\0".join(os.fsencode(p.absolute()) for p in members) + b"\0"
        try:
            done = run_git(["check-ignore", "--stdin", "-z"], tree, input=listing, timeout=60)
        except GitMissing:
            kept.extend(members)
            continue
        except (OSError, subprocess.SubprocessError) as exc:
            warnings.append(f"git check-ignore failed in {printable(str(tree))} ({printable(str(exc))[:200]}): "
                            ".gitignore not applied there")
            kept.extend(members)
            continue
        if done.returncode not in (0, 1):  # 128: git refused the repository (another owner), or failed
            said = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
            reason = next((line for line in said if line.startswith("fatal:")), said[-1] if said else "failed")
            warnings.append(f"git refused {printable(str(tree))} ({printable(reason.removeprefix('fatal: '))[:200]}):"
                            " .gitignore not applied there")
            kept.extend(members)
            continue
        ignored = {Path(os.fsdecode(p)) for p in done.stdout.split(b"\0") if p}
        kept.extend(p for p in members if Path(str(p.absolute())) not in ignored)
    return kept
