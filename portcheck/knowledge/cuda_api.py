"""rules/cuda_api.toml: the `torch.cuda` API, each attribute with its rule, what it does without CUDA, and what
replaces it on each stack (with the release the native replacement arrives in)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from typing import Any

from portcheck.knowledge.catalog import load_catalog
from portcheck.knowledge.files import read
from portcheck.knowledge.sdk import known_releases
from portcheck.releases import KnowledgeError, parse, read_range


@dataclass(frozen=True)
class ApiFix:
    """How calls of one torch.cuda API are rewritten on one stack (`native_fix` / `xla_fix` in cuda_api.toml):
    exactly one of a drop-in callee, a constant value, or removal of the statement."""

    call: str = ""  # "module:attribute", a drop-in callee
    arguments: str = "same"  # "none": a drop-in only for a call without arguments
    value: str = ""  # what the call always returns on Neuron
    remove: bool = False  # the call does nothing on this stack: its statement goes
    safe: bool = True


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
    fixes: dict[str, ApiFix] = field(default_factory=dict)  # stack -> fix
    native_since: str = ""  # the first Neuron SDK release whose native stack has `native` (and its fix)
    native_source: str = ""
    harmless: str = ""  # why doing nothing without CUDA loses nothing: then it is reported as info

    def replacement(self, stack: str, sdk: str = "") -> str:
        """The replacement on a stack at a release ("": the newest); "" where there is none."""
        if stack == "native":
            return self.native if not self.later(stack, sdk) else ""
        return self.xla

    def fix(self, stack: str, sdk: str = "") -> ApiFix | None:
        return None if self.later(stack, sdk) else self.fixes.get(stack)

    def later(self, stack: str, sdk: str) -> bool:
        """Whether the stack's replacement comes only after release `sdk`."""
        return stack == "native" and bool(self.native_since and sdk) and parse(sdk) < parse(self.native_since)


BEHAVIOURS = ("raises", "returns-false", "returns-zero", "ignored")


_FIX_KEYS = {f.name for f in fields(ApiFix)}


def _api_fixes(name: str, entry: dict[str, Any]) -> dict[str, ApiFix]:
    fixes = {}
    for stack in ("native", "xla"):
        spec = entry.get(f"{stack}_fix")
        if spec is None:
            continue
        if not isinstance(spec, dict) or not set(spec) <= _FIX_KEYS:
            raise KnowledgeError(f"cuda_api.toml: {name}.{stack}_fix has unknown keys")
        fix = ApiFix(**spec)
        kinds = [bool(fix.call), bool(fix.value), fix.remove]
        if sum(kinds) != 1 or fix.arguments not in ("same", "none") or (fix.call and ":" not in fix.call):
            raise KnowledgeError(f"cuda_api.toml: {name}.{stack}_fix needs exactly one of call (module:attr), value, "
                                 "remove, and arguments 'same' or 'none'")
        fixes[stack] = fix
    return fixes


@functools.cache
def load_cuda_api() -> dict[str, CudaApi]:
    """rules/cuda_api.toml: each `torch.cuda` attribute's rule, behaviour without CUDA and replacements."""
    cuda = read("cuda_api.toml")
    known = known_releases()
    rules, _ = load_catalog()
    apis = {}
    for name, a in cuda["api"].items():
        since = read_range(f"cuda_api.toml: {name}", {"since": a.get("native_since", ""),
                                                       "source": a.get("native_source", "")}, known).since
        api = CudaApi(name, a["code"], a["behaviour"], a.get("native", ""), a.get("xla", ""),
                      a.get("xla_source", ""), a.get("xla_note", ""), _api_fixes(name, a), since,
                      a.get("native_source", ""), a.get("harmless", ""))
        if since and not api.native:
            raise KnowledgeError(f"cuda_api.toml: {name} has native_since without a native replacement")
        if api.xla and not api.xla_source:
            raise KnowledgeError(f"cuda_api.toml: {name} names an xla replacement without its source")
        if api.code not in rules or api.behaviour not in BEHAVIOURS:
            raise KnowledgeError(f"cuda_api.toml: {name} has unknown code or behaviour")
        apis[name] = api

    return apis


@functools.cache
def load_torch_features() -> frozenset[str]:
    """rules/cuda_api.toml [torch_features]: the attributes of `torch` every Neuron release's PyTorch has."""
    table = dict(read("cuda_api.toml").get("torch_features", {}))
    oldest, source = table.pop("oldest_torch", ""), table.pop("oldest_source", "")
    if not oldest or not source:
        raise KnowledgeError("cuda_api.toml: torch_features needs oldest_torch and its oldest_source")
    for name, entry in table.items():
        since = entry.get("since_torch", "")
        if not entry.get("source") or not since or _version(since) > _version(oldest):
            raise KnowledgeError(f"cuda_api.toml: torch feature {name} needs a source and a since_torch no newer "
                                 f"than {oldest}")
    return frozenset(table)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))

