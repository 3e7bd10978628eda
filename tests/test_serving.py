"""`portcheck advise`'s serving path (portcheck/advise/serving.py, rules/serving.toml): the path chosen per chip,
stack and release, the architecture check behind it, every emitted artifact checked here — the `vllm serve` and
`optimum-cli export neuron` commands parsed against the documented argument data (and optimum-neuron's own parser
where its venv is built: scripts/optimum_neuron_venv.sh), NxD Inference's NeuronConfig against its documented
fields, the scripts run in their dry-run mode and the vLLM client against a real HTTP server on 127.0.0.1 —,
--compile-only, the serving dtype and the host memory a compile needs (PC808).

Where the facts come from: rules/serving.toml (each entry cites its document or the repository commit read)."""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from portcheck.advise.model import ModelShape
from portcheck.advise.plan import make_plan
from portcheck.advise.serving import command
from portcheck.advise.values import AdviseOptions
from portcheck.dynamic.outcome import InputFact
from portcheck.knowledge.serving import load_serving

ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "fixtures" / "models" / "hf"
OPTIMUM_PYTHON = ROOT / ".cache" / "optimum-neuron" / "bin" / "python"
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="could not import 'torch'")


def llm(name: str, model_type: str, params: int = 8_030_261_248, kind: str = "decoder") -> ModelShape:
    """An 8B-class GQA decoder (Llama-3-8B's numbers) under another architecture's name."""
    return ModelShape(name, params, kind, layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336,
                      max_positions=8192, hf_model_type=model_type, source="trace")


def plan_for(shape: ModelShape, chip: str, stack: str = "", **options):
    stack = stack or {"inf2": "xla", "trn1": "xla", "trn2": "native"}[chip]
    return make_plan(shape, AdviseOptions(chip, stack, **options))


def reason(plan, item: str) -> str:
    return next(r.why for r in plan.reasons if r.item == item)


BERT = ModelShape("BertModel", 109_514_298, "encoder", layers=12, hidden=768, heads=12, intermediate=3072,
                  max_positions=512, hf_model_type="bert", source="trace")
GPT2 = ModelShape("GPT2LMHeadModel", 124_439_808, "decoder", layers=12, hidden=768, heads=12, intermediate=3072,
                  max_positions=1024, hf_model_type="gpt2")  # as numbers: a token model's sequence is bucketed


@pytest.mark.parametrize("shape, chip, stack, sdk, path, natively", [
    (llm("LlamaForCausalLM", "llama"), "trn2", "native", "2.34", "vllm-neuron", True),
    (llm("Qwen3ForCausalLM", "qwen3"), "trn2", "native", "2.34", "vllm-neuron", True),
    # vLLM Neuron is the recommended path from 2.34 (beta before): 2.33 keeps the native script
    (llm("LlamaForCausalLM", "llama"), "trn2", "native", "2.33", "native", False),
    (llm("MistralForCausalLM", "mistral"), "trn2", "native", "2.34", "native", False),
    (llm("LlamaForCausalLM", "llama"), "trn2", "xla", "2.33", "nxd-inference", True),
    (llm("LlamaForCausalLM", "llama"), "inf2", "xla", "2.34", "nxd-inference", True),
    (llm("MistralForCausalLM", "mistral"), "trn1", "xla", "2.34", "nxd-inference", True),
    (BERT, "inf2", "xla", "2.34", "optimum-neuron", True),
    (BERT, "trn2", "native", "2.34", "native", False),
    (GPT2, "inf2", "xla", "2.34", "trace", False),
])
def test_the_serving_path_follows_chip_stack_release_and_architecture(shape, chip, stack, sdk, path, natively):
    plan = plan_for(shape, chip, stack, sdk=sdk)
    assert plan.serving is not None
    assert (plan.serving.path, plan.serving.natively) == (path, natively)
    why = reason(plan, "serving_path")
    assert ("served natively by" in why) == natively
    if shape.name in ("MistralForCausalLM", "GPT2LMHeadModel") and path in ("native", "trace"):
        assert "needs a custom port" in why  # names the library it would need porting to, and what it lists
    assert plan.to_json()["serving"]["path"] == path


