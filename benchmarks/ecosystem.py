"""Precision of portcheck's rules on real code, like ruff's ecosystem checks: pinned releases of PyTorch projects
the rules were not tuned on, scanned for each target, with a committed human judgment of sampled findings.

The projects and their pins are in ``benchmarks/ecosystem/projects.toml``. Each is fetched once with
``python -m pip download --no-deps NAME==VERSION`` (a wheel or an sdist) into ``benchmarks/.cache/ecosystem/``
(``--cache-dir`` to change) and the ``.py`` files under its ``include`` folders are extracted to
``CACHE/ecosystem/NAME-VERSION/``. Delete the cache at will; it is rebuilt on the next run.

For each ``--target`` (default ``trn2`` and ``inf2``, each on its default stack and default rule selection) the
script runs one child process over every project::

    portcheck scan --isolated --no-cache --format json --exit-zero --no-respect-gitignore --target CHIP PATH...

and keys each warning or error finding by (project, path relative to the project's root, line, code); two
findings of one code on one line are one key. Info findings are not judged. Per code, every key is judged when
there are ``--sample`` (20) or fewer, else the ``--sample`` keys ranked lowest by a hash of ``--seed`` and the
key. The rank of a key depends on nothing else, so a new or moved finding changes the sample only where it ranks
in, and both targets share the sample wherever they share findings. ``--project`` scans only the named projects
and draws the sample from their findings, so it may list findings the full run does not sample (and exit 1);
the precision to quote is the full run's.

``benchmarks/ecosystem/judgments.toml`` holds a verdict (``tp``: a real problem when this code runs on Neuron;
``fp``: not one) and a one-line reason per key; a judgment with ``target`` applies to that target only and
overrides one without. Its ``misses`` list records constructs that break on Neuron and that portcheck does not
flag, with the code that should fire; a miss counts as found when a finding of that code (any severity) is on
its line (or between ``line`` and ``end_line``).

Projects are tuning projects (``set = "tuning"``: rules were changed while looking at their findings) or test
projects (``set = "test"``: never), reported apart, each with its own sample. A test project has recall labels in
``benchmarks/ecosystem/labels/<project>.toml``, written by hand before portcheck ever ran on it: constructs that
hurt on Neuron (path, lines, category, target, reason). A label counts as found when a finding of its category
(any severity) overlaps its lines (a finding over several lines, such as a hand-written attention from its q @ kᵀ to
its @ v, counts on each of them). ``--set`` runs one kind only. A judgment may also be ``unsure`` (left out of
precision).

Prints, per set and target, precision per rule, per category and overall (the share of judged sampled keys that are
``tp``; the ``weighted`` column weights each rule's precision by its number of keys), recall over the misses,
the sampled keys nobody judged yet, and the judgments no finding matches any more (stale). ``--list-unjudged``
prints each unjudged key with its message, the code around it and a line to paste into the judgment file.

Standard library only; exit code 0 when every sampled key is judged, 1 when some are not, 2 on an error.

    python benchmarks/ecosystem.py
    python benchmarks/ecosystem.py --project kornia --target inf2 --list-unjudged
    python benchmarks/ecosystem.py --json eco.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from corpus import DEFAULT_CACHE, Fail, main_of

HERE = Path(__file__).resolve().parent
PROJECTS_FILE = HERE / "ecosystem" / "projects.toml"
JUDGMENTS_FILE = HERE / "ecosystem" / "judgments.toml"
TARGETS = ("trn2", "inf2")
SETS = ("tuning", "test")
LABELS_DIR = HERE / "ecosystem" / "labels"
CATEGORIES = ("cuda-api", "cuda-library", "dynamic-shape", "unsupported-op", "dtype", "custom-attention", "host-sync",
              "training", "distributed", "compile", "memory")
VERDICTS = {"tp": "true positive", "fp": "false positive", "unsure": "ambiguous (left out of precision)"}
JUDGED_SEVERITIES = ("error", "warning")
DEFAULT_SAMPLE = 20

Key = tuple[str, str, int, str]  # project, path relative to the project's root, line, code


# ---- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Project:
    name: str
    requirement: str
    include: tuple[str, ...]
    tests: bool
    pip_args: tuple[str, ...] = ()
    set: str = "tuning"  # "tuning": rules were changed looking at its findings; "test": never (the judging rubric)

    @property
    def dist(self) -> str:
        return self.requirement.partition("==")[0]

    @property
    def version(self) -> str:
        return self.requirement.partition("==")[2]

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"


@dataclass(frozen=True)
class Judgment:
    project: str
    path: str
    line: int
    code: str
    verdict: str
    reason: str
    target: str | None = None

    @property
    def key(self) -> Key:
        return (self.project, self.path, self.line, self.code)


@dataclass(frozen=True)
class Miss:
    project: str
    path: str
    line: int
    code: str
    reason: str
    target: str | None = None
    end_line: int | None = None  # a statement over several lines: a finding on any of them counts

    @property
    def key(self) -> Key:
        return (self.project, self.path, self.line, self.code)

    @property
    def lines(self) -> range:
        return range(self.line, (self.end_line or self.line) + 1)


@dataclass(frozen=True)
class Label:
    """A construct that hurts on Neuron, written down by hand before portcheck ran on the project (recall)."""

    project: str
    path: str
    line: int
    end_line: int
    category: str
    target: str  # "both", "trn2" or "inf2"
    reason: str

    def applies(self, target: str) -> bool:
        return self.target in ("both", target)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise Fail(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise Fail(f"{path}: not valid TOML: {exc}") from None


def load_projects(path: Path = PROJECTS_FILE) -> list[Project]:
    projects = []
    for i, entry in enumerate(_read_toml(path).get("project", []), 1):
        where = f"{path.name}: project {i}"
        requirement = entry.get("requirement", "")
        if not isinstance(entry.get("name"), str) or not re.fullmatch(r"[A-Za-z0-9_.-]+==[A-Za-z0-9_.+-]+",
                                                                       requirement):
            raise Fail(f"{where}: needs a name and an exact requirement NAME==VERSION")
        if not isinstance(entry.get("tests"), bool) or not entry.get("include"):
            raise Fail(f"{where} ({entry['name']}): needs include = [...] and tests = true/false")
        if entry.get("set", "tuning") not in SETS:
            raise Fail(f"{where} ({entry['name']}): set must be one of {', '.join(SETS)}")
        projects.append(Project(entry["name"], requirement, tuple(entry["include"]), entry["tests"],
                                tuple(entry.get("pip_args", ())), entry.get("set", "tuning")))
    if len({p.name for p in projects}) != len(projects):
        raise Fail(f"{path.name}: two projects share a name")
    return projects


def _entry(entry: dict[str, Any], where: str, fields: Iterable[str], optional: Iterable[str] = ()) -> dict[str, Any]:
    """The fields of one judgment or miss, checked: a message names the entry and what is wrong with it."""
    out: dict[str, Any] = {}
    for name in fields:
        value = entry.get(name)
        if name == "line":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise Fail(f"{where}: line must be a positive integer")
        elif not isinstance(value, str) or not value.strip():
            raise Fail(f"{where}: {name} is missing or empty")
        out[name] = value
    if not re.fullmatch(r"PC\d{3}", out["code"]):
        raise Fail(f"{where}: code {out['code']!r} is not a PC code")
    target = entry.get("target")
    if target is not None and target not in TARGETS:
        raise Fail(f"{where}: target must be one of {', '.join(TARGETS)}")
    unknown = set(entry) - set(fields) - set(optional) - {"target"}
    if unknown:
        raise Fail(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    out["target"] = target
    for name in optional:
        value = entry.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < out["line"]):
            raise Fail(f"{where}: {name} must be an integer not below line")
        out[name] = value
    return out


def load_judgments(path: Path = JUDGMENTS_FILE) -> tuple[list[Judgment], list[Miss]]:
    """The judgments and misses of the file, validated: verdicts, non-empty reasons, no key judged twice."""
    data = _read_toml(path)
    judgments: list[Judgment] = []
    seen: dict[tuple[Key, str | None], int] = {}
    for i, entry in enumerate(data.get("findings", []), 1):
        where = f"{path.name}: findings entry {i} ({entry.get('project')} {entry.get('path')}:{entry.get('line')})"
        fields = _entry(entry, where, ("project", "path", "line", "code", "verdict", "reason"))
        if fields["verdict"] not in VERDICTS:
            raise Fail(f"{where}: verdict must be one of {', '.join(VERDICTS)}")
        judgment = Judgment(**fields)
        slot = (judgment.key, judgment.target)
        if slot in seen:
            raise Fail(f"{where}: judged twice (also entry {seen[slot]})")
        seen[slot] = i
        judgments.append(judgment)
    misses: list[Miss] = []
    seen_miss: set[tuple[Key, str | None]] = set()
    for i, entry in enumerate(data.get("misses", []), 1):
        where = f"{path.name}: misses entry {i} ({entry.get('project')} {entry.get('path')}:{entry.get('line')})"
        miss = Miss(**_entry(entry, where, ("project", "path", "line", "code", "reason"), ("end_line",)))
        if (miss.key, miss.target) in seen_miss:
            raise Fail(f"{where}: recorded twice")
        seen_miss.add((miss.key, miss.target))
        misses.append(miss)
    return judgments, misses


def load_labels(folder: Path = LABELS_DIR) -> list[Label]:
    """Every `labels/<project>.toml`, validated: a known category and target, lines in order, a reason."""
    labels: list[Label] = []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        project = path.stem
        for i, entry in enumerate(_read_toml(path).get("labels", []), 1):
            where = f"{path.name}: label {i} ({entry.get('path')}:{entry.get('line')})"
            line, end = entry.get("line"), entry.get("end_line", entry.get("line"))
            if not isinstance(line, int) or not isinstance(end, int) or line < 1 or end < line:
                raise Fail(f"{where}: line and end_line must be positive integers, end_line not below line")
            if entry.get("category") not in CATEGORIES:
                raise Fail(f"{where}: category must be one of {', '.join(CATEGORIES)}")
            if entry.get("target", "both") not in ("both", *TARGETS):
                raise Fail(f"{where}: target must be both, trn2 or inf2")
            if not isinstance(entry.get("path"), str) or not str(entry.get("reason", "")).strip():
                raise Fail(f"{where}: path and reason are required")
            labels.append(Label(project, entry["path"], line, end, entry["category"], entry.get("target", "both"),
                                entry["reason"]))
    return labels


def label_recall(labels: Iterable[Label], findings: Iterable[tuple[Key, str] | tuple[Key, str, int]],
                 target: str) -> dict[str, Any]:
    """Labels hit by a finding of the same category (any severity) whose lines overlap theirs, per category. A
    finding is (key, category) or (key, category, its last line) for one over several lines."""
    placed: dict[tuple[str, str], set[tuple[int, int, str]]] = defaultdict(set)
    for (project, path, line, _code), category, *last in findings:
        placed[(project, path)].add((line, max([line, *last]), category))
    rows = []
    for label in labels:
        if not label.applies(target):
            continue
        here = placed.get((label.project, label.path), set())
        hit = any(line <= label.end_line and label.line <= end and category == label.category
                  for line, end, category in here)
        near = sorted({c for line, end, c in here if line <= label.end_line and label.line <= end} - {label.category})
        rows.append({"project": label.project, "path": label.path, "line": label.line, "category": label.category,
                     "found": hit, "other_category_on_line": near, "reason": label.reason})
    by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        by_category[row["category"]][0] += row["found"]
        by_category[row["category"]][1] += 1
    hit = sum(r["found"] for r in rows)
    return {"labels": len(rows), "found": hit, "recall": _round(hit / len(rows)) if rows else None,
            "by_category": {c: {"found": f, "labels": n} for c, (f, n) in sorted(by_category.items())}, "rows": rows}


def kept_rows(labels: dict[str, Any], part: str, keep_test_rows: bool) -> dict[str, Any]:
    """The label recall as the output shows it: a test project's rows (paths, lines, reasons of what it misses) are
    left out unless asked for, since reading them while working on the rules would make those projects tuning
    ones (JUDGING.md); the counts, per category too, stay."""
    if part != "test" or keep_test_rows:
        return labels
    return {key: value for key, value in labels.items() if key != "rows"}


def verdict_for(judgments: dict[tuple[Key, str | None], Judgment], key: Key, target: str) -> Judgment | None:
    """The judgment of a key for a target: one made for that target, else one made for every target."""
    return judgments.get((key, target)) or judgments.get((key, None))


def judged_keys(findings: Iterable[tuple[Key, dict[str, Any]]], judgments: Iterable[Judgment]
                ) -> list[tuple[Key, dict[str, Any]]]:
    """Each finding under the key it was judged by: its own, or, for a finding that now spans lines (PC209 from the
    read of a size to its use, PC401 from the scores to the values) and has no judgment of its own, the first line
    of its span that a judgment of the same code names. A finding that grew backwards from the line it used to be
    reported on is the same finding: it keeps its verdict and its place in the sample."""
    lines: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    exact: set[Key] = set()
    for j in judgments:
        lines[(j.project, j.path, j.code)].add(j.line)
        exact.add(j.key)
    out = []
    for key, finding in findings:
        end = finding.get("end_line", key[2])
        if key not in exact and end > key[2]:
            inside = sorted(n for n in lines.get((key[0], key[1], key[3]), ()) if key[2] < n <= end)
            if inside:
                key = (key[0], key[1], inside[0], key[3])
        out.append((key, finding))
    return out


# ---- sampling and precision ---------------------------------------------------------------------


def rank(key: Key, seed: int) -> str:
    """A key's place in the sample order: depends on the seed and the key alone."""
    project, path, line, code = key
    return hashlib.sha256(f"{seed}:{project}:{path}:{line}:{code}".encode()).hexdigest()


