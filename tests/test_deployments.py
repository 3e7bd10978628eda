"""Documented deployments (tests/data/deployments.toml) against `portcheck advise`'s plan.

For every row: the documented tensor-parallel degree is accepted (no PC804 against it, no PC801 when it is
given), and the plan portcheck proposes by itself is never larger than the documented one, a configuration that
runs being an upper bound on the smallest that fits. A row whose `differs` names a deliberate difference has the
test check that reason's condition instead. Run as a script, the file prints the table documented vs portcheck.
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from portcheck.advise.model import with_numbers
from portcheck.advise.plan import PlanError, make_plan
from portcheck.advise.serving import command
from portcheck.advise.sizing import divides_heads, flash_attention, kv_cache_bytes
from portcheck.advise.values import AdviseOptions, Plan
from portcheck.knowledge import load_hardware
from portcheck.knowledge.serving import load_serving

DATA = Path(__file__).resolve().parent / "data" / "deployments.toml"
ROWS: list[dict[str, Any]] = tomllib.loads(DATA.read_text(encoding="utf-8"))["deployment"]
STACK = {"inf2": "xla", "trn1": "xla", "trn2": "native"}
KEYS = {"name", "model", "target", "instance", "tp", "dp", "batch", "seq", "dtype", "minimum", "source"}
OPTIONAL = {"attention_dp", "context_batch", "differs", "task", "sdk", "stack", "kv_dtype", "nodes", "architecture",
            "model_type"}
# A deliberate difference from a document, and the condition that must hold for it: no row needs one today
# (a row naming a reason not listed here fails test_the_table_is_complete_and_sourced).
DIFFERS: dict[str, Callable[[dict[str, Any], Plan], bool]] = {}


def shape(row: dict[str, Any]):
    numbers = dict(row["model"])
    tokens = row["seq"] if numbers["kind"] == "vision" else 0
    named = {"name": row.get("architecture", row["name"]), "hf_model_type": row.get("model_type", "")}
    return with_numbers(None, {**numbers, **named, "image_tokens": tokens})


def plan_for(row: dict[str, Any], tp: int = 0) -> Plan:
    options = AdviseOptions(row["target"], row.get("stack", STACK[row["target"]]), task=row.get("task", "inference"),
                            batch=row["batch"], seq_len=row["seq"], dtype=row["dtype"], tp=tp, dp=row["dp"],
                            attention_dp=row.get("attention_dp", 1), context_batch=row.get("context_batch", 1),
                            sdk=row.get("sdk", ""), kv_dtype=row.get("kv_dtype", ""))
    return make_plan(shape(row), options)


def documented_chips(row: dict[str, Any]) -> int:
    """The documented instance's chips, or where only the cores are documented, those of the smallest instance of
    the target that has them."""
    hardware = load_hardware()
    chip = hardware.chips[row["target"]]
    cores = chip.cores_per_chip[chip.default_lnc]
    needed = -(-row["tp"] * row["dp"] // cores)
    return next(i.chips for i in hardware.instances
                if i.name == row["instance"] or (not row["instance"] and i.chip == chip.name and i.chips >= needed))


def chips_used(row: dict[str, Any]) -> int:
    chip = load_hardware().chips[row["target"]]
    return -(-row["tp"] * row["dp"] // chip.cores_per_chip[chip.default_lnc])


def test_the_table_is_complete_and_sourced():
    assert len(ROWS) >= 20
    hardware = load_hardware()
    names = {i.name for i in hardware.instances}
    for row in ROWS:
        assert KEYS <= set(row) <= KEYS | OPTIONAL, row["name"]
        assert row["source"].startswith("https://") and "(" in row["source"], row["name"]  # URL and section
        assert not row["instance"] or row["instance"] in names, row["name"]
        assert "differs" not in row or row["differs"] in DIFFERS, row["name"]
        assert {"params", "layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "kind"} \
            <= set(row["model"]), row["name"]
    assert len({row["name"] for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_the_documented_degree_is_accepted(row):
    result = plan_for(row, tp=row["tp"])
    codes = [f.rule.code for f in result.findings]
    assert "PC804" not in codes and "PC801" not in codes, [f.message for f in result.findings]
    assert result.memory is not None and result.memory.fits
    assert result.instance is not None and result.instance.chips <= documented_chips(row)
    # PC803 is the padding advice, and only where the degree does not divide the heads.
    assert ("PC803" in codes) == (not divides_heads(result.model, row["tp"]))


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_the_proposed_plan_is_never_larger_than_the_documented_one(row):
    result = plan_for(row)
    assert result.tp_degree, [f.message for f in result.findings]  # no PC802: it fits some instance
    assert result.tp_degree * result.dp <= row["tp"] * row["dp"]
    assert result.instance is not None and result.instance.chips <= documented_chips(row)
    if row["minimum"] and "differs" not in row:  # the document's smallest configuration is portcheck's too
        assert result.chips == chips_used(row)
    elif "differs" in row:
        assert DIFFERS[row["differs"]](row, result), row["differs"]


def test_the_issue_cases_that_were_rejected_are_accepted():
    """Issue 20's list of documented configurations advise used to reject or call unplaceable."""
    by_name = {row["name"]: row for row in ROWS}
    for name in ("Llama-2-7B chat, batch 32 at 4096, 8 Inf2 cores (optimum-neuron cache)",
                 "Mistral-7B-Instruct-v0.3, batch 8 at 4096, 2 Inf2 cores (optimum-neuron cache)",
                 "Llama-3.3-70B, throughput config: TP32 x DP2, batch 8 at 16384 on trn2.48xlarge (NxD Inference "
                 "model card)",
                 "Mistral-7B-Instruct-v0.2, batch 8 at 16384, TP24 on inf2.48xlarge (Inf2 performance)",
                 "Qwen3-235B-A22B, TP64 with attention DP 8, batch 64 at 16384 on trn2.48xlarge (NxD Inference "
                 "model card)"):
        row = by_name[name]
        assert plan_for(row, tp=row["tp"]).memory.fits, name  # type: ignore[union-attr]
        assert plan_for(row).tp_degree, name


