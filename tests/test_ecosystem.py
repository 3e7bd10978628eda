"""benchmarks/ecosystem.py without the network: its data files are valid, and its sampling, precision and recall
compute what they say on small inputs made here."""

import importlib
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
ecosystem = importlib.import_module("ecosystem")
Fail = importlib.import_module("corpus").Fail


def key(path: str, line: int, code: str = "PC201", project: str = "p") -> tuple[str, str, int, str]:
    return (project, path, line, code)


def judgment(k, verdict: str, target: str | None = None):
    return ecosystem.Judgment(*k, verdict=verdict, reason="r", target=target)


# ---- the committed data -------------------------------------------------------------------------


def test_the_projects_are_pinned_and_enough():
    projects = ecosystem.load_projects()
    assert len(projects) >= 8
    for project in projects:
        assert project.version, project
        assert project.name not in {"transformers", "diffusers", "timm", "mamba-ssm"}, project


def test_every_judgment_has_a_verdict_a_reason_and_a_unique_key():
    judgments, misses = ecosystem.load_judgments()
    assert judgments and misses
    names = {p.name for p in ecosystem.load_projects()}
    slots = [(j.key, j.target) for j in judgments]
    assert len(slots) == len(set(slots))
    for j in judgments:
        assert j.verdict in ecosystem.VERDICTS and j.reason.strip(), j
        assert j.project in names and not j.path.startswith("/"), j
    for m in misses:
        assert m.reason.strip() and m.project in names, m


def test_the_judgment_file_is_sorted_so_that_diffs_stay_small():
    judgments, misses = ecosystem.load_judgments()
    order = [(j.project, j.path, j.line, j.code, j.target or "") for j in judgments]
    assert order == sorted(order)
    assert [m.key for m in misses] == sorted(m.key for m in misses)


@pytest.mark.parametrize(("text", "message"), [
    ('findings = [{ project = "p", path = "a.py", line = 1, code = "PC201", verdict = "tp", reason = "" }]',
     "reason is missing or empty"),
    ('findings = [{ project = "p", path = "a.py", line = 1, code = "PC201", verdict = "maybe", reason = "r" }]',
     "verdict must be one of"),
    ('findings = [{ project = "p", path = "a.py", line = 1, code = "PC201", reason = "r" }]',
     "verdict is missing"),
    ('findings = [{ project = "p", path = "a.py", line = 1, code = "PC201", verdict = "tp", reason = "r" },\n'
     '            { project = "p", path = "a.py", line = 1, code = "PC201", verdict = "fp", reason = "s" }]',
     "judged twice"),
    ('findings = [{ project = "p", path = "a.py", line = 0, code = "PC201", verdict = "tp", reason = "r" }]',
     "line must be a positive integer"),
    ('findings = [{ project = "p", path = "a.py", line = 1, code = "PC201", verdict = "tp", reason = "r", '
     'target = "h100" }]', "target must be one of"),
    ('misses = [{ project = "p", path = "a.py", line = 3, end_line = 2, code = "PC604", reason = "r" }]',
     "end_line must be an integer not below line"),
    ("findings = [", "not valid TOML"),
])
def test_a_bad_judgment_file_is_one_message(tmp_path, text, message):
    path = tmp_path / "judgments.toml"
    path.write_text(text + "\n")
    with pytest.raises(Fail, match=message):
        ecosystem.load_judgments(path)


def test_a_judgment_per_target_may_sit_beside_one_for_both(tmp_path):
    path = tmp_path / "judgments.toml"
    path.write_text('findings = [\n'
                    '  { project = "p", path = "a.py", line = 1, code = "PC717", verdict = "fp", reason = "r" },\n'
                    '  { project = "p", path = "a.py", line = 1, code = "PC717", target = "inf2", verdict = "tp", '
                    'reason = "s" },\n]\n')
    judgments, _ = ecosystem.load_judgments(path)
    table = {(j.key, j.target): j for j in judgments}
    k = key("a.py", 1, "PC717")
    assert ecosystem.verdict_for(table, k, "trn2").verdict == "fp"
    assert ecosystem.verdict_for(table, k, "inf2").verdict == "tp"


# ---- sampling -----------------------------------------------------------------------------------


def test_a_code_with_few_findings_is_judged_whole():
    keys = [key("a.py", n) for n in range(1, 6)] + [key("b.py", 1, "PC301")]
    picked = ecosystem.sample(keys, 20, seed=0)
    assert picked == {"PC201": sorted(keys[:5]), "PC301": [key("b.py", 1, "PC301")]}


