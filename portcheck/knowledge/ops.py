"""rules/ops.toml: each ATen op's status per stack with its source, its neuronx-cc error codes, argument limits
and restricted dtypes; the releases each stack's statuses hold for; TorchNeuron's native SDPA conditions."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from portcheck.knowledge.core import load
from portcheck.knowledge.files import read
from portcheck.knowledge.sdk import known_releases
from portcheck.releases import KnowledgeError, Range, read_range

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
    data = read("ops.toml")
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
    data = read("ops.toml")
    given = data.get("releases", {})
    stacks = set(load().stacks)
    if not isinstance(given, dict) or set(given) != stacks:
        raise KnowledgeError(f"ops.toml: [releases] needs exactly one range per stack ({', '.join(sorted(stacks))})")
    ranges = {stack: read_range(f"ops.toml: releases.{stack}", spec, known_releases()) for stack, spec in given.items()}
    if not all(r.bounded for r in ranges.values()):
        raise KnowledgeError("ops.toml: each [releases.<stack>] needs since and/or until")
    return ranges


@dataclass(frozen=True)
class IntegerSort:
    """Whether sorting an integer tensor fails to compile at a release (ops.toml [integer_sort])."""

    releases: Range  # the releases whose compiler fails; unbounded: fixed before every release the data knows
    failed_with: str
    fixed_in: str
    source: str

    def fails(self, sdk: str) -> bool:
        return self.releases.bounded and self.releases.holds(sdk)


@functools.cache
def load_integer_sort() -> IntegerSort:
    spec = read("ops.toml").get("integer_sort")
    texts = ("failed_with", "fixed_in", "source")
    if not isinstance(spec, dict) or not all(isinstance(spec.get(k), str) and spec[k].strip() for k in texts) or \
            "since" in spec:
        raise KnowledgeError(f"ops.toml: [integer_sort] needs {', '.join(texts)} and at most `until`")
    releases = read_range("ops.toml: integer_sort", spec, known_releases())
    return IntegerSort(releases, spec["failed_with"], spec["fixed_in"], spec["source"])


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
    spec = read("ops.toml").get("native_sdpa")
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
