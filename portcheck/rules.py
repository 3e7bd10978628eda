"""What a rule is, for every pass, and the one registry of them.

A rule is a small class. Its docstring is the user documentation in ruff's sections (`portcheck rule PC101`
prints it), its `message` is the template its findings are worded from (`traced_message` words what the trace
sends as facts, for the target's stack), `fix_title` names its rewrite, and
`passes` says which passes report it: `static` (the libcst checks of `portcheck scan`, which `trace` also runs
over the model's files), `trace` (evidence from the captured graph) and `advise` (the plan's arithmetic). What
Neuron says about the construct (name, category, severity, targets, the reason and its source) is data, in
rules/catalog/<category>.toml, and `Rule.info()` reads it.

Static rules live in `portcheck/static/<category>/`, each module beginning with its rule classes and followed by
the checks that report them; rules only the trace reports live in `portcheck/dynamic/rules.py`, those only the
advisor reports in `portcheck/advise/rules.py`. `registry()` imports those modules and nothing else: no engine,
no torch, so `portcheck rule` and the SARIF help read it cheaply. It finds a category's modules by listing its
package, so a new module needs no line in the package's `__init__.py`.
"""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
import pkgutil
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from portcheck.findings import CATEGORIES, Category, Severity
from portcheck.knowledge import RuleInfo, load
from portcheck.traced import JSON, AttentionShape, Place


class Pass(enum.StrEnum):
    STATIC = "static"  # libcst checks over source files
    TRACE = "trace"  # the captured ATen graph
    ADVISE = "advise"  # the compile plan


class Rule:
    """The base of every rule class; subclasses set `code` and the attributes below."""

    code: ClassVar[str]
    passes: ClassVar[tuple[Pass, ...]] = (Pass.STATIC,)
    message: ClassVar[str] = ""  # the finding's wording, a str.format template; "" where each check words it
    fix_title: ClassVar[str] = ""  # what its fix does, where every occurrence's fix does the same
    TARGET: ClassVar[tuple[str, str]] = ("trn2", "native")  # the (chip, stack) its examples are checked for
    VALID: ClassVar[tuple[str, ...]] = ()  # code that must stay quiet
    INVALID: ClassVar[tuple[str, ...]] = ()  # code that must fire
    FIXABLE: ClassVar[bool] = False  # some occurrences carry a fix (its safety is decided per occurrence)
    ONCE_PER_FILE: ClassVar[bool] = False  # it reports a file's first occurrence only
    EXAMPLE_FILE: ClassVar[str] = "example.py"  # the file name its examples are scanned as (a requirements file)
    # Where its findings keep their severity (portcheck.static.semantic.graph): "device" (what forward or a
    # training step reaches), "host" (what only the data pipeline reaches) and "unknown". None: its category's.
    CONTEXTS: ClassVar[frozenset[str] | None] = None

    @classmethod
    def info(cls) -> RuleInfo:
        """The catalog's entry: name, category, severity, targets, the reason on Neuron and its source."""
        return load().rules[cls.code]

    @classmethod
    def sections(cls) -> dict[str, str]:
        """The docstring's `## Heading` sections, by heading."""
        return doc_sections(inspect.cleandoc(cls.__doc__ or ""))

    @classmethod
    def format(cls, **fields: Any) -> str:
        """The message template with its fields filled in."""
        return cls.message.format(**fields)

    @classmethod
    def traced_message(cls, finding: TracedFinding, stack: str) -> str:
        """The message of a traced finding the child sent as facts only (an export failure, an attention's
        sizes), for the target's stack. Rules the trace reports that way say how; this is the fallback."""
        return f"{cls.code} in the traced graph"

    @classmethod
    def template_fields(cls) -> frozenset[str]:
        return frozenset(name for _, name, _, _ in string.Formatter().parse(cls.message) if name)


_HEADING = re.compile(r"^## (.+)$", re.MULTILINE)


def doc_sections(doc: str) -> dict[str, str]:
    parts = _HEADING.split(doc)
    return {parts[i].strip(): parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}


RULES: dict[str, type[Rule]] = {}


R = TypeVar("R", bound=type[Rule])


def rule(cls: R) -> R:
    """Register a rule class (a class decorator). A code registered twice is a programming error."""
    existing = RULES.get(cls.code)
    if existing is not None and existing is not cls:
        raise ValueError(f"{cls.code} is registered twice: {existing.__qualname__} and {cls.__qualname__}")
    RULES[cls.code] = cls
    return cls


# Where rule classes are defined: the static category packages (every module in one; memory has none), the trace's
# and the advisor's rule modules.
HOMES = (*(f"portcheck.static.{c.replace('-', '_')}" for c in CATEGORIES if c != Category.MEMORY),
         "portcheck.dynamic.rules", "portcheck.advise.rules")