def test_a_sample_is_fixed_by_the_seed_and_stable_when_findings_are_added():
    keys = [key(f"m{n // 10}.py", n) for n in range(100)]
    first = ecosystem.sample(keys, 20, seed=0)["PC201"]
    assert len(first) == 20 and first == sorted(set(first))
    assert ecosystem.sample(list(reversed(keys)), 20, seed=0)["PC201"] == first
    assert ecosystem.sample(keys, 20, seed=1)["PC201"] != first
    # A new finding that ranks outside the sample changes nothing; one that ranks in displaces exactly one.
    extra = [key("new.py", n) for n in range(1, 40)]
    out = next(k for k in extra if ecosystem.rank(k, 0) > max(ecosystem.rank(s, 0) for s in first))
    assert ecosystem.sample([*keys, out], 20, seed=0)["PC201"] == first
    into = next(k for k in extra if ecosystem.rank(k, 0) < max(ecosystem.rank(s, 0) for s in first))
    after = ecosystem.sample([*keys, into], 20, seed=0)["PC201"]
    assert into in after and len(set(first) - set(after)) == 1


# ---- precision and recall ------------------------------------------------------------------------


def test_precision_counts_the_judged_sample_and_lists_what_is_unjudged():
    pc201 = [key("a.py", n) for n in range(1, 31)]  # 30 findings, 20 sampled
    pc301 = [key("b.py", n, "PC301") for n in range(1, 5)]  # 4 findings, all sampled
    picked = ecosystem.sample(pc201 + pc301, 20, seed=0)
    table = {}
    for i, k in enumerate(picked["PC201"][:15]):  # 15 judged: 12 tp, 3 fp; 5 unjudged
        table[(k, None)] = judgment(k, "tp" if i < 12 else "fp")
    for i, k in enumerate(picked["PC301"]):  # 1 tp, 3 fp
        table[(k, None)] = judgment(k, "tp" if i == 0 else "fp")
    tallies, unjudged = ecosystem.precision(pc201 + pc301, picked, table, "trn2")

    pc = tallies["PC201"]
    assert (pc.keys, pc.sampled, pc.tp, pc.fp, pc.unjudged) == (30, 20, 12, 3, 5)
    assert pc.precision == pytest.approx(0.8)
    assert tallies["PC301"].precision == pytest.approx(0.25)
    assert sorted(unjudged) == sorted(picked["PC201"][15:])

    categories, total = ecosystem.rollup(tallies, {"PC201": "dynamic-shape", "PC301": "unsupported-op"})
    assert total.tp == 13 and total.fp == 6 and total.precision == pytest.approx(13 / 19)
    # Weighted: each rule's precision times its findings, over the findings: (0.8 * 30 + 0.25 * 4) / 34.
    assert total.weighted == pytest.approx((0.8 * 30 + 0.25 * 4) / 34)
    assert categories["dynamic-shape"].precision == pytest.approx(0.8)


def test_a_judgment_for_the_other_target_does_not_count():
    k = key("a.py", 1)
    table = {(k, "inf2"): judgment(k, "tp", "inf2")}
    tallies, unjudged = ecosystem.precision([k], {"PC201": [k]}, table, "trn2")
    assert unjudged == [k] and tallies["PC201"].precision is None


def test_recall_finds_a_miss_by_its_code_on_its_lines():
    misses = [ecosystem.Miss("p", "a.py", 10, "PC604", "r"),
              ecosystem.Miss("p", "a.py", 20, "PC209", "r", end_line=22),
              ecosystem.Miss("p", "b.py", 5, "PC210", "r"),
              ecosystem.Miss("p", "c.py", 1, "PC701", "r", target="inf2")]
    found = {key("a.py", 10, "PC604"), key("a.py", 22, "PC209"), key("b.py", 5, "PC204")}
    result = ecosystem.recall(misses, found, "trn2")
    assert (result["misses"], result["found"], result["recall"]) == (3, 2, pytest.approx(2 / 3, abs=1e-4))
    assert [r["other_code_on_line"] for r in result["rows"]] == [False, False, True]
    assert ecosystem.recall(misses, found, "inf2")["misses"] == 4


# ---- test projects and recall labels ------------------------------------------------------------


def test_tuning_and_test_projects_are_apart_and_test_projects_have_labels_written_first():
    projects = ecosystem.load_projects()
    test = {p.name for p in projects if p.set == "test"}
    assert len(test) >= 10 and {p.set for p in projects} == {"tuning", "test"}
    labels = ecosystem.load_labels()
    assert {label.project for label in labels} <= {p.name for p in projects}
    assert len([label for label in labels if label.project in test]) >= 80


