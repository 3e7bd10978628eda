"""The dependency files `scan` reads besides Python: requirements*.txt (and *.txt under a `requirements/` folder),
pyproject.toml's dependency lists and environment.yml's `dependencies:`, read into requirements with positions.

Limits, by design (nothing is installed or resolved, nothing is run):
- requirements files: one requirement a line (a `\\` continuation is joined); options (`-r`, `-e`,
  `--extra-index-url`), paths and URLs are skipped; `-r` includes are not followed (each file is scanned itself).
- pyproject.toml: `[project] dependencies`, `[project.optional-dependencies]` and `[dependency-groups]`; Poetry's
  tables are not read. A dependency's position is where its string is first written after the last one found.
- environment.yml: no YAML library is a dependency, so a line reader takes the top-level `dependencies:` list and
  its `- pip:` list; flow style (`[a, b]`), anchors and multi-line strings are not read. Conda specs
  (`pytorch=2.1`, `pytorch 2.1.*`, `conda-forge::pytorch`) are read as the pip requirement they mean, and conda's
  `pytorch` as `torch`.
Suppression: a trailing `# noqa: PC724` (or `# portcheck: ignore[PC724]`) on the requirement's line, and a
file-level `# portcheck: noqa` line, as in Python files.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import PurePosixPath

from portcheck.static.source import SourceError


@dataclass(frozen=True)
class Requirement:
    name: str  # normalized: lower case, runs of -_. as one "-"
    spec: str  # the version specifier as written ("==2.9.0.2.*", ">=2.1,<3"), "" for any
    group: str  # which list it is in: "requirements", "dependencies", "optional-dependencies.dev", ...
    line: int
    column: int  # 1-based, of the requirement's first character
    end_column: int  # exclusive


@dataclass(frozen=True)
class Manifest:
    requirements: tuple[Requirement, ...]
    comments: tuple[tuple[int, int, int, str], ...]  # (line, column, end column, text) of each `#` comment
    error: tuple[str, int | None] | None = None  # (message, line) when the file cannot be read as its format


_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
_COMMENT = re.compile(r"(^|\s)#.*$")


def kind(path: str) -> str | None:
    """"requirements", "pyproject" or "conda" for a dependency file's name, else None."""
    posix = PurePosixPath(path.replace("\\", "/"))
    name = posix.name.lower()
    if name == "pyproject.toml":
        return "pyproject"
    if name in ("environment.yml", "environment.yaml"):
        return "conda"
    if name.endswith(".txt") and (name.startswith("requirements") or posix.parent.name.lower() == "requirements"):
        return "requirements"
    return None


def decode(data: bytes) -> str:
    """A dependency file's text: UTF-8 (pip, TOML and YAML read it so), a BOM allowed."""
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise SourceError("binary file: contains NUL bytes, not a dependency list", line)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SourceError(f"cannot decode byte {data[exc.start]:#04x} as UTF-8; save the file as UTF-8", line) from None


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read(text: str, path: str) -> Manifest:
    found = kind(path)
    comments = tuple(_comments(text))
    if found == "pyproject":
        return _pyproject(text, comments)
    if found == "conda":
        return Manifest(tuple(_conda(text)), comments)
    return Manifest(tuple(_requirements(text)), comments)


def _comments(text: str) -> list[tuple[int, int, int, str]]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        match = _COMMENT.search(line)
        if match:
            start = match.start() + len(match.group(1))
            out.append((number, start + 1, len(line) + 1, line[start:]))
    return out


def parse_requirement(text: str, group: str, line: int, column: int) -> Requirement | None:
    """A PEP 508 requirement (`torch[extra]>=2.1; python_version>"3"`), or None for anything else."""
    body = text.split(";", 1)[0].strip()
    if not body or body.startswith(("-", ".", "/", "git+", "http:", "https:", "file:")) or " @ " in body:
        return None
    match = _NAME.match(body)
    if match is None:
        return None
    spec = match.group(3).strip().strip("()").replace(" ", "")
    if spec and not re.match(r"^(===?|~=|!=|<=?|>=?)", spec):
        return None
    width = len(text.rstrip())
    return Requirement(normalize(match.group(1)), spec, group, line, column, column + width)


