"""What a plan needs to know about a model: its size and, for transformers, the shape numbers that size the KV
cache and the activations. From numbers on the command line, from a traced model, or both (numbers win)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

KINDS = ("decoder", "encoder", "encoder-decoder", "vision", "other")

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
    experts: int = 0
    hf_model_type: str = ""
    modules: tuple[str, ...] = ()  # module class names, from a traced model
    int64_in_graph: bool | None = None  # None: not traced
    peak_activation_bytes: int = 0  # largest live set of the traced graph at its example inputs
    example_batch: int = 0
    example_seq: int = 0
    dynamic_axes: tuple[str, ...] = ()  # "input_ids:1", from the trace's shape probe
    seq_bound: int = 0  # the largest sequence length export found the model takes
    inputs: tuple[dict, ...] = field(default=(), compare=False)  # the example inputs: name, dtype, shape, low, high
    source: str = "numbers"  # "numbers", "trace", or "trace+numbers"

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


def with_numbers(shape: ModelShape | None, numbers: dict) -> ModelShape:
    """Numbers given on the command line override what the trace found (or make the whole shape)."""
    given = {k: v for k, v in numbers.items() if v not in (None, 0, "")}
    if shape is None:
        if not given.get("params"):
            raise ValueError("give a model (SPEC or --hf-config) or its size with --params")
        kind = given.pop("kind", "decoder" if given.get("layers") and given.get("heads") else "other")
        return ModelShape(name=given.pop("name", "model given as numbers"), kind=kind, **given)
    if not given:
        return shape
    return replace(shape, **given, source="trace+numbers")


def from_trace(raw: dict) -> ModelShape:
    """The shape of a model `portcheck trace`'s child built: its parameter count, its config's numbers, the int64
    tensors and the live activations of its graph, and the dynamic axes of its shape probe."""
    model = raw.get("model") or {}
    config = model.get("config") or {}
    graph = raw.get("graph") or {}
    shapes = raw.get("shapes") or {}
    dynamic = tuple(f"{a['input']}:{a['axis']}" for a in shapes.get("axes", []) if a.get("dynamic"))
    bound = max((a.get("max") or 0 for a in shapes.get("axes", []) if a.get("dynamic") and a.get("axis") == 1),
                default=0)
    kv = config.get("num_key_value_heads") or config.get("num_attention_heads") or 0
    return ModelShape(
        name=model.get("class", "model").rpartition(".")[2],
        params=int(model.get("parameters") or 0),
        kind=_kind(config, model),
        layers=int(config.get("num_hidden_layers") or 0),
        hidden=int(config.get("hidden_size") or 0),
        heads=int(config.get("num_attention_heads") or 0),
        kv_heads=int(kv),
        head_dim=int(config.get("head_dim") or 0),
        intermediate=int(config.get("intermediate_size") or 0),
        vocab=int(config.get("vocab_size") or 0),
        max_positions=int(model.get("max_positions") or 0),
        experts=int(config.get("num_local_experts") or config.get("num_experts") or 0),
        hf_model_type=str(config.get("model_type") or ""),
        modules=tuple(model.get("modules") or ()),
        int64_in_graph=bool(graph.get("int64")),
        peak_activation_bytes=int(graph.get("peak_activation_bytes") or 0),
        example_batch=int(model.get("example_batch") or 0),
        example_seq=int(model.get("example_seq") or 0),
        dynamic_axes=dynamic,
        seq_bound=int(bound),
        inputs=tuple(model.get("inputs") or ()),
        source="trace",
    )


def _kind(config: dict, model: dict) -> str:
    if config.get("is_encoder_decoder"):
        return "encoder-decoder"
    architectures = " ".join(config.get("architectures") or [model.get("class", "")])
    if any(word in architectures for word in ("CausalLM", "LMHeadModel")) or config.get("is_decoder"):
        return "decoder"
    if "pixel_values" in {i.get("name") for i in model.get("inputs") or []}:
        return "vision"
    if config.get("num_attention_heads"):
        return "encoder"
    return "other"
