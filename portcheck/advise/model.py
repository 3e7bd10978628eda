"""What a plan needs to know about a model: its size and, for transformers, the shape numbers that size the KV
cache and the activations. From numbers on the command line, from a traced model, or both (numbers win)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from portcheck.dynamic.outcome import ConfigFacts, InputFact, ModelFacts, TraceOutcome
from portcheck.knowledge.serving import KINDS as KINDS  # the model kinds, which serving paths name

# Model types optimum-neuron compiles with the default `--model-type generic` (CNN and audio models) or with
# `unet-inference` (huggingface/optimum-neuron@213224e6: optimum/exporters/neuron/convert.py).
GENERIC_MODEL_TYPES = frozenset({"hubert", "levit", "mobilenet-v2", "mobilenet_v2", "mobilevit", "unispeech",
                                 "unispeech-sat", "unispeech_sat", "wav2vec2", "wavlm", "resnet", "convnext",
                                 "regnet", "efficientnet"})
UNET_NAMES = ("unet", "vae", "controlnet", "autoencoderkl")


@dataclass(frozen=True)
class ModelShape:
    name: str
    params: int
    kind: str = "other"
    layers: int = 0
    hidden: int = 0
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    intermediate: int = 0
    vocab: int = 0
    max_positions: int = 0
    image_tokens: int = 0  # a vision transformer's patches + class token, from its config
    tower: str = ""  # a multimodal decoder's "vision" or "audio" encoder tower, sized beside the decoder
    tower_layers: int = 0
    tower_hidden: int = 0
    tower_heads: int = 0
    tower_intermediate: int = 0
    hf_model_type: str = ""
    modules: tuple[str, ...] = ()  # module class names, from a traced model
    int64_in_graph: bool | None = None  # None: not traced, or the graph was not exported
    peak_activation_bytes: int = 0  # largest live set of the exported graph at its example inputs
    example_batch: int = 0
    example_seq: int = 0
    dynamic_axes: tuple[str, ...] = ()  # "input_ids:1", from the trace's shape probe
    seq_bound: int = 0  # the largest sequence length export found the model takes
    inputs: tuple[InputFact, ...] = field(default=(), compare=False)  # example inputs: name, dtype, shape, range
    source: str = "numbers"  # "numbers", "trace", or "trace+numbers"
    pooling: str = ""  # why it is a pooling (embedding) model: what its checkpoint directory says; "": not one

    @property
    def is_transformer(self) -> bool:
        return bool(self.layers and self.hidden and self.heads)

    @property
    def attention_head_dim(self) -> int:
        return self.head_dim or (self.hidden // self.heads if self.heads else 0)

    def model_type_flag(self) -> tuple[str, str]:
        """neuronx-cc `--model-type` and why: transformer for attention models, unet-inference for UNet/VAE,
        generic for CNN and audio models, as optimum-neuron's exporter decides."""
        names = " ".join((self.hf_model_type, *self.modules)).lower()
        if any(word in names for word in UNET_NAMES):
            return "unet-inference", "a UNet/VAE model: optimum-neuron compiles UNet, ControlNet and VAE parts so"
        if self.hf_model_type.lower() in GENERIC_MODEL_TYPES:
            return "generic", f"a {self.hf_model_type} model (CNN/audio): optimum-neuron keeps these generic"
        if self.is_transformer or any("attention" in m.lower() for m in self.modules):
            return "transformer", "a transformer: optimum-neuron compiles every transformer with this"
        return "generic", "no attention layers found: the compiler's default"


TRANSFORMER_NUMBERS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate")


def with_numbers(shape: ModelShape | None, numbers: dict[str, Any]) -> ModelShape:
    """Numbers given on the command line override what the trace found (or make the whole shape). A ValueError
    names what is missing or inconsistent."""
    given = {k: v for k, v in numbers.items() if v not in (None, 0, "")}
    if shape is None:
        if not given.get("params"):
            raise ValueError("give a model (SPEC or --hf-config) or its size with --params")
        kind = given.pop("kind", "decoder" if given.get("layers") and given.get("heads") else "other")
        shape = ModelShape(name=given.pop("name", "model given as numbers"), kind=kind, **given)
    elif given:
        shape = replace(shape, **given, source="trace+numbers")
    else:  # traced alone: a config without the numbers is sized from its graph instead
        try:
            _check(shape)
        except ValueError:
            zeros: dict[str, Any] = dict.fromkeys(TRANSFORMER_NUMBERS, 0)
            return replace(shape, **zeros)
        return shape
    _check(shape)
    return shape


def _check(shape: ModelShape) -> None:
    claims_transformer = any(getattr(shape, n) for n in TRANSFORMER_NUMBERS) or shape.kind != "other"
    if claims_transformer and not (shape.layers and shape.heads and shape.hidden):
        raise ValueError(f"a {shape.kind if shape.kind != 'other' else 'transformer'} is sized from --layers, "
                             "--hidden and --heads together (the KV cache and activations need all three)")
    if not shape.heads:
        return
    kv = shape.kv_heads or shape.heads
    if kv > shape.heads or shape.heads % kv:
        raise ValueError(f"{kv} KV heads must divide the {shape.heads} attention heads (grouped-query attention)")
    if not shape.head_dim and shape.hidden % shape.heads:
        raise ValueError(f"--hidden {shape.hidden} is not a multiple of --heads {shape.heads}: give --head-dim")


