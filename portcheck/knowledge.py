"""Loads the data in rules/*.toml into typed, validated objects, once per process."""

from __future__ import annotations

import functools
import hashlib
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from portcheck.findings import CATEGORIES, Severity
from portcheck.releases import KnowledgeError as KnowledgeError  # raised by every loader; defined below them
from portcheck.releases import Range, parse, read_range

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
    trace_default: bool = False  # on by default in `trace` although off in `scan`
    releases: Range = ALL_RELEASES  # the Neuron SDK releases the rule applies to (`since` / `until`)

    def applies_to(self, chip: str, stack: str, sdk: str | None = None) -> bool:
        """Whether the rule runs for a target: its chip, its stack and, when given, its SDK release."""
        return chip in self.targets and stack in self.stacks and (sdk is None or self.releases.holds(sdk))


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
class Release:
    """One Neuron SDK release the data knows (rules/sdk.toml) and what changed in it for a port."""

    version: str
    date: str
    changes: tuple[str, ...]
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


@dataclass(frozen=True)
class Knowledge:
    rules: dict[str, RuleInfo]
    chips: dict[str, Chip]
    stacks: dict[str, Stack]
    cuda_api: dict[str, CudaApi]
    retired: dict[str, str]
    data_version: str
    releases: dict[str, Release] = field(default_factory=dict)  # oldest first
    availability: tuple[Availability, ...] = ()
    serving: tuple[Serving, ...] = ()

    @property
    def newest_sdk(self) -> str:
        return next(reversed(self.releases))

    def applicable(self, chip: str, stack: str, sdk: str | None = None) -> frozenset[str]:
        return frozenset(code for code, info in self.rules.items() if info.applies_to(chip, stack, sdk))

    def available(self, chip: str, stack: str, sdk: str, task: str | None = None) -> Availability | None:
        """The entry under which `stack` runs `task` (any task when None) on `chip` at release `sdk`."""
        return next((a for a in self.availability if a.chip == chip and a.stack == stack and a.releases.holds(sdk)
                     and (task is None or task in a.tasks)), None)

    def default_stack(self, chip: str, sdk: str) -> str:
        """The chip's default stack, else the first of its stacks the release supports."""
        order = [self.chips[chip].default_stack, *self.chips[chip].stacks]
        return next((s for s in order if self.available(chip, s, sdk)), self.chips[chip].default_stack)

    def refusal(self, chip: str, stack: str, sdk: str, task: str | None = None) -> str | None:
        """Why `stack` cannot run `task` (any task when None) on `chip` at release `sdk`, with the releases that
        had it; None when it can."""
        if self.available(chip, stack, sdk, task):
            return None
        what = f"{task} with the {stack} stack on {chip}" if task else f"the {stack} stack on {chip}"
        entries = [a for a in self.availability if a.chip == chip and a.stack == stack
                   and (task is None or task in a.tasks)]
        at = parse(sdk)
        ended = sorted((a for a in entries if a.releases.until and parse(a.releases.until) < at),
                       key=lambda a: parse(a.releases.until))
        if ended:
            last = ended[-1]
            return (f"{what} is not supported at Neuron SDK {sdk}: {last.ended} (the last release with it is "
                    f"{last.releases.until}; an explicit --sdk {last.releases.until} still plans it)")
        later = sorted((a for a in entries if a.releases.since and at < parse(a.releases.since)),
                       key=lambda a: parse(a.releases.since))
        if later:
            first = later[0]
            return (f"{what} is not supported at Neuron SDK {sdk}: {first.before or 'it starts later'} "
                    f"(use --sdk {first.releases.since} or later)")
        return f"{what} is not supported by any Neuron SDK release portcheck knows"

    def serving_paths(self, chip: str, sdk: str) -> tuple[Serving, ...]:
        return tuple(s for s in self.serving if chip in s.chips and s.releases.holds(sdk))

    def rule_by_name(self, name: str) -> RuleInfo | None:
        return next((r for r in self.rules.values() if r.name == name), None)