def test_the_architecture_check_names_the_lists_it_compared():
    why = reason(plan_for(llm("MistralForCausalLM", "mistral"), "trn2"), "serving_path")
    assert "custom port to vLLM Neuron" in why and "LlamaForCausalLM" in why
    why = reason(plan_for(GPT2, "inf2"), "serving_path")
    assert "NxD Inference lists" in why and "mistral" in why  # gpt2 is in neither list
    assert "optimum-neuron (optimum-cli export neuron) lists" in why and "bert" in why
    llama = reason(plan_for(llm("LlamaForCausalLM", "llama"), "inf2"), "serving_path")
    assert "also optimum-neuron" in llama  # both libraries serve it; NxD Inference is chosen
    numbers = ModelShape("model", 7_000_000_000, "decoder", layers=32, hidden=4096, heads=32)
    assert "architecture is unknown" in reason(plan_for(numbers, "inf2"), "serving_path")


def test_training_plans_have_no_serving_path():
    assert plan_for(llm("LlamaForCausalLM", "llama"), "trn2", task="training").serving is None


# ---- the commands, against the documented argument data -----------------------------------------------------

def documented_parser(tool: str) -> argparse.ArgumentParser:
    """An argparse parser built from rules/serving.toml's documented arguments of `tool` (and nothing else)."""
    parser = argparse.ArgumentParser(prog=tool, add_help=False, exit_on_error=False)
    types = {"int": int, "str": str, "path": str, "json": json.loads}
    for argument in load_serving().arguments[tool].values():
        if argument.type == "switch":
            parser.add_argument(argument.name, action="store_true")
        else:
            parser.add_argument(argument.name, type=types[argument.type], choices=argument.choices or None)
    return parser


def parse_documented(tool: str, argv: list[str]) -> argparse.Namespace:
    parser = documented_parser(tool)
    if tool == "optimum-cli export neuron":
        parser.add_argument("output")
    else:
        parser.add_argument("model")
    args, unknown = parser.parse_known_args(argv)
    assert not unknown, f"undocumented arguments {unknown}"
    return args


@pytest.mark.parametrize("batch, seq", [(1, 4096), (8, 2048), (6, 1000)])
def test_the_vllm_command_parses_with_the_documented_arguments(batch, seq):
    plan = plan_for(llm("LlamaForCausalLM", "llama"), "trn2", batch=batch, seq_len=seq)
    argv = command(plan, "/models/llama-3-8b")
    assert argv[:3] == ["vllm", "serve", "/models/llama-3-8b"]
    args = parse_documented("vllm serve", argv[2:])
    assert args.tensor_parallel_size == plan.tp_degree and args.max_model_len == seq and args.max_num_seqs == batch
    assert args.dtype == "bfloat16"
    neuron = args.additional_config["neuron_config"]
    documented = load_serving().arguments["vllm serve"]["--additional-config"].keys
    assert {f"neuron_config.{key}" for key in neuron} <= set(documented)
    # the documented constraints: the largest bucket of each list equals its maximum
    assert max(neuron["num_batched_tokens_buckets"]) == args.max_num_batched_tokens == seq
    assert max(neuron["num_seqs_buckets"]) == batch and neuron["num_seqs_buckets"] == sorted(neuron["num_seqs_buckets"])
    assert neuron["num_batched_tokens_buckets"] == [b for b in (128, 256, 512, 1024, 2048) if b < seq] + [seq]


def optimum_plan(shape: ModelShape = BERT, **options):
    return plan_for(shape, "inf2", **options)


