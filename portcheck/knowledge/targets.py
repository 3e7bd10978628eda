"""rules/targets.toml: the chips and stacks portcheck can target, which release runs which stack for which task
on each chip ([[availability]]), and the serving paths per release ([[serving]])."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from portcheck.knowledge.catalog import load_catalog
from portcheck.knowledge.files import read
from portcheck.knowledge.sdk import known_releases
from portcheck.releases import KnowledgeError, Range, read_range


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
class Availability:
    """A stack running some tasks on a chip over a range of releases (targets.toml [[availability]])."""

    chip: str
    stack: str
    tasks: tuple[str, ...]
    releases: Range
    source: str
    note: str = ""  # what a plan says of it (maintenance, beta)
    ended: str = ""  # why it stops after `until`, and the way forward
    before: str = ""  # why it is absent before `since`


@dataclass(frozen=True)
class Serving:
    """A serving path on some chips over a range of releases (targets.toml [[serving]])."""

    name: str
    chips: tuple[str, ...]
    releases: Range
    source: str


TASKS = ("inference", "training")


@dataclass(frozen=True)
class Targets:
    chips: dict[str, Chip]
    stacks: dict[str, Stack]
    availability: tuple[Availability, ...]
    serving: tuple[Serving, ...]


@functools.cache
def load_targets() -> Targets:
    """rules/targets.toml: the chips, their stacks, which release runs which stack and task on each, and the
    serving paths per release."""
    targets = read("targets.toml")
    known = known_releases()
    rules, _ = load_catalog()
    chips = {
        name: Chip(name, c["title"], tuple(c["stacks"]), c["default_stack"], c["source"])
        for name, c in targets["chips"].items()
    }
    stacks = {name: Stack(name, s["title"], s["device"], s["source"]) for name, s in targets["stacks"].items()}
    for chip in chips.values():
        if chip.default_stack not in chip.stacks or not set(chip.stacks) <= set(stacks):
            raise KnowledgeError(f"targets.toml: chip {chip.name} names an unknown stack")
    for info in rules.values():
        if not set(info.targets) <= set(chips) or not set(info.stacks) <= set(stacks):
            raise KnowledgeError(f"catalog: {info.code} names an unknown target or stack")
    availability = tuple(_availability(entry, chips, stacks, known) for entry in targets.get("availability", []))
    serving = tuple(_serving(entry, chips, known) for entry in targets.get("serving", []))
    for chip in chips.values():
        for stack in chip.stacks:
            if not any(a.chip == chip.name and a.stack == stack for a in availability):
                raise KnowledgeError(f"targets.toml: no [[availability]] for {chip.name} with the {stack} stack")

    return Targets(chips, stacks, availability, serving)


def _availability(entry: dict[str, Any], chips: dict[str, Chip], stacks: dict[str, Stack],
                  known: tuple[str, ...]) -> Availability:
    where = f"targets.toml: availability of {entry.get('chip')} {entry.get('stack')}"
    found = Availability(entry.get("chip", ""), entry.get("stack", ""), tuple(entry.get("tasks", ())),
                         read_range(where, entry, known), entry.get("source", ""), entry.get("note", ""),
                         entry.get("ended", ""), entry.get("before", ""))
    if found.chip not in chips or found.stack not in chips[found.chip].stacks or found.stack not in stacks:
        raise KnowledgeError(f"{where}: unknown chip, or a stack the chip does not list")
    if not found.tasks or not set(found.tasks) <= set(TASKS) or not found.source.strip():
        raise KnowledgeError(f"{where}: needs tasks ({', '.join(TASKS)}) and a source")
    if (found.releases.until and not found.ended) or (found.releases.since and not found.before):
        raise KnowledgeError(f"{where}: an entry that ends (until) says why (`ended`), one that starts later "
                             "(since) says what came before (`before`)")
    return found


def _serving(entry: dict[str, Any], chips: dict[str, Chip], known: tuple[str, ...]) -> Serving:
    where = f"targets.toml: serving {entry.get('name')!r}"
    found = Serving(entry.get("name", ""), tuple(entry.get("chips", ())), read_range(where, entry, known),
                    entry.get("source", ""))
    if not found.name or not found.chips or not set(found.chips) <= set(chips) or not found.source.strip():
        raise KnowledgeError(f"{where}: needs a name, known chips and a source")
    return found