def test_attention_dp_is_what_places_qwen3_at_batch_64():
    row = next(r for r in ROWS if r["name"].startswith("Qwen3") and r["batch"] == 64)
    with_dp = plan_for(row, tp=64)
    without = plan_for({**row, "attention_dp": 1}, tp=64)
    assert with_dp.memory is not None and without.memory is not None
    assert with_dp.memory.fits and not without.memory.fits
    # 94 layers × 1 KV head (4 replicated over the attention group of 8) × 128 × 16384 × 64 / 8 × 2 × 2 bytes
    assert with_dp.memory.kv_cache == pytest.approx(94 * 128 * 16384 * 8 * 2 * 2 / 2**30)
    assert kv_cache_bytes(without.model, without.workload, 64) == 8 * kv_cache_bytes(with_dp.model,
                                                                                      with_dp.workload, 64)


def test_the_flash_condition_follows_nxd_inference():
    """LNC=1 (inf2, trn1): the kernel from 4096 tokens; LNC=2 (trn2): from 1024 tokens in multiples of 512."""
    row = next(r for r in ROWS if r["name"].startswith("Mistral-7B-Instruct-v0.3, batch 8"))
    short, long_ = plan_for({**row, "seq": 2048}), plan_for(row)
    assert not flash_attention(short.model, short.workload, 1) and flash_attention(long_.model, long_.workload, 1)
    assert flash_attention(short.model, short.workload, 2)
    at = {s: flash_attention(short.model, replace(short.workload, seq=s), 2) for s in (1280, 1536, 640, 768)}
    assert at == {1280: False, 1536: True, 640: False, 768: True}  # below 1024: multiples of 256
    assert not flash_attention(short.model, replace(short.workload, seq=8192, task="training"), 2)


MISTRAL = next(r for r in ROWS if r["name"].startswith("Mistral-7B-Instruct-v0.3, batch 8"))


def test_fp8_weights_leave_the_kv_cache_and_the_activations_alone():
    bf16, fp8 = plan_for(MISTRAL, tp=2), plan_for({**MISTRAL, "dtype": "fp8"}, tp=2)
    assert bf16.memory is not None and fp8.memory is not None
    # NxD Inference's fp8 recipe: the MLPs of layers 1-30 in fp8; lm_head, the embedding, the attention and the
    # first and last MLP in bf16. 32 layers × 4096 × 128 × 2 × (32 + 8) heads of attention, 2 × 32768 × 4096 of
    # embedding and lm_head, the rest MLP.
    mlp = 7_248_023_552 - 32 * 4096 * 128 * 2 * 40 - 2 * 32768 * 4096
    quantised = mlp * 30 // 32
    assert fp8.memory.weights == pytest.approx((2 * 7_248_023_552 - quantised) / 2 / 2**30)
    assert bf16.memory.weights / 2 < fp8.memory.weights < bf16.memory.weights
    assert (fp8.memory.kv_cache, fp8.memory.activations) == (bf16.memory.kv_cache, bf16.memory.activations)


