"""One model planned on several chips (`portcheck advise --target trn2,trn3`): each plan's memory per core, instances
and cost where a price is known, and which plan the data favours and why. The judgement uses only what the plans
hold (whether the model fits, the price per hour, the chips and instances a copy takes): no throughput is assumed,
so two plans that fit with no price differ only in the hardware they take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portcheck.advise.values import Plan


@dataclass(frozen=True)
class Side:
    """One plan of the comparison, in the terms the table shows."""

    chip: str
    fits: bool
    instance: str  # "" when none fits
    instances: int
    tp: int
    dp: int
    cores: int
    chips: int
    per_core_gib: float | None
    budget_gib: float | None
    usd_per_hour: float | None  # of the whole plan; None: no published price

    @classmethod
    def of(cls, plan: Plan) -> Side:
        memory, cost = plan.memory, plan.cost
        instance = plan.fleet.instance.name if plan.fleet else (plan.instance.name if plan.instance else "")
        return cls(plan.chip, bool(plan.tp_degree and plan.instance_count), instance, plan.instance_count,
                   plan.tp_degree, plan.dp, plan.cores, plan.chips,
                   round(memory.per_core, 2) if memory else None, memory.budget if memory else None,
                   cost.usd_per_hour if cost else None)

    def to_json(self) -> dict[str, Any]:
        return {"chip": self.chip, "fits": self.fits, "instance": self.instance or None,
                "instance_count": self.instances or None, "tp_degree": self.tp or None, "dp": self.dp,
                "cores": self.cores or None, "chips": self.chips or None, "per_core_gib": self.per_core_gib,
                "budget_per_core_gib": self.budget_gib, "usd_per_hour": self.usd_per_hour}


@dataclass(frozen=True)
class Comparison:
    sides: tuple[Side, ...]
    favours: str  # the chip the data favours; "" when it does not separate them
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"targets": [s.to_json() for s in self.sides], "favours": self.favours or None, "why": self.why}


def compare(plans: list[Plan]) -> Comparison:
    """The plans side by side and the verdict: a plan that fits beats one that does not; of those that fit, the
    cheaper per hour when every one has a price; else the one taking fewer chips, then fewer instances."""
    sides = tuple(Side.of(p) for p in plans)
    fitting = [s for s in sides if s.fits]
    if not fitting:
        return Comparison(sides, "", "the model fits no documented shape of any of these targets")
    if len(fitting) == 1:
        others = ", ".join(s.chip for s in sides if not s.fits)
        return Comparison(sides, fitting[0].chip, f"only {fitting[0].chip} holds the model ({others}: no documented "
                                                  "shape does)")
    priced = [s for s in fitting if s.usd_per_hour is not None]
    if len(priced) == len(fitting):
        best = min(fitting, key=lambda s: s.usd_per_hour or 0.0)
        rest = "; ".join(f"{s.chip} ${s.usd_per_hour:,.2f}" for s in fitting if s is not best)
        return Comparison(sides, best.chip, f"the lowest price per hour for one copy: {best.chip} "
                                            f"${best.usd_per_hour:,.2f} ({rest}); tokens per dollar need your "
                                            "measured throughput (--tokens-per-second)")
    unpriced = ", ".join(s.chip for s in fitting if s.usd_per_hour is None)
    fewest = min(fitting, key=lambda s: (s.chips, s.instances))
    ties = [s for s in fitting if (s.chips, s.instances) == (fewest.chips, fewest.instances)]
    note = f"no published price for {unpriced} (give each instance's price in the config's prices table)"
    if len(ties) > 1:
        return Comparison(sides, "", f"each takes {fewest.chips} chip(s) on {fewest.instances} instance(s); {note}: "
                                     "the data does not separate them")
    rest = "; ".join(f"{s.chip} {s.chips}" for s in fitting if s is not fewest)
    return Comparison(sides, fewest.chip, f"fewer chips for one copy: {fewest.chip} {fewest.chips} ({rest}), "
                                          f"its {fewest.budget_gib:g} GiB per core holding the model at tp "
                                          f"{fewest.tp}; {note}, so not by cost")
