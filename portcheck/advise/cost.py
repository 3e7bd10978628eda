"""What a plan costs: the instances' price per hour (rules/prices.toml, a [tool.portcheck] `prices` table, or
`--price-per-hour`), times how many; for inference at a throughput the user gives, the cost per million tokens; and
next to a GPU baseline, the ratio of tokens per dollar. Throughputs are the user's measurements, never an estimate
of portcheck's, and no FLOPs figure enters the arithmetic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portcheck.errors import UserError
from portcheck.knowledge import load_prices

SECONDS_PER_HOUR = 3600
MILLION = 1_000_000


class CostError(UserError):
    """Cost options that cannot go together: one line for the user."""


@dataclass(frozen=True)
class CostOptions:
    price_per_hour: float = 0.0  # USD per instance hour, for the plan's instance ("": from the data)
    prices: tuple[tuple[str, float], ...] = ()  # a config's `prices` table: instance -> USD per hour
    tokens_per_second: float = 0.0
    baseline_gpu: str = ""
    baseline_tokens_per_second: float = 0.0
    baseline_price_per_hour: float = 0.0


@dataclass(frozen=True)
class Price:
    usd_per_hour: float | None  # None: no price known
    origin: str  # "--price-per-hour", "the config's prices table", "rules/prices.toml", or why there is none
    region: str = ""
    date: str = ""
    source: str = ""
    note: str = ""  # a warning that goes with the price (a cut after its date)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"usd_per_hour": self.usd_per_hour, "from": self.origin, "region": self.region or None,
                               "date": self.date or None, "source": self.source or None}
        if self.note:  # only where the data has one (a price cut after the price's date)
            out["note"] = self.note
        return out

    @property
    def dated(self) -> str:
        """Where the price is from and its date, as a bill quotes it."""
        return self.origin + (f", as of {self.date}" if self.date else "") + (f"; {self.note}" if self.note else "")


def price_of(instance: str, given: float, prices: tuple[tuple[str, float], ...], flag: str) -> Price:
    if given:
        return Price(given, flag)
    table = dict(prices)
    if instance in table:
        return Price(table[instance], "the config's prices table")
    known = load_prices().get(instance)
    if known is not None:
        return Price(known.usd_per_hour, "rules/prices.toml", known.region, known.date, known.source, known.note)
    return Price(None, f"no price for {instance} in portcheck's data; give {flag}")


def per_million(usd_per_hour: float | None, tokens_per_second: float) -> float | None:
    """USD per million tokens: the hourly cost over the tokens an hour makes."""
    if usd_per_hour is None or tokens_per_second <= 0:
        return None
    return usd_per_hour / (tokens_per_second * SECONDS_PER_HOUR) * MILLION


@dataclass(frozen=True)
class Baseline:
    instance: str
    price: Price
    tokens_per_second: float

    @property
    def usd_per_million_tokens(self) -> float | None:
        return per_million(self.price.usd_per_hour, self.tokens_per_second)

    def to_json(self) -> dict[str, Any]:
        return {"instance": self.instance, "price": self.price.to_json(), "tokens_per_second": self.tokens_per_second,
                "usd_per_million_tokens": _round(self.usd_per_million_tokens)}


@dataclass(frozen=True)
class Cost:
    instance: str
    count: int
    price: Price  # per instance
    tokens_per_second: float = 0.0  # of the whole plan (all its instances), as the user measured it
    baseline: Baseline | None = None

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.price.usd_per_hour is None else self.price.usd_per_hour * self.count

    @property
    def usd_per_million_tokens(self) -> float | None:
        return per_million(self.usd_per_hour, self.tokens_per_second)

    @property
    def tokens_per_dollar_ratio(self) -> float | None:
        """Neuron's tokens per dollar over the baseline's (above 1: Neuron makes more tokens per dollar)."""
        ours = self.usd_per_million_tokens
        theirs = self.baseline.usd_per_million_tokens if self.baseline else None
        return None if ours is None or theirs is None or ours == 0 else theirs / ours

    def to_json(self) -> dict[str, Any]:
        return {"instance": self.instance, "instance_count": self.count, "price": self.price.to_json(),
                "usd_per_hour": _round(self.usd_per_hour), "tokens_per_second": self.tokens_per_second or None,
                "usd_per_million_tokens": _round(self.usd_per_million_tokens),
                "baseline": self.baseline.to_json() if self.baseline else None,
                "tokens_per_dollar_ratio": _round(self.tokens_per_dollar_ratio)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def check(options: CostOptions, task: str) -> None:
    """The cost options that make no sense together, refused before any model is built."""
    if options.tokens_per_second and task != "inference":
        raise CostError("--tokens-per-second prices an inference plan's tokens; a training plan reports its cost "
                        "per hour only")
    if (options.baseline_tokens_per_second or options.baseline_price_per_hour) and not options.baseline_gpu:
        raise CostError("--baseline-tokens-per-second and --baseline-price-per-hour describe --baseline-gpu INSTANCE: "
                        "give it too")
    if options.baseline_gpu and not (options.baseline_tokens_per_second and options.tokens_per_second):
        raise CostError("--baseline-gpu compares tokens per dollar: give the baseline's measured "
                        "--baseline-tokens-per-second and this plan's --tokens-per-second")


def plan_cost(instance: str, count: int, options: CostOptions) -> Cost:
    price = price_of(instance, options.price_per_hour, options.prices, "--price-per-hour")
    baseline = None
    if options.baseline_gpu:
        baseline = Baseline(options.baseline_gpu, price_of(options.baseline_gpu, options.baseline_price_per_hour,
                                                           options.prices, "--baseline-price-per-hour"),
                            options.baseline_tokens_per_second)
    return Cost(instance, count, price, options.tokens_per_second, baseline)