def test_the_kv_cache_is_quantised_only_when_asked():
    shape_, stack = shape(MISTRAL), STACK[MISTRAL["target"]]
    base = dict(batch=8, seq_len=4096, tp=2)
    plain = make_plan(shape_, AdviseOptions("inf2", stack, **base))
    fp8 = make_plan(shape_, AdviseOptions("inf2", stack, kv_dtype="fp8", **base))
    assert plain.memory is not None and fp8.memory is not None
    # 32 layers × 4 KV heads a core × 128 × 4096 × 8 × 2 × 2 bytes = 2 GiB; one byte each in fp8
    assert (plain.memory.kv_cache, fp8.memory.kv_cache) == (2.0, 1.0)
    assert plain.memory.weights == fp8.memory.weights and plain.memory.activations == fp8.memory.activations
    assert plan_for(MISTRAL).to_json()["workload"]["kv_cache_dtype"] == "bf16"


def test_context_encoding_is_sized_for_the_context_batch_only():
    one, all_ = plan_for(MISTRAL, tp=2), plan_for({**MISTRAL, "context_batch": 8}, tp=2)
    assert one.memory is not None and all_.memory is not None
    assert all_.memory.kv_cache == one.memory.kv_cache
    assert all_.memory.activations == pytest.approx(8 * one.memory.activations)
    # an encoder has no context encoding of its own: its whole batch runs at once, whatever --context-batch says
    bert = next(r for r in ROWS if r["name"].startswith("bert-base"))
    assert plan_for(bert, tp=1).to_json()["workload"]["context_batch"] == 8


