"""Every fact of a trace honours `--sdk`: the integer-sort failure (PC305) holds only at releases whose compiler
fails on it (rules/ops.toml [integer_sort]); topk's refusal of integer inputs holds at every release."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from portcheck.config import Layer, resolve
from portcheck.dynamic.outcome import ModelFacts, OpCount, TraceOutcome
from portcheck.dynamic.results import build_report
from portcheck.findings import Severity
from portcheck.knowledge import known_releases, load_integer_sort
from portcheck.releases import Range
from portcheck.rules import TracedFinding
from portcheck.static.engine import analyse_text
from portcheck.static.unsupported_op.sort import IntegerSortInput
from portcheck.traced import GraphFacts, Place

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "fixtures" / "models" / "vocab_sort.py"


def _outcome() -> TraceOutcome:
    place = Place(str(MODEL), 15)
    return TraceOutcome(
        model=ModelFacts("vocab_sort.Sampler", 0, "cpu", build_place=Place(str(MODEL), 20)),
        graph=GraphFacts("torch.export", 3, 0),
        findings=[TracedFinding(IntegerSortInput, place, "`argsort` on an int64 tensor", Severity.WARNING,
                                "aten::sort"),
                  TracedFinding(IntegerSortInput, Place(str(MODEL), 16), "`topk` on an int64 tensor", None,
                                "aten::topk")],
        ops=[OpCount("aten::sort", 1, ("int64",), place), OpCount("aten::topk", 1, ("int64",), place)])


def _codes_at(sdk: str, monkeypatch: pytest.MonkeyPatch, fails_until: str = "") -> list[str]:
    import portcheck.dynamic.results as results_module

    data = load_integer_sort()
    if fails_until:
        data = replace(data, releases=Range(until=fails_until))
    monkeypatch.setattr(results_module, "load_integer_sort", lambda: data)
    settings = resolve([Layer(target="trn2", sdk=sdk)], ROOT, None, command="trace")
    result = build_report(_outcome(), settings, ROOT, static=False)
    return sorted(f.message.split("`")[1] for f in result.findings if f.code == "PC305")


def test_an_integer_sort_is_not_reported_at_a_release_whose_compiler_sorts_integers(monkeypatch):
    newest = known_releases()[-1]
    # neuronx-cc 2.18 (Neuron 2.23) fixed it, before every release the data knows: only topk's refusal remains
    assert _codes_at(newest, monkeypatch) == ["topk"]
    assert not load_integer_sort().fails(known_releases()[0])
    # were a known release's compiler to fail, that release (and not a later one) reports it
    older = known_releases()[-2]
    assert _codes_at(older, monkeypatch, fails_until=older) == ["argsort", "topk"]
    assert _codes_at(newest, monkeypatch, fails_until=older) == ["topk"]


def test_the_static_pass_follows_the_same_fact():
    source = "import torch\nc = torch.zeros(8, dtype=torch.long)\no = torch.argsort(c)\nt = c.topk(2)\n"
    found = analyse_text(source, "m.py", "trn2", "native", frozenset({"PC305"}), sdk=known_releases()[-1])
    assert [f.line for f in found.findings] == [4]


def test_trn3_has_op_statuses_only_from_the_releases_that_support_it():
    from portcheck.knowledge import load

    def trn3(sdk: str) -> set[str]:
        settings = resolve([Layer(target="trn2", sdk=sdk)], ROOT, None, command="trace")
        assert settings.sdk == sdk
        result = build_report(_outcome(), settings, ROOT, static=False)
        assert result.trace is not None
        return {op.status["trn3"] for op in result.trace.ops}

    newest, first = known_releases()[-1], known_releases()[0]
    assert load().available("trn3", "native", newest) and not load().available("trn3", "native", first)
    assert trn3(newest) != {"unknown"}  # the native stack's statuses, as trn2's
    assert trn3(first) == {"unknown"}  # a release before Trn3's support says nothing of it
