"""`portcheck advise` on deployments the recipes document (issue 34): multimodal decoders sized and served as
decoders with a vision tower, fp8 weights and KV caches as NxD Inference's recipe and vLLM Neuron spell them, the
override gpt-oss needs on Trn2.

Real transformers configs (no model built) for the config facts; plans from rules/ data for the rest."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import transformers

from portcheck.advise.model import ModelShape, from_trace, with_numbers
from portcheck.advise.plan import make_plan
from portcheck.advise.serving import command
from portcheck.advise.sizing import Workload, flash_attention, kv_cache_bytes, tower_activation_bytes
from portcheck.advise.values import AdviseOptions, Plan
from portcheck.dynamic.facts import config_facts
from portcheck.dynamic.outcome import InputFact, ModelFacts, TraceOutcome
from portcheck.knowledge.serving import load_serving


def traced(config: object, class_name: str, params: int) -> ModelShape:
    """The shape advise reads from a trace of a model built from `config` (its facts as the child reports them)."""
    facts = ModelFacts(f"transformers.{class_name}", params, "meta", config=config_facts(config))
    return from_trace(TraceOutcome(model=facts))


def plan(shape: ModelShape, chip: str = "trn2", stack: str = "", **options: object) -> Plan:
    stack = stack or {"inf2": "xla", "trn1": "xla", "trn2": "native"}[chip]
    return make_plan(shape, AdviseOptions(chip, stack, **options))  # type: ignore[arg-type]


# ---- multimodal decoders ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("config, model_type, tower_hidden", [
    (transformers.Qwen2VLConfig(), "qwen2_vl", 1280),  # its vision tower's width is embed_dim (hidden_size: merger)
    (transformers.Qwen3VLConfig(), "qwen3_vl", 1152),
    (transformers.Llama4Config(), "llama4", 768),
    (transformers.LlavaConfig(), "llava", 1024),
])
def test_a_multimodal_config_names_the_whole_model_and_its_tower(config, model_type, tower_hidden):
    facts = config_facts(config)
    text = config.get_text_config()
    assert facts.model_type == model_type  # not the text part's (llama4_text, qwen3_vl_text, ...)
    assert (facts.num_hidden_layers, facts.hidden_size) == (text.num_hidden_layers, text.hidden_size)
    assert facts.tower == "vision" and facts.tower_hidden == tower_hidden and facts.tower_layers


@pytest.mark.parametrize("config, name", [
    (transformers.Qwen3VLConfig(), "Qwen3VLForConditionalGeneration"),
    (transformers.Qwen2VLConfig(), "Qwen2VLForConditionalGeneration"),
    (transformers.Llama4Config(), "Llama4ForConditionalGeneration"),
    (transformers.LlavaConfig(), "LlavaForConditionalGeneration"),
])
def test_a_multimodal_decoder_is_a_decoder_with_a_kv_cache_and_flash_attention(config, name):
    shape = traced(config, name, 8_000_000_000)
    assert (shape.kind, shape.tower) == ("decoder", "vision")
    work = Workload("inference", 4, 8192, "bf16")
    assert kv_cache_bytes(shape, work, 4) > 0 and flash_attention(shape, work, 2)


def test_clip_stays_a_vision_model():
    shape = traced(transformers.CLIPConfig(), "CLIPModel", 150_000_000)
    assert shape.kind != "decoder" and shape.tower == ""


def test_qwen3_vl_is_served_by_vllm_neuron_and_nxd_inference_by_its_top_model_type():
    shape = traced(transformers.Qwen3VLConfig(), "Qwen3VLForConditionalGeneration", 8_000_000_000)
    vllm = plan(shape, "trn2", sdk="2.34", batch=4, seq_len=8192)
    assert vllm.serving is not None and (vllm.serving.path, vllm.serving.natively) == ("vllm-neuron", True)
    nxdi = plan(shape, "trn1", batch=1, seq_len=4096)
    assert nxdi.serving is not None and (nxdi.serving.path, nxdi.serving.natively) == ("nxd-inference", True)


def test_a_fixed_size_vision_tower_adds_its_image_encoding():
    shape = traced(transformers.LlavaConfig(), "LlavaForConditionalGeneration", 7_000_000_000)
    assert shape.image_tokens == (336 // 14) ** 2 + 1  # its CLIP tower's image and patch size
    work = Workload("inference", 1, 4096, "bf16")
    # 1 image of 577 tokens × (4 × 1024 + 2 × 4096) × 2 bytes + 16 heads × 577² × 2 bytes, at tp 1
    assert tower_activation_bytes(shape, work, 1) == 577 * (4 * 1024 + 2 * 4096) * 2 + 16 * 577 * 577 * 2
    result = plan(shape, "trn2", batch=1, seq_len=4096)
    assert any(r.item == "tower" and "577 tokens" in r.why for r in result.reasons)


# ---- fp8 as the recipes do it -----------------------------------------------------------------------------------

LLAMA_70B = with_numbers(None, dict(params=70_553_706_496, layers=80, hidden=8192, heads=64, kv_heads=8,
                                    intermediate=28672, vocab=128256, kind="decoder", name="LlamaForCausalLM"))
LLAMA_70B_TRACED = ModelShape("LlamaForCausalLM", 70_553_706_496, "decoder", layers=80, hidden=8192, heads=64,
                              kv_heads=8, intermediate=28672, vocab=128256, max_positions=131072,
                              hf_model_type="llama", source="trace")


def test_fp8_weights_keep_the_recipes_bf16_modules():
    """A 70B model at tp 4 on one trn2 chip, batch 4 at 8192: with every parameter at one byte it looked like it
    fit; with lm_head, the attention and the first and last MLP in bf16 it does not."""
    result = plan(LLAMA_70B, "trn2", batch=4, seq_len=8192, dtype="fp8", tp=4)
    assert result.memory is not None and not result.memory.fits
    assert "PC804" in [f.rule.code for f in result.findings]
    # 80 layers × 8192 × 128 × 2 × (64 + 8) heads of attention, 2 × 128256 × 8192 of embedding and lm_head
    mlp = 70_553_706_496 - 80 * 8192 * 128 * 2 * 72 - 2 * 128256 * 8192
    assert result.memory.weights == pytest.approx((2 * 70_553_706_496 - mlp * 78 // 80) / 4 / 2**30)
    why = next(r for r in result.reasons if r.item == "weights_gib")
    assert "trn2-llama3.3-70b-fp8.rst" in why.source and "self-attention" in why.why


def test_the_nxdi_config_carries_fp8_weights_and_kv_cache_as_the_api_guide_spells_them():
    result = plan(LLAMA_70B_TRACED, "trn1", batch=1, seq_len=4096, dtype="fp8", kv_dtype="fp8")
    assert result.serving is not None and result.serving.path == "nxd-inference"
    config = result.serving.options
    assert set(config) <= set(load_serving().arguments["NeuronConfig"])
    assert (config["quantized"], config["quantization_type"], config["quantization_dtype"],
            config["kv_cache_quant"]) == (True, "per_channel_symmetric", "f8e4m3", True)
    kept = config["modules_to_not_convert"]
    assert kept[:3] == ["lm_head", "layers.0.mlp", "layers.79.mlp"]
    assert kept[3:] == [f"layers.{i}.self_attn" for i in range(80)]
    assert result.env["XLA_HANDLE_SPECIAL_SCALAR"] == "1"
    assert result.to_json()["serving"]["options"]["kv_cache_quant"] is True
    plain = plan(LLAMA_70B_TRACED, "trn1", batch=1, seq_len=4096)
    assert plain.serving is not None and "quantized" not in plain.serving.options


def test_the_vllm_command_quantises_the_kv_cache_with_the_documented_flag():
    result = plan(LLAMA_70B_TRACED, "trn2", sdk="2.34", batch=4, seq_len=4096, kv_dtype="fp8")
    argv = command(result, "/models/llama")
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8"
    documented = load_serving().arguments["vllm serve"]["--kv-cache-dtype"]
    assert "fp8" in documented.choices
    assert "--kv-cache-dtype" not in command(plan(LLAMA_70B_TRACED, "trn2", sdk="2.34", batch=4, seq_len=4096),
                                             "/models/llama")


GPT_OSS = ModelShape("GptOssForCausalLM", 20_914_757_184, "decoder", layers=24, hidden=2880, heads=64, kv_heads=8,
                     head_dim=64, intermediate=2880, max_positions=131072, hf_model_type="gpt_oss", source="trace")


def test_gpt_oss_on_trn2_clears_its_mxfp4_quantization_config():
    result = plan(GPT_OSS, "trn2", sdk="2.34", batch=4, seq_len=4096, tp=8)
    argv = command(result, "openai/gpt-oss-20b")
    assert json.loads(argv[argv.index("--hf-overrides") + 1]) == {"quantization_config": {}}
    assert any(r.item == "override" and "MXFP4" in r.why for r in result.reasons)
    llama = command(plan(LLAMA_70B_TRACED, "trn2", sdk="2.34", batch=4, seq_len=4096), "/models/llama")
    assert "--hf-overrides" not in llama


# ---- training as NxD Training sizes it --------------------------------------------------------------------------

LLAMA3_8B = with_numbers(None, dict(params=8_030_261_248, layers=32, hidden=4096, heads=32, kv_heads=8,
                                    intermediate=14336, vocab=128256, kind="decoder", name="Llama-3-8B"))
LLAMA2_70B = with_numbers(None, dict(params=68_976_648_192, layers=80, hidden=8192, heads=64, kv_heads=8,
                                     intermediate=28672, vocab=32000, kind="decoder", name="Llama-2-70B"))


def test_nxd_training_activations_follow_the_sdk_formula_and_the_documented_config_fits():
    """Llama-3-8B at tp 32 and 8192 tokens on trn1 (the xla stack, NxD Training): sequence parallelism with
    selective checkpointing keeps 34·s·b·h/t bytes a layer."""
    result = plan(LLAMA3_8B, "trn1", task="training", batch=1, seq_len=8192, tp=32, sdk="2.29")
    assert result.memory is not None and result.memory.fits and not result.findings
    assert result.memory.activations == pytest.approx(34 * 8192 * 4096 / 32 * 32 / 2**30)  # about 1.06 GiB
    why = next(r for r in result.reasons if r.item == "activations_gib")
    assert "34 × sequence" in why.why and "activation_memory_reduction.rst" in why.source


def test_zero1_splits_the_optimizer_state_over_the_copies():
    one = plan(LLAMA3_8B, "trn1", task="training", batch=1, seq_len=4096, tp=16, sdk="2.29")
    two = plan(LLAMA3_8B, "trn1", task="training", batch=1, seq_len=4096, tp=16, dp=2, sdk="2.29")
    assert one.memory is not None and two.memory is not None and one.fleet is None and two.fleet is None
    assert two.memory.optimizer == pytest.approx(one.memory.optimizer / 2)
    assert two.memory.gradients == one.memory.gradients


def test_a_70b_pretraining_spans_trn1_instances_with_pipeline_parallelism():
    """Llama-2-70B pretraining at 4096 tokens (documented: TP 32 × PP 8 on 32 trn1.32xlarge): no single instance
    holds it; NxD Training's pipeline stages over EFA do, on no more instances than the document uses."""
    result = plan(LLAMA2_70B, "trn1", task="training", batch=1, seq_len=4096, sdk="2.29")
    assert "PC802" not in [f.rule.code for f in result.findings]
    assert result.fleet is not None and result.fleet.across.startswith("pipeline parallelism")
    assert result.fleet.count <= 32 and result.memory is not None and result.memory.fits


