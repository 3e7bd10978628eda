"""Issue 23: plans beyond one instance (a Trn2 UltraServer, instances over EFA) and what a plan costs.

Every figure is worked by hand from documented memory: a Trn2 logical core at LNC=2 may use 24 GiB
(SDK:about-neuron/arch/neuron-features/logical-neuroncore-config.rst), trn2.48xlarge / trn2u.48xlarge have 16 chips
of 4 logical cores (SDK:about-neuron/arch/neuron-hardware/trn2-arch.rst), and a Trn2 UltraServer is four
trn2u.48xlarge (same page). Each core also carries the runtime's overhead: 96 MiB of micro-code per physical core
(two per logical core: 0.1875 GiB, SDK:neuron-runtime/explore/device-memory.rst) plus portcheck's 10 % reserve
(2.4 GiB of 24), 2.5875 GiB in all. A model given only as a parameter count has no KV cache or activations.
Prices are rules/prices.toml's, or given."""

from __future__ import annotations

import json
import re

import pytest

from portcheck.advise.cost import CostError, CostOptions, per_million
from portcheck.advise.fleet import entries
from portcheck.advise.model import with_numbers
from portcheck.advise.plan import PlanError, make_plan
from portcheck.advise.values import AdviseOptions
from portcheck.cli import main
from portcheck.knowledge import load_hardware, load_prices

GIB = 2**30
OVERHEAD = 96 / 1024 * 2 + 0.1 * 24  # GiB a Trn2 logical core keeps for the runtime at LNC=2


def exit_code(args: list[str]) -> int:
    """portcheck's exit code, in process: argparse's errors exit, the rest return."""
    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code or 0)


def plan(params: float, chip: str = "trn2", stack: str = "native", **options):
    return make_plan(with_numbers(None, {"params": params}), AdviseOptions(chip, stack, **options))


def test_the_documented_shapes_are_data_with_their_links():
    hardware = load_hardware()
    by_name = {i.name: i for i in hardware.instances}
    # trn2-arch.rst: trn2.48xlarge / trn2u.48xlarge, 16 chips, 192 vCPUs, 2,048 GiB host, EFAv3 3,200 Gbps.
    for name in ("trn2.48xlarge", "trn2u.48xlarge"):
        instance = by_name[name]
        assert (instance.chips, instance.vcpus, instance.host_memory_gib, instance.efa_gbps) == (16, 192, 2048, 3200)
        assert "NeuronLink-v3" in instance.interconnect and "1,024 GB/s" in instance.interconnect
    # trn1-arch.rst: trn1n.32xlarge is trn1.32xlarge with twice the EFA (1,600 Gbps) and NeuronLink (768 GiB/s).
    assert (by_name["trn1n.32xlarge"].chips, by_name["trn1n.32xlarge"].efa_gbps) == (16, 1600)
    assert by_name["trn1.32xlarge"].efa_gbps == 800
    # Inf2's table lists no EFA; trn2.3xlarge's host is undocumented: both stay unknown (0).
    assert by_name["inf2.48xlarge"].efa_gbps == 0
    assert (by_name["trn2.3xlarge"].vcpus, by_name["trn2.3xlarge"].host_memory_gib) == (0, 0)
    # The UltraServer: four trn2u.48xlarge = 64 chips, 64 × 96 GiB = 6,144 GiB of device memory, 4 × 2,048 GiB host.
    server = next(u for u in hardware.ultraservers if u.name == "Trn2 UltraServer")  # Trn3's: tests/test_trn3.py
    member = by_name[server.instance]
    chip = hardware.chips[member.chip]
    assert server.count * member.chips == 64 and server.count * member.chips * chip.hbm_gib == 6144
    assert server.count * member.host_memory_gib == 8192 and "256 GB/s" in server.interconnect
    # A single-instance plan takes trn2.48xlarge, never the UltraServer's member.
    assert plan(70e9).instance.name == "trn2.48xlarge"


