"""Trainium3 (trn3) as a target (issue 35): its data, scan / trace / advise / report with `--target trn3`, the
documented Trn3 deployments (tests/data/deployments_trn3.toml), `advise --target trn2,trn3` side by side, and the
datatypes Trn3 adds (torch's float8_e4m3fn runs on Trn3, not on Trn2)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from portcheck.advise.compare import compare
from portcheck.advise.model import with_numbers
from portcheck.advise.plan import make_plan
from portcheck.advise.values import AdviseOptions, Plan
from portcheck.knowledge import load, load_catalog, load_dtypes, load_hardware
from portcheck.knowledge.targets import load_targets
from tests.conftest import ROOT

DATA = Path(__file__).resolve().parent / "data" / "deployments_trn3.toml"
ROWS: list[dict[str, Any]] = tomllib.loads(DATA.read_text(encoding="utf-8"))["deployment"]
# The deliberate difference of some Trn3 rows: a page whose reachable text gives the degree but not the shape is
# checked at one sequence of the longest length its command allows (the data file's header says why).
DIFFERS = {"unstated-shape": lambda row: row["target"] == "trn3" and row["batch"] == 1
           and row["seq"] == row["model"].get("max_positions", row["seq"])}
LLAMA_70B = {"params": 70_553_706_496, "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
             "intermediate": 28672, "kind": "decoder"}
GPT_OSS_120B = {"params": 117_000_000_000, "layers": 36, "hidden": 2880, "heads": 64, "kv_heads": 8, "head_dim": 64,
                "intermediate": 2880, "kind": "decoder"}


def plan(numbers: dict[str, Any], chip: str, name: str = "model", **options: Any) -> Plan:
    return make_plan(with_numbers(None, {**numbers, "name": name}), AdviseOptions(chip, "native", **options))


def row_plan(row: dict[str, Any], tp: int = 0) -> Plan:
    numbers = {**row["model"], "hf_model_type": row.get("model_type", "")}
    return plan(numbers, row["target"], row.get("architecture", "model"), batch=row["batch"], seq_len=row["seq"],
                dtype=row["dtype"], tp=tp, dp=row["dp"], lnc=row.get("lnc", 0), kv_dtype=row.get("kv_dtype", ""))


def test_trn3_is_sourced_data_and_only_the_native_stack():
    knowledge, hardware = load(), load_hardware()
    assert knowledge.chips["trn3"].stacks == ("native",)
    chip = hardware.chips["trn3"]
    assert (chip.neuron_core, chip.physical_cores, chip.hbm_gib, chip.default_lnc) == ("NeuronCore-v4", 8, 144, 2)
    assert chip.memory_per_core_gib == {1: 18, 2: 36} and chip.cores_per_chip == {1: 8, 2: 4}
    assert "trainium3.rst" in chip.source
    servers = {i.name: i for i in hardware.instances if i.chip == "trn3"}
    assert {n: (i.chips, i.vcpus, i.host_memory_gib) for n, i in servers.items()} == {
        "Trn3 Gen1 server": (16, 192, 2048), "Trn3 Gen2 server": (4, 64, 768)}
    domains = {u.name: u.count * servers[u.instance].chips for u in hardware.ultraservers if u.instance in servers}
    assert domains == {"Trn3 Gen1 UltraServer": 64, "Trn3 Gen2 UltraServer": 144}
    native = [a for a in load_targets().availability if a.chip == "trn3"]
    assert [(a.stack, a.releases.since) for a in native] == [("native", "2.33")]
    rules, _ = load_catalog()
    on_trn2_native = {c for c, i in rules.items() if "trn2" in i.targets and "native" in i.stacks}
    assert on_trn2_native == {c for c, i in rules.items() if "trn3" in i.targets}  # the audit: every one applies


def test_before_2_33_trn3_is_refused_in_one_line(portcheck, tmp_path):
    done = portcheck("scan", "--isolated", "--target", "trn3", "--sdk", "2.32", ".", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "2.33" in done.stderr


def test_scan_finds_on_trn3_what_it_finds_on_trn2(portcheck):
    found = {}
    for chip in ("trn2", "trn3"):
        done = portcheck("scan", "--isolated", "--no-cache", "--target", chip, "--format", "json",
                         "fixtures/examples", cwd=ROOT)
        assert done.returncode == 1, done.stderr
        found[chip] = {(f["path"], f["line"], f["code"]) for f in json.loads(done.stdout)["findings"]}
    assert found["trn2"] == found["trn3"] and len(found["trn3"]) > 10


def test_float8_e4m3fn_is_refused_before_trn3_and_native_on_it(portcheck, tmp_path):
    (tmp_path / "q.py").write_text("import torch\n\ndef q(w):\n    return w.to(torch.float8_e4m3fn)\n")
    codes = {}
    for chip in ("trn2", "trn3"):
        done = portcheck("scan", "--isolated", "--no-cache", "--target", chip, "--format", "json", ".", cwd=tmp_path)
        codes[chip] = [(f["code"], f["message"]) for f in json.loads(done.stdout)["findings"]]
    assert codes["trn3"] == []
    assert [c for c, _ in codes["trn2"]] == ["PC312"] and "NCC_EVRF051" in codes["trn2"][0][1]
    assert not load_dtypes().entries["float8_e4m3fn"].on("trn3")


def test_trace_judges_the_graph_for_trn3(shared_run):
    done = shared_run("trace", "fixtures/models/nonzero.py:build", "--no-shapes", "--target", "trn3",
                      "--format", "json")
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert report["target"]["chip"] == "trn3"
    assert {"trn2", "inf2", "trn3"} <= set(report["ops"][0]["status"])
    assert "PC201" in {f["code"] for f in report["findings"]}


def test_a_70b_model_on_trn3_is_sized_at_36_gib_a_core():
    """bf16 weights 70,553,706,496 × 2 / 8 = 16.43 GiB; KV 80 × 1 head × 128 × 16384 × 8 × 2 × 2 B = 5 GiB."""
    result = plan(LLAMA_70B, "trn3", batch=8, seq_len=16384)
    memory = result.memory
    assert memory is not None and memory.budget == 36
    assert (result.tp_degree, result.chips, result.lnc) == (8, 2, 2)
    assert memory.weights == pytest.approx(70_553_706_496 * 2 / 8 / 2**30)
    assert memory.kv_cache == pytest.approx(5.0)
    assert result.instance is not None and result.instance.name == "Trn3 Gen2 server"
    assert "--target" not in result.compiler_args  # the compiler reference names no trn3 value
    assert "--logical-nc-config" in result.compiler_args
    tp_reason = next(r for r in result.reasons if r.item == "tp_degree")
    assert "vllm-neuron" in tp_reason.source and "nxd-inference" not in tp_reason.source  # Trn3's own degrees


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_each_documented_trn3_deployment_is_matched(row):
    assert row["differs"] in DIFFERS if "differs" in row else True
    if "differs" in row:
        assert DIFFERS[row["differs"]](row)
    given = row_plan(row, tp=row["tp"])
    codes = [f.rule.code for f in given.findings]
    assert "PC804" not in codes and "PC801" not in codes, [f.message for f in given.findings]
    assert given.memory is not None and given.memory.fits and given.instance is not None
    own = row_plan(row)
    assert own.tp_degree and own.tp_degree * own.dp <= row["tp"] * row["dp"]
    if row["instance"]:
        assert own.instance is not None and own.instance.chips <= next(
            i.chips for i in load_hardware().instances if i.name == row["instance"])


def test_side_by_side_70b_and_120b_moe_favour_trn3_by_chips():
    dense = compare([plan(LLAMA_70B, chip, batch=8, seq_len=16384) for chip in ("trn2", "trn3")])
    assert [(s.chip, s.tp, s.chips, s.budget_gib) for s in dense.sides] == [("trn2", 16, 4, 24), ("trn3", 8, 2, 36)]
    assert dense.favours == "trn3" and "fewer chips" in dense.why and "no published price" in dense.why
    moe = compare([plan(GPT_OSS_120B, chip, batch=4, seq_len=16384) for chip in ("trn2", "trn3")])
    assert moe.favours == "trn3" and [s.tp for s in moe.sides] == [16, 8]


def test_advise_side_by_side_on_the_command_line(portcheck):
    numbers = ("--params", "70.55e9", "--layers", "80", "--hidden", "8192", "--heads", "64", "--kv-heads", "8",
               "--intermediate", "28672", "--batch", "8", "--seq-len", "16384", "--isolated")
    done = portcheck("advise", *numbers, "--target", "trn2,trn3", "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    assert [p["target"]["chip"] for p in report["plans"]] == ["trn2", "trn3"]
    assert report["comparison"]["favours"] == "trn3"
    table = portcheck("advise", *numbers, "--target", "trn2,trn3")
    assert "side by side" in table.stdout and "the data favours trn3" in table.stdout


@pytest.mark.parametrize("args, message", [
    (("--target", "trn2,trn9"), "unknown target 'trn9'"),
    (("--target", "trn3,trn3"), "names a target twice"),
    (("--target", "trn2,trn3", "--price-per-hour", "10"), "--price-per-hour prices one instance"),
    (("--target", "trn2,trn3", "--hf-config", "fixtures/models/hf/llama", "--emit-script", "x.sh"),
     "give one --target"),
])
def test_bad_side_by_side_requests_get_one_line_and_exit_2(args, message, portcheck, tmp_path):
    done = portcheck("advise", "--params", "7e9", "--isolated", *args, cwd=ROOT)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr.splitlines()[-1]
    assert not (ROOT / "x.sh").exists()


def test_report_shows_trn3_next_to_trn2(portcheck):
    """The shipped examples and the tiny llama config, planned on both: the page's plan table has both columns."""
    done = portcheck("report", "--isolated", "--no-cache", "--target", "trn2", "--target", "trn3", "--hf-config",
                     "fixtures/models/hf/llama", "--format", "markdown", "fixtures/examples", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    plan_header = "| | trn2 (native stack, Neuron SDK 2.34) | trn3 (native stack, Neuron SDK 2.34) |"
    assert plan_header in done.stdout.splitlines()
    assert "| instance | trn2.3xlarge | Trn3 Gen2 server |" in done.stdout.splitlines()


def test_portcheck_sdk_says_when_trn3_starts(portcheck):
    done = portcheck("sdk")
    block = done.stdout.split("\n2.33")[1].split("\n2.34")[0]
    assert "target: trn3 on the native stack (inference, training) from this release" in block


def test_the_config_file_and_review_take_trn3(portcheck, tmp_path):
    (tmp_path / "portcheck.toml").write_text('target = "trn3"\n')
    (tmp_path / "m.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    done = portcheck("scan", "--no-cache", ".", cwd=tmp_path)
    assert done.returncode == 1 and "Target: trn3 (native stack" in done.stdout, done.stdout + done.stderr
    helped = portcheck("review", "--help")
    assert "trn3" in helped.stdout


def test_a_traced_dtype_finding_holds_only_for_its_chips():
    """The trace reports float8_e4m3fn with the chips that refuse it; results keep it for those targets only, and
    the chips survive the child's JSON."""
    from portcheck.config import Layer, resolve
    from portcheck.dynamic.outcome import TraceOutcome
    from portcheck.dynamic.results import _graph_findings
    from portcheck.rules import TracedFinding, rule_class

    fp8 = rule_class("PC312")
    assert fp8 is not None
    found = TracedFinding(fp8, None, "uses an F8E4M3FN float8 type", op="aten::_to_copy",
                          chips=load_dtypes().entries["float8_e4m3fn"].chips)
    assert TracedFinding.from_json(found.to_json()) == found
    outcome = TraceOutcome(findings=[found])
    kept = {chip: _graph_findings(outcome, resolve([Layer(target=chip)], ROOT, None, "trace"), [], {}, None)
            for chip in ("trn2", "trn3")}
    assert [f.rule.code for f in kept["trn2"]] == ["PC312"] and kept["trn3"] == []


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_the_vllm_command_of_each_trn3_row_is_what_vllm_neuron_takes(row):
    """At the documented degree the artifact is vLLM Neuron's command, with the documented arguments and keys, and
    the recipe's MX settings: neuron_config quantization, MXFP8's modules_to_not_convert and cleared
    quantization_config."""
    from portcheck.advise.serving import command
    from portcheck.knowledge.serving import load_serving
    from tests.test_serving import parse_documented

    result = row_plan(row, tp=row["tp"])
    assert result.serving is not None and result.serving.path == "vllm-neuron", result.serving
    args = parse_documented("vllm serve", command(result, "/models/m")[2:])
    assert (args.tensor_parallel_size, args.max_model_len, args.max_num_seqs) == (row["tp"], row["seq"], row["batch"])
    neuron = args.additional_config["neuron_config"]
    documented = load_serving().arguments["vllm serve"]["--additional-config"].keys
    assert {f"neuron_config.{key}" for key in neuron} <= set(documented)
    assert neuron.get("quantization") == (row["dtype"] if row["dtype"].startswith("mx") else None)
    assert ("modules_to_not_convert" in neuron) == (row["dtype"] == "mxfp8")
    assert (args.hf_overrides == {"quantization_config": {}}) == (row["dtype"] == "mxfp8")
    assert (args.kv_cache_dtype == "fp8") == (row.get("kv_dtype") == "fp8")
    assert args.runner == row.get("runner")  # Qwen3-Embedding: --runner pooling, from its checkpoint's files alone


def test_mxfp4_counts_the_experts_at_4_25_bits_and_the_rest_in_bf16():
    """gpt-oss-120b: attention 36 × 2880 × 64 × 2 × (64 + 8) = 955,514,880 and embeddings 2 × 201,088 × 2880 =
    1,158,266,880 stay bf16; the other 114,886,218,240 (the experts) at 17/32 byte: 65,260,866,960 bytes."""
    result = plan({**GPT_OSS_120B, "vocab": 201088}, "trn3", batch=4, seq_len=16384, dtype="mxfp4", tp=8)
    assert result.memory is not None
    assert result.memory.weights == pytest.approx(65_260_866_960 / 8 / 2**30)
    weights = next(r for r in result.reasons if r.item == "weights_gib")
    assert "114,886,218,240" in weights.why and "mxfp4" in weights.why and "features-guide" in weights.source
    fp8 = plan({**GPT_OSS_120B, "vocab": 201088}, "trn3", batch=4, seq_len=16384, dtype="fp8", tp=8)
    assert fp8.memory is not None and result.memory.weights < fp8.memory.weights * 0.6


def test_mxfp8_keeps_the_mlps_in_bf16_from_tp_32_as_the_recipe_does():
    qwen3_32b = tomllib.loads(DATA.read_text())["deployment"][8]["model"]
    at = {tp: plan(qwen3_32b, "trn3", "Qwen3ForCausalLM", batch=1, seq_len=8192, dtype="mxfp8", tp=tp)
          for tp in (16, 32)}
    total = {tp: at[tp].memory.weights * tp for tp in at if at[tp].memory is not None}
    mlp = 3 * 5120 * 25600 * 64
    assert total[32] - total[16] == pytest.approx(mlp * (2 - 33 / 32) / 2**30)
    neuron = {tp: at[tp].serving.options["--additional-config"]["neuron_config"] for tp in at if at[tp].serving}
    assert neuron[16]["modules_to_not_convert"] == [] and neuron[32]["modules_to_not_convert"] == ["mlp"]


def test_an_mx_checkpoint_on_trn2_is_sized_dequantised_with_the_documented_override():
    gpt_oss = {**GPT_OSS_120B, "vocab": 201088, "hf_model_type": "gpt_oss"}
    on_trn2 = plan(gpt_oss, "trn2", "GptOssForCausalLM", batch=4, seq_len=16384, dtype="mxfp4", tp=16)
    bf16 = plan(gpt_oss, "trn2", "GptOssForCausalLM", batch=4, seq_len=16384, dtype="bf16", tp=16)
    assert on_trn2.workload.dtype == "bf16" and on_trn2.memory == bf16.memory
    assert any("dequantised to bf16" in r.why for r in on_trn2.reasons if r.item == "quantization")
    assert on_trn2.serving is not None and on_trn2.serving.options["--hf-overrides"] == {"quantization_config": {}}
    assert "quantization" not in on_trn2.serving.options["--additional-config"]["neuron_config"]


def test_mx_weights_are_for_inference_only(portcheck):
    done = portcheck("advise", "--target", "trn3", "--task", "training", "--dtype", "mxfp4", "--params", "8e9",
                     "--layers", "32", "--hidden", "4096", "--heads", "32")
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_advise_plans_a_shipped_llm_config_on_trn3_through_vllm_neuron(portcheck):
    """Llama 3 8B's config on trn3: bf16 weights 8,030,261,248 × 2 / 2³⁰ = 14.96 GiB on one 36 GiB logical core,
    served by vLLM Neuron (LlamaForCausalLM is in its registry)."""
    done = portcheck("advise", "--isolated", "--target", "trn3", "--hf-config", "fixtures/models/hf/llama-3-8b",
                     "--format", "json", cwd=ROOT)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    plan_ = report["plan"]
    assert report["target"]["chip"] == "trn3" and plan_["serving"]["path"] == "vllm-neuron"
    assert plan_["memory"]["budget_per_core_gib"] == 36 and plan_["memory"]["weights_gib"] == pytest.approx(14.958)
    assert plan_["memory"]["per_core_gib"] <= 36
