"""`portcheck report`: one page a team reads to decide, plan and track a port. The scan's findings for each target,
side by side: a verdict per target, a category × target matrix, a heat map of the files, every finding with its
code frame, reason, sources and fix, and, against a baseline, what is new and what was fixed.

The page is one self-contained HTML file (CSS and SVG inline, no script needed, nothing loaded from the network),
rendered with Jinja2 with autoescaping on, so every piece of text from the scanned tree is escaped. The same
content renders as markdown for a pull request comment or $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import datetime
import difflib
import functools
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import jinja2
import markupsafe

from portcheck import __version__
from portcheck.escape import markdown_code, markdown_text, printable
from portcheck.findings import CATEGORIES, LEFT_OUT_REASONS, Edit, Finding, ScanResult, Severity
from portcheck.knowledge import RuleInfo, load
from portcheck.report.decision import PLACES, Decision, decide
from portcheck.report.links import Link, source_links
from portcheck.report.models import ModelView
from portcheck.report.trend import Trend, trend

# Okabe and Ito's palette, which readers with any common colour-vision deficiency tell apart; every colour also
# has a text label on the page.
SEVERITY_COLOURS = {Severity.ERROR: "#D55E00", Severity.WARNING: "#E69F00", Severity.INFO: "#0072B2"}


@dataclass(frozen=True)
class Shown:
    """How one target reports a finding: its severity, wording and fix may differ from another target's."""

    chip: str
    severity: Severity
    message: str
    fix_title: str = ""
    fix_safety: str = ""
    fix_diff: str = ""


@dataclass
class Entry:
    """One finding as the page shows it: the same rule, file and line on several targets is one entry, whatever
    each target's wording, with each target's severity and message."""

    anchor: str
    code: str
    name: str
    category: str
    path: str  # relative to the project
    line: int
    column: int
    runs: str
    shown: list[Shown] = field(default_factory=list)
    frame: list[tuple[int, str, bool]] = field(default_factory=list)  # (number, text, flagged)
    reason: str = ""
    sources: list[Link] = field(default_factory=list)
    fingerprints: set[str] = field(default_factory=set)

    @property
    def severity(self) -> Severity:
        """The worst of the targets': what the file's tile and the sort go by."""
        return max(s.severity for s in self.shown)

    @property
    def targets(self) -> list[str]:
        return [s.chip for s in self.shown]

    @property
    def alike(self) -> bool:
        """Every target says the same, at the same severity: one line says it for all."""
        return len({(s.severity, s.message) for s in self.shown}) == 1

    @property
    def fix(self) -> Shown | None:
        return next((s for s in self.shown if s.fix_title), None)

    @property
    def fixes(self) -> list[tuple[list[str], Shown]]:
        """Each distinct fix with the targets it is offered on (a fix names the target's device or backend)."""
        out: dict[tuple[str, str, str], tuple[list[str], Shown]] = {}
        for s in self.shown:
            if s.fix_title:
                out.setdefault((s.fix_title, s.fix_safety, s.fix_diff), ([], s))[0].append(s.chip)
        return list(out.values())

    def on(self, chip: str) -> Shown | None:
        return next((s for s in self.shown if s.chip == chip), None)


@dataclass
class FileRow:
    path: str
    anchor: str
    lines: int
    counts: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # per chip: (errors, warnings, infos)
    entries: list[Entry] = field(default_factory=list)

    @property
    def worst(self) -> tuple[int, int, int]:
        """(errors, warnings, infos) over the targets, each finding counted once at its worst severity."""
        c = Counter(e.severity for e in self.entries)
        return c[Severity.ERROR], c[Severity.WARNING], c[Severity.INFO]

    @property
    def folder(self) -> str:
        return self.path.rpartition("/")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]


@dataclass(frozen=True)
class Change:
    """Against a baseline: findings new since it, and recorded ones no longer found."""

    new: list[Entry]
    fixed: list[tuple[str, str, int]]  # (code, path, line) as the baseline recorded them


@dataclass(frozen=True)
class NotScanned:
    reason: str
    items: list[tuple[str, str]]  # (path, detail)


@dataclass
class Page:
    title: str
    project: str
    generated: str
    version: str
    paths: list[str]
    decisions: list[Decision]
    chips: list[str]
    matrix: list[tuple[str, list[tuple[int, int, int]]]]  # category -> per chip (errors, warnings, infos)
    files: list[FileRow]
    entries: int
    change: Change | None = None
    colours: dict[str, str] = field(default_factory=dict)
    models: list[ModelView] = field(default_factory=list)
    not_scanned: list[NotScanned] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, why) files that could not be analysed
    trend: Trend | None = None
    new_since: dict[str, list[Entry]] = field(default_factory=dict)  # with a trend: per chip, the new findings

    @property
    def categories(self) -> list[str]:
        return [category for category, _ in self.matrix]


