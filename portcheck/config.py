"""Settings: `[tool.portcheck]` in pyproject.toml or a portcheck.toml, found by walking up from the
scanned paths, with the command line layered on top (ruff's model: a layer's `select` starts afresh,
`extend-select` adds, `ignore` removes, and the more specific selector wins within a layer)."""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
import functools
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from portcheck.errors import UserError
from portcheck.findings import CATEGORIES, DEFAULT_MAX_FILE_BYTES, FileJob, FileTooLarge, Severity, Target, read_bounded
from portcheck.knowledge import CODE_PATTERN, known_releases, load
from portcheck.releases import RELEASE_PATTERN

T = TypeVar("T")


class ConfigError(UserError):
    """A mistake in the user's configuration or options: shown as one line, exit code 2."""


DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".hg", ".mypy_cache", ".nox", ".pants.d", ".pytype", ".ruff_cache",
    ".svn", ".tox", ".venv", "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules",
    "site-packages", "venv", ".portcheck_cache", "__pycache__",
)

# What pytest collects (`test_*.py`, `*_test.py`, `conftest.py`) and the folders projects keep tests in. Skipped
# when a directory is walked, unless `tests = "include"`: a port is about the model, training and serving code,
# and a test suite's GPU paths are gated on purpose (on ten real projects every judged finding in a test file was
# a false positive: benchmarks/ecosystem/judgments.toml).
TEST_PATTERNS = ("tests", "test", "test_*.py", "*_test.py", "conftest.py")
TESTS_SETTINGS = ("exclude", "include")
CONFIG_LIMIT = 4 * 2**20  # bytes: a repository's 16 MB pyproject.toml took minutes to read

FORMATS = ("concise", "full", "json", "json-lines", "sarif", "github", "rdjson")


MAX_FILE_BYTES_CAP = 2**50  # max-file-size above this (1e13 MB) means no limit a machine could reach


@dataclass
class Layer:
    """One source of options (the config file, or the command line); None means "not given here"."""

    origin: str = "command line"
    target: str | None = None
    stack: str | None = None
    sdk: str | None = None  # Neuron SDK release, "2.34"
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool | None = None
    respect_gitignore: bool | None = None
    tests: str | None = None
    fail_level: str | None = None
    format: str | None = None
    max_file_size: float | None = None  # megabytes
    prices: dict[str, float] | None = None  # advise: USD per instance hour, overriding rules/prices.toml


@dataclass(frozen=True)
class Settings:
    target: Target  # the chip, stack and SDK release: made once here, passed whole
    enabled: frozenset[str]
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...]
    exclude: tuple[str, ...]
    force_exclude: bool
    respect_gitignore: bool
    fail_level: Severity
    format: str
    root: Path
    config_path: Path | None
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    tests: str = "exclude"
    prices: tuple[tuple[str, float], ...] = ()  # advise: USD per instance hour (the config's `prices` table)

    @property
    def chip(self) -> str:
        return self.target.chip

    @property
    def stack(self) -> str:
        return self.target.stack

    @property
    def sdk(self) -> str:
        """The Neuron SDK release whose facts apply ("": the newest the data knows)."""
        return self.target.sdk

    def relative(self, path: Path) -> str:
        """The path as exclude and per-file-ignores patterns see it: relative to the config's directory."""
        try:
            # realpath, not resolve(): a symlink loop is a path like any other here, not a RuntimeError
            return Path(os.path.realpath(path)).relative_to(os.path.realpath(self.root)).as_posix()
        except (ValueError, OSError):
            return path.as_posix()

    def job(self, display: str, location: Path, data: bytes | None = None, unreadable: str = "") -> FileJob:
        """The one way to make a file's job: the target, the rules enabled for that file and the size limit."""
        return FileJob(path=display, chip=self.chip, stack=self.stack, sdk=self.sdk,
                       enabled=self.enabled_for(self.relative(location)), data=data,
                       location=None if data is not None else str(location), max_bytes=self.max_file_bytes,
                       unreadable=unreadable)

    def enabled_for(self, relative_path: str) -> frozenset[str]:
        ignored: set[str] = set()
        for pattern, codes in self.per_file_ignores:
            if path_matches(relative_path, pattern):
                ignored |= codes
        return self.enabled - ignored if ignored else self.enabled