# The hundreds digit of a code is its category group (`--select PC2` selects a family): CONTRIBUTING.md, rule codes.
FAMILIES = {
    "1": ("cuda-api",), "2": ("dynamic-shape",), "3": ("unsupported-op", "dtype"), "4": ("custom-attention",),
    "5": ("cuda-library",), "6": ("training", "distributed"), "7": ("host-sync", "compile"), "8": ("memory",),
    "9": ("suppression",),
}


def rules_dir() -> Path:
    """rules/ ships inside the package when installed, and sits beside it in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "rules", here.parent / "rules"):
        if (candidate / "catalog").is_dir() and (candidate / "targets.toml").is_file():
            return candidate
    raise KnowledgeError(f"rules data not found next to {here}")


def _read(name: str) -> dict[str, Any]:
    return _read_path(rules_dir() / name)


def _read_path(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise KnowledgeError(f"{path}: {exc}") from exc


BEHAVIOURS = ("raises", "returns-false", "returns-zero", "ignored")


@functools.cache
def load_releases() -> dict[str, Release]:
    """rules/sdk.toml: the releases the data knows, oldest first; the last is `newest`."""
    data = _read("sdk.toml")
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


@functools.cache
def load() -> Knowledge:
    catalog_files = sorted((rules_dir() / "catalog").glob("*.toml"))
    catalogs = {path.name: _read_path(path) for path in catalog_files}
    targets = _read("targets.toml")
    cuda = _read("cuda_api.toml")
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

    return Knowledge(rules, chips, stacks, apis, retired, data_version(), load_releases(), availability, serving)


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


def data_version() -> str:
    """A digest of every shipped data file: it changes whenever what the rules know changes (cache keys)."""
    digest = hashlib.sha256()
    root = rules_dir()
    for path in sorted(root.rglob("*.toml")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


OP_STATUSES = ("supported", "cpu-fallback", "restricted", "unsupported")
# One neuronx-cc code, or several " / "-separated: "NCC_EVRF017 / NCC_EVRF018".
ERROR_CODE_PATTERN = re.compile(r"^NCC_[A-Z]{4}\d{3}( / NCC_[A-Z]{4}\d{3})*$")


@dataclass(frozen=True)
class OpLimit:
    """The largest value one argument of an op may take (`[ops."aten::topk".limits.k]`), and the code the
    compiler rejects a larger one with."""

    argument: str
    max: int
    error_code: str
    source: str


@dataclass(frozen=True)
class RestrictedDtypes:
    """The dtypes of an op's first tensor operand its `restricted` status is about
    (`[ops."aten::mm".restricted_dtypes]`): a call with other dtypes is outside the restriction."""

    dtypes: frozenset[str]  # torch's names without "torch.": "int64"
    source: str


@dataclass(frozen=True)
class OpSupport:
    """One ATen op's support per stack (rules/ops.toml); a stack without a status is unknown."""

    op: str
    status: dict[str, str]  # stack -> one of OP_STATUSES
    source: str
    restriction: str = ""
    error_code: str = ""
    limits: dict[str, OpLimit] = field(default_factory=dict)  # argument -> its limit
    restricted_dtypes: RestrictedDtypes | None = None  # the dtypes a dtype restriction is about

    def on(self, stack: str) -> str:
        return self.status.get(stack, "unknown")

    def limit(self, argument: str) -> OpLimit:
        """The limit of an argument a check compares against: one the data lacks is a packaging mistake."""
        if argument not in self.limits:
            raise KnowledgeError(f"ops.toml: {self.op} has no limits.{argument}, which portcheck's checks read")
        return self.limits[argument]

    @property
    def error_codes(self) -> tuple[str, ...]:
        """`error_code` split into its codes, in the order the entry gives them."""
        return tuple(self.error_code.split(" / ")) if self.error_code else ()


