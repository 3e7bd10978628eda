"""Neuron SDK releases: "MAJOR.MINOR" strings, and the `since` / `until` ranges of the facts in rules/.

`since` is the first release a fact holds for, `until` the last (inclusive); either may be absent. A range is
checked against the releases rules/sdk.toml knows: a range naming an unknown release, or ending before it starts,
is a packaging mistake (KnowledgeError), never the user's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

RELEASE_PATTERN = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)$")


class KnowledgeError(Exception):
    """The shipped rules data is inconsistent: a packaging or editing mistake, never user input. Defined here, the
    lowest module that reads the data, and raised by every loader (portcheck.knowledge re-exports it)."""


def parse(text: str) -> tuple[int, int]:
    """(2, 34) for "2.34"; ValueError for anything that is not MAJOR.MINOR."""
    match = RELEASE_PATTERN.match(text)
    if match is None:
        raise ValueError(f"not a Neuron SDK release (MAJOR.MINOR, e.g. 2.34): {text!r}")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class Range:
    """The releases a fact holds for; both ends inclusive, "" for open."""

    since: str = ""
    until: str = ""

    def holds(self, release: str) -> bool:
        at = parse(release)
        return (not self.since or parse(self.since) <= at) and (not self.until or at <= parse(self.until))

    @property
    def bounded(self) -> bool:
        return bool(self.since or self.until)

    def describe(self) -> str:
        """"all releases", "2.34 and later", "2.33 and earlier", "2.31 to 2.33"."""
        if self.since and self.until:
            return self.since if self.since == self.until else f"{self.since} to {self.until}"
        if self.since:
            return f"{self.since} and later"
        if self.until:
            return f"{self.until} and earlier"
        return "all releases"


def read_range(where: str, entry: Mapping[str, object], known: tuple[str, ...]) -> Range:
    """The `since` / `until` of a data entry, checked: each a release rules/sdk.toml knows, `since` <= `until`,
    and a `source` beside them. `known` is every release the data knows."""
    ends = {}
    for key in ("since", "until"):
        value = entry.get(key, "")
        if not isinstance(value, str) or (value and value not in known):
            raise KnowledgeError(f"{where}: {key} = {value!r} is not a release rules/sdk.toml knows "
                                 f"({', '.join(known)})")
        ends[key] = value
    found = Range(ends["since"], ends["until"])
    if found.since and found.until and parse(found.since) > parse(found.until):
        raise KnowledgeError(f"{where}: since {found.since} is after until {found.until}")
    source = entry.get("source")
    if found.bounded and (not isinstance(source, str) or not source.strip()):
        raise KnowledgeError(f"{where}: a release range without a source")
    return found
