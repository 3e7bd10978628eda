"""A pull-request review of portcheck's findings: the JSON body of GitHub's create-a-review call (one comment a
finding on its changed line, a ```suggestion where a safe fix rewrites whole lines) and a markdown comment."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from portcheck.escape import markdown_code, markdown_text, unicode_only
from portcheck.findings import Applicability, Finding, ScanResult, Severity


class Change(Protocol):
    """What a review needs of the diff it comments on (portcheck.review.Change, which the reports do not import):
    the head commit, and the hunk of changed lines around a finding."""

    head_sha: str

    def hunk_of(self, path: str, first: int, last: int) -> tuple[int, int] | None: ...

ICONS = {Severity.ERROR: "🔴 error", Severity.WARNING: "🟡 warning", Severity.INFO: "🔵 info"}


def review_body(result: ScanResult, change: Change, lines_for: Callable[[str], list[str]]) -> dict[str, Any]:
    """GitHub's create-a-review body. Each comment sits on the changed lines of one hunk (GitHub refuses lines
    outside the diff); a suggestion only where the finding lies wholly inside that hunk."""
    comments = []
    for f in result.findings:
        hunk = change.hunk_of(f.path, f.line, f.end_line) or (f.line, f.end_line)
        first, last = max(f.line, hunk[0]), min(f.end_line, hunk[1])
        inside = hunk[0] <= f.line and f.end_line <= hunk[1]
        comment = {"path": f.path, "line": last, "side": "RIGHT",
                   "body": _comment(f, lines_for(f.path) if inside else [])}
        if last > first:
            comment.update(start_line=first, start_side="RIGHT")
        comments.append(comment)
    return {"commit_id": change.head_sha, "event": "COMMENT", "body": summary_markdown(result),
            "comments": comments}


def summary_markdown(result: ScanResult) -> str:
    sdk = f", Neuron SDK {result.target.sdk}" if result.target.sdk else ""
    target = f"{result.target.chip} ({result.target.stack} stack{sdk})"
    if not result.findings and not result.errors:
        return f"**portcheck** found nothing to fix for {target} on the changed lines."
    by = Counter((f.category, f.severity) for f in result.findings)
    rows = ["| category | errors | warnings | info |", "|---|---:|---:|---:|"]
    for category in sorted({c for c, _ in by}):
        rows.append(f"| {category} | {by[(category, Severity.ERROR)]} | {by[(category, Severity.WARNING)]} | "
                    f"{by[(category, Severity.INFO)]} |")
    text = [f"**portcheck**: {len(result.findings)} finding(s) on the changed lines for {target}.", "", *rows]
    if result.errors:
        text += ["", f"{len(result.errors)} changed file(s) could not be analysed: "
                 + ", ".join(f"{markdown_code(e.path)} ({markdown_text(e.message)})" for e in result.errors)]
    return "\n".join(text)


def _comment(f: Finding, lines: list[str]) -> str:
    text = f"**{f.code}** `{f.name}` ({ICONS[f.severity]}): {markdown_text(f.message)}"
    suggestion = fixed_lines(f, lines)
    if suggestion is not None:
        fence = "`" * max(3, _longest_backticks(suggestion) + 1)
        text += f"\n\n{fence}suggestion\n" + (suggestion + "\n" if suggestion else "") + fence
    elif f.fix is not None:
        unsafe = f.fix.applicability == Applicability.UNSAFE
        text += f"\n\n`portcheck scan --fix{' --unsafe-fixes' if unsafe else ''}`: " \
                f"{f.fix.title}"
    return text


def _longest_backticks(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def fixed_lines(f: Finding, lines: list[str]) -> str | None:
    """The finding's whole lines with its safe fix applied (without their final newline; "" when the fix
    deletes them), when every edit stays inside those lines; else None."""
    if f.fix is None or f.fix.applicability != Applicability.SAFE or not lines or f.end_line > len(lines):
        return None
    first, last = f.line, f.end_line
    for e in f.fix.edits:
        inside = first <= e.line and (e.end_line <= last or (e.end_line == last + 1 and e.end_column == 1))
        if not inside:
            return None
    block = "\n".join(lines[first - 1 : last]) + "\n"
    starts = [0]
    for line in lines[first - 1 : last]:
        starts.append(starts[-1] + len(line) + 1)

    def offset(line: int, column: int) -> int:
        return starts[line - first] + column - 1

    for e in sorted(f.fix.edits, key=lambda e: (e.line, e.column), reverse=True):
        block = block[: offset(e.line, e.column)] + e.content + block[offset(e.end_line, e.end_column):]
    return block.removesuffix("\n")


def write_github_review(result: ScanResult, stream: TextIO, change: Change,
                        lines_for: Callable[[str], list[str]]) -> None:
    json.dump(unicode_only(review_body(result, change, lines_for)), stream, indent=2, ensure_ascii=False)
    stream.write("\n")


def write_markdown(result: ScanResult, stream: TextIO) -> None:
    out = [summary_markdown(result)]
    if result.findings:
        out += ["", "| where | rule | severity | what |", "|---|---|---|---|"]
        for f in result.findings:
            out.append(f"| {markdown_code(f'{f.path}:{f.line}')} | {f.code} `{f.name}` | {f.severity.label} | "
                       f"{markdown_text(f.message)} |")
    stream.write("\n".join(out) + "\n")


def write_review(result: ScanResult, output_format: str, stream: TextIO, change: Change,
                 lines_for: Callable[[str], list[str]]) -> None:
    """`portcheck review --format github-review` (GitHub's create-a-review body) or `markdown` (one comment)."""
    if output_format == "github-review":
        write_github_review(result, stream, change, lines_for)
    else:
        write_markdown(result, stream)
