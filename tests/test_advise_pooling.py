"""Embedding (pooling) models in `portcheck advise`: what a checkpoint directory says of one (a sentence-transformers
modules.json with a Pooling module; advise/model.py checkpoint_pooling), `advise --runner`, and the `vllm serve
--runner pooling` command vLLM Neuron's Qwen3-Embedding tutorial documents (rules/serving.toml [pooling]).

The fixture tests/data/hf/qwen3-embedding-8b is Qwen/Qwen3-Embedding-8B's shape (its config declares
Qwen3ForCausalLM, as the tutorial says) with the sentence-transformers files its model card loads it through, and no
weights."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from portcheck.advise.model import ModelShape, checkpoint_pooling, from_trace
from portcheck.advise.plan import make_plan
from portcheck.advise.serving import command
from portcheck.advise.values import AdviseOptions
from portcheck.dynamic.outcome import ConfigFacts, ModelFacts, TraceOutcome
from portcheck.errors import UserError
from portcheck.traced import Place
from tests.conftest import ROOT
from tests.test_serving import parse_documented

CHECKPOINT = Path(__file__).resolve().parent / "data" / "hf" / "qwen3-embedding-8b"
QWEN3_EMBEDDING = ModelShape("Qwen3ForCausalLM", 8_188_515_328, "decoder", layers=36, hidden=4096, heads=32,
                             kv_heads=8, head_dim=128, intermediate=12288, vocab=151665, hf_model_type="qwen3",
                             source="trace", pooling=checkpoint_pooling(str(CHECKPOINT / "config.json")))


def plan(shape: ModelShape = QWEN3_EMBEDDING, chip: str = "trn3", **options):
    return make_plan(shape, AdviseOptions(chip, "native", **{"seq_len": 4096, "tp": 8, **options}))


def argv(result) -> list[str]:
    return command(result, "/models/qwen3-embedding-8b")


def test_the_checkpoint_says_it_is_a_pooling_model_by_its_sentence_transformers_modules():
    assert "Pooling module (sentence_transformers.models.Pooling" in QWEN3_EMBEDDING.pooling
    assert "config_sentence_transformers.json" in QWEN3_EMBEDDING.pooling


@pytest.mark.parametrize("modules, pooling", [
    (None, False),  # no modules.json: the same config.json says nothing
    ('[{"type": "sentence_transformers.models.Transformer"}]', False),  # no Pooling module
    ('[{"type": "sentence_transformers.sparse_encoder.models.SpladePooling"}]', False),  # token-wise, not embed
    ('[{"type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling"}]', True),  # newer releases
    ('[{"type": "my_package.Pooling"}]', False),  # not sentence-transformers' module
    ('{"type": "sentence_transformers.models.Pooling"}', False),  # not a list of modules
    ("[{", False),  # malformed: says nothing, and no traceback
    (b"\xff\xfe[", False),  # not UTF-8
])
def test_only_a_sentence_transformers_pooling_module_makes_a_pooling_model(modules, pooling, tmp_path):
    shutil.copy(CHECKPOINT / "config.json", tmp_path / "config.json")
    if isinstance(modules, bytes):
        (tmp_path / "modules.json").write_bytes(modules)
    elif modules is not None:
        (tmp_path / "modules.json").write_text(modules, encoding="utf-8")
    assert bool(checkpoint_pooling(str(tmp_path / "config.json"))) == pooling
    (tmp_path / "build.py").write_text("", encoding="utf-8")
    assert checkpoint_pooling(str(tmp_path / "missing" / "config.json")) == ""
    assert checkpoint_pooling(str(tmp_path / "build.py")) == ""  # a build callable's file is no checkpoint


def test_a_modules_json_that_is_no_regular_file_is_never_read(tmp_path):
    os.mkfifo(tmp_path / "modules.json")  # reading a FIFO with no writer would hang
    assert checkpoint_pooling(str(tmp_path / "config.json")) == ""
    (tmp_path / "modules.json").unlink()
    (tmp_path / "modules.json").write_text("[" + " " * (1 << 20) + "]", encoding="utf-8")  # over the 1 MiB limit
    assert checkpoint_pooling(str(tmp_path / "config.json")) == ""


def test_vllm_serve_gets_the_documented_runner_and_the_plan_says_why():
    result = plan()
    args = parse_documented("vllm serve", argv(result)[2:])
    assert args.runner == "pooling" and argv(result)[3:5] == ["--runner", "pooling"]  # as the tutorial writes it
    assert (args.tensor_parallel_size, args.max_model_len, args.dtype) == (8, 4096, "bfloat16")
    reasons = {r.item: r for r in result.reasons}
    assert "modules.json lists a sentence-transformers Pooling module" in reasons["pooling"].why
    assert "tutorial-qwen3-embedding-8b.md" in reasons["pooling"].source
    assert "no decode step" in reasons["pooling_memory"].why and "pooling-models.md" in reasons["pooling_memory"].source
    assert result.serving is not None and result.serving.task == "feature-extraction"


def test_the_memory_is_sized_as_for_generation_because_the_prompt_keeps_its_kv_cache():
    """The pooling design page: no decode step, but not no KV cache. 36 layers × 1 KV head a core × 128 × 4096 × 2 ×
    2 bytes = 72 MiB a core at tp 8, the same as the generative plan's."""
    pooled, generative = plan(), plan(replace(QWEN3_EMBEDDING, pooling=""))
    assert pooled.memory is not None and generative.memory is not None
    assert pooled.memory == generative.memory
    assert pooled.memory.kv_cache == pytest.approx(36 * 128 * 4096 * 2 * 2 / 2**30)
    assert generative.serving is not None and "--runner" not in generative.serving.options