def test_labels_are_validated(tmp_path):
    (tmp_path / "p.toml").write_text('labels = [{ path = "a.py", line = 3, category = "gpu", reason = "r" }]')
    with pytest.raises(Fail, match="category must be one of"):
        ecosystem.load_labels(tmp_path)
    (tmp_path / "p.toml").write_text('labels = [{ path = "a.py", line = 3, end_line = 2, category = "dtype", '
                                     'reason = "r" }]')
    with pytest.raises(Fail, match="end_line not below line"):
        ecosystem.load_labels(tmp_path)


def test_a_label_is_found_by_a_finding_of_its_category_on_its_lines_for_its_target():
    labels = [ecosystem.Label("p", "a.py", 10, 12, "host-sync", "both", "r"),
              ecosystem.Label("p", "a.py", 20, 20, "training", "inf2", "r"),
              ecosystem.Label("p", "b.py", 5, 5, "dtype", "both", "r")]
    findings = [(key("a.py", 11, "PC701"), "host-sync"), (key("a.py", 20, "PC601"), "training"),
                (key("b.py", 5, "PC301"), "unsupported-op")]
    trn2 = ecosystem.label_recall(labels, findings, "trn2")
    assert (trn2["labels"], trn2["found"]) == (2, 1)  # the inf2-only label does not count on trn2
    assert trn2["rows"][1]["other_category_on_line"] == ["unsupported-op"]  # another category is no hit
    inf2 = ecosystem.label_recall(labels, findings, "inf2")
    assert (inf2["labels"], inf2["found"]) == (3, 2)
    assert inf2["by_category"]["training"] == {"found": 1, "labels": 1}


def test_a_test_projects_label_rows_stay_out_of_the_output_unless_asked_for():
    """The rows name each label's path, line and reason: read while tuning, they would turn the test projects into
    tuning ones. Counts and categories stay; a tuning project's rows stay too."""
    labels = [ecosystem.Label("p", "a.py", 10, 12, "host-sync", "both", "r")]
    found = ecosystem.label_recall(labels, [(key("a.py", 11, "PC701"), "host-sync")], "trn2")
    shown = ecosystem.kept_rows(found, "test", keep_test_rows=False)
    assert "rows" not in shown and (shown["found"], shown["labels"]) == (1, 1)
    assert shown["by_category"] == {"host-sync": {"found": 1, "labels": 1}}
    assert ecosystem.kept_rows(found, "test", keep_test_rows=True)["rows"] == found["rows"]
    assert ecosystem.kept_rows(found, "tuning", keep_test_rows=False)["rows"] == found["rows"]


def test_a_finding_over_several_lines_finds_a_label_on_any_of_them():
    """JUDGING's recall: a finding whose lines overlap the label's. A hand-written attention reported from its
    q @ kᵀ (line 10) to its @ v (line 14) finds a label written on the scores alone; one that ends above misses."""
    labels = [ecosystem.Label("p", "a.py", 10, 11, "custom-attention", "both", "r"),
              ecosystem.Label("p", "a.py", 30, 30, "custom-attention", "both", "r")]
    findings = [(key("a.py", 14, "PC401"), "custom-attention", 14), (key("a.py", 9, "PC401"), "custom-attention", 14),
                (key("a.py", 25, "PC401"), "custom-attention", 29)]
    found = ecosystem.label_recall(labels, findings, "trn2")
    assert [row["found"] for row in found["rows"]] == [True, False]
    assert ecosystem.label_recall(labels, findings[:1], "trn2")["found"] == 0  # on the @ v line alone: no overlap


def test_a_finding_that_now_spans_back_keeps_the_key_it_was_judged_by():
    """PC209 used to be reported where a size is used (line 12) and now spans from the read (line 10): it keeps the
    judged key, so its verdict and its place in the sample stay. A finding with its own judgment, one that does not
    span, and a judgment of another code or outside the span change nothing."""
    judgments = [judgment(key("m.py", 12, "PC209"), "tp"), judgment(key("m.py", 30, "PC209"), "fp"),
                 judgment(key("m.py", 22, "PC204"), "tp"), judgment(key("m.py", 40, "PC209"), "tp")]
    findings = [(key("m.py", 10, "PC209"), {"end_line": 12}),
                (key("m.py", 20, "PC209"), {"end_line": 25}),
                (key("m.py", 30, "PC209"), {"end_line": 31}),
                (key("m.py", 38, "PC209"), {"end_line": 38})]
    assert [k for k, _ in ecosystem.judged_keys(findings, judgments)] == [
        key("m.py", 12, "PC209"), key("m.py", 20, "PC209"), key("m.py", 30, "PC209"), key("m.py", 38, "PC209")]
