"""Quantisation as the recipes do it: fp8 weights with the modules NxD Inference's recipe keeps in bf16 (lm_head,
every layer's self-attention, the first and the last MLP), the NeuronConfig values and environment that recipe
sets, and the fp8 KV cache's; microscaled weights (mxfp4, mxfp8) as vLLM Neuron's Trn3 recipes quantise them.
Data from rules/serving.toml [fp8_recipe]; pure arithmetic, no torch here."""

from __future__ import annotations

from typing import Any

from portcheck.advise.model import ModelShape
from portcheck.knowledge.serving import MxFormat, load_serving


def attention_params(model: ModelShape) -> int:
    """The attention projections' parameters: queries and output (heads × head dim each), keys and values (KV
    heads × head dim each), per layer."""
    d = model.attention_head_dim
    return model.layers * model.hidden * d * 2 * (model.heads + (model.kv_heads or model.heads))


def mlp_params(model: ModelShape) -> int:
    """The MLPs' parameters over all layers (experts included): what is neither attention nor the embedding and
    lm_head (vocab × hidden each) where the vocabulary is known; else three hidden × intermediate projections a
    layer (a gated MLP), or, where those explain less than half of the rest, the rest (a mixture of experts)."""
    rest = model.params - attention_params(model)
    if model.vocab:
        return max(rest - 2 * model.vocab * model.hidden, 0)
    if model.intermediate:
        dense = 3 * model.hidden * model.intermediate * model.layers
        # A mixture of experts given as numbers: its experts are the parameters a dense MLP leaves unexplained.
        return max(rest, 0) if dense < rest // 2 else min(dense, max(rest, 0))
    return max(rest, 0)


def fp8_params(model: ModelShape) -> int:
    """The parameters the recipe quantises to fp8: the MLPs of every layer but those it keeps in bf16."""
    recipe = load_serving().fp8
    if not model.is_transformer or model.layers < 1 or recipe is None:
        return model.params
    kept = ("first_mlp" in recipe.keep) + ("last_mlp" in recipe.keep and model.layers > 1)
    return mlp_params(model) * max(model.layers - kept, 0) // model.layers


def fp8_weight_bytes(model: ModelShape) -> int:
    """One byte for each quantised parameter, two (bf16) for the rest."""
    quantised = fp8_params(model)
    return quantised + 2 * (model.params - quantised)


def modules_to_not_convert(model: ModelShape) -> list[str]:
    """The recipe's modules_to_not_convert list for the model's layers, in NxD Inference's module names."""
    recipe = load_serving().fp8
    keep = recipe.keep if recipe else ()
    out = ["lm_head"] if "lm_head" in keep else []
    if "first_mlp" in keep:
        out.append("layers.0.mlp")
    if "last_mlp" in keep and model.layers > 1:
        out.append(f"layers.{model.layers - 1}.mlp")
    if "self_attn" in keep:
        out += [f"layers.{i}.self_attn" for i in range(model.layers)]
    return out