def from_trace(outcome: TraceOutcome) -> ModelShape:
    """The shape of a model `portcheck trace`'s child built: its parameter count, its config's numbers, the int64
    tensors and the live activations of its graph, and the dynamic axes of its shape probe."""
    model = outcome.model or ModelFacts("model", 0, "")
    config = model.config
    axes = outcome.shapes.axes if outcome.shapes else ()
    dynamic = tuple(f"{a.input}:{a.axis}" for a in axes if a.dynamic)
    bound = max((a.max or 0 for a in axes if a.dynamic and a.axis == 1), default=0)
    kv = config.num_key_value_heads or config.num_attention_heads or 0
    kind = _kind(config, model)
    int64 = outcome.graph.int64 if outcome.graph else None
    return ModelShape(
        name=model.class_name.rpartition(".")[2],
        params=model.parameters,
        kind=kind,
        layers=int(config.num_hidden_layers or 0),
        hidden=int(config.hidden_size or 0),
        heads=int(config.num_attention_heads or 0),
        kv_heads=int(kv),
        head_dim=int(config.head_dim or 0),
        intermediate=int(config.intermediate_size or 0),
        vocab=int(config.vocab_size or 0),
        max_positions=model.max_positions,
        image_tokens=_image_tokens(config),
        tower=str(config.tower or "") if kind == "decoder" else "",
        tower_layers=int(config.tower_layers or 0) if kind == "decoder" else 0,
        tower_hidden=int(config.tower_hidden or 0) if kind == "decoder" else 0,
        tower_heads=int(config.tower_heads or 0) if kind == "decoder" else 0,
        tower_intermediate=int(config.tower_intermediate or 0) if kind == "decoder" else 0,
        hf_model_type=str(config.model_type or ""),
        modules=model.modules,
        int64_in_graph=None if int64 is None else bool(int64),
        peak_activation_bytes=outcome.graph.peak_activation_bytes if outcome.graph else 0,
        example_batch=model.example_batch,
        example_seq=model.example_seq,
        dynamic_axes=dynamic,
        seq_bound=int(bound),
        inputs=model.inputs,
        source="trace",
        pooling=checkpoint_pooling(model.build_place.file) if model.build_place else "",
    )


# sentence-transformers' list of a model's modules, saved beside its config.json: a Pooling module turns the
# backbone's hidden states into one vector a text (its type sentence_transformers.models.Pooling, or the module path
# of newer releases, sentence_transformers.sentence_transformer.modules.pooling.Pooling).
ST_MODULES = "modules.json"
ST_CONFIG = "config_sentence_transformers.json"
ST_LIMIT = 1 << 20  # a modules.json is a few hundred bytes: a larger file is not one


def checkpoint_pooling(config_file: str) -> str:
    """Why the checkpoint whose --hf-config is `config_file` is a pooling (embedding) model: its sentence-transformers
    modules.json lists a Pooling module. "" for a build file, or a checkpoint that does not say so (a missing,
    unreadable or malformed modules.json says nothing)."""
    if not config_file.endswith(".json"):
        return ""
    folder = Path(config_file).parent
    try:  # a regular file only: a FIFO or a device named modules.json would block the read
        if not (folder / ST_MODULES).is_file() or (folder / ST_MODULES).stat().st_size > ST_LIMIT:
            return ""
        modules = json.loads((folder / ST_MODULES).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return ""
    for module in modules if isinstance(modules, list) else ():
        kind = module.get("type") if isinstance(module, dict) else None
        if isinstance(kind, str) and kind.startswith("sentence_transformers.") and kind.endswith(".Pooling"):
            also = f", beside {ST_CONFIG}" if (folder / ST_CONFIG).is_file() else ""
            return f"its {ST_MODULES} lists a sentence-transformers Pooling module ({kind}{also})"
    return ""


def _image_tokens(config: ConfigFacts) -> int:
    """(image size / patch size)² patches and the class token: a ViT's sequence."""
    image, patch = config.image_size, config.patch_size
    if isinstance(image, list):
        image = image[0]
    if isinstance(patch, list):
        patch = patch[0]
    if isinstance(image, int) and isinstance(patch, int) and patch > 0:
        return (image // patch) ** 2 + 1
    return 0


# A model with an encoder tower is a decoder when its class generates text from it (Llava, Qwen2-VL, Llama 4, ...);
# CLIP-like models with a vision tower and a text encoder are not.
GENERATING = ("CausalLM", "LMHeadModel", "ForConditionalGeneration", "ImageTextToText")


def _kind(config: ConfigFacts, model: ModelFacts) -> str:
    """The kind of the model as a whole: a multimodal decoder (a text decoder fed by a vision or audio tower) is a
    decoder, whatever the class its tower alone would suggest."""
    if config.is_encoder_decoder:
        return "encoder-decoder"
    architectures = " ".join(config.architectures or [model.class_name])
    if any(word in architectures for word in ("CausalLM", "LMHeadModel")) or config.is_decoder:
        return "decoder"
    if config.tower and any(word in architectures for word in GENERATING):
        return "decoder"
    if "pixel_values" in {i.name for i in model.inputs}:
        return "vision"
    if config.num_attention_heads:
        return "encoder"
    return "other"
