"""rules/catalog/*.toml: one entry per rule code (name, category, severity, targets, the reason on Neuron and
its source), checked against the code families; retired codes."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from portcheck.findings import CATEGORIES, Category, Severity
from portcheck.knowledge.files import read_path, rules_path
from portcheck.knowledge.sdk import known_releases
from portcheck.releases import KnowledgeError, Range, read_range

CODE_PATTERN = re.compile(r"^PC\d{3}$")
ALL_RELEASES = Range()


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    category: str
    severity: Severity
    targets: tuple[str, ...]
    summary: str
    neuron: str
    source: str
    stacks: tuple[str, ...] = ("native", "xla")
    default: bool = True
    trace_default: bool = False  # on by default in `trace`, where only the graph's evidence counts
    releases: Range = ALL_RELEASES  # the Neuron SDK releases the rule applies to (`since` / `until`)

    def applies_to(self, chip: str, stack: str, sdk: str | None = None) -> bool:
        """Whether the rule runs for a target: its chip, its stack and, when given, its SDK release."""
        return chip in self.targets and stack in self.stacks and (sdk is None or self.releases.holds(sdk))


# The hundreds digit of a code is its category group (`--select PC2` selects a family): CONTRIBUTING.md, rule codes.
FAMILIES = {family: tuple(c.value for c in Category if c.family == family)
            for family in sorted({c.family for c in Category})}


@functools.cache
def load_catalog() -> tuple[dict[str, RuleInfo], dict[str, str]]:
    """rules/catalog/*.toml: every rule's entry by code, and the retired codes with why."""
    catalogs = {path.name: read_path(path) for path in sorted(rules_path("catalog").glob("*.toml"))}
    known = known_releases()
    rules: dict[str, RuleInfo] = {}
    retired: dict[str, str] = {}
    entries = [(name, entry) for name, c in catalogs.items() for entry in c.get("rule", [])]
    for c in catalogs.values():
        retired.update({str(k): str(v) for k, v in c.get("retired", {}).items()})
    for where, entry in entries:
        info = RuleInfo(
            code=entry["code"],
            name=entry["name"],
            category=entry["category"],
            severity=Severity.parse(entry["severity"]),
            targets=tuple(entry["targets"]),
            summary=entry["summary"],
            neuron=entry["neuron"],
            source=entry["source"],
            stacks=tuple(entry.get("stacks", ("native", "xla"))),
            default=entry.get("default", True),
            trace_default=entry.get("trace_default", False),
            releases=read_range(f"catalog/{where}: {entry.get('code')}", entry, known),
        )
        if not CODE_PATTERN.match(info.code) or info.code in rules:
            raise KnowledgeError(f"catalog/{where}: bad or repeated code {info.code!r}")
        if info.category not in CATEGORIES:
            raise KnowledgeError(f"catalog/{where}: {info.code} has unknown category {info.category!r}")
        family = FAMILIES.get(info.code[2], ())
        if info.category not in family:
            raise KnowledgeError(f"catalog/{where}: {info.code} is in category {info.category}, but PC{info.code[2]} "
                                 f"codes are {' or '.join(family) or 'unassigned'} (CONTRIBUTING.md: rule codes)")
        if where != f"{info.category}.toml":
            raise KnowledgeError(f"catalog/{where}: {info.code} is in category {info.category}, whose rules belong in "
                                 f"catalog/{info.category}.toml")
        if not info.neuron or not info.source:
            raise KnowledgeError(f"catalog/{where}: {info.code} has no `neuron` reason or no `source`")
        rules[info.code] = info
    if reused := set(retired) & set(rules):
        raise KnowledgeError(f"catalog: retired codes reused: {sorted(reused)}")

    return rules, retired