def path_matches(relative: str, pattern: str, parents_checked: bool = False) -> bool:
    """ruff-style: a pattern with a slash matches the path (or a parent); one without matches any part.
    `parents_checked`: the parents are known not to match (a walk that prunes what matches), so only the path
    itself is tried: a walk 600 folders deep tried every parent again at every level (35 s)."""
    relative = relative.replace("\\", "/").removeprefix("./")
    pattern = pattern.rstrip("/")
    if "/" in pattern:
        pattern = pattern.removeprefix("./")
        ends = [i for i, c in enumerate(relative) if c == "/"] if not parents_checked else []
        return any(fnmatch.fnmatchcase(relative[:end], pattern) for end in [*ends, len(relative)])
    return any(fnmatch.fnmatchcase(part, pattern)
               for part in (relative.rpartition("/")[2:] if parents_checked else relative.split("/")))


# ---- reading files ------------------------------------------------------------------------------

_KEYS: dict[str, type | tuple[type, ...]] = {
    "target": str, "stack": str, "sdk": str, "select": list, "extend-select": list, "ignore": list,
    "per-file-ignores": dict, "exclude": list, "extend-exclude": list, "force-exclude": bool,
    "respect-gitignore": bool, "tests": str, "fail-level": str, "format": str, "max-file-size": (int, float),
    "prices": dict,
}


def find_config(start: Path) -> Path | None:
    """The nearest portcheck.toml, or pyproject.toml with a [tool.portcheck] table, at or above `start`."""
    for directory in (start, *start.parents):
        candidate = directory / "portcheck.toml"
        if candidate.is_file():
            return candidate
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                tool = tomllib.loads(candidate.read_text(encoding="utf-8")).get("tool")
                if isinstance(tool, dict) and "portcheck" in tool:
                    return candidate
            except OSError:
                continue  # unreadable (no permission): not a configuration portcheck can use
            except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
                # A broken pyproject.toml that may be ours: read it properly to report its line.
                with contextlib.suppress(OSError):
                    if "[tool.portcheck" in candidate.read_text(encoding="utf-8", errors="replace"):
                        return candidate
    return None


def _key_line(text: str, key: str) -> int | None:
    pattern = re.compile(rf'^\s*["\']?{re.escape(key)}["\']?\s*=', re.MULTILINE)
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def read_config(path: Path) -> Layer:
    path = Path(os.path.relpath(path)) if path.is_absolute() and Path.cwd() in path.parents else path
    try:
        text = read_bounded(str(path), CONFIG_LIMIT).decode("utf-8")
    except FileTooLarge:
        raise ConfigError(f"{path}: cannot read: over {CONFIG_LIMIT // 2**20} MiB, not a configuration") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply to read") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = re.search(r"\(at line (\d+), column \d+\)", message)
        line = int(found.group(1)) if found else max(1, text.count("\n"))  # "at end of document"
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", message)
        raise ConfigError(f"{path}:{line}: invalid TOML: {reason}") from None
    tool = data.get("tool", {})
    if path.name == "pyproject.toml" and not isinstance(tool, dict):
        raise ConfigError(f"{path}: [tool] must be a table")
    table = tool.get("portcheck", {}) if path.name == "pyproject.toml" else data
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.portcheck] must be a table")

    def where(key: str) -> str:
        line = _key_line(text, key)
        return f"{path}:{line}" if line else str(path)

    layer = Layer(origin=str(path))
    for key, value in table.items():
        expected = _KEYS.get(key)
        if expected is None:
            hint = difflib.get_close_matches(key, list(_KEYS), n=1)
            suggestion = f"; did you mean '{hint[0]}'?" if hint else f"; valid keys: {', '.join(_KEYS)}"
            raise ConfigError(f"{where(key)}: unknown key '{key}'{suggestion}")
        wrong = not isinstance(value, expected) or (
            expected is list and isinstance(value, list) and not all(isinstance(v, str) for v in value))
        if expected == (int, float) and not wrong:
            wrong = isinstance(value, bool) or value <= 0
        if wrong:
            kind = {str: "a string", list: "a list of strings", dict: "a table", bool: "true or false",
                    (int, float): "a positive number of megabytes"}[expected]
            raise ConfigError(f"{where(key)}: '{key}' must be {kind}, not {value!r}")
        if key == "prices":
            for instance, price in value.items():
                if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 < price < float("inf"):
                    raise ConfigError(f"{where(instance)}: prices: '{instance}' must be a positive number of USD per "
                                      f"hour, not {price!r}")
        if key == "per-file-ignores":
            for pattern, codes in value.items():
                if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
                    raise ConfigError(f"{where(pattern)}: per-file-ignores for '{pattern}' must be a list of codes")
        setattr(layer, key.replace("-", "_"), value)
    for key in ("select", "extend-select", "ignore"):
        for selector in table.get(key, []):
            check_selector(selector, where(key))
    for pattern, codes in table.get("per-file-ignores", {}).items():
        for code in codes:
            check_selector(code, where(pattern))
    return layer


