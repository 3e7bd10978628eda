"""Neuron SDK releases: the loader's checks on release ranges, the release-dependent facts and their ranges, the
`--sdk` setting, targets a release no longer supports, and every difference between two releases' scans."""

import json
import textwrap

import pytest
from conftest import run_portcheck

from portcheck.findings import Severity
from portcheck.knowledge import (
    KnowledgeError,
    RuleInfo,
    known_releases,
    load,
    load_compiler,
    load_native_sdpa,
    load_op_releases,
    load_ops,
    load_releases,
)
from portcheck.releases import Range, read_range

KNOWN = ("2.31", "2.32", "2.33", "2.34")


@pytest.mark.parametrize(("entry", "problem"), [
    ({"since": "2.99", "source": "s"}, "not a release"),
    ({"until": "2.3", "source": "s"}, "not a release"),
    ({"since": 2.33, "source": "s"}, "not a release"),
    ({"since": "2.34", "until": "2.33", "source": "s"}, "after until"),
    ({"since": "2.33"}, "without a source"),
    ({"until": "2.33", "source": "  "}, "without a source"),
])
def test_a_bad_range_or_a_range_without_source_is_a_knowledge_error(entry, problem):
    with pytest.raises(KnowledgeError, match=problem):
        read_range("x.toml: entry", entry, KNOWN)


def test_ranges_hold_inclusively_and_describe_themselves():
    both = read_range("x", {"since": "2.31", "until": "2.33", "source": "s"}, KNOWN)
    assert [both.holds(r) for r in KNOWN] == [True, True, True, False]
    assert both.describe() == "2.31 to 2.33"
    assert Range().holds("2.27") and Range().describe() == "all releases"
    assert Range(since="2.34").describe() == "2.34 and later" and not Range(since="2.34").holds("2.33")


def test_the_data_knows_releases_up_to_the_newest():
    releases = load_releases()
    assert list(releases)[-1] == load().newest_sdk == "2.34"
    assert releases["2.34"].date == "2026-11-30" and all(r.source and r.changes for r in releases.values())


def test_every_release_dependent_fact_has_its_range_and_source():
    """The facts rules/research/torchneuron-native/facts.md dates: a test fails when one loses its range."""
    k = load()

    def availability(chip, stack, task):
        return next(a for a in k.availability if (a.chip, a.stack) == (chip, stack) and task in a.tasks)

    assert availability("trn2", "xla", "inference").releases == Range(until="2.33")
    assert availability("trn2", "xla", "training").releases == Range(until="2.29")
    assert availability("trn1", "xla", "training").releases == Range(until="2.29")
    assert availability("trn2", "native", "inference").releases == Range(since="2.33")
    assert availability("inf2", "xla", "inference").releases == Range()  # maintenance, still supported
    serving = {(s.name.split(" (")[0], s.chips): s.releases for s in k.serving}
    assert serving[("NxD Inference", ("trn2",))] == Range(until="2.33")
    assert serving[("vLLM Neuron", ("trn2",))] in (Range(since="2.34"), Range(since="2.31", until="2.33"))
    for name in ("Stream", "Event"):
        assert k.cuda_api[name].native_since == "2.33" and k.cuda_api[name].native_source
    for name in ("memory_allocated", "empty_cache", "memory_stats", "reset_peak_memory_stats", "mem_get_info"):
        assert k.cuda_api[name].native_since == "2.34" and k.cuda_api[name].native_source
    compiler = load_compiler()
    assert compiler.flags["--native-int64"].since == "2.32"
    native_env = [e for e in compiler.env.values() if e.stacks == ("native",)]
    assert len(native_env) >= 8 and all(e.releases.since == "2.33" and e.source for e in native_env)
    assert compiler.native_defaults is not None and compiler.native_defaults.releases.since == "2.33"
    assert load_op_releases()["native"] == Range(since="2.33") and load_native_sdpa().releases.since == "2.33"
    native = [op for op in load_ops().values() if "native" in op.status]
    assert len(native) > 300 and all("parmoham-aws/test-repo-parmoham@98154b86" in op.source for op in native)


def test_native_op_statuses_separate_device_kernels_from_the_cpu_fallback():
    ops = load_ops()
    assert ops["aten::mm"].on("native") == "supported"
    assert ops["aten::sort"].on("native") == "cpu-fallback" and ops["aten::roll"].on("native") == "cpu-fallback"
    assert ops["aten::argsort"].on("native") == "unknown"  # composite: judged by what it decomposes into


