"""rules/sdk.toml: the Neuron SDK releases the data knows, oldest first, and what each changed for a port."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from portcheck.knowledge.files import read
from portcheck.releases import KnowledgeError, parse


@dataclass(frozen=True)
class Release:
    """One Neuron SDK release the data knows (rules/sdk.toml) and what changed in it for a port."""

    version: str
    date: str
    changes: tuple[str, ...]
    source: str


@functools.cache
def load_releases() -> dict[str, Release]:
    """rules/sdk.toml: the releases the data knows, oldest first; the last is `newest`."""
    data = read("sdk.toml")
    releases: dict[str, Release] = {}
    for entry in data.get("release", []):
        version = entry.get("version", "")
        try:
            at = parse(version)
        except (TypeError, ValueError):
            raise KnowledgeError(f"sdk.toml: release {version!r} is not MAJOR.MINOR") from None
        if releases and parse(next(reversed(releases))) >= at:
            raise KnowledgeError(f"sdk.toml: release {version} is out of order (oldest first)")
        changes = entry.get("changes", [])
        if not isinstance(entry.get("source"), str) or not entry["source"].strip() or not changes:
            raise KnowledgeError(f"sdk.toml: release {version} needs its changes and a source")
        releases[version] = Release(version, entry.get("date", ""), tuple(changes), entry["source"])
    if not releases or data.get("newest") != next(reversed(releases)):
        raise KnowledgeError("sdk.toml: `newest` must name the last release listed")
    return releases


def known_releases() -> tuple[str, ...]:
    return tuple(load_releases())
