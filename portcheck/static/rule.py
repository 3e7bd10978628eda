"""Transitional: the old spelling of the static rule API (code strings), while the families move to
portcheck.rules and portcheck.static.check. Removed when the last family has moved."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import libcst as cst

from portcheck.rules import RULES, Rule, rule
from portcheck.static.check import CHECKS, Check, Context, FixPlan, Hit, Replace
from portcheck.static.syntax import call_name, dotted_name, keyword, positional, string_prefix, string_value


def check(*node_types: type[cst.CSTNode], codes: Iterable[str], tokens: Iterable[str]) -> Callable:
    def register(fn: Callable) -> Callable:
        CHECKS.append(Check(fn, node_types, frozenset(codes), tuple(tokens)))
        return fn

    return register


__all__ = [
    "CHECKS", "RULES", "Check", "Context", "FixPlan", "Hit", "Replace", "Rule", "call_name", "check", "dotted_name",
    "keyword", "positional", "rule", "string_prefix", "string_value",
]
