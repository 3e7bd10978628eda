"""rules/prices.toml: on-demand prices per instance (region, date, source), and vendor claims quoted as claims."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from portcheck.knowledge.files import read
from portcheck.releases import KnowledgeError


@dataclass(frozen=True)
class Price:
    """An instance's on-demand price (rules/prices.toml)."""

    instance: str
    usd_per_hour: float
    region: str
    date: str
    source: str
    note: str = ""  # what a reader of the price should know (a price cut after its date)


@functools.cache
def load_prices() -> dict[str, Price]:
    """rules/prices.toml: on-demand USD per instance hour, each with its region, date and source."""
    prices = {}
    for entry in read("prices.toml").get("price", []):
        price = Price(entry["instance"], float(entry["usd_per_hour"]), entry["region"], entry["date"],
                      entry["source"], entry.get("note", ""))
        if price.usd_per_hour <= 0 or not price.source.strip() or not price.date or price.instance in prices:
            raise KnowledgeError(f"prices.toml: {price.instance} needs a positive price, a date and a source, once")
        prices[price.instance] = price
    return prices


@functools.cache
def load_claims() -> dict[str, tuple[tuple[str, str], ...]]:
    """rules/prices.toml [[claim]]: per chip, vendor claims (text, source) quoted as claims, never used as figures."""
    claims: dict[str, list[tuple[str, str]]] = {}
    for entry in read("prices.toml").get("claim", []):
        if not entry.get("claim", "").strip() or not entry.get("source", "").strip():
            raise KnowledgeError(f"prices.toml: a claim about {entry.get('chip')} needs its text and source")
        claims.setdefault(entry["chip"], []).append((entry["claim"], entry["source"]))
    return {chip: tuple(items) for chip, items in claims.items()}
