"""Quantisation as the recipes do it: fp8 weights with the modules NxD Inference's recipe keeps in bf16 (lm_head,
every layer's self-attention, the first and the last MLP), the NeuronConfig values and environment that recipe
sets, and the fp8 KV cache's. Data from rules/serving.toml [fp8_recipe]; pure arithmetic, no torch here."""

from __future__ import annotations

from typing import Any

from portcheck.advise.model import ModelShape
from portcheck.knowledge.serving import load_serving


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
