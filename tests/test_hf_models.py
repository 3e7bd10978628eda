"""`portcheck trace` on Hugging Face models as they ship: each tiny config in fixtures/models/hf sets `use_cache` as
the real model's config does, and portcheck makes the inputs the model takes (from its forward signature,
`main_input_name` and config). Each model is traced once (`--format json`: both chips' op statuses) and shared by
the tests that check it, on one xdist worker."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_command

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    pytest.skip("the Hugging Face models need torch and transformers", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "fixtures" / "models" / "hf"
UNET = "fixtures/models/hf/unet2d_condition/build.py:build"

# model -> (the inputs portcheck should make, as (name, dtype); the config's own use_cache; shape probe on)
# The probe runs where it shows something new: audio samples, image height and width, a decoder LM's sequence.
MODELS: dict[str, tuple[list[tuple[str, str | None]], bool | None, bool]] = {
    "whisper": ([("input_features", "float32"), ("use_cache", None), ("decoder_input_ids", "int64")], True, False),
    "clip": ([("input_ids", "int64"), ("pixel_values", "float32")], None, False),
    "wav2vec2": ([("input_values", "float32")], None, True),
    "detr": ([("pixel_values", "float32")], None, True),  # no decoder ids: its decoder runs on learned queries
    "gemma2": ([("input_ids", "int64"), ("use_cache", None)], True, True),
    "phi3": ([("input_ids", "int64"), ("use_cache", None)], True, False),
    "qwen3_moe": ([("input_ids", "int64"), ("use_cache", None)], True, False),
    "deepseek_v3": ([("input_ids", "int64"), ("use_cache", None)], True, False),
    "mamba": ([("input_ids", "int64"), ("use_cache", None)], True, False),
    "bart": ([("input_ids", "int64"), ("use_cache", None)], True, False),  # BART makes its decoder ids itself
    "swin": ([("pixel_values", "float32")], None, False),
    "unet2d_condition": ([("sample", "float32"), ("timestep", "int64"), ("encoder_hidden_states", "float32")],
                         None, False),
}


def _trace(*args: str) -> subprocess.CompletedProcess:
    return run_command(["trace", *args, "--isolated"], cwd=ROOT, timeout=400)


@pytest.fixture(scope="module")
def traced():
    """Each model's JSON report, traced on first use (tests of one model share one xdist group: one worker)."""
    done: dict[str, dict] = {}

    def traced(name: str) -> dict:
        if name not in done:
            if name == "unet2d_condition" and importlib.util.find_spec("diffusers") is None:
                pytest.skip("the UNet needs diffusers")
            where = [UNET] if name == "unet2d_condition" else ["--hf-config", str(HF / name)]
            shapes = [] if MODELS[name][2] else ["--no-shapes"]
            run = _trace(*where, *shapes, "--format", "json")
            assert run.returncode in (0, 1), run.stderr
            assert "Traceback" not in run.stderr
            done[name] = json.loads(run.stdout)
        return done[name]

    return traced


def each_model():
    return [pytest.param(name, marks=pytest.mark.xdist_group(f"hf-{name}")) for name in MODELS]


def test_every_model_here_has_its_tiny_config():
    for name in MODELS:
        assert (HF / name / "config.json").is_file(), name
    shipped = {name for name, (_, cache, _) in MODELS.items() if cache}
    for name in shipped:  # as the real configs ship it
        assert json.loads((HF / name / "config.json").read_text())["use_cache"] is True, name


@pytest.mark.parametrize("name", each_model())
def test_each_model_exports_whole(name, traced):
    report = traced(name)
    steps = report["graph"]["steps"]
    assert report["graph"]["method"] == "torch.export", steps
    assert steps[0] == {**steps[0], "method": "torch.export", "ok": True}
    assert report["graph"]["nodes"] > 0


@pytest.mark.parametrize("name", [p for p in each_model() if p.values[0] in ("wav2vec2", "bart")])
def test_no_library_finding_from_code_the_model_did_not_run(name, traced):
    """Every static finding in transformers' files is on a line that ran, as an independent witness saw it
    (sys.settrace over the model's construction and an eager forward: tests/data/lines_that_ran.py); the same files
    scanned whole have findings on lines that never ran, which the trace leaves out."""
    report = traced(name)
    witness = subprocess.run([sys.executable, str(ROOT / "tests" / "data" / "lines_that_ran.py"), str(HF / name),
                              json.dumps(report["model"]["inputs"])], capture_output=True, text=True, timeout=300)
    assert witness.returncode == 0, witness.stderr
    ran = {(path, line) for path, line in json.loads(witness.stdout)}

    def did_run(finding: dict) -> bool:
        path = str((ROOT / finding["path"]).resolve())
        return any((path, n) in ran for n in range(finding["line"], (finding["end_line"] or finding["line"]) + 1))

    library = [f for f in report["findings"] if "site-packages" in f["path"] and "traced" not in f["evidence"]]
    assert library, "no static finding in a library file: nothing to check"
    assert [f for f in library if not did_run(f)] == []
    files = sorted({f["path"] for f in library})
    whole = run_command(["scan", "--isolated", "--no-cache", "--exit-zero", "--format", "json", *files], cwd=ROOT,
                        timeout=300)
    never_ran = [f for f in json.loads(whole.stdout)["findings"] if not did_run(f)]
    assert never_ran, "the whole files have no finding off the path: the check above proves nothing"
    assert not {(f["path"], f["line"], f["code"]) for f in never_ran} & {(f["path"], f["line"], f["code"]) for f in
                                                                       report["findings"]}