def sample(keys: Iterable[Key], size: int, seed: int) -> dict[str, list[Key]]:
    """Per code, every key when there are `size` or fewer, else the `size` keys of lowest rank; sorted."""
    by_code: dict[str, set[Key]] = defaultdict(set)
    for key in keys:
        by_code[key[3]].add(key)
    picked = {}
    for code, pool in sorted(by_code.items()):
        chosen = pool if len(pool) <= size else sorted(pool, key=lambda k: rank(k, seed))[:size]
        picked[code] = sorted(chosen)
    return picked


@dataclass
class Tally:
    """Counts for one rule, category or the whole target."""

    keys: int = 0
    sampled: int = 0
    tp: int = 0
    fp: int = 0
    unsure: int = 0
    weighted_tp: float = 0.0  # sum over rules of precision x keys: the estimated true positives among all keys
    weighted_keys: int = 0  # keys of the rules with at least one judged sample

    @property
    def unjudged(self) -> int:
        return self.sampled - self.tp - self.fp - self.unsure

    @property
    def precision(self) -> float | None:
        judged = self.tp + self.fp
        return self.tp / judged if judged else None

    @property
    def weighted(self) -> float | None:
        return self.weighted_tp / self.weighted_keys if self.weighted_keys else None

    def add(self, other: Tally) -> None:
        self.keys += other.keys
        self.sampled += other.sampled
        self.tp += other.tp
        self.fp += other.fp
        self.unsure += other.unsure
        self.weighted_tp += other.weighted_tp
        self.weighted_keys += other.weighted_keys

    def as_json(self) -> dict[str, Any]:
        return {"findings": self.keys, "sampled": self.sampled, "tp": self.tp, "fp": self.fp,
                "unjudged": self.unjudged, "precision": _round(self.precision), "weighted": _round(self.weighted)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def precision(keys: Iterable[Key], sampled: dict[str, list[Key]], judgments: dict[tuple[Key, str | None], Judgment],
              target: str) -> tuple[dict[str, Tally], list[Key]]:
    """Per code, the tally of the keys and of the judged sample; and the sampled keys with no judgment."""
    count: dict[str, int] = defaultdict(int)
    for key in set(keys):
        count[key[3]] += 1
    tallies: dict[str, Tally] = {}
    unjudged: list[Key] = []
    for code in sorted(count):
        tally = Tally(keys=count[code], sampled=len(sampled.get(code, [])))
        for key in sampled.get(code, []):
            judgment = verdict_for(judgments, key, target)
            if judgment is None:
                unjudged.append(key)
            elif judgment.verdict == "tp":
                tally.tp += 1
            elif judgment.verdict == "unsure":
                tally.unsure += 1
            else:
                tally.fp += 1
        if tally.precision is not None:
            tally.weighted_tp = tally.precision * tally.keys
            tally.weighted_keys = tally.keys
        tallies[code] = tally
    return tallies, unjudged


def rollup(tallies: dict[str, Tally], category_of: dict[str, str]) -> tuple[dict[str, Tally], Tally]:
    categories: dict[str, Tally] = defaultdict(Tally)
    total = Tally()
    for code, tally in tallies.items():
        categories[category_of.get(code, "?")].add(tally)
        total.add(tally)
    return dict(sorted(categories.items())), total


def recall(misses: Iterable[Miss], found: set[Key], target: str) -> dict[str, Any]:
    """Misses that apply to the target: found (a finding of the expected code, any severity, on its lines) or
    still missed; `other_code_on_line` tells whether some other code is reported there."""
    rows: list[dict[str, Any]] = []
    for miss in misses:
        if miss.target not in (None, target):
            continue
        codes = {k[3] for k in found if k[:2] == (miss.project, miss.path) and k[2] in miss.lines}
        rows.append({"project": miss.project, "path": miss.path, "line": miss.line, "code": miss.code,
                     "found": miss.code in codes, "other_code_on_line": bool(codes - {miss.code}),
                     "reason": miss.reason})
    hit = sum(1 for r in rows if r["found"])
    return {"misses": len(rows), "found": hit, "recall": _round(hit / len(rows)) if rows else None, "rows": rows}


# ---- corpus -------------------------------------------------------------------------------------


def _archive(cache: Path, project: Project) -> Path | None:
    stem = re.sub(r"[-_.]+", "_", f"{project.dist}-{project.version}_").lower()
    for candidate in sorted(cache.iterdir()) if cache.is_dir() else []:
        name = re.sub(r"[-_.]+", "_", candidate.name.lower())
        if name.startswith(stem) and candidate.name.endswith((".whl", ".tar.gz")):
            return candidate
    return None


def download(cache: Path, project: Project) -> Path:
    archive = _archive(cache, project)
    if archive is not None:
        return archive
    cache.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", project.requirement, "--no-deps",
               "--disable-pip-version-check", *project.pip_args, "-d", str(cache)]
    print(f"downloading {project.requirement} into {cache} ...", file=sys.stderr)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise Fail(f"cannot run pip: {exc}") from None
    archive = _archive(cache, project)
    if proc.returncode != 0 or archive is None:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines[-1:] or ["no output"]
        raise Fail(f"pip download {project.requirement} failed (no network, or no such release?): {errors[-1]}")
    return archive