# ---- selection ----------------------------------------------------------------------------------


def _vocabulary() -> list[str]:
    rules = load().rules
    return sorted(set(rules) | {r.name for r in rules.values()} | set(CATEGORIES) | {"ALL"})


@functools.lru_cache(maxsize=4096)
def selector_codes(selector: str) -> tuple[frozenset[str], int]:
    """The codes a selector names and how specific it is (a longer prefix is more specific); remembered (a
    selector repeated 200,000 times in a config took 71 s)."""
    rules = load().rules
    if selector == "ALL":
        return frozenset(rules), 0
    if selector in CATEGORIES:
        return frozenset(c for c, r in rules.items() if r.category == selector), 2
    named = load().rule_by_name(selector)
    if named is not None:
        return frozenset({named.code}), 5
    upper = selector.upper()
    codes = frozenset(c for c in rules if c.startswith(upper)) if upper.startswith("PC") else frozenset()
    return codes, len(upper)


def _close_selectors(selector: str) -> list[str]:
    """Up to three known selectors a mistyped one may mean. A code-shaped typo (`PC1O1`, `pc10l`) is
    matched position by position first: difflib alone ranks `PC311` level with `PC101` for `PC1O1`."""
    vocabulary = _vocabulary()
    upper = selector.upper()
    if re.fullmatch(r"PC\w{3}", upper):
        codes = [c for c in vocabulary if CODE_PATTERN.match(c)]
        by_distance = sorted(codes, key=lambda c: (sum(a != b for a, b in zip(c, upper, strict=True)), c))
        near = [c for c in by_distance if sum(a != b for a, b in zip(c, upper, strict=True)) <= 1]
        if near:
            return near[:3]
    return difflib.get_close_matches(selector, vocabulary, n=3)


def check_selector(selector: str, where: str) -> None:
    codes, _ = selector_codes(selector)
    if not codes:
        hint = _close_selectors(selector)
        suggestion = f"; did you mean {' or '.join(hint)}?" if hint else "; see `portcheck rules`"
        raise ConfigError(f"{where}: unknown rule selector '{selector}'{suggestion}")


def _resolve_layer(current: set[str], layer: Layer) -> set[str]:
    if layer.select is None and not layer.extend_select and not layer.ignore:
        return current
    chosen: dict[str, tuple[int, bool]] = {}  # code -> (specificity, enabled)
    base = set(current) if layer.select is None else set()
    for selector in (layer.select or []) + layer.extend_select:
        codes, rank = selector_codes(selector)
        for code in codes:
            if chosen.get(code, (-1, False))[0] <= rank:
                chosen[code] = (rank, True)
    for selector in layer.ignore:
        codes, rank = selector_codes(selector)
        for code in codes:
            if chosen.get(code, (-1, False))[0] <= rank:
                chosen[code] = (rank, False)
    result = set(base)
    for code, (_, on) in chosen.items():
        (result.add if on else result.discard)(code)
    return result


def common_parent(paths: list[str], cwd: Path) -> Path:
    """The deepest directory (or file) that holds every path: where the search for a configuration starts."""
    resolved = [Path(os.path.realpath(cwd / p)) for p in paths]  # a symlink loop resolves to itself, no error
    try:
        return Path(os.path.commonpath([str(p) for p in resolved]))
    except ValueError:
        return cwd


def project_root(settings: Settings, paths: list[str], cwd: Path) -> Path:
    """The project a scan is about: the configuration file's directory, else the directory scanned (the common
    parent of the paths, a file's own directory)."""
    if settings.config_path is not None:
        return settings.root
    start = common_parent(paths, cwd)
    return start if start.is_dir() else start.parent