@functools.cache
def load_ops() -> dict[str, OpSupport]:
    """rules/ops.toml: the trace's status of every op, and the codes and limits the static checks word their
    findings with."""
    data = _read("ops.toml")
    sources = data.get("sources", {})

    def cite(text: str) -> str:
        return "; ".join(sources.get(part.strip(), part.strip()) for part in text.split(";") if part.strip())

    ops = {}
    for name, entry in data.get("ops", {}).items():
        status = {stack: entry[stack] for stack in ("native", "xla") if stack in entry}
        if not name.startswith(("aten::", "prims::")) or any(s not in OP_STATUSES for s in status.values()):
            raise KnowledgeError(f"ops.toml: {name} has a bad name or status")
        if status and not entry.get("source"):
            raise KnowledgeError(f"ops.toml: {name} has a status without a source")
        error_code = entry.get("error_code", "")
        if error_code and not ERROR_CODE_PATTERN.match(error_code):
            raise KnowledgeError(f"ops.toml: {name} has a malformed error_code {error_code!r} (NCC_XXXX000, "
                                 "\" / \"-separated)")
        limits = {argument: _op_limit(name, argument, spec, cite) for argument, spec in entry.get("limits", {}).items()}
        ops[name] = OpSupport(name, status, cite(entry.get("source", "")), entry.get("restriction", ""), error_code,
                              limits, _restricted_dtypes(name, entry, cite))
    return ops


@functools.cache
def load_op_releases() -> dict[str, Range]:
    """ops.toml [releases.<stack>]: the Neuron SDK releases each stack's statuses hold for (every stack has one:
    op support depends on the release)."""
    data = _read("ops.toml")
    given = data.get("releases", {})
    stacks = set(load().stacks)
    if not isinstance(given, dict) or set(given) != stacks:
        raise KnowledgeError(f"ops.toml: [releases] needs exactly one range per stack ({', '.join(sorted(stacks))})")
    ranges = {stack: read_range(f"ops.toml: releases.{stack}", spec, known_releases()) for stack, spec in given.items()}
    if not all(r.bounded for r in ranges.values()):
        raise KnowledgeError("ops.toml: each [releases.<stack>] needs since and/or until")
    return ranges


@dataclass(frozen=True)
class NativeSdpa:
    """When TorchNeuron runs SDPA with its NKI kernel (ops.toml [native_sdpa])."""

    eager_seq_multiple: int
    compile_seq_multiple: int
    compile_key_tile: int
    head_dim_max: int
    releases: Range
    source: str


@functools.cache
def load_native_sdpa() -> NativeSdpa:
    spec = _read("ops.toml").get("native_sdpa")
    numbers = ("eager_seq_multiple", "compile_seq_multiple", "compile_key_tile", "head_dim_max")
    if not isinstance(spec, dict) or not all(isinstance(spec.get(k), int) and spec[k] > 0 for k in numbers):
        raise KnowledgeError(f"ops.toml: [native_sdpa] needs positive integers {', '.join(numbers)}")
    releases = read_range("ops.toml: native_sdpa", spec, known_releases())
    if not releases.since:
        raise KnowledgeError("ops.toml: [native_sdpa] needs `since` and a source")
    return NativeSdpa(spec["eager_seq_multiple"], spec["compile_seq_multiple"], spec["compile_key_tile"],
                      spec["head_dim_max"], releases, spec["source"])


def _restricted_dtypes(op: str, entry: dict[str, Any], cite: Callable[[str], str]) -> RestrictedDtypes | None:
    spec = entry.get("restricted_dtypes")
    if spec is None:
        return None
    dtypes = spec.get("dtypes") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or set(spec) != {"dtypes", "source"} or not isinstance(dtypes, list) or not dtypes \
            or not all(isinstance(d, str) and d.isidentifier() for d in dtypes):
        raise KnowledgeError(f"ops.toml: {op} restricted_dtypes needs exactly dtypes (a list of dtype names) and "
                             "source")
    if not isinstance(spec["source"], str) or not spec["source"].strip():
        raise KnowledgeError(f"ops.toml: {op} restricted_dtypes has no source")
    if "restricted" not in entry.values():
        raise KnowledgeError(f"ops.toml: {op} has restricted_dtypes but no restricted status")
    return RestrictedDtypes(frozenset(dtypes), cite(spec["source"]))


