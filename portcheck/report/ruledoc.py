"""`portcheck rules` (the catalog as a table), `portcheck rule CODE` (one rule's documentation, in ruff's section
order plus "Why it matters on Neuron" with its source) and `portcheck sdk` (the Neuron SDK releases the data
knows)."""

from __future__ import annotations

import json
from typing import TextIO

from portcheck.knowledge import RuleInfo, load, load_releases
from portcheck.rules import Pass, rule_class


def fixable(code: str) -> bool:
    rule = rule_class(code)
    return rule is not None and rule.FIXABLE


def rule_rows() -> list[RuleInfo]:
    return sorted(load().rules.values(), key=lambda r: r.code)


def write_rules(stream: TextIO, *, as_json: bool, rich_table: bool) -> None:
    rows = rule_rows()
    if as_json:
        json.dump([
            {"code": r.code, "name": r.name, "category": r.category, "severity": r.severity.label,
             "fixable": fixable(r.code), "targets": list(r.targets), "default": r.default, "summary": r.summary,
             "since": r.releases.since or None, "until": r.releases.until or None}
            for r in rows
        ], stream, indent=2)
        stream.write("\n")
        return
    header = ("code", "name", "category", "severity", "fixable", "targets", "sdk", "default")
    table = [(r.code, r.name, r.category, r.severity.label, "yes" if fixable(r.code) else "no", ",".join(r.targets),
              _releases(r), "on" if r.default else "off") for r in rows]
    if rich_table:
        from rich.console import Console
        from rich.table import Table

        t = Table(*header)
        for row in table:
            t.add_row(*row)
        Console(file=stream).print(t)
        return
    widths = [max(len(str(row[i])) for row in [header, *table]) for i in range(len(header))]
    for row in [header, *table]:
        stream.write("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n")


def write_rules_markdown(stream: TextIO) -> None:
    """`portcheck rules --format markdown`: the counts and the table README.md holds between its rule markers."""
    knowledge, rows = load(), rule_rows()
    categories = sorted({r.category for r in rows})
    passes = {r.code: _passes(r.code) for r in rows}
    found = {name: sum(name in p.split(", ") for p in passes.values()) for name in ("scan", "trace", "advise")}
    stream.write(f"{len(rows)} rules in {len(categories)} categories, {sum(r.default for r in rows)} of them on by "
                 f"default and {sum(fixable(r.code) for r in rows)} with fixes. {found['scan']} are found by `scan` "
                 f"(and by `trace` in the files a model runs), {found['trace']} by `trace` in the captured graph, "
                 f"{found['advise']} by `advise`.\n\n")
    stream.write("| code | name | category | severity | found by | applies to | fixable | default |\n")
    stream.write("|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        chips = "" if set(r.targets) >= set(knowledge.chips) else "/".join(r.targets)
        stacks = "" if set(r.stacks) >= set(knowledge.stacks) else "/".join(r.stacks) + " stack"
        releases = "" if _releases(r) == "all" else f"Neuron {_releases(r)}"
        applies = ", ".join(part for part in (chips, stacks, releases) if part) or "all"
        stream.write(f"| {r.code} | {r.name} | {r.category} | {r.severity.label} | {passes[r.code]} | {applies} | "
                     f"{'yes' if fixable(r.code) else 'no'} | {'on' if r.default else 'off'} |\n")


def _passes(code: str) -> str:
    """The commands whose evidence reports a rule: scan (and trace, which runs the static pass too), trace, advise."""
    rule = rule_class(code)
    names = {Pass.STATIC: "scan", Pass.TRACE: "trace", Pass.ADVISE: "advise"}
    return ", ".join(names[p] for p in (rule.passes if rule is not None else (Pass.STATIC,)))


def _releases(info: RuleInfo) -> str:
    """The Neuron SDK releases a rule applies to, as the table shows them: "all", "2.34+", "<=2.33", "2.31-2.33"."""
    since, until = info.releases.since, info.releases.until
    if since and until:
        return f"{since}-{until}"
    return f"{since}+" if since else f"<={until}" if until else "all"


def write_releases(stream: TextIO) -> None:
    """`portcheck sdk`: each release the data knows, oldest first, with what changed in it for a port."""
    releases = load_releases()
    newest = next(reversed(releases))
    for release in releases.values():
        dated = f" ({release.date})" if release.date else ""
        newest_note = "  [newest; the default --sdk]" if release.version == newest else ""
        stream.write(f"{release.version}{dated}{newest_note}\n")
        for change in release.changes:
            stream.write(f"  - {change}\n")
        for line in _target_changes(release.version):
            stream.write(f"  - {line}\n")
        stream.write(f"  source: {release.source}\n")


def _target_changes(version: str) -> list[str]:
    """The chips, stacks and tasks, and the serving paths, rules/targets.toml starts at this release."""
    targets = load()
    lines = [f"serving: {path.name} on {', '.join(path.chips)} from this release" for path in targets.serving
             if path.releases.since == version]
    for entry in targets.availability:
        what = f"{entry.chip} on the {entry.stack} stack ({', '.join(entry.tasks)})"
        if entry.releases.since == version:
            lines.append(f"target: {what} from this release" + (f": {entry.note}" if entry.note else ""))
    return lines


def rule_doc(info: RuleInfo) -> str:
    cls = rule_class(info.code)
    sections = cls.sections() if cls is not None else {}
    passes = cls.passes if cls is not None else (Pass.STATIC,)
    lines = [
        f"# {info.code} {info.name}",
        "",
        f"Category: {info.category} · severity: {info.severity.label} · targets: {', '.join(info.targets)}"
        f" · fixable: {'yes' if fixable(info.code) else 'no'} · enabled by default: {'yes' if info.default else 'no'}"
        f" · Neuron SDK releases: {info.releases.describe()}"
        + ("" if Pass.STATIC in passes else f" · reported by: `portcheck {' and '.join(passes)}`"),
        "",
        "## What it does",
        sections.get("What it does", info.summary),
        "",
        "## Why it matters on Neuron",
        info.neuron,
        "",
        f"Source: {info.source}",
    ]
    for title in ("Example", "Use instead", "Fix safety", "References"):
        if title in sections:
            lines += ["", f"## {title}", sections[title]]
    return "\n".join(lines) + "\n"