def _requirements(text: str) -> list[Requirement]:
    out = []
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        start, raw = number, lines[number]
        while raw.rstrip().endswith("\\") and number + 1 < len(lines):  # a continued line
            number += 1
            raw = raw.rstrip()[:-1] + " " + lines[number]
        number += 1
        body = _COMMENT.sub("", raw)
        indent = len(body) - len(body.lstrip())
        requirement = parse_requirement(body, "requirements", start + 1, indent + 1)
        if requirement is not None:
            out.append(requirement)
    return out


def _pyproject(text: str, comments: tuple[tuple[int, int, int, str], ...]) -> Manifest:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        return Manifest((), comments, (f"not valid TOML: {exc}", int(line.group(1)) if line else None))
    lists: list[tuple[str, object]] = []
    project = data.get("project")
    if isinstance(project, dict):
        lists.append(("dependencies", project.get("dependencies")))
        extras = project.get("optional-dependencies")
        if isinstance(extras, dict):
            lists += [(f"optional-dependencies.{name}", items) for name, items in extras.items()]
    groups = data.get("dependency-groups")
    if isinstance(groups, dict):
        lists += [(f"dependency-groups.{name}", items) for name, items in groups.items()]
    lines = text.splitlines()
    cursor = (0, 0)
    out = []
    for group, items in lists:
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, str):
                continue  # an include-group table
            where = _locate(lines, item, cursor)
            if where is None:
                continue
            cursor = where
            requirement = parse_requirement(item, group, where[0] + 1, where[1] + 2)
            if requirement is not None:
                out.append(requirement)
    return Manifest(tuple(out), comments)


def _locate(lines: list[str], item: str, after: tuple[int, int]) -> tuple[int, int] | None:
    """(line index, column index of the opening quote) of the TOML string holding `item`, from `after` on."""
    for number in range(after[0], len(lines)):
        for quote in ('"', "'"):
            column = lines[number].find(quote + item + quote, after[1] if number == after[0] else 0)
            if column >= 0:
                return number, column
    return None


_CONDA = re.compile(r"^(?:[\w.-]+::)?([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$")


def _conda_requirement(spec: str, line: int, column: int) -> Requirement | None:
    """A conda match spec as the pip requirement it means: `pytorch=2.1` is `torch==2.1.*`; a build string
    (`pytorch=2.1.0=py3.11_0`) is dropped."""
    match = _CONDA.match(spec.strip())
    if match is None:
        return None
    name = normalize(match.group(1))
    name = "torch" if name == "pytorch" else name
    words = match.group(2).split()
    version = words[0] if words else ""
    if version and version[0] not in "=<>!~":
        version = "=" + version  # `pytorch 2.1.*`
    if version.startswith("=") and not version.startswith("=="):
        pinned = version[1:].split("=", 1)[0]
        version = "==" + pinned + ("" if pinned.endswith("*") else ".*")
    elif version.startswith("=="):
        version = "==" + version[2:].split("=", 1)[0]
    return Requirement(name, version, "dependencies", line, column, column + len(spec.rstrip()))


def _conda(text: str) -> list[Requirement]:
    out: list[Requirement] = []
    in_dependencies, pip_indent = False, -1
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_dependencies, pip_indent = line.strip() == "dependencies:", -1
            continue
        if not in_dependencies:
            continue
        item = line.strip()
        if not item.startswith("- "):
            continue
        value = item[2:].strip().strip("'\"")
        column = indent + 3 + (len(item[2:]) - len(item[2:].lstrip()))
        if pip_indent >= 0 and indent <= pip_indent:
            pip_indent = -1
        if value == "pip:":
            pip_indent = indent
        elif pip_indent >= 0:
            requirement = parse_requirement(value, "pip", number, column)
            if requirement is not None:
                out.append(requirement)
        else:
            conda = _conda_requirement(value, number, column)
            if conda is not None:
                out.append(conda)
    return out
