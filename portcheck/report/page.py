"""`portcheck report`: one page a team reads to decide, plan and track a port. The scan's findings for each target,
side by side: a verdict per target, a category × target matrix, a heat map of the files, every finding with its
code frame, reason, sources and fix, and, against a baseline, what is new and what was fixed.

The page is one self-contained HTML file (CSS and SVG inline, no script needed, nothing loaded from the network),
rendered with Jinja2 with autoescaping on, so every piece of text from the scanned tree is escaped. The same
content renders as markdown for a pull request comment or $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import datetime
import difflib
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import jinja2
import markupsafe

from portcheck import __version__
from portcheck.escape import markdown_code, markdown_text, printable
from portcheck.findings import CATEGORIES, Applicability, Edit, Finding, ScanResult, Severity
from portcheck.knowledge import RuleInfo, load
from portcheck.report.links import Link, source_links
from portcheck.report.models import ModelView

# Okabe and Ito's palette, which readers with any common colour-vision deficiency tell apart; every colour also
# has a text label on the page.
SEVERITY_COLOURS = {Severity.ERROR: "#D55E00", Severity.WARNING: "#E69F00", Severity.INFO: "#0072B2"}


@dataclass(frozen=True)
class Verdict:
    target: str  # "trn2 (native stack, Neuron SDK 2.34)"
    chip: str
    errors: int
    warnings: int
    infos: int
    safe_fixes: int
    unsafe_fixes: int
    files_affected: int
    files: int
    could_not_analyse: int
    models: int = 0  # models traced for the page
    models_blocked: int = 0  # of them, those with errors on this target, or no plan for it


@dataclass
class Entry:
    """One finding as the page shows it: the same code, place and message for several targets is one entry."""

    anchor: str
    code: str
    name: str
    category: str
    severity: Severity
    message: str
    path: str
    line: int
    column: int
    targets: list[str] = field(default_factory=list)
    frame: list[tuple[int, str, bool]] = field(default_factory=list)  # (number, text, flagged)
    reason: str = ""
    sources: list[Link] = field(default_factory=list)
    fix_title: str = ""
    fix_safety: str = ""
    fix_diff: str = ""


@dataclass
class FileRow:
    path: str
    anchor: str
    lines: int
    errors: int
    warnings: int
    infos: int
    entries: list[Entry] = field(default_factory=list)


@dataclass(frozen=True)
class Change:
    """Against a baseline: findings new since it, and recorded ones no longer found."""

    new: list[Entry]
    fixed: list[tuple[str, str, int]]  # (code, path, line) as the baseline recorded them


@dataclass
class Page:
    title: str
    generated: str
    version: str
    paths: list[str]
    verdicts: list[Verdict]
    chips: list[str]
    matrix: list[tuple[str, list[tuple[int, int, int]]]]  # category -> per chip (errors, warnings, infos)
    files: list[FileRow]
    entries: int
    change: Change | None = None
    colours: dict[str, str] = field(default_factory=dict)
    models: list[ModelView] = field(default_factory=list)


def build_page(results: Sequence[ScanResult], paths: Sequence[str], lines_for: Callable[[str], list[str]],
               fix_diff: Callable[[Finding], str], change: tuple[list[Finding], list[tuple[str, str, int]]] | None
               = None, models: Sequence[ModelView] = ()) -> Page:
    """The page for the scans of one tree, one result per target, in the order given, and the models traced."""
    rules = load().rules
    verdicts = [_verdict(result, models) for result in results]
    chips = [result.target.chip for result in results]
    entries: dict[tuple[str, int, int, str, str], Entry] = {}
    for result in results:
        for f in result.findings:
            key = (f.path, f.line, f.column, f.code, f.message)
            entry = entries.get(key)
            if entry is None:
                entry = entries[key] = _entry(f, lines_for, fix_diff, rules)
            entry.targets.append(result.target.chip)
    by_file: dict[str, FileRow] = {}
    for entry in sorted(entries.values(), key=lambda e: (e.path, e.line, e.column, e.code)):
        row = by_file.get(entry.path)
        if row is None:
            row = by_file[entry.path] = FileRow(entry.path, _anchor("file", entry.path), len(lines_for(entry.path)),
                                                0, 0, 0)
        row.entries.append(entry)
        row.errors += entry.severity == Severity.ERROR
        row.warnings += entry.severity == Severity.WARNING
        row.infos += entry.severity == Severity.INFO
    matrix = []
    for category in CATEGORIES:
        cells = []
        for result in results:
            counts = Counter(f.severity for f in result.findings if f.category == category)
            cells.append((counts[Severity.ERROR], counts[Severity.WARNING], counts[Severity.INFO]))
        if any(sum(cell) for cell in cells):
            matrix.append((category, cells))
    files = sorted(by_file.values(), key=lambda r: (-r.errors, -r.warnings, -r.infos, r.path))
    shown_change = None
    if change is not None:
        new, fixed = change
        shown_change = Change([entries[(f.path, f.line, f.column, f.code, f.message)] for f in new
                               if (f.path, f.line, f.column, f.code, f.message) in entries], fixed)
    return Page(
        title="portcheck migration report", version=__version__, paths=[printable(p) for p in paths],
        generated=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        verdicts=verdicts, chips=chips, matrix=matrix, files=files, entries=len(entries), change=shown_change,
        colours={s.label: colour for s, colour in SEVERITY_COLOURS.items()}, models=list(models),
    )


def _verdict(result: ScanResult, models: Sequence[ModelView]) -> Verdict:
    counts = Counter(f.severity for f in result.findings)
    fixes = Counter(f.fix.applicability for f in result.findings if f.fix is not None)
    target = result.target
    sdk = f", Neuron SDK {target.sdk}" if target.sdk else ""
    on_target = [t for model in models for t in model.targets if t.chip == target.chip]
    blocked = sum(1 for model in models if model.error) + sum(1 for t in on_target if t.errors or t.plan is None)
    return Verdict(f"{target.chip} ({target.stack} stack{sdk})", target.chip, counts[Severity.ERROR],
                   counts[Severity.WARNING], counts[Severity.INFO], fixes[Applicability.SAFE],
                   fixes[Applicability.UNSAFE],
                   len({f.path for f in result.findings}), result.files, len(result.errors), len(models), blocked)


def _entry(f: Finding, lines_for: Callable[[str], list[str]], fix_diff: Callable[[Finding], str],
           rules: Mapping[str, RuleInfo]) -> Entry:
    info = rules.get(f.code)
    lines = lines_for(f.path)
    frame = [(n, printable(lines[n - 1].rstrip("\r\n")), f.line <= n <= f.end_line)
             for n in range(max(1, f.line - 2), min(len(lines), f.end_line + 2) + 1)]
    return Entry(
        anchor=_anchor("finding", f"{f.path}:{f.line}:{f.column}:{f.code}:{f.message}"), code=f.code, name=f.name,
        category=f.category, severity=f.severity, message=printable(f.message), path=printable(f.path),
        line=f.line, column=f.column, frame=frame, reason=info.neuron if info else "",
        sources=source_links(info.source) if info else [], fix_title=f.fix.title if f.fix else "",
        fix_safety=f.fix.applicability if f.fix else "", fix_diff=printable_diff(fix_diff(f)) if f.fix else "",
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
    stream.write(_ENVIRONMENT.get_template("report.html.j2").render(page=page, Severity=Severity))


def write_markdown_report(page: Page, stream: TextIO) -> None:
    stream.write(_MARKDOWN.get_template("report.md.j2").render(page=page, Severity=Severity))


def tile_size(lines: int, largest: int) -> int:
    """A heat map tile's side in pixels: its area grows with the file's lines."""
    return 48 + int(112 * (max(lines, 1) / max(largest, 1)) ** 0.5)


def inline_code(text: str) -> markupsafe.Markup:
    """Text escaped for HTML, with its `backticked` spans as code."""
    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))


_ENVIRONMENT.globals["tile_size"] = tile_size
_ENVIRONMENT.filters["code"] = inline_code
__all__ = ["Page", "build_page", "fix_preview", "write_html", "write_markdown_report"]
