"""rules/serving.toml: the documented ways to serve a model on each chip, stack and release (the architectures or
model types each serves natively), compiling without Neuron devices, the arguments each emitted artifact may pass,
and the compile host's memory factors."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from portcheck.knowledge.core import load
from portcheck.knowledge.files import read
from portcheck.knowledge.sdk import known_releases
from portcheck.releases import KnowledgeError, Range, read_range

ARGUMENT_TYPES = ("int", "str", "json", "path", "switch")
# The kinds of model a plan sizes (portcheck/advise/model.py), a path serves some of them.
KINDS = ("decoder", "encoder", "encoder-decoder", "vision", "other")


@dataclass(frozen=True)
class ServingPath:
    id: str
    title: str
    chips: tuple[str, ...]
    stacks: tuple[str, ...]
    kinds: tuple[str, ...]
    releases: Range
    architectures: tuple[str, ...]
    model_types: tuple[str, ...]
    why: str
    source: str

    @property
    def listed(self) -> bool:
        """Serves only the architectures it lists (a library), not every model of its stack."""
        return bool(self.architectures or self.model_types)

    def serves(self, name: str, model_type: str) -> bool:
        return name in self.architectures or (bool(model_type) and model_type in self.model_types)


@dataclass(frozen=True)
class CompileOnly:
    path: str
    env: dict[str, str]
    how: str
    source: str


@dataclass(frozen=True)
class Argument:
    tool: str
    name: str
    type: str
    choices: tuple[str, ...]
    keys: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class ServingData:
    paths: tuple[ServingPath, ...]
    compile_only: dict[str, CompileOnly]
    arguments: dict[str, dict[str, Argument]]  # tool -> name -> argument
    weights_factor: float
    optlevel3_factor: float
    compile_host_source: str


@functools.cache
def load_serving() -> ServingData:
    """rules/serving.toml, checked: known chips, stacks, kinds and releases, a source on every entry."""
    data = read("serving.toml")
    knowledge, known = load(), known_releases()
    paths = []
    for entry in data.get("path", []):
        where = f"serving.toml: path {entry.get('id')!r}"
        path = ServingPath(entry.get("id", ""), entry.get("title", ""), tuple(entry.get("chips", ())),
                           tuple(entry.get("stacks", ())), tuple(entry.get("kinds", ())),
                           read_range(where, entry, known),
                           tuple(entry.get("architectures", ())), tuple(entry.get("model_types", ())),
                           entry.get("why", ""), entry.get("source", ""))
        if not (path.id and path.title and path.why and path.source.strip() and path.chips and path.stacks
                and path.kinds) or not set(path.chips) <= set(knowledge.chips) or not set(path.stacks) <= \
                set(knowledge.stacks) or not set(path.kinds) <= set(KINDS):
            raise KnowledgeError(f"{where}: needs an id, a title, why, a source and known chips, stacks and kinds")
        paths.append(path)
    ids = {p.id for p in paths}
    compile_only = {}
    for entry in data.get("compile_only", []):
        found = CompileOnly(entry.get("path", ""), dict(entry.get("env", {})), entry.get("how", ""),
                            entry.get("source", ""))
        if found.path not in ids or not found.how or not found.source.strip():
            raise KnowledgeError(f"serving.toml: compile_only {found.path!r} needs a known path, how and a source")
        compile_only[found.path] = found
    arguments: dict[str, dict[str, Argument]] = {}
    for entry in data.get("argument", []):
        argument = Argument(entry.get("tool", ""), entry.get("name", ""), entry.get("type", ""),
                            tuple(entry.get("choices", ())), tuple(entry.get("keys", ())), entry.get("source", ""))
        if not argument.tool or not argument.name or argument.type not in ARGUMENT_TYPES or not argument.source:
            raise KnowledgeError(f"serving.toml: argument {argument.name!r} needs a tool, a type "
                                 f"({', '.join(ARGUMENT_TYPES)}) and a source")
        arguments.setdefault(argument.tool, {})[argument.name] = argument
    host = data.get("compile_host", {})
    if not host.get("source") or float(host.get("weights_factor", 0)) < 1:
        raise KnowledgeError("serving.toml: [compile_host] needs weights_factor >= 1 and a source")
    return ServingData(tuple(paths), compile_only, arguments, float(host["weights_factor"]),
                       float(host.get("optlevel3_factor", 1)), host["source"])
