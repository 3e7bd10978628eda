"""rules/dtypes.toml: the torch dtypes NeuronCores lack or narrow, each with its rule, error code and source."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from portcheck.knowledge.core import load
from portcheck.knowledge.files import read
from portcheck.knowledge.ops import ERROR_CODE_PATTERN
from portcheck.releases import KnowledgeError

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
    chips: tuple[str, ...] = ()  # the chips it holds for; (): every chip

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def on(self, chip: str) -> bool:
        """Whether the entry holds for the chip (float8_e4m3fn is refused on Trn1/Trn2, native on Trn3)."""
        return not self.chips or chip in self.chips


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


_DTYPE_KEYS = frozenset({"aliases", "status", "rule", "kind", "source"})  # every entry's
_OPTIONAL_KEYS = frozenset({"error_code", "chips"})


@functools.cache
def load_dtypes() -> Dtypes:
    """rules/dtypes.toml, read by the static dtype checks, the trace and `advise`."""
    data = read("dtypes.toml")
    rules = load().rules
    entries: dict[str, DtypeSupport] = {}
    seen: set[str] = set()
    for name, entry in data.get("dtypes", {}).items():
        if not isinstance(entry, dict) or not _DTYPE_KEYS <= set(entry) <= _DTYPE_KEYS | _OPTIONAL_KEYS:
            raise KnowledgeError(f"dtypes.toml: {name} needs aliases, status, rule, kind and source (and may have "
                                 "error_code and chips), nothing else")
        texts = [entry[key] for key in entry if key not in ("aliases", "chips")]
        lists = [*entry["aliases"], *entry.get("chips", [])] if isinstance(entry["aliases"], list) and \
            isinstance(entry.get("chips", []), list) else [None]
        if not all(isinstance(x, str) for x in [*texts, *lists]):
            raise KnowledgeError(f"dtypes.toml: {name} takes strings, and a list of them as aliases (and as chips)")
        dtype = DtypeSupport(name, tuple(entry["aliases"]), entry["status"], entry["rule"], entry["kind"],
                             entry["source"], entry.get("error_code", ""), tuple(entry.get("chips", ())))
        if unknown := set(dtype.chips) - set(load().chips):
            raise KnowledgeError(f"dtypes.toml: {name} names unknown chips {sorted(unknown)}")
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