def test_a_1t_model_goes_onto_a_trn2_ultraserver():
    # 1e12 parameters × 2 bytes = 1,862.6 GiB. One trn2.48xlarge: 1,862.6 / 64 = 29.10 GiB + 2.59 > 24.
    # Two trn2u.48xlarge of an UltraServer (tensor parallelism over its NeuronLink, 128 cores): 14.55 + 2.59 = 17.14.
    weights = 1e12 * 2 / GIB
    assert weights / 64 + OVERHEAD > 24 and weights / 128 + OVERHEAD <= 24
    result = plan(1e12)
    assert not [f for f in result.findings if f.rule.code == "PC802"]
    fleet = result.fleet
    assert fleet is not None and fleet.layout == "ultraserver" and fleet.instance.name == "trn2u.48xlarge"
    assert (fleet.count, fleet.tp, result.tp_degree, result.cores, result.chips) == (2, 64, 64, 128, 32)
    assert result.memory.weights == pytest.approx(weights / 128) and result.memory.per_core == pytest.approx(
        weights / 128 + OVERHEAD)
    assert fleet.tensor_across and "NeuronLink-v3" in fleet.between
    # The deployment is documented, the split over the instances is not: the plan says what is missing.
    assert "degrees stop at 64" in fleet.missing
    assert any(r.item == "missing" for r in result.reasons)
    data = result.to_json()
    assert data["instance_count"] == 2 and data["fleet"]["tp_degree_total"] == 128
    assert data["interconnect"]["between_instances"] == fleet.between and not data["fleet"]["documented"]
    # In fp32 it takes the whole UltraServer: 3,725.3 / 128 = 29.10 + 2.59 > 24; / 256 = 14.55 + 2.59 fits.
    whole = plan(1e12, dtype="fp32")
    assert whole.fleet is not None and whole.fleet.count == 4 and whole.fleet.name == "Trn2 UltraServer"
    assert whole.memory.per_core == pytest.approx(2 * weights / 256 + OVERHEAD)


def test_a_tp_larger_than_one_instance_spans_an_ultraserver():
    # --tp 128 on trn2 is 128 logical cores: two trn2u.48xlarge of an UltraServer at 64 each (the plan advise makes
    # by itself for 1e12 parameters), --tp 256 the whole UltraServer; --tp 512 no documented layout (PC804).
    given = plan(1e12, tp=128)
    assert given.fleet is not None and (given.fleet.count, given.fleet.tp, given.cores) == (2, 64, 128)
    assert not [f for f in given.findings if f.rule.code == "PC804"]
    assert plan(1e12, tp=256).fleet.count == 4
    assert plan(1e12, tp=256).memory.per_core == pytest.approx(1e12 * 2 / GIB / 256 + OVERHEAD)
    beyond = plan(1e12, tp=512)
    assert beyond.fleet is None and [f for f in beyond.findings if f.rule.code == "PC804"]
    # Training splits across instances with FSDP, not tensor parallelism: --tp 128 stays a PC804 there.
    training = plan(400e9, task="training", tp=128)
    assert training.fleet is None and [f for f in training.findings if f.rule.code == "PC804"]


def test_llama_3_1_405b_stays_on_one_trn2_48xlarge_at_tp_64():
    # The NxD Inference tutorial (SDK:libraries/nxd-inference/tutorials/trn2-llama3.1-405b-tutorial.rst) deploys it
    # at tensor_parallel_size 64 on one trn2.48xlarge: 405,853,388,800 × 2 bytes / 64 = 11.81 GiB of weights a core.
    numbers = {"params": 405_853_388_800, "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
               "intermediate": 53248, "kind": "decoder"}
    result = make_plan(with_numbers(None, numbers), AdviseOptions("trn2", "native", seq_len=2048, tp=64))
    assert result.instance.name == "trn2.48xlarge" and result.tp_degree == 64 and result.fleet is None
    assert result.instance_count == 1 and result.memory.weights == pytest.approx(405_853_388_800 * 2 / GIB / 64)
    assert not result.findings
    # No trn2 price is in the data: the plan says so rather than invent one.
    assert result.cost.usd_per_hour is None and "give --price-per-hour" in result.cost.price.origin