@pytest.mark.parametrize("shape, options, task", [
    (BERT, {}, "feature-extraction"),
    (llm("Phi3ForCausalLM", "phi3", params=3_821_079_552), {"prefer": "speed", "batch": 4}, "text-generation"),
    (ModelShape("BertForSequenceClassification", 109_483_778, "encoder", layers=12, hidden=768, heads=12,
                max_positions=512, hf_model_type="bert", source="trace"), {"dtype": "fp16"}, "text-classification"),
])
def test_the_optimum_command_parses_with_the_documented_arguments(shape, options, task):
    plan = optimum_plan(shape, **options)
    assert plan.serving.path == "optimum-neuron"  # phi3 is optimum-neuron's, not NxD Inference's
    argv = command(plan, "/models/m", "out")
    assert argv[:7] == ["optimum-cli", "export", "neuron", "--model", "/models/m", "--task", task]
    args = parse_documented("optimum-cli export neuron", argv[3:])
    assert (args.batch_size, args.tensor_parallel_size, args.instance_type, args.output) == \
        (plan.workload.batch, plan.tp_degree, "inf2", "out")
    assert args.sequence_length == plan.workload.seq
    assert args.torch_dtype == {"bf16": "bfloat16", "fp16": "float16"}[plan.workload.dtype]  # built in its dtype
    assert args.auto_cast == ("matmul" if options.get("prefer") == "speed" else "none")
    assert (options.get("prefer") == "speed") == args.O3 and args.O2 != args.O3


def test_the_nxdi_neuron_config_uses_only_documented_fields():
    plan = plan_for(llm("LlamaForCausalLM", "llama"), "inf2", batch=4, seq_len=2048)
    config = plan.serving.options
    assert set(config) <= set(load_serving().arguments["NeuronConfig"])
    assert (config["tp_degree"], config["batch_size"], config["seq_len"], config["torch_dtype"]) == \
        (plan.tp_degree, 4, 2048, "bfloat16")
    assert config["context_encoding_buckets"] == config["token_generation_buckets"] == [128, 256, 512, 1024, 2048]
    trn2 = plan_for(llm("LlamaForCausalLM", "llama"), "trn2", "xla", sdk="2.33")
    assert trn2.serving.options["logical_nc_config"] == 2


@pytest.mark.skipif(not OPTIMUM_PYTHON.exists(), reason="optimum-neuron's parser venv is not built here "
                    "(bash scripts/optimum_neuron_venv.sh builds it; the documented-argument test above still runs)")
def test_the_optimum_command_parses_with_optimum_neurons_own_parser():
    plan = optimum_plan(llm("Phi3ForCausalLM", "phi3", params=3_821_079_552), prefer="speed", batch=4)
    parsed = optimum_parse(command(plan, "/models/m", "out"))
    assert parsed["batch_size"] == "4" and parsed["sequence_length"] == str(plan.workload.seq)
    assert parsed["tensor_parallel_size"] == str(plan.tp_degree)  # --num_cores is its older spelling
    assert (parsed["auto_cast"], parsed["auto_cast_type"], parsed["torch_dtype"]) == ("matmul", "bf16", "bfloat16")
    assert (parsed["instance_type"], parsed["O3"], parsed["task"]) == ("inf2", "True", "text-generation")


