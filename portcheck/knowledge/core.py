"""The facts every pass reads as one value: the rule catalog, the targets, the CUDA API and the releases
(`load()`, once per process)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from portcheck.knowledge.catalog import RuleInfo, load_catalog
from portcheck.knowledge.cuda_api import CudaApi, load_cuda_api
from portcheck.knowledge.files import data_version
from portcheck.knowledge.sdk import Release, load_releases
from portcheck.knowledge.targets import Availability, Chip, Serving, Stack, load_targets
from portcheck.releases import parse


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


@functools.cache
def load() -> Knowledge:
    """The facts every pass reads, once per process."""
    rules, retired = load_catalog()
    targets = load_targets()
    return Knowledge(rules, targets.chips, targets.stacks, load_cuda_api(), retired, data_version(), load_releases(),
                     targets.availability, targets.serving)