@dataclass(frozen=True)
class Project:
    """What the page is about: its name (the pyproject's, else the folder's) and how a scan's path becomes one
    relative to the project's folder."""

    name: str
    prefix: str = ""  # the project folder as the scan's paths start with it ("" when they are relative to it)

    def relative(self, path: str) -> str:
        return path[len(self.prefix):] if self.prefix and path.startswith(self.prefix) else path


def build_page(results: Sequence[ScanResult], paths: Sequence[str], lines_for: Callable[[str], list[str]],
               fix_diff: Callable[[Finding], str], change: tuple[list[Finding], list[tuple[str, str, int]]] | None
               = None, models: Sequence[ModelView] = (), project: Project | None = None,
               history: list[dict[str, Any]] | None = None) -> Page:
    """The page for the scans of one tree, one result per target, in the order given, and the models traced."""
    rules = load().rules
    project = project or Project("")
    chips = [result.target.chip for result in results]
    entries: dict[tuple[str, int, str, int], Entry] = {}
    by_finding: dict[tuple[str, str, int, int, str, str], Entry] = {}
    for result in results:
        seen: Counter[tuple[str, int, str]] = Counter()
        for f in result.findings:
            place = (f.path, f.line, f.code)
            key = (*place, seen[place])  # the n-th finding of a rule on a line is shared with the others' n-th
            seen[place] += 1
            entry = entries.get(key)
            if entry is None:
                entry = entries[key] = _entry(f, lines_for, rules, project)
            entry.shown.append(_shown(result.target.chip, f, fix_diff))
            entry.fingerprints.add(f.fingerprint)
            by_finding[(result.target.chip, f.path, f.line, f.column, f.code, f.message)] = entry
    by_file: dict[str, FileRow] = {}
    for entry in sorted(entries.values(), key=lambda e: (e.path, e.line, e.column, e.code)):
        row = by_file.get(entry.path)
        if row is None:
            row = by_file[entry.path] = FileRow(entry.path, _anchor("file", entry.path), 0)
        row.entries.append(entry)
    for row in by_file.values():
        row.lines = len(lines_for(_original(row.entries[0], project)))
        for chip in chips:
            c = Counter(s.severity for e in row.entries for s in e.shown if s.chip == chip)
            row.counts[chip] = (c[Severity.ERROR], c[Severity.WARNING], c[Severity.INFO])
    matrix = []
    for category in CATEGORIES:
        cells = []
        for result in results:
            counts = Counter(f.severity for f in result.findings if f.category == category)
            cells.append((counts[Severity.ERROR], counts[Severity.WARNING], counts[Severity.INFO]))
        if any(sum(cell) for cell in cells):
            matrix.append((category, cells))
    files = sorted(by_file.values(), key=lambda r: (*(-n for n in r.worst), r.path))
    shown_change = None
    if change is not None and results:
        new, fixed = change
        chip = results[0].target.chip
        picked = [by_finding.get((chip, f.path, f.line, f.column, f.code, f.message)) for f in new]
        shown_change = Change(list({id(e): e for e in picked if e is not None}.values()),
                              [(code, printable(project.relative(path)), line) for code, path, line in fixed])

    def anchor_of(chip: str, f: Finding) -> str:
        return by_finding[(chip, f.path, f.line, f.column, f.code, f.message)].anchor

    decisions = []
    for result in results:
        target = result.target
        sdk = f", Neuron SDK {target.sdk}" if target.sdk else ""
        decisions.append(decide(result, rules, models, f"{target.chip} ({target.stack} stack{sdk})",
                                functools.partial(anchor_of, target.chip)))
    page = Page(
        title=f"{project.name}: migration report" if project.name else "portcheck migration report",
        project=project.name, version=__version__, paths=[printable(p) for p in paths],
        generated=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        decisions=decisions, chips=chips, matrix=matrix, files=files, entries=len(entries), change=shown_change,
        colours={s.label: colour for s, colour in SEVERITY_COLOURS.items()}, models=list(models),
        not_scanned=_not_scanned(results, project),
        failed=[(printable(project.relative(e.path)), printable(e.message)) for e in results[0].errors
                if not e.message.startswith("too large to analyse")] if results else [],
    )
    if history:
        page.trend = trend(history, chips)
        by_print = {p: e for e in entries.values() for p in e.fingerprints}
        page.new_since = {chip: [by_print[p] for p in prints if p in by_print]
                          for chip, prints in page.trend.new.items()}
    return page


def _original(entry: Entry, project: Project) -> str:
    return project.prefix + entry.path if project.prefix and not entry.path.startswith(project.prefix) else \
        entry.path