def test_a_rule_outside_the_chosen_release_does_not_apply():
    info = RuleInfo("PC999", "x", "memory", Severity.INFO, ("trn2",), "s", "n", "src", releases=Range(since="2.34"))
    assert info.applies_to("trn2", "native", "2.34") and not info.applies_to("trn2", "native", "2.33")
    assert info.applies_to("trn2", "native")  # no release given: every release


def test_known_releases_are_ordered():
    releases = known_releases()
    assert releases == tuple(sorted(releases, key=lambda r: tuple(map(int, r.split(".")))))


# ---- the setting, end to end ---------------------------------------------------------------------

MEMORY_AND_STREAMS = textwrap.dedent("""\
    import torch
    used = torch.cuda.memory_allocated()
    torch.cuda.empty_cache()
    side = torch.cuda.Stream()
    x = torch.zeros(4).cuda()
""")


def _scan(tmp_path, *args):
    path = tmp_path / "train.py"
    path.write_text(MEMORY_AND_STREAMS, encoding="utf-8")
    done = run_portcheck("scan", "--isolated", "--no-cache", "--format", "json", *args, str(path))
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    return data, {(f["line"], f["code"]): f for f in data["findings"]}


def test_the_same_scan_at_2_33_and_2_34_differs_exactly_where_the_facts_differ(tmp_path):
    """torch.accelerator's memory functions work on native from 2.34: before, no replacement and no fix; the rest
    (streams, placement) is the same."""
    _, old = _scan(tmp_path, "--sdk", "2.33")
    _, new = _scan(tmp_path, "--sdk", "2.34")
    assert old.keys() == new.keys()
    differing = {key for key in old if old[key]["message"] != new[key]["message"] or old[key]["fix"] != new[key]["fix"]}
    assert differing == {(2, "PC106"), (3, "PC106")}
    assert "torch.accelerator.memory_allocated()" in new[(2, "PC106")]["message"] and new[(2, "PC106")]["fix"]
    assert "from Neuron 2.34" in old[(2, "PC106")]["message"] and old[(2, "PC106")]["fix"] is None
    assert "torch.neuron.Stream()" in old[(4, "PC107")]["message"]  # native has Stream from 2.33


def test_the_same_scan_at_2_31_and_2_34_differs_in_the_stack_trn2_defaults_to(tmp_path):
    """At 2.31 TorchNeuron was a private beta: trn2's default stack is xla, whose messages the scan gives."""
    old_data, old = _scan(tmp_path, "--sdk", "2.31")
    new_data, new = _scan(tmp_path, "--sdk", "2.34")
    assert old_data["target"]["stack"] == "xla" and new_data["target"]["stack"] == "native"
    assert "torch.neuron.Stream" not in old[(4, "PC107")]["message"]
    assert "torch.neuron.Stream" in new[(4, "PC107")]["message"]
    assert "xm.get_memory_info" in old[(2, "PC106")]["message"]


def test_inf2_scans_the_same_at_2_31_and_2_34(tmp_path):
    """Inf2 keeps the xla stack in maintenance at the 2.31 components: no fact differs for it."""
    _, old = _scan(tmp_path, "--target", "inf2", "--sdk", "2.31")
    _, new = _scan(tmp_path, "--target", "inf2", "--sdk", "2.34")
    assert {k: v["message"] for k, v in old.items()} == {k: v["message"] for k, v in new.items()}