def test_model_copies_take_cores_and_the_throughput_plan_fills_the_instance():
    row = next(r for r in ROWS if "TP32 x DP2" in r["name"])
    result = plan_for(row, tp=32)
    assert (result.tp_degree, result.dp, result.cores, result.chips) == (32, 2, 64, 16)
    too_many = plan_for({**row, "dp": 3}, tp=32)  # 96 cores: more than trn2.48xlarge's 64
    assert too_many.instance is None and "PC804" in [f.rule.code for f in too_many.findings]
    llama = plan_for({**row, "dp": 1, "batch": 1, "seq": 4096}, tp=0)
    best = llama.throughput
    assert best is not None and best.tp == llama.tp_degree and best.instance == llama.instance
    assert best.dp == 64 // llama.tp_degree and best.batch > 1 and best.memory.fits
    json_ = llama.to_json()["throughput"]
    assert json_["sequences_in_flight"] == best.dp * best.batch
    # already the throughput configuration: nothing shown beside it
    full = plan_for({**row, "dp": 64 // llama.tp_degree, "batch": best.batch, "seq": 4096}, tp=llama.tp_degree)
    assert full.throughput is None


def test_a_kv_cache_that_fits_nowhere_is_offered_fp8():
    # Mistral-7B at batch 64 and 16384 tokens on inf2: 32 × 1 KV head × 128 × 16384 × 64 × 2 × 2 bytes = 16 GiB a
    # core from tp 8 on (one KV head a core); in fp8, 8 GiB at tp 8.
    row = {**MISTRAL, "batch": 64, "seq": 16384}
    result = plan_for(row)
    message = next(f.message for f in result.findings if f.rule.code == "PC802")
    assert "an fp8 KV cache (--kv-cache-dtype fp8) (tp 8 on inf2.24xlarge" in message
    assert "fp8 weights (--dtype fp8)" not in message  # the weights were never the problem


@pytest.mark.parametrize("args, message", [
    (("--target", "inf2", "--attention-dp", "2"), "documented for Trn2"),
    (("--attention-dp", "3", "--batch", "8"), "must divide the batch"),
    (("--attention-dp", "4", "--batch", "8", "--tp", "2"), "must divide --tp 2"),
    (("--kind", "encoder", "--kv-cache-dtype", "fp8"), "no KV cache"),
    (("--dp", "0"), "at least 1"),
    (("--target", "inf2", "--dp", "24"), "--dp 24: no inf2 instance holds 24 copies of the smallest degree"),
    (("--context-batch", "x"), "expected a whole number"),
])
def test_bad_parallelism_gets_one_line_and_exit_2(args, message, portcheck):
    done = portcheck("advise", "--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32",
                     "--isolated", *args)
    assert done.returncode == 2, done.stdout
    assert message in done.stderr.splitlines()[-1] and "Traceback" not in done.stderr  # argparse: usage first


def test_the_options_reach_the_plan_from_the_command_line(portcheck):
    done = portcheck("advise", "--params", "235e9", "--layers", "94", "--hidden", "4096", "--heads", "64",
                     "--kv-heads", "4", "--head-dim", "128", "--intermediate", "12288", "--target", "trn2",
                     "--tp", "64", "--attention-dp", "8", "--batch", "64", "--seq-len", "16384",
                     "--context-batch", "1", "--kv-cache-dtype", "bf16", "--dp", "1", "--format", "json",
                     "--isolated")
    assert done.returncode in (0, 1), done.stderr
    plan_ = json.loads(done.stdout)["plan"]
    assert (plan_["tp_degree"], plan_["attention_dp"], plan_["dp"]) == (64, 8, 1)
    assert plan_["workload"]["kv_cache_dtype"] == "bf16" and plan_["workload"]["context_batch"] == 1
    assert plan_["memory"]["per_core_gib"] <= plan_["memory"]["budget_per_core_gib"]
    assert {r["item"] for r in plan_["reasons"]} >= {"context_batch", "attention", "kv_cache_gib"}


def table(rows: list[dict[str, Any]]) -> str:
    """Documented vs portcheck: tp, instance and GiB per core at the documented degree and in portcheck's plan."""
    lines = ["| deployment | documented tp×dp, instance | at documented tp: GiB/core | portcheck: tp×dp, instance, "
             "GiB/core |", "|---|---|---|---|"]
    for row in rows:
        try:
            given, own = plan_for(row, tp=row["tp"]), plan_for(row)
        except PlanError as exc:
            lines.append(f"| {row['name']} | | {exc} | |")
            continue
        codes = ",".join(sorted({f.rule.code for f in given.findings})) or "-"
        at = f"{given.memory.per_core:.1f} of {given.memory.budget:g} ({codes})" if given.memory else "-"
        mine = (f"{own.tp_degree}×{own.dp}, {own.instance.name if own.instance else '-'}, "
                f"{own.memory.per_core:.1f}" if own.tp_degree and own.memory else "fits no instance")
        lines.append(f"| {row['name']} | {row['tp']}×{row['dp']}, {row['instance'] or '-'} | {at} | {mine} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(table(ROWS) + "\n")


ARTIFACT_ROWS = [r for r in ROWS if "architecture" in r and r.get("task", "inference") == "inference"]


@pytest.mark.parametrize("row", ARTIFACT_ROWS, ids=[r["name"] for r in ARTIFACT_ROWS])
def test_the_artifact_of_the_documented_configuration_is_what_the_tools_take(row):
    """At the documented degree, the serving path's artifact: the vllm serve / optimum-cli command parses with the
    documented arguments and carries the documented shape; NxD Inference's NeuronConfig uses documented fields."""
    from tests.test_serving import parse_documented  # here: this file also runs as a script (the table)

    result = plan_for(row, tp=row["tp"])
    serving = result.serving
    assert serving is not None and serving.natively, (row["name"], serving)
    if serving.path == "vllm-neuron":
        args = parse_documented("vllm serve", command(result, "/models/m")[2:])
        assert (args.tensor_parallel_size, args.max_model_len, args.max_num_seqs) == (row["tp"], row["seq"],
                                                                                      row["batch"])
        assert (args.hf_overrides == {"quantization_config": {}}) == (row.get("model_type") == "gpt_oss")
    elif serving.path == "optimum-neuron":
        argv = command(result, "/models/m", "out")
        args = parse_documented("optimum-cli export neuron", argv[3:])
        assert (args.batch_size, args.tensor_parallel_size) == (row["batch"], row["tp"])
        inputs, _ = load_serving().mandatory.get(("optimum-cli export neuron", serving.task), ((), ""))
        assert all(getattr(args, name) is not None for name in inputs), (serving.task, argv)
    elif serving.path == "nxd-inference":
        config = serving.options
        assert set(config) <= set(load_serving().arguments["NeuronConfig"])
        assert (config["tp_degree"], config["batch_size"], config["seq_len"]) == (row["tp"], row["batch"], row["seq"])
        assert ("quantized" in config) == (row["dtype"] == "fp8")
    else:
        pytest.fail(f"{row['name']}: {serving.path} is not the documented library")
