"""rules/compiler.toml: the neuronx-cc flags and environment variables a plan may emit or a scan checks, with
their values, chips, stacks and releases; TorchNeuron's own compiler defaults."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from portcheck.knowledge.catalog import ALL_RELEASES
from portcheck.knowledge.core import load
from portcheck.knowledge.files import citations, read
from portcheck.knowledge.sdk import known_releases
from portcheck.releases import KnowledgeError, Range, read_range


@dataclass(frozen=True)
class CompilerFlag:
    name: str
    values: tuple[str, ...]  # empty: a switch without a value
    targets: tuple[str, ...]
    source: str
    default: str = ""
    since: str = ""  # first Neuron SDK release whose compiler takes it
    value_sources: dict[str, str] = field(default_factory=dict)  # value -> what a plan cites for it, after `source`
    argument: str = ""  # what its value is when any value goes ("path"); with `values` empty and no argument: a switch
    aliases: tuple[str, ...] = ()  # other spellings (`--lnc`; `-O` glued to its value: `-O2`)

    @property
    def takes_value(self) -> bool:
        return bool(self.values or self.argument)

    def cited(self, value: str | None) -> str:
        """The flag's source, with its value's where the data has one."""
        extra = self.value_sources.get(value) if value is not None else None
        return f"{self.source}; {extra}" if extra else self.source


@dataclass(frozen=True)
class EnvVar:
    name: str
    values: tuple[str, ...]  # empty: any value
    targets: tuple[str, ...]
    source: str
    stacks: tuple[str, ...] = ("native", "xla")  # the stacks that read it
    releases: Range = ALL_RELEASES


@dataclass(frozen=True)
class NativeDefaults:
    """What TorchNeuron passes to neuronx-cc itself (compiler.toml [native_defaults])."""

    args: tuple[str, ...]
    eager_optlevel: str
    compile_optlevel: str
    releases: Range
    source: str


@dataclass(frozen=True)
class CompileSources:
    """How each stack compiles a plan's shapes (compiler.toml [compile]): the sources a plan cites for its
    buckets, dynamic batch and NEURON_CC_FLAGS."""

    stacks: dict[str, str]  # stack -> how it compiles (trace API, torch.compile)
    native_wrapper: str  # TorchNeuron's compile wrapper: target and LNC from the instance, NEURON_CC_FLAGS appended
    buckets: str  # NxD Inference's automatic sequence buckets


@dataclass(frozen=True)
class Compiler:
    flags: dict[str, CompilerFlag]
    env: dict[str, EnvVar]
    newest_sdk: dict[str, str]  # stack -> newest SDK release it runs on ("" = current)
    compile: CompileSources
    native_defaults: NativeDefaults | None = None

    def check(self, args: list[str], env: dict[str, str], chip: str, stack: str) -> None:
        """Every flag of a plan exists, takes that value and is allowed for the chip and the stack's SDK;
        every environment variable too. A violation is portcheck's bug, never the user's."""
        for problem in self.problems(args, chip, stack):
            raise KnowledgeError(problem.message)
        for name, value in env.items():
            var = self.env.get(name)
            if var is None or chip not in var.targets or stack not in var.stacks or \
                    (var.values and value not in var.values):
                raise KnowledgeError(f"environment variable {name}={value} is not allowed for target {chip}")

    def flag(self, spelling: str) -> CompilerFlag | None:
        """The flag a spelling names: its name or one of its aliases (`--lnc` -> `--logical-nc-config`)."""
        return self.flags.get(spelling) or next((f for f in self.flags.values() if spelling in f.aliases), None)

    def problems(self, args: Sequence[str | None], chip: str, stack: str) -> list[FlagProblem]:
        """What is wrong with a command line of neuronx-cc flags for the chip and the stack's SDK: a flag the data
        lacks, a value it does not take, a chip it is not for, a release that lacks it. `args` holds one flag or
        value per item (`--lnc=2` already split); None stands for a part known only at run time, which is never
        judged (nor is the flag it may be the value of)."""
        found: list[FlagProblem] = []
        i = 0
        while i < len(args):
            name = args[i]
            flag = self.flag(name) if name is not None else None
            if name is None or not name.startswith("-"):
                i += 1
                continue
            if flag is None:
                found.append(FlagProblem("unknown", i, name, None,
                                         f"compiler flag {name} is not in rules/compiler.toml"))
                i += 1
                continue
            value = args[i + 1] if flag.takes_value and i + 1 < len(args) else None
            if chip not in flag.targets:
                found.append(FlagProblem("target", i, name, value, f"compiler flag {name} is not allowed for target "
                                         f"{chip}", flag))
            if flag.since and self.newest_sdk.get(stack) and _release(self.newest_sdk[stack]) < _release(flag.since):
                found.append(FlagProblem("release", i, name, value, f"compiler flag {name} needs Neuron {flag.since}; "
                                         f"the {stack} stack stops at {self.newest_sdk[stack]}", flag))
            if flag.values and not (i + 1 < len(args) and args[i + 1] is None) and value not in flag.values:
                found.append(FlagProblem("value", i, name, value, f"compiler flag {name} needs one of "
                                         f"{', '.join(flag.values)}", flag))
            i += 2 if flag.takes_value else 1
        return found


@dataclass(frozen=True)
class FlagProblem:
    """One thing wrong with a neuronx-cc command line (Compiler.problems)."""

    kind: str  # "unknown", "target", "release" or "value"
    index: int  # of the flag in the arguments
    spelling: str  # as written: "--lnc"
    value: str | None  # the value that follows it, where it takes one
    message: str
    flag: CompilerFlag | None = None  # the data's entry, unless unknown


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@functools.cache
def load_compiler() -> Compiler:
    """rules/compiler.toml, read only by `advise`."""
    data = read("compiler.toml")
    flags = {f["name"]: CompilerFlag(f["name"], tuple(f["values"]), tuple(f["targets"]), f["source"],
                                     f.get("default", ""), f.get("since", ""), f.get("value_sources", {}),
                                     f.get("argument", ""), tuple(f.get("aliases", ())))
             for f in data["flag"]}
    known = known_releases()
    env = {e["name"]: EnvVar(e["name"], tuple(e["values"]), tuple(e["targets"]), e["source"],
                             tuple(e.get("stacks", ("native", "xla"))),
                             read_range(f"compiler.toml: {e['name']}", e, known)) for e in data["env"]}
    for flag_entry in data["flag"]:
        read_range(f"compiler.toml: {flag_entry['name']}", flag_entry, known)
    for var in env.values():
        if not set(var.stacks) <= set(load().stacks):
            raise KnowledgeError(f"compiler.toml: {var.name} names an unknown stack")
        if var.stacks == ("native",) and not var.releases.since:
            raise KnowledgeError(f"compiler.toml: {var.name} is read by the native stack only, which depends on the "
                                 "release: it needs `since` (and its source)")
    defaults = data.get("native_defaults")
    native_defaults = None
    if defaults is not None:
        native_defaults = NativeDefaults(tuple(defaults["args"]), defaults["eager_optlevel"],
                                         defaults["compile_optlevel"],
                                         read_range("compiler.toml: native_defaults", defaults, known),
                                         defaults["source"])
        if not native_defaults.releases.since:
            raise KnowledgeError("compiler.toml: [native_defaults] needs `since` and a source")
    items: tuple[CompilerFlag | EnvVar, ...] = (*flags.values(), *env.values())
    for item in items:
        if not item.source or not item.targets:
            raise KnowledgeError(f"compiler.toml: {item.name} needs targets and a source")
    for flag in flags.values():
        cited: object = flag.value_sources  # as compiler.toml gave it: checked here
        if not isinstance(cited, dict) or not set(cited) <= set(flag.values) or \
                not all(isinstance(s, str) and s.strip() for s in cited.values()):
            raise KnowledgeError(f"compiler.toml: {flag.name}.value_sources must cite values the flag takes")
        if flag.values and flag.argument:
            raise KnowledgeError(f"compiler.toml: {flag.name} takes either listed `values` or any `argument`")
    spellings = [spelling for flag in flags.values() for spelling in (flag.name, *flag.aliases)]
    if len(spellings) != len(set(spellings)):
        raise KnowledgeError("compiler.toml: a flag name or alias is given twice")
    newest = {k: v for k, v in data["sdk"].items() if k != "source"}
    stacks = sorted(load().stacks)
    given = citations("compiler.toml", "compile", data.get("compile"), {*stacks, "native_wrapper", "buckets"})
    compile_sources = CompileSources({s: given[s] for s in stacks}, given["native_wrapper"], given["buckets"])
    return Compiler(flags, env, newest, compile_sources, native_defaults)
