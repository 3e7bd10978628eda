"""Each rule's own examples (its VALID / INVALID lists) and its documentation, for every rule."""

import inspect

import pytest

from portcheck.knowledge import load
from portcheck.report.ruledoc import rule_doc
from portcheck.rules import Pass, registry
from portcheck.static.engine import analyse_text

CODES = sorted(load().rules)


def codes_in(source: str, target: tuple[str, str] = ("trn2", "native"), filename: str = "example.py") -> set[str]:
    chip, stack = target
    result = analyse_text(source, filename, chip, stack, load().applicable(chip, stack))
    assert result.errors == (), result.errors
    return {f.code for f in result.findings}


ALL_RULES = registry()
# Rules with static checks, whose examples the static pass must reproduce (PC900 is about comments, not code).
RULES = {code: cls for code, cls in ALL_RULES.items() if Pass.STATIC in cls.passes and code != "PC900"}
# Rules reported without a static check: from the traced graph (`trace`) or the compile plan (`advise`).
TRACE_ONLY = sorted(code for code, cls in ALL_RULES.items() if Pass.STATIC not in cls.passes)


def test_every_catalog_rule_has_a_class_and_every_class_a_catalog_entry():
    assert set(ALL_RULES) == set(CODES)
    assert set(RULES) | {"PC900"} | set(TRACE_ONLY) == set(CODES)


@pytest.mark.parametrize("code", TRACE_ONLY)
def test_trace_only_rules_have_docs(code):
    text = rule_doc(load().rules[code])
    for section in ("## What it does", "## Why it matters on Neuron", "## Example", "## Use instead", "## Fix safety"):
        assert section in text, f"{code} lacks {section}"
    assert ALL_RULES[code].passes in ((Pass.TRACE,), (Pass.ADVISE,))


@pytest.mark.parametrize("code", sorted(RULES))
def test_invalid_examples_fire(code):
    cls = RULES[code]
    assert cls.INVALID, f"{code} has no INVALID examples"
    for source in cls.INVALID:
        assert code in codes_in(source, cls.TARGET, cls.EXAMPLE_FILE), f"{code} did not fire on:\n{source}"


@pytest.mark.parametrize("code", sorted(RULES))
def test_valid_examples_stay_quiet(code):
    cls = RULES[code]
    assert cls.VALID, f"{code} has no VALID examples"
    for source in cls.VALID:
        assert code not in codes_in(source, cls.TARGET, cls.EXAMPLE_FILE), f"{code} fired on:\n{source}"


@pytest.mark.parametrize("code", sorted(RULES))
def test_docs_have_the_sections(code):
    doc = inspect.cleandoc(RULES[code].__doc__ or "")
    for section in ("## What it does", "## Example", "## Use instead", "## Fix safety"):
        assert section in doc, f"{code} lacks {section}"
    text = rule_doc(load().rules[code])
    assert text.index("## What it does") < text.index("## Why it matters on Neuron") < text.index("## Example")
    assert "Source: " in text


@pytest.mark.parametrize("code", CODES)
def test_every_rule_cites_a_source(code):
    info = load().rules[code]
    assert info.source and info.neuron and info.summary


def test_messages_follow_the_stack():
    native = analyse_text("import torch\ntorch.cuda.synchronize()\n", "a.py", "trn2", "native", frozenset(load().rules))
    xla = analyse_text("import torch\ntorch.cuda.synchronize()\n", "a.py", "inf2", "xla", frozenset(load().rules))
    assert "torch.accelerator.synchronize()" in native.findings[0].message
    assert "xm.wait_device_ops()" in xla.findings[0].message


def test_unselected_codes_do_not_fire():
    source = "import torch\nx.cuda()\ntorch.cuda.synchronize()\n"
    result = analyse_text(source, "a.py", "trn2", "native", frozenset({"PC105"}))
    assert [f.code for f in result.findings] == ["PC105"]