def optimum_parse(argv: list[str]) -> dict[str, str]:
    """The command's arguments as optimum-neuron's own `optimum-cli export neuron` parser reads them."""
    probe = ("import json, sys\nfrom argparse import ArgumentParser\n"
             "from optimum.commands.export.neuronx import parse_args_neuronx\n"
             "parser = ArgumentParser(); parse_args_neuronx(parser)\n"
             "print(json.dumps({k: str(v) for k, v in vars(parser.parse_args(sys.argv[1:])).items()}))\n")
    done = subprocess.run([str(OPTIMUM_PYTHON), "-c", probe, *argv[3:]], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    parsed: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return parsed


T5 = ModelShape("T5ForConditionalGeneration", 60_506_624, "encoder-decoder", layers=6, hidden=512, heads=8,
                intermediate=2048, max_positions=512, hf_model_type="t5", source="trace")


def test_the_t5_command_has_every_input_shape_its_task_requires():
    plan = optimum_plan(T5, batch=2, seq_len=128)
    argv = command(plan, "/models/t5", "out")
    assert argv[:7] == ["optimum-cli", "export", "neuron", "--model", "/models/t5", "--task", "text2text-generation"]
    args = parse_documented("optimum-cli export neuron", argv[3:])
    assert (args.batch_size, args.sequence_length, args.num_beams) == (2, 128, 1)
    assert "--num_cores" not in argv and args.tensor_parallel_size == plan.tp_degree  # not the hidden spelling
    inputs, _ = load_serving().mandatory["optimum-cli export neuron", "text2text-generation"]
    assert all(f"--{name}" in argv for name in inputs)


@pytest.mark.skipif(not OPTIMUM_PYTHON.exists(), reason="optimum-neuron's parser venv is not built here "
                    "(bash scripts/optimum_neuron_venv.sh builds it)")
def test_the_t5_command_passes_optimum_neurons_parser_and_its_mandatory_shapes():
    """The installed optimum-neuron's own parser reads the command, and every INPUT_ARGS its T5 export configs
    require (check_mandatory_input_shapes) is set: read from its source, since importing its model configs needs
    neuronx_distributed, which installs only from AWS's index."""
    argv = command(optimum_plan(T5, batch=2, seq_len=128), "/models/t5", "out")
    parsed = optimum_parse(argv)
    configs = OPTIMUM_PYTHON.parent.parent / "lib"
    source = next(configs.glob("python3*/site-packages/optimum/exporters/neuron/model_configs.py")).read_text()
    required: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name in ("T5EncoderForTransformersNeuronConfig",
                                                             "T5DecoderNeuronConfig"):
            for statement in node.body:
                if isinstance(statement, ast.Assign) and getattr(statement.targets[0], "id", "") == "INPUT_ARGS":
                    required |= set(ast.literal_eval(statement.value))
    assert required == {"batch_size", "sequence_length", "num_beams"}
    assert all(parsed.get(name) not in (None, "None") for name in required), parsed
    assert parsed["tensor_parallel_size"] == "1" and parsed["task"] == "text2text-generation"


@pytest.mark.skipif(not OPTIMUM_PYTHON.exists(), reason="optimum-neuron's parser venv is not built here "
                    "(bash scripts/optimum_neuron_venv.sh builds it)")
def test_the_diffusers_command_passes_optimum_neurons_parser():
    unet = ModelShape("UNet2DConditionModel", 865_910_724, "other", source="trace", example_batch=1,
                      inputs=(InputFact("sample", True, "tensor", "float32", (1, 4, 64, 64)),))
    plan = optimum_plan(unet, batch=1)
    parsed = optimum_parse(command(plan, "stabilityai/stable-diffusion-2-1-base", "sd_neuron"))
    assert (parsed["task"], parsed["height"], parsed["width"], parsed["num_images_per_prompt"]) == \
        ("text-to-image", "512", "512", "1")
    assert parsed["batch_size"] == "1" and parsed["output"] == "sd_neuron"


# ---- compile-only and host memory -----------------------------------------------------------------------------

def test_compile_only_sets_what_each_path_documents():
    vllm = plan_for(llm("LlamaForCausalLM", "llama"), "trn2", compile_only=True).serving
    assert vllm.compile_only and vllm.compile_env == {"VLLM_NEURON_CPU_COMPILE": "1",
                                                      "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}
    nxdi = plan_for(llm("LlamaForCausalLM", "llama"), "inf2", compile_only=True).serving
    assert nxdi.compile_only and nxdi.compile_env == {"NEURON_PLATFORM_TARGET_OVERRIDE": "inf2"}
    optimum = plan_for(BERT, "inf2", compile_only=True).serving
    assert optimum.compile_only and optimum.options["--instance_type"] == "inf2"
    assert plan_for(GPT2, "trn1", compile_only=True).serving.compile_only
    native = plan_for(BERT, "trn2", compile_only=True)
    assert not native.serving.compile_only and "no documented way" in reason(native, "compile_only")


LLAMA_2_7B = ModelShape("LlamaForCausalLM", 6_738_415_616, "decoder", layers=32, hidden=4096, heads=32,
                        intermediate=11008, max_positions=4096, hf_model_type="llama", source="trace")


def test_a_host_too_small_to_compile_on_is_a_finding_with_the_instance_to_use():
    """Llama-2-7B on inf2.xlarge (16 GiB of host memory): 12.55 GiB of bf16 weights × 2 = 25.1 GiB."""
    plan = plan_for(LLAMA_2_7B, "inf2")
    assert plan.instance.name == "inf2.xlarge"
    found = [f for f in plan.findings if f.rule.code == "PC808"]
    assert len(found) == 1 and "25.1 GiB" in found[0].message and "inf2.8xlarge" in found[0].message
    assert plan.compile_instance.name == "inf2.8xlarge" and plan.to_json()["compile_instance"] == "inf2.8xlarge"
    assert plan.serving.compile_host_gib == pytest.approx(6_738_415_616 * 2 * 2 / 2**30)
    # -O3 (--prefer speed) asks more of the host: × 1.5, portcheck's own factor
    speed = plan_for(LLAMA_2_7B, "inf2", prefer="speed")
    assert speed.serving.compile_host_gib == pytest.approx(plan.serving.compile_host_gib * 1.5)
    # a small model compiles where it runs
    small = plan_for(BERT, "inf2")
    assert not [f for f in small.findings if f.rule.code == "PC808"] and small.compile_instance is None


def test_bucket_workers_each_hold_a_copy_on_the_trace_path():
    """GPT-2 traced with bucket_model_trace: one model per bucket worker on the host."""
    plan = plan_for(GPT2, "inf2")
    weights = 124_439_808 * 2 / 2**30
    assert plan.serving.path == "trace" and len(plan.buckets) == 4  # 128, 256, 512, 1024
    assert plan.serving.compile_host_gib == pytest.approx(weights * 2 + weights * 3)


# ---- the scripts, emitted for tiny models and run here --------------------------------------------------------

@pytest.fixture
def emitted(shared_run, tmp_path):
    """`portcheck advise --emit-script` for a tiny model: run once a session for each argument list, with the same
    arguments as tests/test_advise.py's scripts where they overlap (conftest.SharedRuns)."""

    def emit(config: str, target: str, *extra: str) -> tuple[dict, Path]:
        script = tmp_path / "bringup.py"
        model = ["--hf-config", str(HF / config)] if "/" not in config else [config]
        done = shared_run("advise", *model, "--target", target, *extra, "--emit-script", str(script),
                          "--format", "json")
        assert done.returncode in (0, 1), done.stderr
        return json.loads(done.stdout), script

    return emit


def run_script(script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), "--warmup", "1", "--runs", "2", "--output",
                           str(script.parent / "out"), *args], cwd=script.parent, capture_output=True, text=True,
                          timeout=240)


