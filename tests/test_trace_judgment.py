"""What the trace knows that changes a finding's weight (portcheck/dynamic/judgment.py): a hand-written attention
whose score matrix stays small, and on the xla stack a tensor test the model's code skips whenever it is traced."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from portcheck.dynamic.judgment import longest_keys, once_at_trace, weigh_attention
from portcheck.dynamic.outcome import InputFact, ModelFacts
from portcheck.findings import Finding, Severity
from portcheck.rules import TracedFinding
from portcheck.static.custom_attention.handwritten import HandWrittenAttention
from portcheck.traced import AttentionShape, Place


def _model(limit: int, *shapes: tuple[int, ...]) -> ModelFacts:
    inputs = tuple(InputFact(f"x{i}", True, "tensor", "int64", shape) for i, shape in enumerate(shapes))
    return ModelFacts("m.M", 1, "cpu", max_positions=limit, inputs=inputs)


def _attention(keys: int) -> TracedFinding:
    return TracedFinding(HandWrittenAttention, Place("m.py", 3), attention=AttentionShape(4, 64, keys, keys),
                         severity=Severity.WARNING)


def test_keys_that_follow_an_input_grow_to_the_position_limit():
    # DeBERTa: 128 tokens traced, keys as many, a 512-position table: small
    assert longest_keys(_attention(128), _model(512, (1, 128))) == (512, "the model's position limit is 512 tokens")
    assert weigh_attention(_attention(128), _model(512, (1, 128)), "m").severity == Severity.INFO
    # an LLM with 4096 positions, or no limit at all: the matrix grows with the sequence, a warning
    assert weigh_attention(_attention(128), _model(4096, (1, 128)), "m").severity == Severity.WARNING
    assert longest_keys(_attention(128), _model(0, (1, 128))) is None
    assert weigh_attention(_attention(128), _model(0, (1, 128)), "m").severity == Severity.WARNING


def test_keys_no_input_has_are_fixed_by_the_model():
    # Swin: 49 keys of a 7 x 7 window, from a 224-pixel image: small whatever the image
    small = weigh_attention(_attention(49), _model(0, (1, 3, 224, 224)), "m")
    assert small.severity == Severity.INFO and "fixed by the model" in small.message
    # a fixed key count that is long stays a warning
    assert weigh_attention(_attention(4096), _model(0, (1, 3, 224, 224)), "m").severity == Severity.WARNING


def _pc208(path: str, line: int) -> Finding:
    return Finding("PC208", "tensor-control-flow", "dynamic-shape", Severity.WARNING, "`if` on a tensor value", path,
                   line, 1, line, 2)


def test_a_test_skipped_when_traced_is_read_once_on_xla(tmp_path: Path):
    (tmp_path / "m.py").write_text(
        "def f(mask, x):\n"
        "    if not is_tracing(mask) and (mask[:, -1] == 0).all():\n"
        "        return None\n"
        "    if mask.any():\n"
        "        return x\n"
        "    y = x if (not torch.compiler.is_compiling() and x.sum() > 0) else mask\n")
    findings = [_pc208("m.py", 2), _pc208("m.py", 4), _pc208("m.py", 6)]
    judged = once_at_trace(findings, "xla", tmp_path)
    assert [f.severity for f in judged] == [Severity.INFO, Severity.WARNING, Severity.INFO]
    assert "read once, at trace time" in judged[0].message
    assert once_at_trace(findings, "native", tmp_path) == findings  # the static pass settles the native stack


needs_trace = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                 reason="the traced fixtures need torch and transformers")


@needs_trace
def test_the_trace_weighs_its_findings(shared_run):
    def trace_json(*args: str) -> dict:
        done = shared_run("trace", *args, "--format", "json")
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout)

    window = trace_json("fixtures/models/windowed_attention.py:build", "--no-shapes")
    attention = [f for f in window["findings"] if f["code"] == "PC401"]
    assert [f["severity"] for f in attention] == ["info"] and "16 × 16" in attention[0]["message"]
    full = trace_json("fixtures/models/handwritten_attention.py:build", "--no-shapes")
    assert [f["severity"] for f in full["findings"] if f["code"] == "PC401"] == ["warning"]
    skipped = trace_json("fixtures/models/traced_skip.py:build", "--no-shapes", "--target", "inf2")
    branch = [f for f in skipped["findings"] if f["code"] == "PC208"]
    assert [f["severity"] for f in branch] == ["info"] and "at trace time" in branch[0]["message"]
    assert skipped["summary"]["by_severity"].get("warning", 0) == 0