def rule_modules() -> Iterator[str]:
    """The modules `registry()` imports: each home, and every module of a home that is a package, by name."""
    for home in HOMES:
        yield home
        package = importlib.import_module(home)
        for module in pkgutil.iter_modules(getattr(package, "__path__", ()), f"{home}."):
            yield module.name


@functools.cache
def registry() -> dict[str, type[Rule]]:
    """Every rule class by code, once per process."""
    for module in rule_modules():
        importlib.import_module(module)
    return dict(sorted(RULES.items()))


def rule_class(code: str) -> type[Rule] | None:
    return registry().get(code)


# Categories whose findings matter only where the code runs on the device: what only the data pipeline reaches
# runs on the host (numpy, CPU tensors), where a data-dependent shape, a float64 or a host read costs nothing.
_DEVICE_CATEGORIES = frozenset({"dynamic-shape", "host-sync", "dtype", "unsupported-op", "custom-attention"})
EVERYWHERE = frozenset({"device", "host", "setup", "unknown"})
# What costs nothing when it runs once rather than every step: a data-dependent shape (one graph), a host read, a
# CPU fallback. (A float64 value made once and kept on the object still flows into the step, so dtype rules keep
# "setup"; the call graph makes one that set-up narrows or uses there info: Finding.kept.)
_ONCE_HARMLESS = frozenset({"dynamic-shape", "host-sync", "unsupported-op"})
# What hurts only inside a compiled graph: a data-dependent shape compiles where a forward or a training step
# reaches it. In a function the project's call graph places but neither reaches (a utility nothing in the tree
# calls, post-processing a caller runs after the model) the finding is info; its note says where it would matter.
# Rules about the loops that drive the device (a tensor grown per step, NMS on predictions) declare their own.
_STEP_ONLY = frozenset({"dynamic-shape"})
# What works on tensor values: on a host value a data-dependent shape, a read, a CPU op or float64 costs the device
# nothing (the call graph settles host values across calls: Finding.host_if).
VALUE_CATEGORIES = frozenset({"dynamic-shape", "host-sync", "unsupported-op", "dtype"})


@functools.cache
def contexts_of(code: str) -> frozenset[str]:
    """The contexts a rule's findings keep their severity in: its own `CONTEXTS`, else its category's."""
    cls = rule_class(code)
    if cls is not None and cls.CONTEXTS is not None:
        return cls.CONTEXTS
    category = load().rules[code].category if code in load().rules else ""
    if category in _STEP_ONLY:
        return frozenset({"device"})
    if category in _ONCE_HARMLESS:
        return EVERYWHERE - {"host", "setup"}
    return EVERYWHERE - {"host"} if category in _DEVICE_CATEGORIES else EVERYWHERE


@dataclass(frozen=True)
class TracedFinding:
    """A finding of the child's, before it is placed in a file: its rule class, the user's line, and either its
    message or the facts its rule words one from for the target (`Rule.traced_message`)."""

    rule: type[Rule]
    place: Place | None
    message: str = ""  # "": worded by the rule from the facts below
    severity: Severity | None = None  # where this occurrence's differs from the rule's
    op: str = ""  # the ATen op, where one is at fault
    shape: tuple[int | str, ...] = ()  # a data-dependent output's sizes (symbolic ones as text)
    reason: str = ""  # export's or Dynamo's own words
    attention: AttentionShape | None = None
    failure_at: str = ""  # torch_neuronx.analyze: where the op failed
    chips: tuple[str, ...] = ()  # the chips this occurrence holds for (a dtype refused on some only); (): every one

    def to_json(self) -> JSON:
        return {"code": self.rule.code, "place": self.place.to_json() if self.place else None,
                "message": self.message, "severity": self.severity.label if self.severity else None,
                "op": self.op, "shape": list(self.shape), "reason": self.reason,
                "attention": self.attention.to_json() if self.attention else None, "failure_at": self.failure_at,
                "chips": list(self.chips)}

    @classmethod
    def from_json(cls, data: JSON) -> TracedFinding:
        rule = rule_class(data["code"])
        if rule is None:
            raise ValueError(f"the trace reported {data['code']}, which no rule class has")
        severity = data.get("severity")
        return cls(rule, Place.from_json(data.get("place")), data.get("message", ""),
                   Severity.parse(severity) if severity else None, data.get("op", ""), tuple(data.get("shape", ())),
                   data.get("reason", ""), AttentionShape.from_json(data.get("attention")),
                   data.get("failure_at", ""), tuple(data.get("chips", ())))


def package_of(category: str) -> str:
    """The static package a category's rules live in: `cuda-api` -> `cuda_api`."""
    return category.replace("-", "_")


__all__ = ["EVERYWHERE", "HOMES", "RULES", "VALUE_CATEGORIES", "Pass", "Rule", "TracedFinding", "contexts_of",
           "doc_sections", "package_of", "registry", "rule", "rule_class", "rule_modules"]