def _op_limit(op: str, argument: str, spec: object, cite: Callable[[str], str]) -> OpLimit:
    if not isinstance(spec, dict) or set(spec) != {"max", "error_code", "source"}:
        raise KnowledgeError(f"ops.toml: {op} limits.{argument} needs exactly max, error_code and source")
    maximum, error_code, source = spec["max"], spec["error_code"], spec["source"]
    if not isinstance(maximum, int) or isinstance(maximum, bool) or maximum < 1:
        raise KnowledgeError(f"ops.toml: {op} limits.{argument}.max must be a positive integer, not {maximum!r}")
    if not isinstance(error_code, str) or not ERROR_CODE_PATTERN.match(error_code):
        raise KnowledgeError(f"ops.toml: {op} limits.{argument} has a malformed error_code {error_code!r}")
    if not isinstance(source, str) or not source.strip():
        raise KnowledgeError(f"ops.toml: {op} limits.{argument} has no source")
    return OpLimit(argument, maximum, error_code, cite(source))


def load_op(name: str) -> OpSupport:
    """One op's entry, for the checks that word their findings with its codes: an op they need that the data
    lacks is a packaging or editing mistake."""
    entry = load_ops().get(name)
    if entry is None:
        raise KnowledgeError(f"ops.toml: no entry for {name}, which portcheck's checks read")
    return entry


DTYPE_STATUSES = ("unsupported", "partial", "narrowed")


@dataclass(frozen=True)
class DtypeSupport:
    """One torch dtype NeuronCores lack or narrow (rules/dtypes.toml), and the rule that reports data of it."""

    name: str  # torch's attribute: "float64"
    aliases: tuple[str, ...]  # torch's other names for it: ("double",)
    status: str  # one of DTYPE_STATUSES
    rule: str  # the dtype rule reporting it: "PC303"
    kind: str  # the family messages name it by: "FNUZ float8"
    source: str
    error_code: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class Dtypes:
    entries: dict[str, DtypeSupport]  # name -> entry
    qualified: dict[str, DtypeSupport]  # every `torch.<name or alias>` -> its entry

    def get(self, qualname: str) -> DtypeSupport | None:
        """The entry of a dtype by any of its qualified names: `torch.double` -> float64's."""
        return self.qualified.get(qualname)

    def named(self, qualname: str) -> DtypeSupport:
        """The entry of a dtype a check words its findings with: one the data lacks is a packaging mistake."""
        entry = self.qualified.get(qualname)
        if entry is None:
            raise KnowledgeError(f"dtypes.toml: no entry for {qualname}, which portcheck's checks read")
        return entry

    def reported_by(self, rule: str) -> tuple[DtypeSupport, ...]:
        return tuple(e for e in self.entries.values() if e.rule == rule)


_DTYPE_KEYS = frozenset({"aliases", "status", "rule", "kind", "source"})  # every entry's; `error_code` is optional


@functools.cache
def load_dtypes() -> Dtypes:
    """rules/dtypes.toml, read by the static dtype checks, the trace and `advise`."""
    data = _read("dtypes.toml")
    rules = load().rules
    entries: dict[str, DtypeSupport] = {}
    seen: set[str] = set()
    for name, entry in data.get("dtypes", {}).items():
        if not isinstance(entry, dict) or not _DTYPE_KEYS <= set(entry) <= _DTYPE_KEYS | {"error_code"}:
            raise KnowledgeError(f"dtypes.toml: {name} needs aliases, status, rule, kind and source (and may have "
                                 "error_code), nothing else")
        texts = [entry[key] for key in entry if key != "aliases"]
        if not isinstance(entry["aliases"], list) or not all(isinstance(x, str) for x in [*texts, *entry["aliases"]]):
            raise KnowledgeError(f"dtypes.toml: {name} takes strings, and a list of them as aliases")
        dtype = DtypeSupport(name, tuple(entry["aliases"]), entry["status"], entry["rule"], entry["kind"],
                             entry["source"], entry.get("error_code", ""))
        if dtype.status not in DTYPE_STATUSES:
            raise KnowledgeError(f"dtypes.toml: {name} has status {dtype.status!r}, not one of "
                                 f"{', '.join(DTYPE_STATUSES)}")
        if dtype.rule not in rules or rules[dtype.rule].category != "dtype":
            raise KnowledgeError(f"dtypes.toml: {name} names {dtype.rule!r}, which is not a dtype rule")
        if dtype.error_code and not ERROR_CODE_PATTERN.match(dtype.error_code):
            raise KnowledgeError(f"dtypes.toml: {name} has a malformed error_code {dtype.error_code!r}")
        if dtype.status == "unsupported" and not dtype.error_code:
            raise KnowledgeError(f"dtypes.toml: {name} is unsupported without the error_code that says so")
        if not dtype.source.strip() or not dtype.kind.strip():
            raise KnowledgeError(f"dtypes.toml: {name} has no source or no kind")
        if repeated := seen & set(dtype.names):
            raise KnowledgeError(f"dtypes.toml: {sorted(repeated)} named twice")
        seen |= set(dtype.names)
        entries[name] = dtype
    return Dtypes(entries, {f"torch.{n}": e for e in entries.values() for n in e.names})