def test_a_model_for_several_instances_trains_over_efa_with_fsdp():
    # Training keeps weights and gradients (2 bytes each) and Adam's state (12 bytes): 400e9 × 16 = 5,960.5 GiB.
    # At tp 64 an instance's core holds 93.13 GiB; FSDP shards it over the instances: 4 (a whole UltraServer)
    # 23.28 + 2.59 > 24; 8 instances over EFA 11.64 + 2.59 = 14.23 GiB (torch.distributed on TorchNeuron, 2.33+).
    state = 400e9 * 16 / GIB / 64
    assert state / 4 + OVERHEAD > 24 and state / 8 + OVERHEAD <= 24
    result = plan(400e9, task="training")
    fleet = result.fleet
    assert fleet is not None and fleet.layout == "efa" and fleet.instance.name == "trn2.48xlarge"
    assert fleet.count == 8 and fleet.across.startswith("FSDP") and "3,200 Gbps" in fleet.between
    assert result.memory.per_core == pytest.approx(state / 8 + OVERHEAD) and not fleet.missing
    # The layout holds from TorchNeuron's public beta (2.33, `since`); before it no documented stack trains across
    # instances, and the native stack itself is refused at 2.32.
    assert plan(400e9, task="training", sdk="2.33").fleet is not None
    hardware = load_hardware()
    assert entries(hardware, "trn2", "training", "native", "2.33", "efa")
    assert not entries(hardware, "trn2", "training", "native", "2.32", "efa")
    with pytest.raises(PlanError, match=r"public from Neuron 2\.33"):
        plan(400e9, task="training", sdk="2.32")


def test_inference_no_ultraserver_holds_has_no_documented_efa_layout():
    # 8e12 × 2 bytes / 256 cores = 58.2 GiB a core: beyond a whole UltraServer; over EFA no inference stack splits
    # one model (vLLM Neuron: no pipeline parallelism; NxD Inference: multi-node in a future release).
    result = plan(8e12)
    assert result.fleet is None and result.instance is None
    (finding,) = [f for f in result.findings if f.rule.code == "PC802"]
    assert "no documented shape or combination of instances holds it" in finding.message
    assert "vLLM Neuron does not support pipeline parallelism" in finding.message
    assert "4 × trn2u.48xlarge (Trn2 UltraServer) do not hold it either" in finding.message
    # inf2 has no EFA in the docs and no UltraServer: said as such.
    inf2 = plan(1e12, "inf2", "xla")
    (finding,) = [f for f in inf2.findings if f.rule.code == "PC802"]
    assert "no inf2 instance has an EFA network in the Neuron docs" in finding.message
    assert "UltraServer" not in finding.message.split("across instances:")[1]


def test_cost_per_hour_and_per_million_tokens_by_hand():
    # 1e9 parameters fit one inf2.xlarge: $0.758 an hour (the Neuron docs' price file). At 500 tokens/s an hour
    # makes 1.8 M tokens: 0.758 / 1.8 = $0.42111 per million. p5.48xlarge at $98.32 and 2,000 tokens/s makes
    # 7.2 M tokens an hour: $13.6556 per million, so inf2 makes 13.6556 / 0.42111 = 32.43× its tokens per dollar.
    assert load_prices()["inf2.xlarge"].usd_per_hour == 0.758 and load_prices()["p5.48xlarge"].usd_per_hour == 98.32
    cost = CostOptions(tokens_per_second=500, baseline_gpu="p5.48xlarge", baseline_tokens_per_second=2000)
    result = plan(1e9, "inf2", "xla", cost=cost).cost
    assert result.instance == "inf2.xlarge" and result.count == 1 and result.usd_per_hour == 0.758
    assert result.usd_per_million_tokens == pytest.approx(0.758 / 1.8)
    assert result.baseline.usd_per_million_tokens == pytest.approx(98.32 / 7.2)
    assert result.tokens_per_dollar_ratio == pytest.approx((98.32 / 7.2) / (0.758 / 1.8))
    assert round(result.tokens_per_dollar_ratio, 2) == 32.43
    # An UltraServer plan at a negotiated $40 per instance hour: 2 × 40 = $80 an hour; at 1,000 tokens/s,
    # 80 / 3.6 = $22.22 per million tokens.
    fleet = plan(1e12, cost=CostOptions(price_per_hour=40, tokens_per_second=1000)).cost
    assert (fleet.count, fleet.usd_per_hour) == (2, 80) and fleet.price.origin == "--price-per-hour"
    assert fleet.usd_per_million_tokens == pytest.approx(80 / 3.6)
    assert per_million(None, 10) is None and per_million(1.0, 0) is None
    # A vendor claim is quoted beside the measured ratio, as a claim: never a figure of the plan.
    trn1 = plan(1e9, "trn1", "xla", cost=cost)
    (claim,) = [r for r in trn1.reasons if r.item == "claim"]
    assert "up to 50% cost-to-train savings" in claim.why and "not a measurement" in claim.why
    assert trn1.cost.usd_per_hour == 1.34 and not [r for r in result_reasons(cost) if r.item == "claim"]