def check_embedded(script: Path, config: str, path: str) -> None:
    """The script's plan: the serving path's command parses with the documented arguments and names the model's
    directory; NxD Inference's NeuronConfig uses only documented fields. (tests/test_advise.py's dry runs of the
    NxD Inference, optimum-neuron, native and trace scripts call it too.)"""
    embedded = json.loads(script.read_text().split('PLAN = json.loads(r"""', 1)[1].split('""")', 1)[0])
    assert embedded["serving"]["path"] == path
    if path in ("vllm-neuron", "optimum-neuron"):
        tool = "vllm serve" if path == "vllm-neuron" else "optimum-cli export neuron"
        parse_documented(tool, embedded["command"][2:] if path == "vllm-neuron" else embedded["command"][3:])
        assert embedded["command"][2 if path == "vllm-neuron" else 4] == str(HF / config)
    elif path == "nxd-inference":
        assert set(embedded["serving"]["options"]) <= set(load_serving().arguments["NeuronConfig"])
    else:
        assert embedded["command"] == []


@needs_torch
def test_the_vllm_script_dry_runs_here_and_shows_the_command(emitted):
    report, script = emitted("llama", "trn2")
    assert report["plan"]["serving"]["path"] == "vllm-neuron"
    done = run_script(script)
    assert done.returncode == 0, done.stderr
    assert "serving path vllm-neuron" in done.stdout and "command: vllm serve " in done.stdout
    assert "vllm (vLLM Neuron) is not installed here" in done.stdout
    result = json.loads(done.stdout.rsplit("result: ", 1)[1])
    assert result["mode"] == "dry-run" and all(r["p50_ms"] > 0 for r in result["runs"])
    check_embedded(script, "llama", "vllm-neuron")