@pytest.mark.parametrize("name", each_model())
def test_each_model_gets_the_inputs_it_takes(name, traced):
    inputs = traced(name)["model"]["inputs"]
    assert [(i["name"], i.get("dtype")) for i in inputs] == MODELS[name][0]
    assert all(i["constant"] is False for i in inputs if i["name"] == "use_cache")


@pytest.mark.parametrize("name", each_model())
def test_the_configs_use_cache_is_noted(name, traced):
    shipped = MODELS[name][1]
    noted = traced(name)["model"]["use_cache"]
    if shipped is None:
        assert noted is None
    else:
        assert noted == {"config": shipped, "traced": False,
                         "note": f"config ships use_cache={str(shipped).lower()}; traced with use_cache=False"}


@pytest.mark.xdist_group("hf-wav2vec2")
def test_audio_samples_are_probed(traced):
    axes = {(a["input"], a["label"]): a for a in traced("wav2vec2")["shapes"]["axes"]}
    assert axes["input_values", "samples"]["dynamic"] is True
    assert axes["input_values", "batch"]["dynamic"] is True


@pytest.mark.xdist_group("hf-detr")
def test_image_sizes_are_probed_where_the_model_takes_any(traced):
    axes = {(a["input"], a["label"]): a for a in traced("detr")["shapes"]["axes"]}
    assert axes["pixel_values", "height"]["dynamic"] is True and axes["pixel_values", "width"]["dynamic"] is True


@pytest.mark.xdist_group("hf-gemma2")
def test_a_shipped_decoder_config_keeps_its_sequence_buckets(traced):
    report = traced("gemma2")
    seq = next(a for a in report["shapes"]["axes"] if a["label"] == "seq")
    assert report["shapes"]["ok"] and seq["dynamic"] is True
    assert "compile sequence buckets" in next(f["message"] for f in report["findings"] if f["code"] == "PC211")


def test_a_fixed_size_vision_model_is_not_probed_for_image_sizes(shared_run):
    done = shared_run("trace", "--hf-config", "fixtures/models/hf/vit", "--no-static", "--format", "json")
    labels = {a["label"] for a in json.loads(done.stdout)["shapes"]["axes"]}
    assert labels == {"batch"}  # ViT's position embeddings fix 32x32 (interpolate_pos_encoding is not passed)


def test_inputs_the_model_cannot_take_stop_in_one_line_naming_input():
    # Whisper's encoder takes exactly 2 x max_source_positions mel frames: 7 fails when the model runs.
    done = _trace("--hf-config", "fixtures/models/hf/whisper", "--input", "input_features=float32[1,80,7]")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--input" in lines[0] and "fail when the model runs eagerly" in lines[0], lines
    assert "input_features=float32[1,80,7]" in lines[0] and "Traceback" not in done.stderr


def test_on_the_meta_device_the_eager_run_is_skipped_and_said():
    done = _trace("--hf-config", "fixtures/models/hf/llama", "--device", "meta", "--no-shapes", "--no-static",
                  "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    steps = json.loads(done.stdout)["graph"]["steps"]
    assert steps[0]["method"] == "eager run" and not steps[0]["ok"] and "meta device" in steps[0]["detail"]
    assert steps[1]["method"] == "torch.export" and steps[1]["ok"]


@pytest.mark.xdist_group("in-process-torch")  # as tests/test_advise.py: one worker imports torch into its process
def test_use_cache_is_turned_off_in_nested_configs_too():
    import transformers

    from portcheck.dynamic.load import _use_cache, _without_cache

    text = {"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 64, "vocab_size": 100, "use_cache": True}
    vision = {"model_type": "clip_vision_model", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 64, "image_size": 32, "patch_size": 8}
    config = transformers.AutoConfig.for_model("llava", text_config=text, vision_config=vision)
    assert _use_cache(config) is True
    assert _without_cache(config) is True
    assert config.text_config.use_cache is False and _use_cache(config) is False
    plain = transformers.AutoConfig.for_model("clip_vision_model", **{k: v for k, v in vision.items()
                                                                       if k != "model_type"})
    assert _use_cache(plain) is None and _without_cache(plain) is False
