"""Child side: the facts `portcheck advise` sizes a plan with — the model's config numbers and module classes,
the int64 tensors of its graph, and the largest set of activations alive at once while it runs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from portcheck.dynamic.outcome import ConfigFacts

CONFIG_KEYS = ("model_type", "architectures", "is_encoder_decoder", "is_decoder", "num_hidden_layers",
               "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
               "vocab_size", "num_local_experts", "num_experts", "num_experts_per_tok", "torch_dtype", "dtype",
               "image_size", "patch_size")
ALIASES = {"n_layer": "num_hidden_layers", "n_embd": "hidden_size", "n_head": "num_attention_heads",
           "n_inner": "intermediate_size", "d_model": "hidden_size", "num_layers": "num_hidden_layers",
           "num_heads": "num_attention_heads", "d_ff": "intermediate_size", "d_kv": "head_dim"}

# Ops whose output shares its input's storage: no new memory.
VIEWS = frozenset({"view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "slice", "select",
                   "unsqueeze", "squeeze", "alias", "as_strided", "detach", "unflatten", "flatten", "split",
                   "chunk", "unbind", "narrow", "view_as", "expand_as"})


# What names the model as a whole: read from the top config only, never from a multimodal model's text part
# (Llama4ForConditionalGeneration is "llama4", its text part "llama4_text").
WHOLE_MODEL_KEYS = ("model_type", "architectures", "is_encoder_decoder")
# A multimodal model's encoder tower, under its config's key, and the names its numbers go by (Qwen2-VL's vision
# tower says depth / embed_dim / num_heads, CLIP's and Llama 4's the usual names).
TOWERS = (("vision_config", "vision"), ("audio_config", "audio"))
TOWER_NAMES = {"tower_layers": ("num_hidden_layers", "depth", "num_layers", "encoder_layers"),
               "tower_hidden": ("embed_dim", "hidden_size", "d_model"),  # Qwen2-VL: hidden_size is the merger's
               "tower_heads": ("num_attention_heads", "num_heads", "encoder_attention_heads"),
               "tower_intermediate": ("intermediate_size", "encoder_ffn_dim")}


def config_facts(config: Any) -> ConfigFacts:
    """The numbers of a transformers config under transformers' usual names: the sizes of its text part for
    multimodal ones, with the whole model's model_type and architectures, and its vision or audio tower's numbers."""
    if config is None:
        return ConfigFacts()
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    facts: dict[str, Any] = {}
    for source in (config, text):
        for key in (*CONFIG_KEYS, *ALIASES):
            value = getattr(source, key, None)
            if source is text and text is not config and key in WHOLE_MODEL_KEYS and key in facts:
                continue
            if isinstance(value, (int, float, str, bool, list)):
                facts[ALIASES.get(key, key)] = value
    if facts.get("torch_dtype") is not None:
        facts["torch_dtype"] = str(facts["torch_dtype"]).removeprefix("torch.")
    facts.update(_tower(config))
    return ConfigFacts(**facts)


def _tower(config: Any) -> dict[str, Any]:
    """The vision (or audio) tower's kind and numbers, and a vision tower's image and patch size."""
    for key, kind in TOWERS:
        tower = getattr(config, key, None)
        if tower is None or isinstance(tower, (int, float, str, bool, list)):
            continue
        out: dict[str, Any] = {"tower": kind}
        for name, names in TOWER_NAMES.items():
            value = next((getattr(tower, n) for n in names if isinstance(getattr(tower, n, None), int)), None)
            if value is not None:
                out[name] = value
        for name in ("image_size", "patch_size"):
            value = getattr(tower, name, None)
            if isinstance(value, (int, list)) and getattr(config, name, None) is None:
                out[name] = value
        return out
    return {}


def module_classes(model: torch.nn.Module) -> tuple[str, ...]:
    return tuple(sorted({type(m).__name__ for m in model.modules()}))


@dataclass(frozen=True)
class GraphMemory:
    int64: tuple[str, ...] | None  # where int64 tensors appear (up to 8); None: the graph was not exported
    peak_activation_bytes: int


def graph_memory(program: torch.export.ExportedProgram | None) -> GraphMemory:
    """Walk the exported graph in order, keeping each tensor until its last use (or its views' last use): the peak
    bytes of inputs and activations alive at once (weights and buffers not counted, views free), and where int64
    tensors appear."""
    if program is None:  # not exported: unknown, not none
        return GraphMemory(None, 0)
    signature = program.graph_signature
    weights = set(signature.inputs_to_parameters) | set(signature.inputs_to_buffers) | set(
        getattr(signature, "inputs_to_lifted_tensor_constants", {}))
    nodes = list(program.graph.nodes)
    # A view keeps its base's storage alive: the base lives until the last use of any view of it.
    root: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in nodes:
        root[node] = root.get(node.all_input_nodes[0], node.all_input_nodes[0]) if _is_view(node) else node
    # A result nobody uses dies at once; the inputs are the caller's and live throughout.
    last_use = {node: len(nodes) if node.op == "placeholder" else index for index, node in enumerate(nodes)}
    for index, node in enumerate(nodes):
        for used in node.all_input_nodes:
            last_use[root[used]] = max(last_use[root[used]], index)
    live: dict[torch.fx.Node, int] = {}
    peak = 0
    int64: list[str] = []
    for index, node in enumerate(nodes):
        if node.op == "placeholder" and node.name in weights:
            continue
        size = 0
        for value in _tensors(node.meta.get("val")):
            if value.dtype == torch.int64 and len(int64) < 8:
                int64.append(_label(node))
            size += _bytes(value)
        if node.op != "output" and root[node] is node:
            live[node] = size
        peak = max(peak, sum(live.values()))
        for gone in [n for n in live if last_use[n] <= index]:
            del live[gone]
    return GraphMemory(tuple(sorted(set(int64))), int(peak))


def _bytes(value: torch.Tensor) -> int:
    try:
        return int(value.numel()) * value.element_size()
    except Exception:  # a data-dependent size (nonzero's output): unknown until run, counted as nothing
        return 0


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)


def _is_view(node: torch.fx.Node) -> bool:
    target = getattr(node.target, "__name__", str(node.target))
    return node.op == "call_function" and bool(node.all_input_nodes) and target.split(".")[0] in VIEWS


def _label(node: torch.fx.Node) -> str:
    if node.op == "placeholder":
        return f"input {node.name}"
    target = getattr(node.target, "__name__", str(node.target))
    return f"aten.{target.split('.')[0]}"
