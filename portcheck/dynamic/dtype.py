"""Child side: the dtype a model is traced in — the one it serves in on Neuron — and what its quantization_config
means there.

Graphs differ by dtype (transformers' MoE layers call `aten::_grouped_mm` in bfloat16 and a custom fallback op
otherwise), so the trace runs in the dtype the model will run in: `--dtype` when given; else the config's
`torch_dtype` / `dtype`; else, for a decoder LLM (a `...ForCausalLM` class), bfloat16, the `torch_dtype` NxD
Inference's NeuronConfig defaults to; else the dtype the model was built in (torch_neuronx.trace compiles the
dtype it is given). A build callable's model keeps its own dtype unless `--dtype` says otherwise."""

from __future__ import annotations

from typing import Any

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
NXDI_DEFAULT = ("bfloat16: NxD Inference's default torch_dtype for a decoder LLM; the config names none "
                "(SDK:libraries/nxd-inference/api-guides/api-guide.rst, NeuronConfig torch_dtype)")


def chosen_dtype(requested: str, shipped: str, model: torch.nn.Module, hf_config: bool) -> tuple[torch.dtype | None,
                                                                                                     str]:
    """The dtype to trace in (None: leave the model as built) and why, in words the report shows."""
    if requested:
        return DTYPES[requested], f"{requested}: --dtype"
    if shipped in DTYPES:
        return DTYPES[shipped], f"{shipped}: the config's torch_dtype"
    if hf_config and type(model).__name__.endswith("ForCausalLM"):
        return torch.bfloat16, NXDI_DEFAULT
    built = _dtype_of(model)
    return None, f"{built}: as built" + (" (the config names no dtype)" if hf_config else "")


def shipped_dtype(data: dict[str, Any]) -> str:
    """A config.json's `torch_dtype` (or transformers 5's `dtype`), as torch names it; "" when it names none."""
    value = data.get("torch_dtype") or data.get("dtype")
    return str(value).removeprefix("torch.") if isinstance(value, str) and value != "auto" else ""


def cast_inputs(value: Any, dtype: torch.dtype) -> Any:
    """A floating-point input in the traced dtype (made-up pixel values, audio, embeddings); others as they are."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


def _dtype_of(model: torch.nn.Module) -> str:
    floating = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    return str(floating or torch.float32).removeprefix("torch.")


def quantization_note(config: Any) -> str:
    """What the config's quantization_config is, for the report: its method and what portcheck knows of it on
    Neuron. No source in portcheck's data covers a quantization method, so its meaning there is unknown."""
    spec = getattr(config, "quantization_config", None)
    if spec is None:
        return ""
    method = spec.get("quant_method") if isinstance(spec, dict) else getattr(spec, "quant_method", None)
    method = str(getattr(method, "value", method) or "unnamed")
    return (f"quantization_config {method}: traced with unquantized weights; whether Neuron runs {method} "
            "weights, dequantizes them or refuses them is unknown (no source in portcheck's data)")