def _members(archive: Path) -> dict[str, bytes]:
    """The .py files of a wheel or sdist by path inside the project (an sdist's top folder stripped)."""
    files: dict[str, bytes] = {}
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.endswith(".py"):
                    files[name] = zf.read(name)
        return files
    with tarfile.open(archive, "r:gz") as tf:
        for member in tf.getmembers():
            parts = PurePosixPath(member.name).parts
            if member.isfile() and member.name.endswith(".py") and len(parts) > 1:
                handle = tf.extractfile(member)
                if handle is not None:
                    files["/".join(parts[1:])] = handle.read()
    return files


def extract(archive: Path, project: Project, destination: Path) -> Path:
    """Extract the project's included .py files once; a half-finished extraction is never taken for a finished one."""
    if destination.is_dir():
        return destination
    try:
        members = _members(archive)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError):
        raise Fail(f"{archive}: not a valid wheel or sdist (delete it and rerun)") from None
    wanted = {path: data for path, data in members.items()
              if any(path == inc or path.startswith(inc.rstrip("/") + "/") for inc in project.include)}
    if not wanted:
        raise Fail(f"{archive}: no .py files under {', '.join(project.include)}")
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        for path, data in wanted.items():
            target = staging.joinpath(*PurePosixPath(path).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        staging.rename(destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return destination


# ---- scanning -----------------------------------------------------------------------------------


def _portcheck() -> list[str]:
    script = Path(sys.executable).parent / "portcheck"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "portcheck"]


def scan(root: Path, projects: list[Project], target: str) -> tuple[dict[str, Any], float]:
    # Each project's folder, as a user scans a checkout (`portcheck scan .`): its test files are left out by
    # default (`tests = "exclude"`), as they would be there. The folder holds only the `include`d files.
    paths = [p.folder for p in projects if any((root / p.folder / inc).exists() for inc in p.include)]
    command = [*_portcheck(), "scan", "--isolated", "--no-cache", "--format", "json", "--exit-zero",
               "--no-respect-gitignore", "--target", target, *paths]
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise Fail(f"cannot run portcheck ({command[0]}): {exc}") from None
    elapsed = time.perf_counter() - started
    message = " ".join(proc.stderr.split()) or f"exit code {proc.returncode}, no message"
    if proc.returncode != 0:
        raise Fail(f"portcheck scan --target {target} failed: {message}")
    try:
        return json.loads(proc.stdout), elapsed
    except json.JSONDecodeError:
        raise Fail(f"portcheck scan --target {target} did not print JSON: {message}") from None


def keyed(findings: list[dict[str, Any]], projects: list[Project]) -> list[tuple[Key, dict[str, Any]]]:
    """(key, finding) for each finding: its path split into the project and the path inside it."""
    by_folder = {p.folder: p.name for p in projects}
    out = []
    for finding in findings:
        folder, _, path = finding["path"].replace("\\", "/").partition("/")
        if folder in by_folder:
            out.append(((by_folder[folder], path, finding["line"], finding["code"]), finding))
    return out


# ---- output -------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]], right: set[int]) -> None:
    widths = [max(len(x) for x in column) for column in zip(header, *rows, strict=False)]

    def line(cells: tuple[str, ...]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in pairs).rstrip()

    print(line(header))
    print(line(tuple("-" * w for w in widths)))
    for row in rows:
        print(line(row))


def _tally_row(name: str, tally: Tally, *extra: str) -> tuple[str, ...]:
    return (name, *extra, str(tally.keys), str(tally.sampled), str(tally.tp), str(tally.fp), str(tally.unjudged),
            _pct(tally.precision), _pct(tally.weighted))


COLUMNS = ("findings", "sampled", "tp", "fp", "unjudged", "precision", "weighted")


def print_target(result: dict[str, Any], rules: dict[str, Tally], categories: dict[str, Tally], total: Tally,
                 category_of: dict[str, str]) -> None:
    print(f"\n== {result['set']} projects, {result['target']} ({result['stack']}): {result['files']} files, "
          f"{total.keys} warning/error "
          f"findings (keys), {result['info']} info, scan {result['wall_seconds']:.0f}s ==")
    print()
    _table(("code", "category", *COLUMNS),
           [_tally_row(code, t, category_of.get(code, "?")) for code, t in rules.items()], set(range(2, 9)))
    print()
    _table(("category", *COLUMNS), [_tally_row(c, t) for c, t in categories.items()]
           + [_tally_row("overall", total)], set(range(1, 8)))
    rec = result["recall"]
    print(f"\nrecall over misses: {rec['found']}/{rec['misses']} ({_pct(rec['recall'])}) found (a finding of the "
          f"expected code, any severity, on the miss's lines); {sum(r['other_code_on_line'] for r in rec['rows'])} "
          f"have a finding of another code there")
    labels = result["labels"]
    if labels["labels"]:
        print(f"recall over hand-written labels: {labels['found']}/{labels['labels']} ({_pct(labels['recall'])}) "
              "found (a finding of the label's category, any severity, on its lines); per category: "
              + ", ".join(f"{c} {v['found']}/{v['labels']}" for c, v in labels["by_category"].items()))
    for err in result["errors"][:5]:
        print(f"  scan error: {err.get('path')}: {err.get('message')}")


def _excerpt(root: Path, folder: str, path: str, line: int, context: int,
             cache: dict[str, list[str]]) -> list[str]:
    if path not in cache:
        try:
            cache[path] = (root / folder / path).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            cache[path] = []
    lines = cache[path]
    return [f"  {'>' if n == line else ' '}{n:6d} | {lines[n - 1]}"
            for n in range(max(1, line - context), min(len(lines), line + context) + 1)]


def print_unjudged(unjudged: dict[Key, dict[str, Any]], root: Path, projects: list[Project], context: int) -> None:
    folders = {p.name: p.folder for p in projects}
    texts: dict[str, list[str]] = {}
    for key in sorted(unjudged):
        project, path, line, code = key
        info = unjudged[key]
        print(f"\n[{code}] {project} {path}:{line}  ({info['severity']}; {', '.join(info['targets'])})")
        print(f"  {info['message']}")
        print("\n".join(_excerpt(root, folders[project], path, line, context, texts)))
        print(f'  {{ project = "{project}", path = "{path}", line = {line}, code = "{code}", verdict = "", '
              f'reason = "" }},')


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Precision of portcheck's rules on pinned real projects, from "
                                     "committed judgments of sampled findings.")
    parser.add_argument("--target", action="append", choices=TARGETS, help="repeatable (default: trn2 and inf2)")
    parser.add_argument("--project", action="append", metavar="NAME",
                        help="only these projects (repeatable); the sample is then drawn from their findings alone")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, metavar="DIR",
                        help="where archives and extracted files are kept (default benchmarks/.cache/)")
    parser.add_argument("--judgments", type=Path, default=JUDGMENTS_FILE, metavar="FILE",
                        help="the judgment file (default benchmarks/ecosystem/judgments.toml)")
    parser.add_argument("--set", choices=SETS, help="only the tuning or only the test projects (default: both, "
                        "reported apart)")
    parser.add_argument("--labels", type=Path, default=LABELS_DIR, metavar="DIR",
                        help="the recall labels, one TOML file per project (default benchmarks/ecosystem/labels/)")
    parser.add_argument("--sample", type=int, default=DEFAULT_SAMPLE, metavar="N",
                        help=f"keys judged per code (default {DEFAULT_SAMPLE})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    parser.add_argument("--list-unjudged", action="store_true",
                        help="print each unjudged sampled finding with its code and a line to paste")
    parser.add_argument("--context", type=int, default=3, metavar="N", help="lines around each listed finding")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the results as JSON")
    parser.add_argument("--test-label-rows", action="store_true",
                        help="put the test projects' label rows (path, line, reason of each) in the JSON too; "
                             "by default only their counts, so that work on the rules never reads them")
    args = parser.parse_args(argv)
    if args.sample < 1:
        parser.error("--sample must be >= 1")
    return args


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    projects = load_projects()
    if args.set:
        projects = [p for p in projects if p.set == args.set]
    if args.project:
        unknown = set(args.project) - {p.name for p in projects}
        if unknown:
            raise Fail(f"--project {', '.join(sorted(unknown))}: not in {PROJECTS_FILE.name} "
                       f"({', '.join(p.name for p in projects)})")
        projects = [p for p in projects if p.name in args.project]
    judgment_list, misses = load_judgments(args.judgments)
    judgments = {(j.key, j.target): j for j in judgment_list}
    chosen = {p.name for p in projects}
    misses = [m for m in misses if m.project in chosen]
    labels = [label for label in load_labels(args.labels) if label.project in chosen]
    set_of = {p.name: p.set for p in projects}
    cache = args.cache_dir.expanduser().resolve() / "ecosystem"
    for project in projects:
        extract(download(cache, project), project, cache / project.folder)
    targets = args.target or list(TARGETS)
    category_of: dict[str, str] = {}

    results = []
    unjudged: dict[Key, dict[str, Any]] = {}
    matched: set[tuple[Key, str | None]] = set()
    for target in targets:
        report, elapsed = scan(cache, projects, target)
        every = keyed(report.get("findings", []), projects)
        category_of.update((f["code"], f.get("category", "?")) for _, f in every)
        for part in SETS:
            # Tuning and test projects apart (the judging rubric): the sample of each is drawn from its own findings.
            pairs = [(k, f) for k, f in every if set_of[k[0]] == part]
            if not any(p.set == part for p in projects):
                continue
            judged = judged_keys([(k, f) for k, f in pairs if f.get("severity") in JUDGED_SEVERITIES], judgment_list)
            keys = {k for k, _ in judged}
            picked = sample(keys, args.sample, args.seed)
            tallies, missing = precision(keys, picked, judgments, target)
            categories, total = rollup(tallies, category_of)
            for key in keys:
                for slot in ((key, target), (key, None)):
                    if slot in judgments:
                        matched.add(slot)
            first: dict[Key, dict[str, Any]] = {}
            for key, finding in judged:
                first.setdefault(key, finding)
            for key in missing:
                entry = unjudged.setdefault(key, {"severity": first[key].get("severity"), "targets": [],
                                                  "message": first[key].get("message", "")})
                entry["targets"].append(target)
            in_part = [m for m in misses if set_of[m.project] == part]
            result = {"target": target, "set": part, "stack": report.get("target", {}).get("stack", "?"),
                      "files": sum(1 for p in projects if p.set == part for _ in (cache / p.folder).rglob("*.py")),
                      "info": len(pairs) - len(judged),
                      "wall_seconds": round(elapsed, 1), "errors": [e for e in report.get("errors", [])
                                                                    if _project_of(e.get("path", ""), projects,
                                                                                   set_of) == part],
                      "rules": {c: t.as_json() | {"category": category_of.get(c, "?")} for c, t in tallies.items()},
                      "categories": {c: t.as_json() for c, t in categories.items()}, "overall": total.as_json(),
                      "unjudged": [list(k) for k in missing],
                      "recall": recall(in_part, {k for k, _ in pairs}, target),
                      "labels": kept_rows(label_recall([lb for lb in labels if set_of[lb.project] == part],
                                                       [(k, f.get("category", "?"), f.get("end_line", k[2]))
                                                        for k, f in pairs], target), part, args.test_label_rows)}
            print_target(result, tallies, categories, total, category_of)
            results.append(result)

    # A judgment no finding matches any more was made for code that moved or a finding that went away.
    stale = []
    if set(targets) == set(TARGETS):
        stale = sorted({(j.key, j.target) for j in judgment_list if j.project in chosen} - matched,
                       key=lambda s: (s[0], s[1] or ""))
    elapsed = time.perf_counter() - started
    print(f"\nunjudged sampled findings: {len(unjudged)}"
          + (" (python benchmarks/ecosystem.py --list-unjudged prints them)" if unjudged and not args.list_unjudged
             else ""))
    if stale:
        print(f"stale judgments (no finding at that line any more): {len(stale)}")
        for (name, path, line, code), only in stale[:20]:
            print(f"  {name} {path}:{line} {code}" + (f" ({only})" if only else ""))
    print(f"projects: {', '.join(p.requirement for p in projects)}; wall time {elapsed:.0f}s")
    if args.list_unjudged and unjudged:
        print("\n-- unjudged sampled findings --")
        print_unjudged(unjudged, cache, projects, args.context)

    if args.json is not None:
        payload = {"projects": [{"name": p.name, "requirement": p.requirement, "include": list(p.include),
                                 "tests": p.tests, "set": p.set} for p in projects],
                   "sample": args.sample, "seed": args.seed, "targets": results,
                   "stale": [{"key": list(k), "target": t} for k, t in stale], "wall_seconds": round(elapsed, 1)}
        try:
            args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise Fail(f"--json {args.json}: cannot write: {exc.strerror or exc}") from None
        print(f"wrote {args.json}")
    return 1 if unjudged else 0


def _project_of(path: str, projects: list[Project], set_of: dict[str, str]) -> str | None:
    folder = path.replace("\\", "/").partition("/")[0]
    return next((set_of[p.name] for p in projects if p.folder == folder), None)


def main(argv: list[str] | None = None) -> int:
    return main_of("ecosystem", run, _arguments(argv))


if __name__ == "__main__":
    sys.exit(main())
