"""`portcheck rules` (the catalog as a table) and `portcheck rule CODE` (one rule's documentation, in
ruff's section order plus "Why it matters on Neuron" with its source)."""

from __future__ import annotations

import json
from typing import TextIO

from portcheck.knowledge import RuleInfo, load
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
             "fixable": fixable(r.code), "targets": list(r.targets), "default": r.default, "summary": r.summary}
            for r in rows
        ], stream, indent=2)
        stream.write("\n")
        return
    header = ("code", "name", "category", "severity", "fixable", "targets")
    table = [(r.code, r.name, r.category, r.severity.label, "yes" if fixable(r.code) else "no", ",".join(r.targets))
             for r in rows]
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


def rule_doc(info: RuleInfo) -> str:
    cls = rule_class(info.code)
    sections = cls.sections() if cls is not None else {}
    passes = cls.passes if cls is not None else (Pass.STATIC,)
    lines = [
        f"# {info.code} {info.name}",
        "",
        f"Category: {info.category} · severity: {info.severity.label} · targets: {', '.join(info.targets)}"
        f" · fixable: {'yes' if fixable(info.code) else 'no'} · enabled by default: {'yes' if info.default else 'no'}"
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
