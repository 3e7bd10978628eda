"""Child side: the example inputs of a model that came without them, made from its forward signature, its
`main_input_name` and its config (a transformers config, or a diffusers one); and `--input` specs as tensors.

A model is called as a user would call it for inference: batch 1, its main input (token ids, pixel values, audio
samples or log-mel features), the other modality only where the model takes both (CLIP), decoder inputs only where
forward takes them and the model cannot derive them (see `DECODER_IDS`), and `use_cache=False` where forward takes
it. No attention or pixel masks: every model here treats a missing mask as "attend to everything"."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from portcheck.dynamic.request import InputSpec

# Forward's inputs portcheck knows how to make; the first of them forward takes (after `main_input_name`) leads.
MAIN_INPUTS = ("input_ids", "pixel_values", "input_values", "input_features", "sample")
DECODER_IDS = "decoder_input_ids"  # made only when the model fails without it (BART derives it from input_ids)
AUDIO_SAMPLES = 16000  # one second at 16 kHz, the rate wav2vec2-style models are trained on
TEXT_LENGTH = 128  # tokens, or the model's limit if smaller
CONDITION_LENGTH = 77  # tokens of a diffusion model's text condition (CLIP's text length)


def forward_parameters(model: torch.nn.Module) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError, AttributeError):
        return {}


def make_input(spec: InputSpec) -> torch.Tensor:
    if spec.file:
        return _read_input(spec.file)
    dtype = getattr(torch, spec.dtype)
    if dtype.is_floating_point or dtype.is_complex:
        made = torch.randn(spec.shape, dtype=dtype)
    elif dtype == torch.bool:
        made = torch.ones(spec.shape, dtype=dtype)
    else:
        made = torch.randint(0, 2, spec.shape, dtype=dtype)
    for start, end, value in spec.fills:  # `;start:end=value`: those positions of the last axis
        made[..., start:end] = value
    return made


def _read_input(path: str) -> torch.Tensor:
    """An input's values from a .npy file (loaded without pickle: a file can hold no code) or a JSON list."""
    import json

    if path.endswith(".npy"):
        import numpy

        return torch.from_numpy(numpy.load(path, allow_pickle=False))
    with open(path, encoding="utf-8") as handle:
        values = json.load(handle)
    return torch.tensor(values)