def nxdi_quantization(model: ModelShape, dtype: str, kv_dtype: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The NeuronConfig keys and the environment of fp8 weights and of an fp8 KV cache."""
    recipe = load_serving().fp8
    config: dict[str, Any] = {}
    env: dict[str, str] = {}
    if recipe is None:
        return config, env
    if dtype == "fp8":
        config.update({"quantized": True, "quantization_type": recipe.quantization_type,
                       "quantization_dtype": recipe.quantization_dtype,
                       "modules_to_not_convert": modules_to_not_convert(model)})
        env.update(recipe.env)
    if kv_dtype == "fp8":
        config["kv_cache_quant"] = True
        env.update(recipe.kv_env)
    return config, env


def fp8_reason(model: ModelShape) -> tuple[str, str]:
    """How the plan counts fp8 weights, and the recipe's source."""
    recipe = load_serving().fp8
    quantised = fp8_params(model)
    return (f"{quantised:,} MLP parameters × 1 byte (fp8) + the other {model.params - quantised:,} × 2 bytes "
            "(bf16: lm_head, every layer's self-attention, the first and the last MLP, as NxD Inference's fp8 recipe "
            "keeps them) / tp", recipe.source if recipe else "")


def mx_format(dtype: str) -> MxFormat | None:
    """The microscaled format `dtype` names (mxfp4, mxfp8), from rules/serving.toml [[mx_format]]."""
    return (load_serving().mx or {}).get(dtype)


def mx_params(model: ModelShape, fmt: MxFormat, tp: int = 0) -> int:
    """The parameters the format's recipe quantises: a mixture of experts' MLPs (gpt-oss in MXFP4), or the text
    decoder's attention and dense MLP projections (MXFP8), its MLPs left in bf16 from `mlp_bf16_from_tp` ranks on.
    Embeddings, lm_head, an encoder tower and everything else stay bf16."""
    if not model.is_transformer:
        return model.params
    quantised = mlp_params(model) if "experts" in fmt.quantises else 0
    if "self_attn" in fmt.quantises:
        quantised += attention_params(model)
    if "mlp" in fmt.quantises and not (fmt.mlp_bf16_from_tp and tp >= fmt.mlp_bf16_from_tp):
        dense = 3 * model.hidden * model.intermediate * model.layers  # a gated MLP's three projections a layer
        quantised += min(dense, mlp_params(model)) if dense else mlp_params(model)
    return min(quantised, model.params)


def mx_weight_bytes(model: ModelShape, fmt: MxFormat, tp: int = 0) -> float:
    """The quantised parameters at the format's bits plus its shared scale per block, two bytes (bf16) the rest."""
    quantised = mx_params(model, fmt, tp)
    return quantised * fmt.bytes_per_value + 2 * (model.params - quantised)


def mx_reason(model: ModelShape, fmt: MxFormat, tp: int) -> tuple[str, str]:
    """How the plan counts microscaled weights, and the recipe's source."""
    quantised = mx_params(model, fmt, tp)
    what = "the experts' MLPs" if "experts" in fmt.quantises else "the text decoder's attention" + (
        "" if fmt.mlp_bf16_from_tp and tp >= fmt.mlp_bf16_from_tp else " and MLP") + " projections"
    kept = (f"; from tp {fmt.mlp_bf16_from_tp} the recipe keeps the MLPs in bf16" if fmt.mlp_bf16_from_tp else "")
    return (f"{quantised:,} parameters ({what}) × {fmt.bytes_per_value:g} bytes ({fmt.name}: {fmt.bits}-bit values "
            f"and one {fmt.scale_bits}-bit scale per {fmt.block}) + the other {model.params - quantised:,} × 2 bytes "
            f"(bf16: embeddings, lm_head, any encoder tower, as the recipe leaves them){kept} / tp", fmt.source)


def mx_modules_to_not_convert(fmt: MxFormat, tp: int) -> list[str]:
    """The recipe's neuron_config modules_to_not_convert: [] (everything it quantises), ["mlp"] from its limit."""
    return ["mlp"] if fmt.mlp_bf16_from_tp and tp >= fmt.mlp_bf16_from_tp else []


def mx_note(fmt: MxFormat, chip: str, model_type: str) -> str:
    """What the plan says of a microscaled checkpoint on this chip: run natively, or dequantised to bf16."""
    runs = ", ".join(fmt.chips)
    if chip not in fmt.chips:
        return (f"{fmt.name} runs natively on {runs} only: on {chip} the weights are sized dequantised to bf16 "
                "(vLLM Neuron loads gpt-oss's MXFP4 experts as bf16 there; the docs give no other model an MX path "
                f"off {runs}: serve its bf16 checkpoint)")
    note = f"{fmt.name} weights run natively on {chip} (vLLM Neuron's neuron_config quantization)"
    if fmt.model_types and model_type not in fmt.model_types:
        note += f"; the docs run {fmt.name} for {', '.join(fmt.model_types)} only, so this model is unvalidated"
    return note