@dataclass(frozen=True)
class ChipHardware:
    """One chip's schedulable cores and the device memory each may use, per logical-NeuronCore setting."""

    name: str
    neuron_core: str
    physical_cores: int
    hbm_gib: float
    lnc: tuple[int, ...]
    default_lnc: int
    cores_per_chip: dict[int, int]
    memory_per_core_gib: dict[int, float]
    tp_degrees: dict[int, tuple[int, ...]]
    source: str


@dataclass(frozen=True)
class Instance:
    name: str
    chip: str
    chips: int
    vcpus: int  # 0: not documented
    host_memory_gib: float  # 0: not documented
    source: str
    efa_gbps: float = 0.0  # 0: not documented
    interconnect: str = ""  # the link between its chips


@dataclass(frozen=True)
class SizingSources:
    """Where a plan's sizing comes from (hardware.toml [sizing]): each the `source` of one of its reasons."""

    tp_degrees: str
    kv_cache: str
    training_activations: str
    training_optimizer: str
    fp8_weights: str
    compile_host: str
    context_encoding: str
    flash_attention: str
    kv_cache_dtype: str
    data_parallel: str
    attention_dp: str


@dataclass(frozen=True)
class Hardware:
    chips: dict[str, ChipHardware]
    instances: tuple[Instance, ...]  # smallest first, per chip
    microcode_mib_per_physical_core: float
    runtime_source: str
    sizing: SizingSources
    ultraservers: tuple[UltraServer, ...] = ()
    scale_out: tuple[ScaleOut, ...] = ()


@dataclass(frozen=True)
class UltraServer:
    """Instances joined by NeuronLink into one domain (hardware.toml [[ultraserver]])."""

    name: str
    instance: str
    count: int
    allocations: tuple[int, ...]
    interconnect: str
    source: str


@dataclass(frozen=True)
class ScaleOut:
    """A documented (or, with supported false, a missing) way to split one model across instances."""

    chip: str  # "*": every chip
    task: str
    stacks: tuple[str, ...]
    link: str  # "ultraserver" or "efa"
    supported: bool
    across: str
    why: str
    missing: str
    releases: Range
    source: str


@dataclass(frozen=True)
class Price:
    """An instance's on-demand price (rules/prices.toml)."""

    instance: str
    usd_per_hour: float
    region: str
    date: str
    source: str


