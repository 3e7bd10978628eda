"""`portcheck advise`: plans worked out by hand from the documented per-core memory, for full-size public
models given as config numbers and for tiny models traced for real; the flags checked against the compiler-flag
data; every emitted bring-up script run here in its dry-run mode.

Where the numbers come from:
- per-core memory: 16 GiB per NeuronCore-v2 (inf2, trn1) and 24 GiB per Trn2 logical core at LNC=2, 12 GiB at
  LNC=1 (SDK about-neuron/arch/neuron-hardware/trainium2.rst, logical-neuroncore-config.rst,
  aws-neuron/aws-neuron-sdk#884); 96 MiB of micro-code per physical core (Neuron device-memory page, 2.33);
- instances: inf2.xlarge 1 chip / 16 GiB host, inf2.24xlarge 6 chips / 384 GiB, trn2.3xlarge 1 chip,
  trn2.48xlarge 16 chips (SDK inf2-arch.rst, trn2-arch.rst; rules/hardware.toml);
- model numbers: the public config.json of each model (fixtures/models/hf/*/config.json); the parameter counts
  are checked against transformers building those configs on the meta device (test_parameter_counts).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from conftest import run_command

from portcheck.advise.model import with_numbers
from portcheck.advise.plan import PlanError, make_plan
from portcheck.advise.values import AdviseOptions, LncAlternative
from portcheck.knowledge import KnowledgeError, load_compiler
from tests.test_serving import check_embedded

ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "fixtures" / "models" / "hf"
GIB = 2**30
MICROCODE = 96 / 1024  # GiB per physical core

# name: (parameters, layers, hidden, heads, kv heads, intermediate, max positions, kind)
MODELS = {
    "llama-2-7b": (6_738_415_616, 32, 4096, 32, 32, 11008, 4096, "decoder"),
    "llama-3-8b": (8_030_261_248, 32, 4096, 32, 8, 14336, 8192, "decoder"),
    "mistral-7b": (7_241_732_096, 32, 4096, 32, 8, 14336, 32768, "decoder"),
    "mixtral-8x7b": (46_702_792_704, 32, 4096, 32, 8, 14336, 32768, "decoder"),
    "bert-base": (109_514_298, 12, 768, 12, 12, 3072, 512, "encoder"),
    "vit-base": (86_567_656, 12, 768, 12, 12, 3072, 0, "vision"),
}


def shape(name: str):
    params, layers, hidden, heads, kv, inter, positions, kind = MODELS[name]
    # ViT-B/16 at 224 pixels: (224 / 16)² patches + the class token (its config's image_size and patch_size)
    tokens = 197 if kind == "vision" else 0
    return with_numbers(None, {"params": params, "layers": layers, "hidden": hidden, "heads": heads,
                               "kv_heads": kv, "intermediate": inter, "max_positions": positions, "kind": kind,
                               "name": name, "image_tokens": tokens})


def plan(name: str, chip: str = "inf2", stack: str | None = None, **options):
    stack = stack or {"inf2": "xla", "trn1": "xla", "trn2": "native"}[chip]
    return make_plan(shape(name), AdviseOptions(chip, stack, **options))


def by_hand(name: str, tp: int, seq: int, budget: float, physical_per_core: int, batch: int = 1,
            size: int = 2, context_batch: int = 1) -> dict:
    """The per-core memory of an inference plan, from the formulas in the issue and the plan's reasons: a decoder
    context-encodes `context_batch` sequences at a time, with NxD Inference's flash kernel (no score matrix) from
    4096 tokens at LNC=1 and from 1024 tokens in multiples of 512 at LNC=2 (trn2's LNC equals its physical cores
    per logical core); an encoder runs its whole batch and holds its scores."""
    params, layers, hidden, heads, kv, inter, _, kind = MODELS[name]
    head_dim = hidden // heads
    weights = params * size / tp / GIB
    kv_cache = 0.0
    heads_core = math.ceil(heads / tp)
    per_token = 4 * hidden + 2 * math.ceil(inter / tp)
    if kind == "decoder":
        kv_cache = layers * math.ceil(kv / tp) * head_dim * seq * batch * 2 * size / GIB
        rows = min(context_batch, batch)
        flash = (seq % 512 == 0 if seq >= 1024 else seq % 256 == 0) if physical_per_core == 2 else seq >= 4096
    else:
        rows, flash = batch, False
    scores = rows * heads_core * 128 * min(seq, 2048) * 4 if flash else rows * heads_core * seq * seq * size
    prefill = rows * seq * per_token * size + scores
    decode = (batch * per_token + batch * heads_core * seq) * size if kind == "decoder" else 0
    activations = max(prefill, decode) / GIB
    overhead = MICROCODE * physical_per_core + 0.10 * budget
    return {"weights": weights, "kv": kv_cache, "activations": activations, "overhead": overhead,
            "total": weights + kv_cache + activations + overhead}


# Tests that import torch (and transformers) into this process run on one xdist worker, which imports them once.
IN_PROCESS_TORCH = "in-process-torch"


def check_memory(result, expected: dict) -> None:
    memory = result.memory
    assert memory.weights == pytest.approx(expected["weights"])
    assert memory.kv_cache == pytest.approx(expected["kv"])
    assert memory.activations == pytest.approx(expected["activations"])
    assert memory.overhead == pytest.approx(expected["overhead"])
    assert memory.per_core == pytest.approx(expected["total"])


@pytest.mark.xdist_group(IN_PROCESS_TORCH)
def test_parameter_counts_are_what_transformers_builds():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    for name, (params, *_rest) in MODELS.items():
        data = json.loads((HF / name / "config.json").read_text())
        config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
        with torch.device("meta"):
            model = getattr(transformers, config.architectures[0])._from_config(config)
        assert sum(p.numel() for p in model.parameters()) == params, name


def test_llama_2_7b_on_inf2_needs_two_cores_of_one_inf2_xlarge():
    result = plan("llama-2-7b", "inf2")
    # One core: 12.55 GiB of bf16 weights + 2 GiB of KV cache (32 × 32 × 128 × 4096 × 2 × 2 bytes) + activations
    # + overhead > 16 GiB; two cores halve weights and KV cache.
    one = by_hand("llama-2-7b", 1, 4096, 16, 1)
    assert one["weights"] == pytest.approx(12.551, abs=1e-3) and one["kv"] == 2.0 and one["total"] > 16
    check_memory(result, by_hand("llama-2-7b", 2, 4096, 16, 1))
    assert (result.tp_degree, result.cores, result.chips, result.lnc) == (2, 2, 1, None)
    assert result.instance.name == "inf2.xlarge"  # 1 chip = 2 cores; 16 GiB host ≥ 12.55 GiB of weights
    # and 16 GiB of host memory is too little to compile 12.55 GiB of weights on (PC808, tests/test_serving.py)
    assert [f.rule.code for f in result.findings] == ["PC801", "PC808"]
    assert result.buckets == [128, 256, 512, 1024, 2048, 4096]


def test_llama_2_7b_fits_one_trn2_logical_core():
    result = plan("llama-2-7b", "trn2")
    # 24 GiB per logical core at LNC=2, which is 2 physical cores (2 × 96 MiB of micro-code).
    check_memory(result, by_hand("llama-2-7b", 1, 4096, 24, 2))
    assert (result.tp_degree, result.chips, result.lnc, result.instance.name) == (1, 1, 2, "trn2.3xlarge")
    assert result.replicas == 4  # 4 logical cores per chip
    assert result.findings == []
    # LNC=1: 12 GiB per core, so two cores; still one chip.
    assert result.alternatives == [LncAlternative(1, 2, 1, pytest.approx(
        by_hand("llama-2-7b", 2, 4096, 12, 1)["total"], abs=1e-3), 12.0)]


def test_llama_2_7b_at_lnc_1_uses_12_gib_cores():
    result = plan("llama-2-7b", "trn2", lnc=1)
    check_memory(result, by_hand("llama-2-7b", 2, 4096, 12, 1))
    assert (result.tp_degree, result.chips, result.lnc) == (2, 1, 1)
    assert result.compiler_args[result.compiler_args.index("--logical-nc-config") + 1] == "1"
    assert result.env["NEURON_LOGICAL_NC_CONFIG"] == "1"


@pytest.mark.parametrize("name", ["llama-3-8b", "mistral-7b"])
def test_gqa_8b_class_models_on_inf2(name):
    # 8 KV heads: at tp 2 each core keeps 4 of them; the 8192 / 32768 position limits are planned at 4096.
    result = plan(name, "inf2")
    assert result.workload.seq == 4096
    check_memory(result, by_hand(name, 2, 4096, 16, 1))
    assert (result.tp_degree, result.instance.name) == (2, "inf2.xlarge")
    if name == "llama-3-8b":  # worked out with a calculator: 8,030,261,248 × 2 / 2 bytes; 32 × 4 × 128 × 4096 × 2 × 2
        assert result.memory.weights == pytest.approx(7.479, abs=1e-3)
        assert result.memory.kv_cache == 0.25
        # the flash kernel at 4096 tokens: 4096 × (16384 + 14336) × 2 + 16 heads × 128 × 2048 × 4 bytes
        assert result.memory.activations == 0.25
        # 14.96 GiB of weights fit inf2.xlarge's 16 GiB host to load, not to compile: a larger compile host
        assert result.compile_instance.name == "inf2.8xlarge"


def test_mixtral_8x7b_needs_eight_inf2_cores_and_two_trn2_chips():
    inf2 = plan("mixtral-8x7b", "inf2")
    # 86.99 GiB of weights: tp 4 leaves 21.7 GiB a core (> 16); tp 8 fits; 8 cores = 4 chips → inf2.24xlarge.
    assert by_hand("mixtral-8x7b", 4, 4096, 16, 1)["total"] > 16
    check_memory(inf2, by_hand("mixtral-8x7b", 8, 4096, 16, 1))
    assert inf2.memory.weights == pytest.approx(10.873, abs=1e-3)  # 46,702,792,704 × 2 / 8
    assert inf2.memory.kv_cache == 0.0625  # 8 KV heads over 8 cores: 32 × 1 × 128 × 4096 × 2 × 2
    assert inf2.memory.activations == 0.15625  # 4096 × (16384 + 3584) × 2 + 4 heads × 128 × 2048 × 4
    assert (inf2.tp_degree, inf2.chips, inf2.instance.name) == (8, 4, "inf2.24xlarge")
    trn2 = plan("mixtral-8x7b", "trn2")
    # tp 4 at LNC=2: 21.75 + KV + activations + 2.59 overhead > 24 GiB; tp 8 = 2 chips → trn2.48xlarge.
    assert by_hand("mixtral-8x7b", 4, 4096, 24, 2)["total"] > 24
    check_memory(trn2, by_hand("mixtral-8x7b", 8, 4096, 24, 2))
    assert (trn2.tp_degree, trn2.chips, trn2.instance.name) == (8, 2, "trn2.48xlarge")


def test_bert_base_is_one_core_without_kv_cache():
    result = plan("bert-base", "inf2")
    check_memory(result, by_hand("bert-base", 1, 512, 16, 1))
    assert result.memory.kv_cache == 0 and result.memory.weights == pytest.approx(0.204, abs=1e-3)
    assert (result.tp_degree, result.instance.name, result.replicas) == (1, "inf2.xlarge", 2)
    assert result.buckets == [128, 256, 512]


def test_vit_base_is_one_core_with_a_fixed_shape():
    result = plan("vit-base", "inf2")  # (224 / 16)² patches + the class token
    assert result.workload.seq == 197
    check_memory(result, by_hand("vit-base", 1, 197, 16, 1))
    assert result.buckets == [] and result.tp_degree == 1
    assert "--model-type" in result.compiler_args
    assert result.compiler_args[result.compiler_args.index("--model-type") + 1] == "transformer"


def test_training_adds_gradients_and_adam_state():
    result = plan("llama-2-7b", "trn2", task="training", seq_len=4096)
    params, layers, hidden, heads, *_ = MODELS["llama-2-7b"]
    tp = result.tp_degree
    # Korthikanti et al. 2022: s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes per layer; ZeRO: 2 + 2 + 12 bytes/param.
    activations = 4096 * hidden * (10 + 24 / tp + 5 * heads * 4096 / (hidden * tp)) * layers / GIB
    per_core = params * 16 / tp / GIB + activations + MICROCODE * 2 + 2.4
    assert result.memory.per_core == pytest.approx(per_core)
    assert result.memory.per_core <= 24
    smaller = tp // 2
    smaller_activations = 4096 * hidden * (10 + 24 / smaller + 5 * heads * 4096 / (hidden * smaller)) * layers
    assert params * 16 / smaller / GIB + smaller_activations / GIB + MICROCODE * 2 + 2.4 > 24
    assert result.env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] == "1"
    assert result.memory.kv_cache == 0


def test_training_on_inf2_is_refused_with_trn2_recommended():
    with pytest.raises(PlanError, match="--target trn2"):
        plan("bert-base", "inf2", task="training")
    done = run("advise", "--params", "1e8", "--target", "inf2", "--task", "training")
    assert done.returncode == 2 and "--target trn2" in done.stderr and "Traceback" not in done.stderr


def test_training_on_the_xla_stack_is_refused():
    for chip in ("trn1", "trn2"):
        with pytest.raises(PlanError, match=r"unsupported from Neuron 2\.30"):
            plan("bert-base", chip, stack="xla", task="training")


@pytest.mark.parametrize("numbers, message", [
    ({"params": 7e9, "layers": 32, "heads": 32}, "--layers, --hidden and --heads together"),
    ({"params": 7e9, "kind": "decoder"}, "--layers, --hidden and --heads together"),
    ({"params": 7e9, "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 64}, "must divide the 32"),
    ({"params": 7e9, "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 3}, "must divide the 32"),
    ({"params": 7e9, "layers": 32, "hidden": 4100, "heads": 32}, "give --head-dim"),
])
def test_inconsistent_numbers_are_refused(numbers, message):
    with pytest.raises(ValueError, match=message):
        with_numbers(None, numbers)


def test_a_sequence_beyond_the_model_or_a_vision_model_without_one_is_refused():
    with pytest.raises(PlanError, match="longer than the 4096 positions"):
        plan("llama-2-7b", "inf2", seq_len=8192)
    vit = with_numbers(None, {"params": 86e6, "layers": 12, "hidden": 768, "heads": 12, "kind": "vision"})
    with pytest.raises(PlanError, match="give --seq-len"):
        make_plan(vit, AdviseOptions("inf2", "xla"))


def test_a_model_that_fits_nowhere_says_what_would_make_it_fit():
    numbers = {"params": 400e9, "layers": 120, "hidden": 16384, "heads": 128, "kv_heads": 8, "max_positions": 4096}
    result = make_plan(with_numbers(None, numbers), AdviseOptions("inf2", "xla"))
    assert result.instance is None and result.tp_degree == 0
    (finding,) = result.findings
    assert finding.rule.code == "PC802" and "inf2.48xlarge" in finding.message
    # 745 GiB of bf16 weights over 24 cores is 31 GiB a core; fp8 halves it to 15.5 GiB, which with the 1.69 GiB
    # overhead still exceeds 16: not offered. trn2.48xlarge's 64 cores of 24 GiB hold it.
    assert "fp8" not in finding.message
    assert "--target trn2 (tp 64 on trn2.48xlarge" in finding.message
    assert make_plan(with_numbers(None, numbers), AdviseOptions("trn2", "native")).tp_degree == 64
    smaller = {**numbers, "params": 250e9, "layers": 80}
    (finding,) = make_plan(with_numbers(None, smaller), AdviseOptions("inf2", "xla")).findings
    assert "fp8 weights (--dtype fp8) (tp 24 on inf2.48xlarge" in finding.message  # 250e9 B / 24 = 9.7 GiB
    assert make_plan(with_numbers(None, smaller), AdviseOptions("inf2", "xla", dtype="fp8")).tp_degree == 24


def test_a_given_tp_that_does_not_fit_is_an_error_naming_the_smallest():
    result = plan("llama-2-7b", "inf2", tp=1)
    assert [f.rule.code for f in result.findings] == ["PC804", "PC808"]  # PC808: inf2.xlarge's host memory
    assert "smallest degree that fits is 2" in result.findings[0].message
    result = plan("llama-2-7b", "inf2", tp=48)
    assert "more than the 24 cores" in result.findings[0].message
    result = plan("llama-2-7b", "inf2", tp=12)  # fits, but NxD Inference lists 1, 2, 4, 8, 24 for inf2
    assert "not a degree the Neuron runtime supports on inf2 (1, 2, 4, 8, 24)" in result.findings[0].message


def test_heads_the_degree_does_not_divide_need_padding():
    result = plan("bert-base", "inf2", tp=8)
    (finding,) = result.findings
    assert finding.rule.code == "PC803" and "pad them to 16 with pad_model" in finding.message
    assert "CONVERT_TO_MHA" not in finding.message  # multi-head already
    replicated = plan("llama-3-8b", "inf2", tp=24)  # 8 KV heads divide 24: replicated, one a core
    assert "pad them to 48" in replicated.findings[-1].message
    assert "CONVERT_TO_MHA" not in replicated.findings[-1].message
    assert replicated.memory.kv_cache == pytest.approx(32 * 1 * 128 * 4096 * 2 * 2 / GIB)
    converted = make_plan(with_numbers(None, {"params": 1e9, "layers": 16, "hidden": 3072, "heads": 48,
                                              "kv_heads": 12, "max_positions": 2048}),
                          AdviseOptions("trn1", "xla", tp=8))  # 48 heads split, 12 KV heads do not
    (finding,) = converted.findings
    assert "CONVERT_TO_MHA" in finding.message and "pad" not in finding.message
    assert converted.memory.kv_cache == pytest.approx(16 * 6 * 64 * 2048 * 2 * 2 / GIB)  # 48 / 8 heads a core
    # Chosen degrees divide the heads: 12 heads skip tp 8 for 12 when memory forces more than 4.
    wide = make_plan(with_numbers(None, {"params": 60e9, "layers": 48, "hidden": 6144, "heads": 48,
                                         "kv_heads": 48, "max_positions": 2048}), AdviseOptions("inf2", "xla"))
    assert 48 % wide.tp_degree == 0


@pytest.mark.parametrize("prefer", ["accuracy", "speed"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32", "fp8"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_trn2_only_flags_never_reach_an_inf2_plan(name, dtype, prefer):
    result = make_plan(shape(name).__class__(**{**shape(name).__dict__, "int64_in_graph": True}),
                       AdviseOptions("inf2", "xla", dtype=dtype, prefer=prefer))
    trn2_only = {f.name for f in load_compiler().flags.values() if set(f.targets) <= {"trn2", "trn3"}}  # and later
    assert trn2_only >= {"--logical-nc-config", "--native-int64"}
    assert not trn2_only & set(result.compiler_args)
    assert "NEURON_LOGICAL_NC_CONFIG" not in result.env
    assert "--enable-saturate-infinity" not in result.compiler_args  # trn1 only
    assert result.compiler_args[:2] == ["--target", "inf2"]
    trn2 = make_plan(shape(name), AdviseOptions("trn2", "native", dtype=dtype, prefer=prefer))
    assert "--enable-saturate-infinity" not in trn2.compiler_args and "--logical-nc-config" in trn2.compiler_args


def test_the_flag_check_rejects_what_the_data_does_not_allow():
    compiler = load_compiler()
    with pytest.raises(KnowledgeError, match="not allowed for target inf2"):
        compiler.check(["--logical-nc-config", "2"], {}, "inf2", "xla")
    with pytest.raises(KnowledgeError, match=r"needs Neuron 2\.32"):
        compiler.check(["--native-int64", "enabled"], {}, "trn2", "xla")
    with pytest.raises(KnowledgeError, match="needs one of"):
        compiler.check(["--auto-cast", "fp8"], {}, "trn2", "native")
    with pytest.raises(KnowledgeError, match=r"not in rules/compiler\.toml"):
        compiler.check(["--made-up"], {}, "trn2", "native")
    with pytest.raises(KnowledgeError, match="NEURON_LOGICAL_NC_CONFIG"):
        compiler.check([], {"NEURON_LOGICAL_NC_CONFIG": "2"}, "inf2", "xla")
    compiler.check(["--target", "trn2", "--logical-nc-config", "2", "--native-int64", "enabled"],
                   {"NEURON_LOGICAL_NC_CONFIG": "2"}, "trn2", "native")


def test_the_flag_problems_name_each_flag_and_skip_what_is_known_only_at_run_time():
    compiler = load_compiler()
    found = compiler.problems(["--lnc", "2", "-O", "4", "--made-up", "--auto-cast", None, "--logfile", "x.txt",
                               "--model-type", "transformer-O2"], "inf2", "xla")
    assert [(p.kind, p.index, p.flag.name if p.flag else None) for p in found] == [
        ("target", 0, "--logical-nc-config"), ("value", 2, "--optlevel"), ("unknown", 4, None),
        ("value", 9, "--model-type")]
    assert compiler.problems(["--optlevel", None, "--native-int64", "enabled"], "trn2", "native") == []
    with pytest.raises(KnowledgeError, match="needs one of"):
        compiler.check(["-O", "4"], {}, "trn2", "native")


def test_prefer_speed_casts_matmults_and_optimises_harder():
    accurate = plan("llama-2-7b", "trn2")
    fast = plan("llama-2-7b", "trn2", prefer="speed")
    assert " ".join(accurate.compiler_args).count("--auto-cast none") == 1
    assert "--auto-cast matmult --auto-cast-type bf16" in " ".join(fast.compiler_args)
    assert fast.compiler_args[fast.compiler_args.index("--optlevel") + 1] == "3"
    assert accurate.compiler_args[accurate.compiler_args.index("--optlevel") + 1] == "2"
    fp8 = plan("llama-2-7b", "trn2", dtype="fp8")
    assert "--auto-cast none" in " ".join(fp8.compiler_args)  # fp8 sizes weights; --prefer decides the cast
    fast_fp8 = plan("llama-2-7b", "trn2", dtype="fp8", prefer="speed")
    assert "--auto-cast matmult --auto-cast-type fp8_e4m3" in " ".join(fast_fp8.compiler_args)
    # NxD Inference's fp8 recipe: the MLPs of layers 1-30 (three 4096 × 11008 projections a layer, the vocabulary
    # being unknown to these numbers) at one byte, every other parameter at two
    params = MODELS["llama-2-7b"][0]
    quantised = 3 * 4096 * 11008 * 32 * 30 // 32
    assert fp8.memory.weights == pytest.approx((2 * params - quantised) / GIB)


def test_native_stack_passes_the_flags_in_the_environment():
    result = plan("llama-2-7b", "trn2")
    # TorchNeuron sets --target, the LNC and -O itself, and passes --model-type transformer --auto-cast none
    # (rules/compiler.toml [native_defaults]); the rest reaches neuronx-cc through NEURON_CC_FLAGS.
    assert "NEURON_CC_FLAGS" not in result.env
    assert any(r.item == "NEURON_CC_FLAGS" and r.why.startswith("not needed") for r in result.reasons)
    fast = plan("llama-2-7b", "trn2", prefer="speed")
    assert fast.env["NEURON_CC_FLAGS"] == "--auto-cast matmult --auto-cast-type bf16"
    assert fast.env["NEURON_COMPILER_OPT_LEVEL"] == "-O3"  # TorchNeuron's own -O2 replaced
    assert result.env["TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"] == "1"
    assert plan("llama-2-7b", "trn2", stack="xla", sdk="2.33").env.get("NEURON_CC_FLAGS") is None


def test_every_reason_has_a_source():
    for name in MODELS:
        for chip in ("inf2", "trn2", "trn1"):
            result = plan(name, chip)
            assert result.reasons and all(r.item and r.why and r.source for r in result.reasons)
            items = {r.item for r in result.reasons}
            args, i = result.compiler_args, 0
            while i < len(args):  # each flag with its value is one reason's item
                takes_value = i + 1 < len(args) and not args[i + 1].startswith("--")
                assert (f"{args[i]} {args[i + 1]}" if takes_value else args[i]) in items, (name, chip, args[i])
                i += 2 if takes_value else 1
            assert all(f"{k}={v}" in items or k in items for k, v in result.env.items()), (name, chip)


# --- the command, for real: a child process, real torch and transformers, tiny models -----------------------

def run(*args: str, cwd: Path = ROOT, timeout: float = 240) -> subprocess.CompletedProcess:
    return run_command(args, cwd=cwd, timeout=timeout)


# torch installed, for the tests whose `portcheck advise` child processes trace a model (this one needn't import it)
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="could not import 'torch'")


@pytest.fixture
def advise_json(shared_run):
    """`portcheck advise ARGS --format json`, run once a session for each ARGS (conftest.SharedRuns)."""

    def advise_json(*args: str) -> dict:
        done = shared_run("advise", *args, "--format", "json")
        assert done.returncode in (0, 1), done.stderr
        assert "Traceback" not in done.stderr
        return json.loads(done.stdout)

    return advise_json


def test_json_has_the_documented_keys(advise_json):
    report = advise_json("--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32",
                         "--kv-heads", "8", "--target", "inf2", "--seq-len", "2048")
    assert report["schema_version"] == 1 and report["target"] == {"chip": "inf2", "stack": "xla"}
    plan_ = report["plan"]
    for key in ("instance", "tp_degree", "cores", "chips", "lnc", "memory", "compiler_args", "env", "buckets",
                "reasons"):
        assert key in plan_, key
    assert set(plan_["memory"]) >= {"weights_gib", "kv_cache_gib", "activations_gib", "overhead_gib",
                                    "per_core_gib", "budget_per_core_gib"}
    assert plan_["lnc"] is None and plan_["compiler_args"][:2] == ["--target", "inf2"]
    assert all(set(r) == {"item", "why", "source"} for r in plan_["reasons"])
    assert isinstance(report["findings"], list)


def test_table_output_names_the_instance_and_the_flags():
    done = run("advise", "--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32", "--target",
               "trn2")
    assert done.returncode == 0, done.stderr
    assert "trn2.3xlarge" in done.stdout and "--logical-nc-config 2" in done.stdout and "why" in done.stdout


@pytest.mark.parametrize("args, message", [
    ((), "advise needs a model"),
    (("--params", "7e9", "--emit-script", "x.py"), "--emit-script needs a model"),
    (("--params", "0"), "expected a positive number"),
    (("--params", "7e9", "--seq-len", "-3"), "at least 1"),
    (("--params", "7e9", "--target", "inf2", "--lnc", "2"), "--lnc 2 is not available on inf2"),
    (("fixtures/models/missing.py:build",), "no such file"),
])
def test_bad_requests_get_one_line_and_exit_2(args, message, tmp_path):
    done = run("advise", *args, cwd=ROOT)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (ROOT / "x.py").exists()


@needs_torch
def test_a_traced_model_gives_int64_flags_on_trn2_native_only(advise_json, tmp_path):
    # the run tests/test_serving.py emits llama's trn2 script from (conftest.SharedRuns: one trace for both)
    native = advise_json("--hf-config", str(HF / "llama"), "--target", "trn2", "--emit-script", str(tmp_path / "b.py"))
    assert native["model"]["int64_in_graph"] is True and native["model"]["source"] == "trace"
    assert "--native-int64" in native["plan"]["compiler_args"]
    assert native["model"]["kv_heads"] == 2 and native["model"]["layers"] == 2
    assert native["plan"]["buckets"] == [128, 256]  # dynamic input_ids:1 up to the 256 positions
    xla = advise_json("--hf-config", "fixtures/models/hf/llama", "--target", "trn2", "--stack", "xla", "--sdk", "2.33")
    assert "--native-int64" not in xla["plan"]["compiler_args"]
    assert any(r["item"] == "int64" and "2.31" in r["why"] for r in xla["plan"]["reasons"])
    # the trace's own findings come along
    assert {f["code"] for f in native["findings"]} >= {"PC211"}


@needs_torch
def test_a_tiny_traced_model_sized_by_hand(advise_json, tmp_path):
    """fixtures/models/hf/llama: 202,048 parameters, 2 layers, hidden 64, 4 heads, 2 KV heads (head dim 16),
    intermediate 128, 256 positions; traced, then planned for inf2 at its 256 positions (the run the llama-inf2
    script tests make: conftest.SharedRuns)."""
    report = advise_json("--hf-config", str(HF / "llama"), "--target", "inf2", "--emit-script", str(tmp_path / "b.py"))
    memory = report["plan"]["memory"]
    assert report["model"]["parameters"] == 202_048
    weights = 202_048 * 2 / GIB
    kv_cache = 2 * 2 * 16 * 256 * 1 * 2 * 2 / GIB
    activations = 256 * (4 * 64 + 2 * 128 + 4 * 256) * 2 / GIB
    overhead = MICROCODE + 1.6
    assert memory["weights_gib"] == round(weights, 3) and memory["kv_cache_gib"] == round(kv_cache, 3)
    assert memory["activations_gib"] == round(activations, 3) and memory["overhead_gib"] == round(overhead, 3)
    assert memory["per_core_gib"] == round(weights + kv_cache + activations + overhead, 3)
    assert (report["plan"]["instance"], report["plan"]["tp_degree"], report["plan"]["replicas"]) == (
        "inf2.xlarge", 1, 2)


@needs_torch
def test_a_unet_is_compiled_as_one_and_sized_from_its_graph(advise_json):
    """fixtures/models/tiny_unet.py at 1×3×512×512 fp32: the most alive at once is the input (3 MiB) with a
    16×256×256 conv output and its ReLU (4 MiB each): 11,534,336 bytes; the plan scales it to batch 4 in bf16."""
    report = advise_json("fixtures/models/tiny_unet.py:build", "--target", "inf2", "--batch", "4")
    assert report["model"]["peak_activation_bytes"] == 3 * 512 * 512 * 4 + 2 * 16 * 256 * 256 * 4 == 11_534_336
    assert report["plan"]["memory"]["activations_gib"] == round(11_534_336 * 4 * 2 / 4 / GIB, 3)
    args = report["plan"]["compiler_args"]
    assert args[args.index("--model-type") + 1] == "unet-inference"
    assert report["plan"]["buckets"] == [] and report["plan"]["dynamic_batch"] is True
    generic = advise_json("fixtures/models/mask_index.py:build", "--target", "inf2")
    assert generic["plan"]["compiler_args"][3] == "generic"
    assert "PC204" in {f["code"] for f in generic["findings"]}  # the trace's blockers come with the plan


def test_advise_from_numbers_does_not_import_torch(tmp_path):
    code = ("import sys; from portcheck.cli import main; "
            "rc = main(['advise', '--params', '7e9', '--layers', '32', '--hidden', '4096', '--heads', '32', "
            "'--format', 'json', '-o', sys.argv[1]]); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "plan.json")], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "plan.json").read_text())["plan"]["instance"] == "trn2.3xlarge"


@needs_torch
def test_numbers_override_what_the_trace_found(advise_json):
    report = advise_json("--hf-config", "fixtures/models/hf/llama", "--params", "7e9", "--layers", "32")
    assert report["model"]["parameters"] == 7_000_000_000 and report["model"]["layers"] == 32
    assert report["model"]["source"] == "trace+numbers" and report["model"]["hidden"] == 64


def script_plan(script: Path) -> dict:
    """The PLAN a bring-up script carries."""
    return json.loads(script.read_text().split('PLAN = json.loads(r"""', 1)[1].split('""")', 1)[0])


@pytest.fixture
def script_run(advise_json):
    return functools.partial(_script_run, advise_json)


def _script_run(advise_json, tmp_path: Path, *advise_args: str) -> tuple[dict, subprocess.CompletedProcess]:
    script = tmp_path / "bringup.py"
    report = advise_json(*advise_args, "--emit-script", str(script))
    assert script.is_file() and script.stat().st_mode & 0o111
    compile(script.read_text(), str(script), "exec")
    done = subprocess.run([sys.executable, str(script), "--warmup", "1", "--runs", "2", "--output",
                           str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "is not installed here" in done.stdout
    assert "running the same model and inputs eagerly on the CPU" in done.stdout
    result = json.loads(done.stdout.rsplit("result: ", 1)[1])
    assert result["mode"] == "dry-run"
    result["stdout"] = done.stdout
    return report, result


# llama-inf2's plan and script are the bucket kernel test's and the hand-sized test's too (conftest.SharedRuns).
@pytest.mark.parametrize("config, target", [("llama", "inf2"), ("bert", "trn2"), ("vit", "inf2"), ("gpt2", "trn1")])
@needs_torch
def test_emitted_scripts_run_here_as_dry_runs(tmp_path, config, target, script_run):
    report, result = script_run(tmp_path, "--hf-config", str(HF / config), "--target", target)
    buckets = report["plan"]["buckets"]
    assert [r["bucket"] for r in result["runs"]] == (buckets or [result["runs"][0]["bucket"]])
    if len(buckets) > 1:  # inputs shorter than their bucket: the TorchScript bucket kernel padded them
        assert all(r["seq"] < r["bucket"] for r in result["runs"])
    assert all(r["p50_ms"] > 0 and r["samples_per_s"] > 0 for r in result["runs"])
    embedded = script_plan(tmp_path / "bringup.py")
    for key in ("compiler_args", "env", "buckets", "tp_degree"):
        assert embedded[key] == report["plan"][key], key
    # each a serving path's script (tests/test_serving.py): what it would run, shown in the dry run and checked
    path, preview = {"llama": ("nxd-inference", "NeuronConfig(tp_degree=1, batch_size=1, seq_len=256"),
                     "vit": ("optimum-neuron", "command: optimum-cli export neuron --model "),
                     "bert": ("native", ""), "gpt2": ("trace", "")}[config]
    assert f"serving path {path}" in result["stdout"] and preview in result["stdout"]
    check_embedded(tmp_path / "bringup.py", config, path)
    # $ per million tokens from the CPU's throughput at the plan's longest shape, labelled a dry run: by hand,
    # the plan's price per hour / (tokens/s × 3,600) × 1,000,000 (llama's inf2.xlarge is priced in the data)
    timed = [r for r in result["runs"] if r.get("tokens_per_s")]
    cost = report["plan"]["cost"]
    if timed:
        line = next(x for x in result["stdout"].splitlines() if x.startswith("cost: "))
        assert line.startswith("cost: dry run, CPU throughput (not a Neuron figure): ")
        if cost["usd_per_hour"]:
            usd = cost["usd_per_hour"] / (timed[-1]["tokens_per_s"] * 3600) * 1_000_000
            assert f"${usd:,.4f} per million tokens at {timed[-1]['tokens_per_s']:.1f} tokens/s" in line
        else:
            assert "give --price-per-hour" in line
    assert config != "llama" or (cost["usd_per_hour"] == 0.758 and timed)


@needs_torch
def test_a_script_for_a_build_callable_with_positional_inputs(tmp_path, script_run):
    report, result = script_run(tmp_path, "fixtures/models/clean_mlp.py:build", "--target", "trn2")
    assert report["plan"]["compiler_args"][:2] == ["--target", "trn2"]
    assert len(result["runs"]) == 1 and result["runs"][0]["samples_per_s"] > 0


@needs_torch
def test_a_script_with_tensor_parallelism_says_what_it_compiles(tmp_path, script_run):
    report, result = script_run(tmp_path, "--hf-config", str(HF / "llama"), "--target", "inf2", "--tp", "2")
    assert report["plan"]["tp_degree"] == 2 and report["plan"]["env"]["NEURON_RT_VISIBLE_CORES"] == "0-1"
    assert "note: the plan shards the model over 2 cores" in result["stdout"]
    assert len(result["runs"]) == len(report["plan"]["buckets"])


@needs_torch
def test_a_full_size_script_dry_runs_on_the_meta_device(tmp_path, advise_json):
    """Llama-2-7B: traced on meta by advise; its script's --meta dry run exports the buckets asked for without
    weights (the longest of the plan's six: each export of a 32-layer model takes seconds)."""
    script = tmp_path / "bringup.py"
    report = advise_json("--hf-config", str(HF / "llama-2-7b"), "--target", "inf2", "--emit-script", str(script))
    assert report["model"]["parameters"] == MODELS["llama-2-7b"][0]
    assert (report["plan"]["instance"], report["plan"]["tp_degree"]) == ("inf2.xlarge", 2)
    assert report["plan"]["buckets"] == [128, 256, 512, 1024, 2048, 4096]
    done = subprocess.run([sys.executable, str(script), "--meta", "--buckets", "4096"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.rsplit("result: ", 1)[1])
    assert [r["bucket"] for r in result["runs"]] == [4096]
    assert all(r["meta"] for r in result["runs"])
    refused = subprocess.run([sys.executable, str(script), "--meta", "--buckets", "100"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1 and refused.stderr.strip() == (
        "--buckets 100: the plan's buckets are 128, 256, 512, 1024, 2048, 4096")


@pytest.mark.xdist_group(IN_PROCESS_TORCH)
def test_graph_memory_keeps_bases_alive_through_their_views():
    """Worked by hand at 1024×1024 fp32 (4 MiB a tensor): the input lives throughout; a matmul result viewed and
    then ReLU'd is alive with the ReLU's output (12 MiB); an unused product dies at once (8 MiB)."""
    torch = pytest.importorskip("torch")
    from portcheck.dynamic.facts import graph_memory

    class Viewed(torch.nn.Module):
        def forward(self, x):
            return torch.relu((x @ x).view(-1))

    class Unused(torch.nn.Module):
        def forward(self, x):
            x * 2
            return x + 1

    x = torch.randn(1024, 1024)
    sizes = [graph_memory(torch.export.export(m, (x,), strict=False)).peak_activation_bytes
             for m in (Viewed(), Unused())]
    assert sizes == [3 * 4 * 2**20, 2 * 4 * 2**20]


@needs_torch
def test_a_script_passes_plain_arguments_in_their_place(tmp_path, script_run):
    report, result = script_run(tmp_path, "fixtures/models/mixed_args.py:build", "--target", "inf2")
    assert len(result["runs"]) == 1 and result["runs"][0]["samples_per_s"] > 0
    plan_ = script_plan(tmp_path / "bringup.py")
    assert [i.get("constant") for i in plan_["inputs"]] == [None, 0.5, None]
    assert plan_["compiler_args"] == report["plan"]["compiler_args"] and plan_["env"] == report["plan"]["env"]


@pytest.mark.xdist_group(IN_PROCESS_TORCH)
def test_the_bucket_kernel_pads_to_the_next_bucket_and_refuses_longer(tmp_path, advise_json):
    torch = pytest.importorskip("torch")
    import importlib.util

    script = tmp_path / "bringup.py"
    report = advise_json("--hf-config", str(HF / "llama"), "--target", "inf2", "--emit-script", str(script))
    assert report["plan"]["buckets"] == [128, 256]
    spec = importlib.util.spec_from_file_location("bringup", script)
    module = importlib.util.module_from_spec(spec)
    with mock.patch.dict(os.environ):  # the script sets the plan's NEURON_* variables: not for the tests after this
        spec.loader.exec_module(module)
    kernel = module.get_bucket_kernel()
    ids, mask = torch.ones(1, 130, dtype=torch.int64), torch.ones(1, 130, dtype=torch.int64)
    (padded_ids, padded_mask), index = kernel([ids, mask])
    assert int(index[0]) == 1 and padded_ids.shape == (1, 256) and int(padded_mask[0, 130:].sum()) == 0
    with pytest.raises(Exception, match="longer than the largest compiled bucket"):
        kernel([torch.ones(1, 300, dtype=torch.int64)])