def resolve(layers: list[Layer], root: Path, config_path: Path | None, command: str = "scan") -> Settings:
    knowledge = load()
    enabled = {code for code, r in knowledge.rules.items() if r.default or (command == "trace" and r.trace_default)}
    for layer in layers:
        enabled = _resolve_layer(enabled, layer)

    def last(attr: str, default: T) -> tuple[T, str]:
        for layer in reversed(layers):
            value = getattr(layer, attr)
            if value is not None:
                return value, layer.origin
        return default, "default"

    chip, origin = last("target", "trn2")
    if chip not in knowledge.chips:
        raise ConfigError(f"{origin}: unknown target '{chip}'; choose one of {', '.join(knowledge.chips)}")
    sdk, origin = last("sdk", knowledge.newest_sdk)
    check_sdk(sdk, origin)
    stack, origin = last("stack", knowledge.default_stack(chip, sdk))
    if stack not in knowledge.stacks:
        raise ConfigError(f"{origin}: unknown stack '{stack}'; choose one of {', '.join(knowledge.stacks)}")
    if stack not in knowledge.chips[chip].stacks:
        allowed = ", ".join(knowledge.chips[chip].stacks)
        raise ConfigError(f"{origin}: the {stack} stack does not run on {chip} (it has: {allowed})")
    if refusal := knowledge.refusal(chip, stack, sdk):
        raise ConfigError(f"{origin}: {refusal}")
    # trace's info findings are advice every model gets (its buckets, SDPA's kernel): a clean model exits 0
    fail_level, origin = last("fail_level", "warning" if command == "trace" else "info")
    try:
        fail = Severity.parse(fail_level)
    except KeyError:
        raise ConfigError(f"{origin}: unknown fail level '{fail_level}'; choose error, warning or info") from None
    output_format, origin = last("format", "concise")
    if output_format not in FORMATS:
        raise ConfigError(f"{origin}: unknown format '{output_format}'; choose one of {', '.join(FORMATS)}")

    exclude: list[str] = list(DEFAULT_EXCLUDE)
    per_file: list[tuple[str, frozenset[str]]] = []
    for layer in layers:
        if layer.exclude is not None:
            exclude = list(layer.exclude)
        exclude += layer.extend_exclude
        for pattern, codes in layer.per_file_ignores.items():
            per_file.append((pattern, frozenset().union(*(selector_codes(c)[0] for c in codes))))
    # A rule about another chip, stack or SDK release (training on inf2, step boundaries on xla) is off for this
    # target.
    enabled = {code for code in enabled if knowledge.rules[code].applies_to(chip, stack, sdk)}
    tests, origin = last("tests", "exclude")
    if tests not in TESTS_SETTINGS:
        raise ConfigError(f"{origin}: unknown tests setting '{tests}'; choose exclude or include")
    force_exclude, _ = last("force_exclude", False)
    respect_gitignore, _ = last("respect_gitignore", True)
    prices: dict[str, float] = last("prices", {})[0] or {}
    max_size, origin = last("max_file_size", DEFAULT_MAX_FILE_BYTES / 2**20)
    if isinstance(max_size, bool) or not math.isfinite(max_size) or max_size <= 0:
        raise ConfigError(f"{origin}: max-file-size must be a positive number of megabytes, not {max_size}")
    return Settings(
        target=Target(chip, stack, sdk), enabled=frozenset(enabled), per_file_ignores=tuple(per_file),
        exclude=tuple(exclude), force_exclude=force_exclude, respect_gitignore=respect_gitignore,
        fail_level=fail, format=output_format, root=root, config_path=config_path,
        max_file_bytes=min(int(max_size * 2**20), MAX_FILE_BYTES_CAP), tests=tests,
        prices=tuple(sorted((name, float(usd)) for name, usd in prices.items())),
    )


def check_sdk(sdk: str, origin: str) -> None:
    """A Neuron SDK release the data knows ("2.34"): anything else is one line for the user."""
    known = known_releases()
    if not RELEASE_PATTERN.match(sdk):
        raise ConfigError(f"{origin}: '{sdk}' is not a Neuron SDK release; write MAJOR.MINOR, e.g. {known[-1]}")
    if sdk not in known:
        raise ConfigError(f"{origin}: Neuron SDK {sdk} is not in portcheck's data, which knows {known[0]} to "
                          f"{known[-1]} (`portcheck sdk` lists them)")
