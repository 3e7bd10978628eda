"""What the editor asks of a finding: its fix as a code action (marked when unsafe, never preferred then), a
`# noqa` quick fix, every safe fix at once (`source.fixAll.portcheck`, what `scan --fix` writes), and the rule's
documentation on hover (what `portcheck rule` prints, its sources as links)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lsprotocol import types
from pygls.workspace import PositionCodec

from portcheck.config import Settings
from portcheck.findings import FileResult, Finding, python_lines
from portcheck.knowledge import load
from portcheck.report.links import source_links
from portcheck.report.ruledoc import rule_doc
from portcheck.server.convert import diagnostic, fix_label, noqa_edit, text_edits, text_range
from portcheck.static.manifests import kind
from portcheck.static.rewrite import fix_text

FIX_ALL = "source.fixAll.portcheck"


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(p: types.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def _edit(uri: str, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(changes={uri: edits})


def code_actions(uri: str, result: FileResult, lines: Sequence[str], codec: PositionCodec, wanted: types.Range,
                 only: Sequence[str] | None) -> list[types.CodeAction]:
    """The quick fixes for the findings that touch `wanted`: each fix, then a `# noqa` for each code."""
    python = kind(result.path) is None
    if only is not None and not any(types.CodeActionKind.QuickFix.value.startswith(kind) for kind in only):
        return []
    actions: list[types.CodeAction] = []
    noqa: list[types.CodeAction] = []
    seen: set[tuple[str, int]] = set()
    for finding in result.findings:
        shown = diagnostic(finding, lines, codec)
        if not _overlaps(shown.range, wanted):
            continue
        if finding.fix is not None:
            title, safe = fix_label(finding)
            actions.append(types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix, diagnostics=[shown],
                                            edit=_edit(uri, text_edits(finding.fix.edits, lines, codec)),
                                            is_preferred=safe))
        if (finding.code, finding.line) not in seen and (edit := noqa_edit(finding, lines, codec, python)) is not None:
            seen.add((finding.code, finding.line))
            noqa.append(types.CodeAction(title=f"Suppress {finding.code} on this statement (# noqa)",
                                         kind=types.CodeActionKind.QuickFix, diagnostics=[shown],
                                         edit=_edit(uri, [edit])))
    return actions + noqa


def wants_fix_all(only: Sequence[str] | None) -> bool:
    return only is not None and any(FIX_ALL.startswith(kind) for kind in only if kind != "")


def fix_all(uri: str, text: str, location: Path, display: str, settings: Settings,
            codec: PositionCodec) -> types.CodeAction | None:
    """Every safe fix applied, as `portcheck scan --fix` applies them (the same passes, tidying and checks): one
    edit replacing the document, or None when nothing would change."""
    job = settings.job(display, location, text.encode("utf-8", errors="surrogatepass"))
    outcome = fix_text(text, job, unsafe=False)
    if outcome.text is None:
        return None
    lines = python_lines(text)
    whole = text_range(lines, codec, 1, 1, len(lines) + 1, 1)
    return types.CodeAction(title="Fix all safe portcheck findings", kind=FIX_ALL,
                            edit=_edit(uri, [types.TextEdit(whole, outcome.text)]))


def rule_markdown(code: str) -> str | None:
    """`portcheck rule CODE`'s page, with its sources as links."""
    info = load().rules.get(code)
    if info is None:
        return None
    links = "; ".join(f"[{link.text}]({link.url})" if link.url else link.text for link in source_links(info.source))
    return rule_doc(info).replace(f"Source: {info.source}", f"Source: {links}", 1)


def hover(result: FileResult, lines: Sequence[str], codec: PositionCodec, where: types.Position) -> types.Hover | None:
    """The documentation of each rule with a finding under the cursor."""
    at = types.Range(where, where)
    found: list[Finding] = []
    for finding in result.findings:
        shown = diagnostic(finding, lines, codec).range
        if _overlaps(shown, at) and finding.code not in {f.code for f in found}:
            found.append(finding)
    pages = [page for f in found if (page := rule_markdown(f.code)) is not None]
    if not pages:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n---\n".join(pages)))
