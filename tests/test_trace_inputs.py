"""Inputs the model accepts, per modality: a vision-language model's image tokens match its vision tower's
features, and images take the size the model's processor gives them."""

from __future__ import annotations

import importlib.util
import json

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    pytest.skip("needs torch and transformers", allow_module_level=True)


@pytest.mark.xdist_group("in-process-torch")  # as tests/test_advise.py: one worker imports torch into its process
def test_a_vision_language_model_gets_one_image_token_per_image_feature():
    import torch
    import transformers

    from portcheck.dynamic.inputs import made_inputs

    text = {"model_type": "gemma", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 64, "vocab_size": 300}
    vision = {"model_type": "siglip_vision_model", "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64, "image_size": 32, "patch_size": 8}
    config = transformers.AutoConfig.for_model("paligemma", text_config=text, vision_config=vision,
                                               image_token_id=256, projection_dim=32)
    model = transformers.PaliGemmaForConditionalGeneration(config).eval()
    inputs = made_inputs(model, config)
    ids = inputs["input_ids"]
    assert int((ids == 256).sum()) == (32 // 8) ** 2  # 16 patches, 16 image tokens
    with torch.no_grad():
        model(**inputs)  # the model's own check that tokens and features match holds


def test_the_image_size_comes_from_the_processor(tmp_path):
    from portcheck.dynamic.inputs import processor_image_size

    (tmp_path / "config.json").write_text("{}")
    assert processor_image_size(str(tmp_path)) == 0
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"size": {"height": 640, "width": 640}}))
    assert processor_image_size(str(tmp_path)) == 640
    assert processor_image_size(str(tmp_path / "config.json")) == 640
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"size": {"shortest_edge": 256},
                                                                    "do_center_crop": True, "crop_size": 224}))
    assert processor_image_size(str(tmp_path)) == 224