def _not_scanned(results: Sequence[ScanResult], project: Project) -> list[NotScanned]:
    """What the scans left out, by reason (the targets' scans walk the same tree: the first one's)."""
    if not results:
        return []
    grouped: dict[str, list[tuple[str, str]]] = {}
    for item in results[0].left_out:
        grouped.setdefault(item.reason, []).append((printable(project.relative(item.path)), printable(item.detail)))
    return [NotScanned(reason, grouped[reason]) for reason in LEFT_OUT_REASONS if reason in grouped]


def _shown(chip: str, f: Finding, fix_diff: Callable[[Finding], str]) -> Shown:
    if f.fix is None:
        return Shown(chip, f.severity, printable(f.message))
    return Shown(chip, f.severity, printable(f.message), f.fix.title, f.fix.applicability,
                 printable_diff(fix_diff(f)))


def _entry(f: Finding, lines_for: Callable[[str], list[str]], rules: Mapping[str, RuleInfo],
           project: Project) -> Entry:
    info = rules.get(f.code)
    lines = lines_for(f.path)
    frame = [(n, printable(lines[n - 1].rstrip("\r\n")), f.line <= n <= f.end_line)
             for n in range(max(1, f.line - 2), min(len(lines), f.end_line + 2) + 1)]
    return Entry(
        anchor=_anchor("finding", f"{f.path}:{f.line}:{f.column}:{f.code}"), code=f.code, name=f.name,
        category=f.category, path=printable(project.relative(f.path)), line=f.line, column=f.column, runs=f.runs,
        frame=frame, reason=info.neuron if info else "", sources=source_links(info.source) if info else [],
    )


def fix_preview(path: str, lines: Sequence[str], edits: Sequence[Edit], context: int = 2) -> str:
    """One fix as a unified diff of the lines its edits touch, with `context` lines around them: a hunk for each
    group of nearby edits (an import added at the top, the call changed further down). Only those lines are
    rewritten and compared, so a preview costs the same in a short file and a long one."""
    groups: list[list[Edit]] = []
    for edit in sorted(edits, key=lambda e: (e.line, e.column)):
        if groups and edit.line <= max(e.end_line for e in groups[-1]) + 2 * context + 1:
            groups[-1].append(edit)
        else:
            groups.append([edit])
    out, shift = [f"--- a/{path}\n", f"+++ b/{path}\n"], 0
    for group in groups:
        first = max(1, group[0].line - context)
        last = min(len(lines), max(e.end_line for e in group) + context)
        before = [line + "\n" for line in lines[first - 1:last]]
        starts = [0]
        for line in before:
            starts.append(starts[-1] + len(line))
        text = "".join(before)
        for edit in sorted(group, key=lambda e: (e.line, e.column), reverse=True):
            start = min(starts[edit.line - first] + edit.column - 1, len(text))
            end = min(starts[min(edit.end_line - first, len(before))] + edit.end_column - 1, len(text))
            text = text[:start] + edit.content + text[end:]
        after = text.splitlines(keepends=True)
        for line in list(difflib.unified_diff(before, after, n=context))[2:]:
            if hunk := _HUNK.match(line):
                old_start, old_count, new_start, new_count = hunk.groups()
                line = (f"@@ -{int(old_start) + first - 1}{old_count or ''} "
                        f"+{int(new_start) + first - 1 + shift}{new_count or ''} @@\n")
            out.append(line)
        shift += len(after) - len(before)
    return "".join(out) if len(out) > 2 else ""


_HUNK = re.compile(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def printable_diff(diff: str) -> str:
    return "\n".join(printable(line) for line in diff.splitlines())


def _anchor(kind: str, text: str) -> str:
    return f"{kind}-{hashlib.sha256(text.encode(errors='surrogateescape')).hexdigest()[:12]}"


_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("portcheck.report", "templates"),
    autoescape=jinja2.select_autoescape(enabled_extensions=("html", "j2"), default=True),
    trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
)
_MARKDOWN = jinja2.Environment(
    loader=jinja2.PackageLoader("portcheck.report", "templates"), autoescape=False,
    trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
)
_MARKDOWN.filters.update(md=markdown_text, mdcode=markdown_code)


def write_html(page: Page, stream: TextIO) -> None:
    stream.write(_ENVIRONMENT.get_template("report.html.j2").render(page=page, Severity=Severity, places=PLACES))


def write_markdown_report(page: Page, stream: TextIO) -> None:
    stream.write(_MARKDOWN.get_template("report.md.j2").render(page=page, Severity=Severity, places=PLACES))


def inline_code(text: str) -> markupsafe.Markup:
    """Text escaped for HTML, with its `backticked` spans as code."""
    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))


_ENVIRONMENT.filters["code"] = inline_code
__all__ = ["Page", "Project", "build_page", "fix_preview", "write_html", "write_markdown_report"]