def test_the_runner_option_overrides_what_the_checkpoint_says():
    generate = plan(runner="generate")
    assert generate.serving is not None and "--runner" not in generate.serving.options
    assert "--runner generate: served as a generative model" in next(
        r.why for r in generate.reasons if r.item == "pooling")
    asked = plan(replace(QWEN3_EMBEDDING, pooling=""), runner="pooling")
    assert parse_documented("vllm serve", argv(asked)[2:]).runner == "pooling"
    assert "--runner pooling was given" in next(r.why for r in asked.reasons if r.item == "pooling")


def test_where_no_pooling_runner_is_documented_the_plan_stays_generative_and_says_so():
    nxd = make_plan(QWEN3_EMBEDDING, AdviseOptions("inf2", "xla", seq_len=4096, tp=8))
    assert nxd.serving is not None and nxd.serving.path == "nxd-inference" and "--runner" not in nxd.serving.options
    assert "NxD Inference documents no pooling runner" in next(r.why for r in nxd.reasons if r.item == "pooling")
    bert = ModelShape("BertModel", 109_514_298, "encoder", layers=12, hidden=768, heads=12, intermediate=3072,
                      hf_model_type="bert", source="trace", pooling="its modules.json lists a Pooling module")
    encoder = make_plan(bert, AdviseOptions("inf2", "xla", seq_len=128))
    assert encoder.serving is not None and encoder.serving.task == "feature-extraction"  # by its class, as before
    assert not [r for r in encoder.reasons if r.item == "pooling"]


def test_an_fp8_kv_cache_is_refused_for_a_pooling_model():
    with pytest.raises(UserError, match="refuses an fp8 KV cache for a pooling model"):
        plan(kv_dtype="fp8")
    assert plan(replace(QWEN3_EMBEDDING, pooling=""), kv_dtype="fp8").serving is not None  # generative: allowed


def test_advise_emits_the_pooling_runner_from_the_checkpoint_directory(tmp_path, portcheck):
    """The checkpoint's sentence-transformers files beside a Qwen3 config.json shrunk to two small layers (the same
    heads, so tp 8 still divides them): the files decide the runner, not the size, and an 8B model on the meta device
    took 26 s of CPU to trace (test_a_full_size_script_dry_runs_on_the_meta_device traces one)."""
    checkpoint = tmp_path / "qwen3-embedding"
    shutil.copytree(CHECKPOINT, checkpoint)
    config = json.loads((CHECKPOINT / "config.json").read_text())
    config.update(hidden_size=256, intermediate_size=512, num_hidden_layers=2, head_dim=8, vocab_size=1000)
    (checkpoint / "config.json").write_text(json.dumps(config))
    done = portcheck("advise", "--isolated", "--target", "trn3", "--hf-config", str(checkpoint), "--seq-len", "4096",
                     "--tp", "8", "--format", "json", cwd=ROOT)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    plan_ = json.loads(done.stdout)["plan"]
    assert plan_["serving"]["options"]["--runner"] == "pooling" and plan_["serving"]["task"] == "feature-extraction"
    assert {"pooling", "pooling_memory"} <= {r["item"] for r in plan_["reasons"]}


def test_the_traced_model_takes_its_pooling_from_the_files_beside_its_config(tmp_path):
    """The same config.json without the sentence-transformers files is a generative model: the files decide."""
    shutil.copy(CHECKPOINT / "config.json", tmp_path / "config.json")
    config = ConfigFacts(model_type="qwen3", architectures=["Qwen3ForCausalLM"], num_hidden_layers=36,
                         hidden_size=4096, num_attention_heads=32, num_key_value_heads=8)

    def traced(config_file: Path) -> ModelShape:
        facts = ModelFacts("transformers.Qwen3ForCausalLM", 8_188_515_328, "meta",
                           build_place=Place(str(config_file), 1), config=config)
        return from_trace(TraceOutcome(model=facts))

    assert "Pooling module" in traced(CHECKPOINT / "config.json").pooling
    assert traced(tmp_path / "config.json").pooling == ""
    assert traced(tmp_path / "config.json").kind == traced(CHECKPOINT / "config.json").kind == "decoder"


@pytest.mark.parametrize("args, message", [
    (("--runner", "pooling", "--task", "training"), "it is for --task inference"),
    (("--runner", "embed"), "invalid choice"),
])
def test_a_bad_runner_request_gets_one_line_and_exit_2(args, message, portcheck):
    done = portcheck("advise", "--isolated", "--target", "trn3", "--params", "8e9", "--layers", "36", "--hidden",
                     "4096", "--heads", "32", *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr.strip().splitlines()[-1]
