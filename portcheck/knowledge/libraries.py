"""rules/libraries.toml: the CUDA-only libraries (by import path), what each is, and what replaces it on each
stack, with the source (PC501)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from portcheck.knowledge.files import read
from portcheck.releases import KnowledgeError


@dataclass(frozen=True)
class Library:
    """One import family of rules/libraries.toml: what it is and what replaces it on each stack."""

    modules: tuple[str, ...]
    title: str
    kind: str
    native: str
    xla: str
    source: str
    names: tuple[str, ...] = ()
    loads: str = ""  # what fails instead, where the import itself works without CUDA (rules/libraries.toml)
    loads_source: str = ""

    def advice(self, stack: str) -> str:
        return self.native if stack == "native" else self.xla


@functools.cache
def libraries() -> dict[str, Library]:
    """Import path -> its library, read once from rules/libraries.toml."""
    path = "libraries.toml"
    data = read(path)
    table: dict[str, Library] = {}
    for entry in data["library"]:
        use = entry.get("use", "")
        library = Library(tuple(entry["modules"]), entry["title"], entry["kind"], entry.get("native", use),
                          entry.get("xla", use), entry.get("source", ""), tuple(entry.get("names", ())),
                          entry.get("loads", ""), entry.get("loads_source", ""))
        if not (library.native and library.xla and library.source):
            raise KnowledgeError(f"{path}: {library.title} lacks `use` (or `native` and `xla`) or `source`")
        if bool(library.loads) != bool(library.loads_source):
            raise KnowledgeError(f"{path}: {library.title} gives `loads` without `loads_source` or the reverse")
        for module in library.modules:
            if module in table:
                raise KnowledgeError(f"{path}: {module} is listed twice")
            table[module] = library
    return table


def library_of(qualname: str) -> Library | None:
    """The library an imported name belongs to, by its longest listed prefix on whole dotted segments."""
    table = libraries()
    parts = qualname.split(".")
    for end in range(len(parts), 0, -1):
        found = table.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None