@functools.cache
def load_hardware() -> Hardware:
    """rules/hardware.toml, read only by `advise`."""
    data = _read("hardware.toml")
    chips = {}
    for name, c in data["chips"].items():
        chip = ChipHardware(
            name, c["neuron_core"], c["physical_cores"], float(c["hbm_gib"]), tuple(c["lnc"]), c["default_lnc"],
            {int(k): int(v) for k, v in c["cores_per_chip"].items()},
            {int(k): float(v) for k, v in c["memory_per_core_gib"].items()},
            {int(k): tuple(v) for k, v in c["tp_degrees"].items()}, c["source"])
        if not set(chip.lnc) == set(chip.cores_per_chip) == set(chip.memory_per_core_gib) == set(chip.tp_degrees) \
                or chip.default_lnc not in chip.lnc or not chip.source:
            raise KnowledgeError(f"hardware.toml: chip {name} needs cores and memory for each of its LNC values")
        chips[name] = chip
    instances = tuple(sorted((Instance(i["name"], i["chip"], i["chips"], i["vcpus"], float(i["host_memory_gib"]),
                                       i["source"], float(i.get("efa_gbps", 0)), i.get("interconnect", ""))
                              for i in data["instance"]),
                             key=lambda i: (i.chip, i.chips, i.host_memory_gib, i.name)))
    for instance in instances:
        if instance.chip not in chips or instance.chips < 1 or not instance.source:
            raise KnowledgeError(f"hardware.toml: instance {instance.name} names an unknown chip or no source")
    runtime = data["runtime"]
    sizing = SizingSources(**_sources("hardware.toml", "sizing", data.get("sizing"),
                                      {f.name for f in fields(SizingSources)}))
    names = {i.name for i in instances}
    ultraservers = tuple(UltraServer(u["name"], u["instance"], u["count"], tuple(u["allocations"]), u["interconnect"],
                                     u["source"]) for u in data.get("ultraserver", []))
    if any(u.instance not in names or u.count < 2 or not u.source for u in ultraservers):
        raise KnowledgeError("hardware.toml: an ultraserver names an unknown instance, fewer than two, or no source")
    known = known_releases()
    scale_out = tuple(ScaleOut(s["chip"], s["task"], tuple(s["stacks"]), s["link"], s.get("supported", True),
                               s["across"], s["why"], s["missing"],
                               read_range(f"hardware.toml: scale_out {s['chip']} {s['task']}", s, known), s["source"])
                      for s in data.get("scale_out", []))
    if any(s.link not in ("ultraserver", "efa") or s.task not in ("inference", "training") for s in scale_out):
        raise KnowledgeError("hardware.toml: a scale_out entry needs link ultraserver or efa and a task")
    return Hardware(chips, instances, float(runtime["microcode_mib_per_physical_core"]), runtime["source"], sizing,
                    ultraservers, scale_out)


@functools.cache
def load_prices() -> dict[str, Price]:
    """rules/prices.toml: on-demand USD per instance hour, each with its region, date and source."""
    prices = {}
    for entry in _read("prices.toml").get("price", []):
        price = Price(entry["instance"], float(entry["usd_per_hour"]), entry["region"], entry["date"],
                      entry["source"])
        if price.usd_per_hour <= 0 or not price.source.strip() or not price.date or price.instance in prices:
            raise KnowledgeError(f"prices.toml: {price.instance} needs a positive price, a date and a source, once")
        prices[price.instance] = price
    return prices


@functools.cache
def load_claims() -> dict[str, tuple[tuple[str, str], ...]]:
    """rules/prices.toml [[claim]]: per chip, vendor claims (text, source) quoted as claims, never used as figures."""
    claims: dict[str, list[tuple[str, str]]] = {}
    for entry in _read("prices.toml").get("claim", []):
        if not entry.get("claim", "").strip() or not entry.get("source", "").strip():
            raise KnowledgeError(f"prices.toml: a claim about {entry.get('chip')} needs its text and source")
        claims.setdefault(entry["chip"], []).append((entry["claim"], entry["source"]))
    return {chip: tuple(items) for chip, items in claims.items()}


def _sources(where: str, table: str, given: object, expected: set[str]) -> dict[str, str]:
    """A table of citations: exactly the `expected` keys, each a non-empty string."""
    if not isinstance(given, dict) or set(given) != expected:
        raise KnowledgeError(f"{where}: [{table}] needs exactly {', '.join(sorted(expected))}")
    for key, value in given.items():
        if not isinstance(value, str) or not value.strip():
            raise KnowledgeError(f"{where}: [{table}].{key} must be a non-empty citation")
    return given


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
    data = _read("compiler.toml")
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
    given = _sources("compiler.toml", "compile", data.get("compile"), {*stacks, "native_wrapper", "buckets"})
    compile_sources = CompileSources({s: given[s] for s in stacks}, given["native_wrapper"], given["buckets"])
    return Compiler(flags, env, newest, compile_sources, native_defaults)


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
    data = _read("environments.toml")
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