@pytest.mark.parametrize(("args", "expected"), [
    (("--sdk", "2.x"), "'2.x' is not a Neuron SDK release"),
    (("--sdk", "2.20"), "Neuron SDK 2.20 is not in portcheck's data, which knows 2.27 to 2.34"),
    (("--stack", "xla"), "PyTorch/XLA inference"),
    (("--stack", "native", "--sdk", "2.31"), "public from Neuron 2.33"),
])
def test_an_unknown_release_or_an_unsupported_target_is_one_line_and_exit_2(tmp_path, args, expected):
    (tmp_path / "m.py").write_text("x = 1\n", encoding="utf-8")
    done = run_portcheck("scan", "--isolated", *args, str(tmp_path / "m.py"))
    assert done.returncode == 2 and expected in done.stderr and len(done.stderr.splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_trn2_xla_is_refused_at_2_34_with_the_last_release_and_planned_at_2_33(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\n", encoding="utf-8")
    refused = run_portcheck("scan", "--isolated", "--stack", "xla", str(tmp_path / "m.py"))
    assert refused.returncode == 2 and "the last release with it is 2.33" in refused.stderr
    assert "unsupported on Trn2 from Neuron 2.34" in refused.stderr
    older = run_portcheck("scan", "--isolated", "--stack", "xla", "--sdk", "2.33", str(tmp_path / "m.py"))
    assert older.returncode == 0 and older.stderr == ""


def test_the_config_key_sdk_picks_the_release(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.portcheck]\nsdk = "2.33"\nstack = "xla"\n', encoding="utf-8")
    (tmp_path / "m.py").write_text("x = 1\n", encoding="utf-8")
    assert run_portcheck("scan", "m.py", cwd=tmp_path).returncode == 0
    (tmp_path / "pyproject.toml").write_text('[tool.portcheck]\nsdk = 2.33\n', encoding="utf-8")
    done = run_portcheck("scan", "m.py", cwd=tmp_path)
    assert done.returncode == 2 and "'sdk' must be a string" in done.stderr


def test_advise_refuses_training_where_no_release_supports_it_and_plans_an_older_release():
    numbers = ("--params", "1e9", "--layers", "16", "--hidden", "2048", "--heads", "16", "--task", "training")
    refused = run_portcheck("advise", *numbers, "--target", "trn1")
    assert refused.returncode == 2 and "PyTorch/XLA training is unsupported from Neuron 2.30" in refused.stderr
    assert "the last release with it is 2.29" in refused.stderr
    planned = run_portcheck("advise", *numbers, "--target", "trn2", "--stack", "xla", "--sdk", "2.29",
                            "--format", "json")
    assert planned.returncode in (0, 1), planned.stderr
    assert json.loads(planned.stdout)["plan"]["task"] == "training"


def test_advise_names_the_release_and_its_serving_path():
    numbers = ("--params", "1e9", "--layers", "16", "--hidden", "2048", "--heads", "16", "--format", "json")
    plan = json.loads(run_portcheck("advise", *numbers).stdout)["plan"]
    reasons = {r["item"]: r["why"] for r in plan["reasons"]}
    assert "vLLM Neuron (generally available" in reasons["serving"]
    old = json.loads(run_portcheck("advise", *numbers, "--sdk", "2.33").stdout)["plan"]
    assert "beta" in {r["item"]: r["why"] for r in old["reasons"]}["serving"]
    inf2 = json.loads(run_portcheck("advise", *numbers, "--target", "inf2").stdout)["plan"]
    assert "maintenance" in {r["item"]: r["why"] for r in inf2["reasons"]}["sdk"]


def test_sdk_listing_version_and_rule_releases():
    listing = run_portcheck("sdk").stdout
    assert "2.34 (2026-11-30)  [newest; the default --sdk]" in listing and "2.27" in listing
    assert "Neuron SDK data to 2.34" in run_portcheck("--version").stdout
    assert run_portcheck("rules").stdout.splitlines()[0].split()[-2:] == ["sdk", "default"]
    assert "Neuron SDK releases: all releases" in run_portcheck("rule", "PC107").stdout


XLA_ON_TRN2 = textwrap.dedent("""\
    import torch
    import torch.distributed as dist
    import torch_neuronx
    traced = torch_neuronx.trace(model, example)
    dist.send(torch.zeros(4), dst=1)
""")


def test_rules_with_a_release_range_apply_from_their_first_release(tmp_path):
    """PC722 (PyTorch/XLA inference on Trn2) holds from 2.34, when it stopped being supported there; PC609 (a
    collective TorchNeuron lacks) from 2.33, when TorchNeuron went public. Same file, same target, two releases."""
    path = tmp_path / "serve.py"
    path.write_text(XLA_ON_TRN2, encoding="utf-8")

    def codes(sdk: str) -> set[tuple[int, str]]:
        done = run_portcheck("scan", "--isolated", "--no-cache", "--format", "json", "--select", "PC722,PC609",
                             "--target", "trn2", "--stack", "native", "--sdk", sdk, str(path))
        assert done.returncode in (0, 1), done.stderr
        return {(f["line"], f["code"]) for f in json.loads(done.stdout)["findings"]}

    assert codes("2.34") == {(4, "PC722"), (5, "PC609")}
    assert codes("2.33") == {(5, "PC609")}