def result_reasons(cost: CostOptions) -> list:
    return plan(1e9, "inf2", "xla", cost=cost).reasons


def test_a_config_prices_table_overrides_the_data_and_the_flag_overrides_both(tmp_path, capsys):
    config = tmp_path / "portcheck.toml"
    config.write_text('[prices]\n"inf2.xlarge" = 0.5\n"p5.48xlarge" = 60\n')
    args = ["advise", "--params", "1e9", "--target", "inf2", "--config", str(config), "--format", "json",
            "--tokens-per-second", "500", "--baseline-gpu", "p5.48xlarge", "--baseline-tokens-per-second", "2000"]
    assert main(args) == 0
    cost = json.loads(capsys.readouterr().out)["plan"]["cost"]
    assert cost["usd_per_hour"] == 0.5 and cost["price"]["from"] == "the config's prices table"
    assert cost["usd_per_million_tokens"] == pytest.approx(0.5 / 1.8, abs=1e-4)
    assert cost["baseline"]["price"]["usd_per_hour"] == 60
    assert main([*args, "--price-per-hour", "0.25"]) == 0
    assert json.loads(capsys.readouterr().out)["plan"]["cost"]["usd_per_hour"] == 0.25
    # The table shows them too.
    assert main(["advise", "--params", "1e9", "--target", "inf2", "--isolated", "--tokens-per-second", "500"]) == 0
    table = capsys.readouterr().out
    assert re.search(r"cost per hour\s+│ \$0\.76 \(1 × \$0\.76, rules/prices\.toml, 2023-09-28\)", table)
    assert "$0.4211 at 500 tokens/s" in table and "interconnect" in table


@pytest.mark.parametrize("args, message", [
    (["--tokens-per-second", "10", "--task", "training"], "a training plan reports its cost per hour only"),
    (["--baseline-gpu", "p5.48xlarge"], "give the baseline's measured --baseline-tokens-per-second"),
    (["--baseline-tokens-per-second", "10"], "give it too"),
    (["--price-per-hour", "-3"], "expected a positive number"),
    (["--tokens-per-second", "nan"], "expected a positive number"),
])
def test_cost_options_that_cannot_be_priced_are_one_line_and_exit_2(capsys, args, message):
    assert exit_code(["advise", "--params", "1e9", "--target", "trn2", "--isolated", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_config_price_that_is_not_a_number_is_refused(tmp_path, capsys):
    config = tmp_path / "portcheck.toml"
    config.write_text('[prices]\n"inf2.xlarge" = "cheap"\n')
    assert main(["advise", "--params", "1e9", "--target", "inf2", "--config", str(config)]) == 2
    assert "must be a positive number of USD per hour" in capsys.readouterr().err


def test_cost_errors_are_user_errors():
    with pytest.raises(CostError):
        plan(1e9, cost=CostOptions(baseline_gpu="p4d.24xlarge"))


def test_the_bill_says_the_date_of_the_gpu_price_and_the_cut_after_it(capsys):
    """p5.48xlarge's rate comes from an undated page; AWS cut P5 prices in June 2025: the table and the reason
    say both."""
    args = ["advise", "--params", "1e9", "--target", "inf2", "--isolated", "--tokens-per-second", "500",
            "--baseline-gpu", "p5.48xlarge", "--baseline-tokens-per-second", "2000"]
    assert main(args) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert "as of undated (the rate before AWS's June 2025 P5 price cut)" in table.replace("│ ", "")
    result = plan(1e9, "inf2", "xla", cost=CostOptions(tokens_per_second=500, baseline_gpu="p5.48xlarge",
                                                        baseline_tokens_per_second=2000))
    baseline = next(r for r in result.reasons if r.item == "baseline")
    assert "June 2025" in baseline.why and "--baseline-price-per-hour" in baseline.why
    assert result.cost.baseline.price.to_json()["note"].startswith("AWS cut P5")