# ---- scripts for models with dict inputs -------------------------------------------------------------------------

CONDITIONED = '''import torch


class Conditioned(torch.nn.Module):
    """A UNet-like forward: a sample and a dict of extra conditions (diffusers' added_cond_kwargs)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, sample, added_cond_kwargs):
        extra = added_cond_kwargs["text_embeds"].sum() + added_cond_kwargs["time_ids"][0].sum()
        return self.proj(sample) + extra


def build():
    conditions = {"text_embeds": torch.randn(2, 8), "time_ids": [torch.randn(2, 6)]}
    return Conditioned(), (torch.randn(2, 8), conditions)
'''


def test_a_script_rebuilds_dict_and_list_inputs(tmp_path, portcheck):
    (tmp_path / "model.py").write_text(CONDITIONED)
    done = portcheck("advise", "--isolated", "model.py:build", "--target", "trn2", "--emit-script", "bringup.py",
                     "--format", "json", "--exit-zero", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = tmp_path / "bringup.py"
    embedded = json.loads(script.read_text().split('PLAN = json.loads(r"""', 1)[1].split('""")', 1)[0])
    keys = [tuple(i.get("key", ())) for i in embedded["inputs"]]
    assert keys == [(), ("text_embeds",), ("time_ids", 0)]
    ran = subprocess.run([sys.executable, str(script), "--warmup", "1", "--runs", "1", "--output",
                          str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads(ran.stdout.rsplit("result: ", 1)[1])["mode"] == "dry-run"


# ---- serving paths: optimum-neuron's diffusers exports, optimum-neuron on Trn2 -----------------------------------

SDXL_UNET = ModelShape("UNet2DConditionModel", 2_567_463_684, "other", hf_model_type="", source="trace",
                       example_batch=1,
                       inputs=(InputFact("sample", True, "tensor", "float32", (1, 4, 128, 128), -3.0, 3.0),
                               InputFact("timestep", True, "tensor", "int64", (1,), 0, 999),
                               InputFact("encoder_hidden_states", True, "tensor", "float32", (1, 77, 2048))))


def test_an_sdxl_unet_is_exported_with_its_pipeline_by_optimum_neuron():
    result = plan(SDXL_UNET, "inf2", batch=1)
    assert result.serving is not None
    assert (result.serving.path, result.serving.natively, result.serving.task) == \
        ("optimum-neuron", True, "text-to-image")
    argv = command(result, "stabilityai/stable-diffusion-xl-base-1.0", "sdxl_neuron")
    assert argv[:7] == ["optimum-cli", "export", "neuron", "--model", "stabilityai/stable-diffusion-xl-base-1.0",
                        "--task", "text-to-image"]
    documented = load_serving().arguments["optimum-cli export neuron"]
    named = [a for a in argv[7:] if a.startswith("-")]
    assert set(named) <= set(documented) and "--sequence_length" not in named
    assert argv[argv.index("--height") + 1] == argv[argv.index("--width") + 1] == "1024"  # 128 latents × 8
    assert "served natively by optimum-neuron diffusers" in next(r.why for r in result.reasons
                                                                 if r.item == "serving_path")


def test_optimum_neuron_serves_trn2_on_the_xla_stack_until_2_33():
    bert = ModelShape("BertModel", 109_514_298, "encoder", layers=12, hidden=768, heads=12, intermediate=3072,
                      max_positions=512, hf_model_type="bert", source="trace")
    at_233 = plan(bert, "trn2", "xla", sdk="2.33")
    assert at_233.serving is not None and (at_233.serving.path, at_233.serving.natively) == ("optimum-neuron", True)
    argv = command(at_233, "bert-base-uncased", "out")
    assert argv[argv.index("--instance_type") + 1] == "trn2"
    at_234 = plan(bert, "trn2", "native", sdk="2.34")
    assert at_234.serving is not None and at_234.serving.path == "native"


def test_a_non_transformer_given_as_numbers_says_its_activations_are_unknown():
    resnet = with_numbers(None, {"params": 25_557_032, "name": "ResNet-50"})
    result = plan(resnet, "inf2", batch=8)
    why = next(r.why for r in result.reasons if r.item == "activations_gib")
    assert why.startswith("unknown, counted as 0") and "--hf-config" in why
