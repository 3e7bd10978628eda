"""The dtype a trace runs in (the one the model serves in on Neuron) and what a quantization_config means there."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    pytest.skip("needs torch and transformers", allow_module_level=True)

in_process_torch = pytest.mark.xdist_group("in-process-torch")  # one worker imports torch into its process


@in_process_torch
def test_the_dtype_comes_from_the_flag_the_config_or_the_serving_path():
    import torch
    import transformers

    from portcheck.dynamic.dtype import chosen_dtype, shipped_dtype

    config = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=64, vocab_size=100)
    decoder = transformers.LlamaForCausalLM(config)
    encoder = torch.nn.Linear(2, 2)
    assert chosen_dtype("float16", "bfloat16", decoder, True) == (torch.float16, "float16: --dtype")
    assert chosen_dtype("", "bfloat16", decoder, True) == (torch.bfloat16, "bfloat16: the config's torch_dtype")
    dtype, why = chosen_dtype("", "", decoder, True)  # a decoder LLM whose config names none: NxD Inference's
    assert dtype is torch.bfloat16 and "NxD Inference's default torch_dtype" in why and "api-guide.rst" in why
    assert chosen_dtype("", "", encoder, True) == (None, "float32: as built (the config names no dtype)")
    assert chosen_dtype("", "", decoder, False) == (None, "float32: as built")  # a build callable's own choice
    assert shipped_dtype({"torch_dtype": "bfloat16"}) == "bfloat16" and shipped_dtype({"dtype": "float16"}) == \
        "float16" and shipped_dtype({"torch_dtype": "auto"}) == "" and shipped_dtype({}) == ""


def test_a_quantization_config_is_named_and_its_meaning_on_neuron_is_unknown():
    from types import SimpleNamespace

    from portcheck.dynamic.dtype import quantization_note

    note = quantization_note(SimpleNamespace(quantization_config={"quant_method": "mxfp4"}))
    assert note.startswith("quantization_config mxfp4: traced with unquantized weights") and "unknown" in note
    assert quantization_note(SimpleNamespace()) == ""