def given_inputs(model: torch.nn.Module, specs: tuple[InputSpec, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`--input` specs: by keyword when forward has those names (with `use_cache=False` where it takes it), else
    positional in the order given (`x` for Sequential's `input`)."""
    made = {spec.name: make_input(spec) for spec in specs}
    parameters = forward_parameters(model)
    if all(name in parameters for name in made):
        return (), {**made, **_no_cache(parameters, made)}
    return tuple(made.values()), {}


def made_inputs(model: torch.nn.Module, config: Any, image_size: int = 0) -> dict[str, Any] | None:
    """Keyword inputs for a model with a config; None when forward takes none of the inputs portcheck can make.
    `image_size`: the processor's (preprocessor_config.json), which wins over the vision config's."""
    parameters = forward_parameters(model)
    main = getattr(model, "main_input_name", None)
    lead = main if main in parameters and main in MAIN_INPUTS else next(
        (name for name in MAIN_INPUTS if name in parameters), None)
    if lead is None:
        return None
    names = [lead]
    vision, text = _part(config, "vision_config"), _part(config, "text_config")
    if vision is not None and text is not None and {"input_ids", "pixel_values"} <= set(parameters):
        names = ["input_ids", "pixel_values"]  # a text-image model (CLIP, SigLIP): both towers run
    if lead == "sample":
        names += [n for n in ("timestep", "encoder_hidden_states") if n in parameters]
    limit = max_positions(config, model)
    inputs = {name: _make(name, config, vision or config, text or config, limit, image_size) for name in names}
    if "pixel_values" in inputs:
        inputs.update(_image_layout(inputs["pixel_values"], vision or config, parameters))
    if "input_ids" in inputs and "pixel_values" in inputs:
        inputs["input_ids"] = _with_image_tokens(model, config, inputs, limit)
        if "mm_token_type_ids" in parameters:  # Qwen2-VL's M-RoPE: 1 for an image token, 0 for text
            inputs["mm_token_type_ids"] = (inputs["input_ids"] == _image_token(config)).long()
    return {**inputs, **_no_cache(parameters, inputs)}


def _with_image_tokens(model: torch.nn.Module, config: Any, inputs: dict[str, Any], limit: int) -> torch.Tensor:
    """A vision-language model's text with one image token (its config's `image_token_id`) for each feature the
    vision tower makes of the image, first, then text tokens that are not image tokens: what its processor
    writes, so the model's check that tokens and features match holds. The ids as made where the model has no
    image token (CLIP: the towers run apart)."""
    ids: torch.Tensor = inputs["input_ids"]
    token = _image_token(config)
    if token < 0:
        return ids
    images = {k: v for k, v in inputs.items() if k in ("pixel_values", "image_grid_thw")}
    count = _image_features(model, images) or _first(_get(config, "num_image_tokens")) or \
        _first(_get(config, "num_query_tokens")) or _first(_get(config, "image_seq_length"))
    if not count:
        return ids
    text = max(1, min(TEXT_LENGTH, (limit or TEXT_LENGTH + count) - count))
    words = torch.randint(0, max(2, min(_vocab(_part(config, "text_config") or config), token)), (1, text))
    return torch.cat([torch.full((1, count), token), words], dim=1)


def _image_token(config: Any) -> int:
    """The config's image token id (`image_token_id`, or `image_token_index`); -1 where it names none."""
    token = _get(config, "image_token_id")
    token = token if isinstance(token, int) else _get(config, "image_token_index")
    return token if isinstance(token, int) and token >= 0 else -1


def missing_image_token(config: Any) -> str:
    """Why a vision-language model cannot run on any inputs: its config declares an image token id (BLIP-2's
    `image_token_index`) but leaves it null, so forward cannot say where the image features go in the text. ""
    for any other config."""
    vision, text = _part(config, "vision_config"), _part(config, "text_config")
    declared = hasattr(config, "image_token_id") or hasattr(config, "image_token_index")
    if vision is None or text is None or not declared:
        return ""
    token = _get(config, "image_token_id")
    token = token if token is not None else _get(config, "image_token_index")
    if token is not None:
        return ""
    return ("its config names no image token id (`image_token_index` is null), so forward cannot place the image "
            "features in the text: set `image_token_index` in config.json to the id its processor gives the image "
            "token (a shipped checkpoint's config has it)")


def _image_layout(pixel_values: torch.Tensor, vision: Any, parameters: dict[str, inspect.Parameter]) -> dict[str, Any]:
    """The image as the model's processor lays it out, where that is not one (batch, channels, height, width)
    tensor: Qwen2-VL's flattened patches with their grid (`image_grid_thw`: one frame of height x width patches,
    each patch `temporal_patch_size` frames deep), or Idefics2's images per text (batch, images, channels, height,
    width; its forward takes `pixel_attention_mask`). {} for any other model."""
    if "image_grid_thw" in parameters:
        patch = _first(_get(vision, "patch_size")) or 14
        depth = _first(_get(vision, "temporal_patch_size")) or 2
        merge = _first(_get(vision, "spatial_merge_size")) or 2
        side = max(merge, pixel_values.shape[-1] // patch // merge * merge)  # whole merged patches
        channels = pixel_values.shape[1]
        return {"pixel_values": torch.randn(side * side, channels * depth * patch * patch),
                "image_grid_thw": torch.tensor([[1, side, side]])}
    if "pixel_attention_mask" in parameters and pixel_values.dim() == 4:
        return {"pixel_values": pixel_values[:, None]}
    return {}


def _image_features(model: torch.nn.Module, images: dict[str, torch.Tensor]) -> int:
    """How many features (image tokens) the vision tower makes of one image; 0 where it cannot say."""
    features = getattr(model, "get_image_features", None)
    if features is None:
        return 0
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    try:  # on the meta device too: the features' count is a shape, which meta tensors carry
        with torch.no_grad():
            out = features(**{k: v.to(device) if k == "pixel_values" else v for k, v in images.items()})
    except Exception:  # the tower needs more than pixel values (grid sizes), or cannot run here (meta): unknown
        return 0
    out = getattr(out, "pooler_output", out)
    parts = out if isinstance(out, (list, tuple)) else [out]
    sizes = [p.shape[-2] for p in parts if isinstance(p, torch.Tensor) and p.dim() >= 2]
    return int(sum(sizes)) if sizes and len(sizes) == len(parts) else 0


def decoder_inputs(model: torch.nn.Module, config: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """The decoder's token ids for an encoder-decoder model whose forward takes them; {} for any other model."""
    if not getattr(config, "is_encoder_decoder", False) or DECODER_IDS not in forward_parameters(model):
        return {}
    if DECODER_IDS in inputs or "decoder_inputs_embeds" in inputs:
        return {}
    text = _part(config, "text_config") or config
    length = min(64, _positions(text, "max_target_positions", "max_position_embeddings") or 64)
    return {DECODER_IDS: torch.randint(0, _vocab(text), (1, length))}


def _make(name: str, config: Any, vision: Any, text: Any, limit: int = 0, image_size: int = 0) -> Any:
    if name == "input_ids":
        length = min(TEXT_LENGTH, limit or TEXT_LENGTH)
        return torch.randint(0, _vocab(text), (1, length))
    if name == "pixel_values":
        size = image_size or _first(getattr(vision, "image_size", None)) or 224
        return torch.randn(1, getattr(vision, "num_channels", 3) or 3, size, size)
    if name == "input_values":
        return torch.randn(1, AUDIO_SAMPLES)
    if name == "input_features":  # log-mel frames: the encoder's positions after its stride-2 convolution
        frames = 2 * (getattr(config, "max_source_positions", 1500) or 1500)
        return torch.randn(1, getattr(config, "num_mel_bins", 80) or 80, frames)
    if name == "sample":  # a diffusion UNet's latent
        size = _first(_get(config, "sample_size")) or 64
        return torch.randn(1, _get(config, "in_channels") or 4, size, size)
    if name == "timestep":
        return torch.tensor([500])
    width = _first(_get(config, "cross_attention_dim")) or 768  # encoder_hidden_states: the text condition
    return torch.randn(1, CONDITION_LENGTH, width)


def max_positions(config: Any, model: torch.nn.Module | None = None) -> int:
    """The longest sequence a transformers config allows, from its text part too (a vision-language model's
    `text_config`); 0 when it names none (or there is no config). A learned position table with a padding row
    (RoBERTa, XLM-R: positions start after `padding_idx`) holds that many fewer: 514 rows and padding_idx 1 are
    512 tokens."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else None
    for source in (config, text):
        for key in ("max_position_embeddings", "n_positions", "max_target_positions"):
            value = getattr(source, key, None)
            if isinstance(value, int) and value > 0:
                return value - _padding_offset(model, value)
    return 0


def _padding_offset(model: torch.nn.Module | None, rows: int) -> int:
    """How many rows of a `rows`-long position table come before the first position: padding_idx + 1 for a
    position embedding with a padding row, else 0."""
    for name, module in model.named_modules() if model is not None else ():
        if isinstance(module, torch.nn.Embedding) and "position" in name and module.num_embeddings == rows and \
                module.padding_idx is not None:
            return int(module.padding_idx) + 1
    return 0


def processor_image_size(hf_config: str) -> int:
    """The image height a model's processor resizes to, from the preprocessor_config.json beside its config.json
    (`crop_size` where it crops, else `size`: a number, height/width or shortest_edge); 0 where there is none."""
    import json
    from pathlib import Path

    if not hf_config:
        return 0
    folder = Path(hf_config) if Path(hf_config).is_dir() else Path(hf_config).parent
    try:
        data = json.loads((folder / "preprocessor_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return 0
    if not isinstance(data, dict):
        return 0
    for key in (("crop_size",) if data.get("do_center_crop") else ()) + ("size",):
        value = data.get(key)
        if isinstance(value, dict):
            value = value.get("height") or value.get("shortest_edge")
        if (size := _first(value)) > 0:
            return size
    return 0


def _no_cache(parameters: dict[str, inspect.Parameter], inputs: dict[str, Any]) -> dict[str, Any]:
    """`use_cache=False` where forward takes it: a cache object in the outputs is no graph to export."""
    return {"use_cache": False} if "use_cache" in parameters and "use_cache" not in inputs else {}


def _part(config: Any, name: str) -> Any:
    part = _get(config, name)
    return part if part is not None and not isinstance(part, (dict, str, int, float, bool)) else None


def _get(config: Any, name: str) -> Any:
    """A config value, from a transformers config (attributes) or a diffusers one (a dict with attributes)."""
    if isinstance(config, dict):
        return config.get(name)
    return getattr(config, name, None)


def _first(value: Any) -> int:
    value = value[0] if isinstance(value, (list, tuple)) and value else value
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _positions(config: Any, *keys: str) -> int:
    for key in keys:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def _vocab(config: Any) -> int:
    value = getattr(config, "vocab_size", None)
    return value if isinstance(value, int) and value > 1 else 2