class Completions(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/completions that answers at once and records what it was asked."""

    asked: ClassVar[list[dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).asked.append({"path": self.path, **body})
        answer = json.dumps({"choices": [{"text": " x" * body["max_tokens"]}],
                             "usage": {"completion_tokens": body["max_tokens"]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_):
        pass


@needs_torch
def test_the_vllm_client_times_a_real_server(emitted):
    _, script = emitted("llama", "trn2")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Completions)
    Completions.asked = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = run_script(script, "--client", f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.rsplit("result: ", 1)[1])
    assert result["mode"] == "client" and result["runs"][0]["tokens_per_s"] > 0
    assert len(Completions.asked) == 3  # one warm-up, two timed
    assert {a["path"] for a in Completions.asked} == {"/v1/completions"}
    assert {a["model"] for a in Completions.asked} == {str(HF / "llama")}  # the model vllm serve was given


@needs_torch
def test_the_client_is_refused_for_a_path_without_a_server(emitted):
    _, script = emitted("vit", "inf2")
    done = run_script(script, "--client", "http://127.0.0.1:9")
    assert done.returncode != 0 and "--client times a vLLM server" in done.stderr


@needs_torch
def test_a_compile_only_script_for_a_path_without_one_stops_with_a_reason(emitted):
    report, script = emitted("bert", "trn2", "--compile-only")
    assert report["plan"]["serving"]["compile_only"] is False
    done = run_script(script)
    assert done.returncode != 0 and "compile only: " in done.stderr and "Traceback" not in done.stderr


@needs_torch
@pytest.mark.parametrize("config, target", [("llama", "inf2"), ("fixtures/models/clean_mlp.py:build", "trn2")])
def test_the_script_builds_the_model_in_its_serving_dtype(emitted, config, target):
    torch = pytest.importorskip("torch")
    _, script = emitted(config, target)
    probe = ("import importlib.util, sys\nspec = importlib.util.spec_from_file_location('bringup', sys.argv[1])\n"
             "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
             "import torch\nbefore = torch.get_default_dtype()\nbuilt = module.build_model()\n"
             "print(sorted({str(p.dtype) for p in built.parameters()}), torch.get_default_dtype() == before)\n")
    ran = subprocess.run([sys.executable, "-c", probe, str(script)], cwd=ROOT, capture_output=True, text=True,
                         timeout=240)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "['torch.bfloat16'] True"
    assert torch.get_default_dtype() == torch.float32


def test_compile_only_needs_a_script(tmp_path):
    done = subprocess.run([sys.executable, "-m", "portcheck", "advise", "--isolated", "--params", "7e9",
                           "--compile-only"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--compile-only shapes the bring-up script" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_table_shows_the_compile_instance_and_the_serving_path(tmp_path):
    done = subprocess.run([sys.executable, "-m", "portcheck", "advise", "--isolated", "--params", "6738415616",
                           "--layers", "32", "--hidden", "4096", "--heads", "32", "--target", "inf2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "compile instance" in done.stdout and "inf2.8xlarge" in done.stdout and "PC808" in done.stdout
    assert "serving path" in done.stdout


@functools.cache
def _serving_paths() -> tuple[str, ...]:
    return tuple(p.id for p in load_serving().paths)


def test_every_serving_entry_has_a_source_and_a_compile_only_entry_names_a_path():
    data = load_serving()
    assert {"vllm-neuron", "nxd-inference", "optimum-neuron", "native", "trace"} == set(_serving_paths())
    assert all(p.source and p.why for p in data.paths)
    assert set(data.compile_only) <= set(_serving_paths()) and "native" not in data.compile_only
    assert all(a.source for tool in data.arguments.values() for a in tool.values())
