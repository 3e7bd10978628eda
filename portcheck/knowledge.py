"""Loads the data in rules/*.toml into typed, validated objects, once per process."""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from portcheck.findings import CATEGORIES, Severity

CODE_PATTERN = re.compile(r"^PC\d{3}$")


class KnowledgeError(Exception):
    """The shipped rules data is inconsistent: a packaging or editing mistake, never user input."""


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
    default: bool = True


@dataclass(frozen=True)
class Chip:
    name: str
    title: str
    stacks: tuple[str, ...]
    default_stack: str
    source: str


@dataclass(frozen=True)
class Stack:
    name: str
    title: str
    device: str
    source: str


@dataclass(frozen=True)
class CudaApi:
    """One `torch.cuda` attribute: its rule, its behaviour without CUDA, and its replacements."""

    name: str
    code: str
    behaviour: str
    native: str
    xla: str
    xla_source: str = ""
    xla_note: str = ""

    def replacement(self, stack: str) -> str:
        return self.native if stack == "native" else self.xla


@dataclass(frozen=True)
class Knowledge:
    rules: dict[str, RuleInfo]
    chips: dict[str, Chip]
    stacks: dict[str, Stack]
    cuda_api: dict[str, CudaApi]
    retired: dict[str, str]
    data_version: str

    def rule_by_name(self, name: str) -> RuleInfo | None:
        return next((r for r in self.rules.values() if r.name == name), None)


def rules_dir() -> Path:
    """rules/ ships inside the package when installed, and sits beside it in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "rules", here.parent / "rules"):
        if (candidate / "catalog.toml").is_file():
            return candidate
    raise KnowledgeError(f"rules data not found next to {here}")


def _read(name: str) -> dict:
    path = rules_dir() / name
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise KnowledgeError(f"{path}: {exc}") from exc


BEHAVIOURS = ("raises", "returns-false", "returns-zero", "ignored")


@functools.cache
def load() -> Knowledge:
    catalog = _read("catalog.toml")
    targets = _read("targets.toml")
    cuda = _read("cuda_api.toml")

    rules: dict[str, RuleInfo] = {}
    for entry in catalog.get("rule", []):
        info = RuleInfo(
            code=entry["code"],
            name=entry["name"],
            category=entry["category"],
            severity=Severity.parse(entry["severity"]),
            targets=tuple(entry["targets"]),
            summary=entry["summary"],
            neuron=entry["neuron"],
            source=entry["source"],
            default=entry.get("default", True),
        )
        if not CODE_PATTERN.match(info.code) or info.code in rules:
            raise KnowledgeError(f"catalog.toml: bad or repeated code {info.code!r}")
        if info.category not in CATEGORIES:
            raise KnowledgeError(f"catalog.toml: {info.code} has unknown category {info.category!r}")
        rules[info.code] = info
    retired = {str(k): str(v) for k, v in catalog.get("retired", {}).items()}
    if reused := set(retired) & set(rules):
        raise KnowledgeError(f"catalog.toml: retired codes reused: {sorted(reused)}")

    chips = {
        name: Chip(name, c["title"], tuple(c["stacks"]), c["default_stack"], c["source"])
        for name, c in targets["chips"].items()
    }
    stacks = {name: Stack(name, s["title"], s["device"], s["source"]) for name, s in targets["stacks"].items()}
    for chip in chips.values():
        if chip.default_stack not in chip.stacks or not set(chip.stacks) <= set(stacks):
            raise KnowledgeError(f"targets.toml: chip {chip.name} names an unknown stack")
    for info in rules.values():
        if not set(info.targets) <= set(chips):
            raise KnowledgeError(f"catalog.toml: {info.code} names an unknown target")

    apis = {}
    for name, a in cuda["api"].items():
        api = CudaApi(name, a["code"], a["behaviour"], a.get("native", ""), a.get("xla", ""),
                      a.get("xla_source", ""), a.get("xla_note", ""))
        if api.xla and not api.xla_source:
            raise KnowledgeError(f"cuda_api.toml: {name} names an xla replacement without its source")
        if api.code not in rules or api.behaviour not in BEHAVIOURS:
            raise KnowledgeError(f"cuda_api.toml: {name} has unknown code or behaviour")
        apis[name] = api

    version = ".".join(str(d.get("data_version", 0)) for d in (catalog, targets, cuda))
    return Knowledge(rules, chips, stacks, apis, retired, version)
