"""rules/environments.toml: the torch releases each stack runs, for the dependency files a scan reads (PC724,
PC725)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from portcheck.knowledge.core import load
from portcheck.knowledge.files import read
from portcheck.releases import KnowledgeError


@dataclass(frozen=True)
class TorchSupport:
    """The torch releases one stack runs on over a range of Neuron SDK releases (rules/environments.toml)."""

    stack: str
    versions: tuple[str, ...]  # "MAJOR.MINOR"
    source: str
    since: str = ""
    until: str = ""  # the last release it holds for; "" = still holds


@dataclass(frozen=True)
class Environments:
    torch: tuple[TorchSupport, ...]
    xla_only: tuple[str, ...]  # distributions that exist only for the XLA stack
    xla_only_source: str

    def current(self, stack: str) -> tuple[TorchSupport, ...]:
        """The entries for the stack that hold at the newest release the data knows."""
        return tuple(t for t in self.torch if t.stack == stack and not t.until)

    def stack_of(self, torch_version: str) -> TorchSupport | None:
        """The entry whose torch release (`2.13`) a torch-neuronx or torch version names, newest first."""
        major_minor = ".".join(torch_version.split(".")[:2])
        return next((t for t in reversed(self.torch) if major_minor in t.versions), None)


_RELEASE = re.compile(r"^\d+\.\d+$")


@functools.cache
def load_environments() -> Environments:
    """rules/environments.toml, read by the scan of requirements files, pyproject.toml and environment.yml."""
    data = read("environments.toml")
    stacks = set(load().stacks)
    entries = []
    for entry in data.get("torch", []):
        item = TorchSupport(entry.get("stack", ""), tuple(entry.get("versions", ())), entry.get("source", ""),
                            entry.get("since", ""), entry.get("until", ""))
        if item.stack not in stacks or not item.versions or not item.source.strip() or \
                not all(_RELEASE.match(v) for v in (*item.versions, *filter(None, (item.since, item.until)))):
            raise KnowledgeError(f"environments.toml: a [[torch]] entry needs a known stack, MAJOR.MINOR versions, "
                                 f"a source, and MAJOR.MINOR since/until: {entry!r}")
        entries.append(item)
    xla_only = data.get("xla_only", {})
    if not isinstance(xla_only.get("packages"), list) or not str(xla_only.get("source", "")).strip():
        raise KnowledgeError("environments.toml: [xla_only] needs packages and a source")
    return Environments(tuple(entries), tuple(xla_only["packages"]), xla_only["source"])
