"""The sequence limits buckets are cut to: the model's real limit (a padding row before the positions), and the
limit of a text sub-config (a vision-language model's `text_config`)."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    pytest.skip("needs torch and transformers", allow_module_level=True)

TEXT = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
        "vocab_size": 100}


@pytest.mark.xdist_group("in-process-torch")  # as tests/test_advise.py: one worker imports torch into its process
def test_an_xlm_roberta_limit_leaves_out_its_padding_offset():
    import torch
    import transformers

    from portcheck.dynamic.inputs import made_inputs, max_positions

    config = transformers.XLMRobertaConfig(**TEXT, max_position_embeddings=34, pad_token_id=1)
    model = transformers.XLMRobertaModel(config).eval()
    assert max_positions(config, model) == 32  # positions start after the padding row: 34 - 1 - 1
    assert max_positions(config) == 34  # without the model, the config's number
    inputs = made_inputs(model, config)
    assert inputs["input_ids"].shape[1] == 32
    with torch.no_grad():
        model(**inputs)  # the longest input the limit allows runs
    with pytest.raises((IndexError, RuntimeError)):
        model(input_ids=torch.full((1, 33), 5))  # one more does not (ids that are not padding)


@pytest.mark.xdist_group("in-process-torch")
def test_a_limit_in_the_text_sub_config_is_found():
    import transformers

    from portcheck.dynamic.inputs import max_positions

    vision = {"model_type": "clip_vision_model", "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64, "image_size": 32, "patch_size": 8}
    config = transformers.AutoConfig.for_model("llava", text_config={"model_type": "llama", **TEXT,
                                                                      "max_position_embeddings": 256},
                                               vision_config=vision)
    assert max_positions(config) == 256
