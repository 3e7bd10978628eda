"""Inputs the model accepts, per modality: a vision-language model's image tokens match its vision tower's
features, and images take the size the model's processor gives them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import run_command

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    pytest.skip("needs torch and transformers", allow_module_level=True)


@pytest.mark.xdist_group("in-process-torch")  # as tests/test_advise.py: one worker imports torch into its process
def test_a_vision_language_model_gets_one_image_token_per_image_feature():
    import torch
    import transformers

    from portcheck.dynamic.inputs import made_inputs

    config = _tiny_paligemma()
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


def test_input_specs_set_positions_and_read_files(tmp_path):
    from portcheck.dynamic.request import InputSpec, RequestError, TraceRequest

    spec = InputSpec.parse("input_ids=int64[1,8];0:3=7;5:6=9")
    assert spec.fills == ((0, 3, 7.0), (5, 6, 9.0))
    (tmp_path / "ids.json").write_text("[[1, 2, 3]]")
    given = InputSpec.parse(f"input_ids=@{tmp_path / 'ids.json'}")
    assert given.file == str(tmp_path / "ids.json")
    request = TraceRequest(model="m.py:build", inputs=(spec, given))
    assert TraceRequest.from_json(request.to_json()) == request  # crosses to the child unchanged
    for bad in ("input_ids=int64[1,8];6:9=1", "input_ids=int64[1,8];3:2=1", f"x=@{tmp_path / 'none.npy'}",
                f"x=@{tmp_path / 'ids.txt'}"):
        with pytest.raises(RequestError):
            InputSpec.parse(bad)


@pytest.mark.xdist_group("in-process-torch")
def test_made_inputs_carry_the_given_positions_and_file_values(tmp_path):
    import numpy
    import torch

    from portcheck.dynamic.inputs import make_input
    from portcheck.dynamic.request import InputSpec

    ids = make_input(InputSpec.parse("input_ids=int64[1,8];0:3=7"))
    assert ids.dtype == torch.int64 and ids[0, :3].tolist() == [7, 7, 7] and set(ids[0, 3:].tolist()) <= {0, 1}
    numpy.save(tmp_path / "pixels.npy", numpy.ones((1, 3, 4, 4), dtype=numpy.float32))
    assert make_input(InputSpec.parse(f"pixel_values=@{tmp_path / 'pixels.npy'}")).shape == (1, 3, 4, 4)
    (tmp_path / "ids.json").write_text("[[1, 2, 3]]")
    assert make_input(InputSpec.parse(f"input_ids=@{tmp_path / 'ids.json'}")).dtype == torch.int64
    numpy.save(tmp_path / "objects.npy", numpy.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError):  # a pickled object array is never loaded
        make_input(InputSpec.parse(f"x=@{tmp_path / 'objects.npy'}"))


def _blip2_config(tmp_path, token: int | None) -> str:
    import transformers

    config = transformers.Blip2Config(
        vision_config={"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 37,
                       "image_size": 30, "patch_size": 15},
        qformer_config={"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 37,
                        "encoder_hidden_size": 32},
        text_config={"model_type": "opt", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                     "ffn_dim": 37, "vocab_size": 99, "word_embed_proj_dim": 32, "max_position_embeddings": 64},
        num_query_tokens=4, image_token_index=token)
    data = {**config.to_dict(), "architectures": ["Blip2ForConditionalGeneration"]}
    folder = tmp_path / str(token)
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data, default=str))
    return str(folder)


@pytest.mark.xdist_group("in-process-torch")
def test_a_vision_language_config_without_its_image_token_says_so(tmp_path):
    # BLIP-2's config class leaves image_token_index null (its processor adds the token): no input can run it
    done = run_command(["trace", "--hf-config", _blip2_config(tmp_path, None), "--no-static", "--no-shapes"],
                       cwd=Path.cwd(), timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "config names no image token id (`image_token_index` is null)" in done.stderr
    # with the id a shipped checkpoint sets, the made-up inputs carry one image token per query token and run
    done = run_command(["trace", "--hf-config", _blip2_config(tmp_path, 98), "--no-static", "--no-shapes",
                        "--format", "json"], cwd=Path.cwd(), timeout=300)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    assert report["graph"]["nodes"] > 0
    ids = next(i for i in report["model"]["inputs"] if i["name"] == "input_ids")
    assert ids["shape"][1] >= 4


def _paligemma_config(tmp_path) -> str:

    config = _tiny_paligemma()
    (tmp_path / "config.json").write_text(json.dumps(
        {**config.to_dict(), "architectures": ["PaliGemmaForConditionalGeneration"]}, default=str))
    return str(tmp_path)


@pytest.mark.xdist_group("in-process-torch")
def test_inputs_the_model_rejects_on_the_meta_device_stop_the_trace(tmp_path):
    folder = _paligemma_config(tmp_path)
    trace = ["trace", "--hf-config", folder, "--device", "meta", "--no-static", "--no-shapes"]
    # text without image tokens: the model's check that tokens and features match is a deferred assert on meta
    done = run_command([*trace, "--input", "input_ids=int64[1,20]", "--input", "pixel_values=float32[1,3,32,32]"],
                       cwd=Path.cwd(), timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "fail PaliGemmaForConditionalGeneration's own input check" in done.stderr
    assert "no findings are reported" in done.stderr
    # the inputs portcheck makes on meta carry one image token per feature (counted from meta shapes): they pass
    done = run_command([*trace, "--format", "json"], cwd=Path.cwd(), timeout=300)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    assert report["model"]["device"] == "meta" and report["graph"]["nodes"] > 0


_TINY_TEXT = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
              "intermediate_size": 32, "vocab_size": 200}
MODALITIES = {
    # speech: log-mel frames (Whisper) and raw samples (Wav2Vec2)
    "whisper": ("whisper", "WhisperForConditionalGeneration", {
        "d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 100,
        "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0, "decoder_start_token_id": 0}),
    "wav2vec2": ("wav2vec2", "Wav2Vec2ForCTC", {
        "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
        "vocab_size": 32, "conv_dim": [32] * 7, "num_conv_pos_embeddings": 16}),
    # Qwen2-VL: flattened patches with their grid, and M-RoPE's token types
    "qwen2-vl": ("qwen2_vl", "Qwen2VLForConditionalGeneration", {
        "text_config": {**_TINY_TEXT, "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}},
        "vision_config": {"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 1},
        "image_token_id": 150, "video_token_id": 151, "vision_start_token_id": 152}),
    # Idefics2: images per text, each resampled to a fixed number of latents
    "idefics2": ("idefics2", "Idefics2ForConditionalGeneration", {
        "text_config": {**_TINY_TEXT, "model_type": "mistral"},
        "vision_config": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                          "intermediate_size": 32, "image_size": 28, "patch_size": 14},
        "perceiver_config": {"hidden_size": 32, "resampler_n_latents": 4, "resampler_depth": 1,
                             "resampler_n_heads": 2, "resampler_head_dim": 8, "num_key_value_heads": 1},
        "image_token_id": 150}),
}


@pytest.mark.xdist_group("in-process-torch")
@pytest.mark.parametrize("name", MODALITIES)
def test_made_inputs_run_every_modality(name):
    import torch
    import transformers

    from portcheck.dynamic.inputs import decoder_inputs, made_inputs

    model_type, architecture, values = MODALITIES[name]
    config = transformers.AutoConfig.for_model(model_type, **values)
    model = getattr(transformers, architecture)(config).eval()
    inputs = made_inputs(model, config)
    inputs.update(decoder_inputs(model, config, inputs))
    with torch.no_grad():
        model(**inputs)  # the model's own checks hold: image tokens match features, grids match patches
    if name == "qwen2-vl":  # 16 x 16 patches of 14 pixels, merged 2 x 2: 64 image tokens
        assert inputs["image_grid_thw"].tolist() == [[1, 16, 16]] and int((inputs["input_ids"] == 150).sum()) == 64
        assert torch.equal(inputs["mm_token_type_ids"], (inputs["input_ids"] == 150).long())
    if name == "idefics2":  # one image per text, 4 latents
        assert inputs["pixel_values"].dim() == 5 and int((inputs["input_ids"] == 150).sum()) == 4


def _tiny_paligemma():
    """A PaliGemma config of a few thousand parameters: one layer each, 32-pixel images, image token 256."""
    import transformers

    text = {"model_type": "gemma", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 64, "vocab_size": 300}
    vision = {"model_type": "siglip_vision_model", "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64, "image_size": 32, "patch_size": 8}
    return transformers.AutoConfig.for_model("paligemma", text_config=text, vision_config=vision,
                                             image_token_id=256, projection_dim=32)
