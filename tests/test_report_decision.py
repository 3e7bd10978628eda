"""`portcheck report` for a lead who decides and tracks a port: a finding the targets share shows each target's
severity and message; the decision summary's numbers are those of `scan --format json`; `--history` appends a run
a line and draws one point a run; the filters work without script; nothing overflows a phone's width. The page is
made from a small real project in a real git repository, and read in a real Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import run_command

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''import torch
from torch import nn
from torch.utils.data import Dataset


class Net(nn.Module):
    def forward(self, x):
        z = torch.view_as_complex(x)
        return z.cuda()


class Data(Dataset):
    def __getitem__(self, i):
        return torch.ones(3).cuda()


def main():
    net = Net().cuda()
    torch.cuda.synchronize()
    return net
'''


def portcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_command(args, cwd=cwd, timeout=300)


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Two runs of `report --history` on a project committed in git, a fix made between them; run from the
    project's parent folder, so the scan's paths start with the project's folder."""
    top = tmp_path_factory.mktemp("runs")
    project = top / "demo"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "demo-port"\n')
    (project / "model.py").write_text(MODEL)
    (project / "tests").mkdir()
    (project / "tests" / "test_model.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    git("init", "-q", ".", cwd=project)
    git("add", ".", cwd=project)
    git("commit", "-q", "-m", "one", cwd=project)
    first = portcheck("report", "--isolated", "--no-cache", "--history", "history.jsonl", "-o", "one.html",
                      "demo", cwd=top)
    assert first.returncode == 0, first.stderr
    (project / "model.py").write_text(MODEL.replace("    torch.cuda.synchronize()\n", "")
                                      + "\n\ndef more():\n    return torch.zeros(2, device='cuda')\n")
    git("commit", "-q", "-am", "two", cwd=project)
    second = portcheck("report", "--isolated", "--no-cache", "--history", "history.jsonl", "-o", "two.html",
                       "demo", cwd=top)
    assert second.returncode == 0, second.stderr
    markdown = portcheck("report", "--isolated", "--no-cache", "--format", "markdown", "demo", cwd=top)
    scans = {chip: json.loads(portcheck("scan", "--isolated", "--no-cache", "--target", chip, "--format", "json",
                                        "demo", cwd=top).stdout) for chip in ("trn2", "inf2")}
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout.strip()
    return {"top": top, "html": (top / "two.html").read_text(), "markdown": markdown.stdout, "scans": scans,
            "history": (top / "history.jsonl").read_text().splitlines(), "head": head}


def _card(html: str, chip: str) -> str:
    start = html.index(f'<div class="card decision" data-target="{chip}"')
    return html[start:html.index("</ul>\n</div>", html.index('<ul class="work">', start))]


def test_the_summary_numbers_are_those_of_scan_json(runs):
    html, scans = runs["html"], runs["scans"]
    for chip, report in scans.items():
        card = _card(html, chip)
        shown: dict[str, int] = {}
        for name, value in re.findall(r'data-count="([\w-]+)">(\d+)<', card):
            shown.setdefault(name, int(value))
        findings = report["findings"]
        severities = Counter(f["severity"] for f in findings)
        fixes = Counter(f["fix"]["applicability"] for f in findings if f["fix"])
        assert (shown["errors"], shown["warnings"], shown["infos"]) == (
            severities["error"], severities["warning"], severities["info"]), chip
        assert (shown["safe-fixes"], shown["unsafe-fixes"]) == (fixes["safe"], fixes["unsafe"])
        assert shown["files"] == report["summary"]["files"]
        assert shown["files-affected"] == len({f["path"] for f in findings})
        manual = [f for f in findings if f["severity"] != "info" and not f["fix"]]
        assert shown["manual-sites"] == len(manual)
        assert shown["work-files"] == len({f["path"] for f in findings if f["severity"] != "info"})
        # the top blockers: each rule's errors, files and fixable sites
        errors = [f for f in findings if f["severity"] == "error"]
        rows = re.findall(r'<tr data-code="(PC\d+)">.*?data-count="errors">(\d+)</td><td class="num"[^>]*>(\d+)</td>\s*'
                          r"<td[^>]*>(\d+) / (\d+) / (\d+)</td>", card, re.S)
        assert rows, card
        for code, count, files, safe, unsafe, by_hand in rows:
            mine = [f for f in errors if f["code"] == code]
            kinds = Counter(f["fix"]["applicability"] if f["fix"] else "" for f in mine)
            assert (int(count), int(files)) == (len(mine), len({f["path"] for f in mine})), code
            assert (int(safe), int(unsafe), int(by_hand)) == (kinds["safe"], kinds["unsafe"], kinds[""]), code
        assert {code for code, *_ in rows} == {f["code"] for f in errors}  # fewer than five rules: all shown
        assert ('data-go="no-go"' in card) == bool(errors)


def test_a_shared_finding_shows_each_targets_severity_and_message_once(runs):
    html, md = runs["html"], runs["markdown"]
    articles = re.findall(r'<article class="finding[^"]*"[^>]*data-code="PC302".*?</article>', html, re.S)
    assert len(articles) == 1, articles  # one finding, worded differently per target
    assert 'data-sev-trn2="warning"' in articles[0] and 'data-sev-inf2="error"' in articles[0]
    assert re.search(r'<li data-for="trn2">.*?badge warning', articles[0])
    assert re.search(r'<li data-for="inf2">.*?badge error', articles[0])
    row = next(line for line in md.splitlines() if "PC302" in line and line.startswith("| `"))
    assert "trn2: warning, inf2: error" in row and row.count("view_as_complex") == 2
    # counted per finding: the file's entries are the rule-file-line places, not the wordings
    places = {(f["code"], f["path"], f["line"]) for report in runs["scans"].values() for f in report["findings"]}
    assert html.count('<article class="finding') == len(places)


def test_the_device_step_and_the_code_around_it_come_from_the_call_graph(runs):
    card = _card(runs["html"], "trn2")
    places = dict(re.findall(r'<tr data-place="([\w-]+)"><th scope="row">[^<]*</th><td class="num">(\d+)</td>', card))
    # forward's .cuda() is model code; main's are module-level set-up; __getitem__'s is the data pipeline
    assert int(places["model"]) >= 1 and "host" in places and "other" in places, places
    device = int(re.search(r'data-count="device-errors">(\d+)<', card)[1])
    around = int(re.search(r'data-count="infrastructure-errors">(\d+)<', card)[1])
    assert device == int(places["model"]) + int(places.get("step", 0))
    assert device + around == int(re.search(r'data-count="errors">(\d+)<', card)[1])


def test_the_history_has_a_line_a_run_with_the_commit_and_the_page_says_what_changed(runs):
    lines = [json.loads(line) for line in runs["history"]]
    assert len(lines) == 2 and lines[1]["commit"] == runs["head"] and lines[0]["commit"] != runs["head"]
    for chip, report in runs["scans"].items():
        counts = Counter(f["severity"] for f in report["findings"])
        assert lines[1]["targets"][chip]["errors"] == counts["error"]
        assert lines[1]["targets"][chip]["warnings"] == counts["warning"]
    html = runs["html"]
    # one new finding (the zeros(device='cuda')), one fixed (the synchronize), on each target
    assert "<strong>trn2</strong> 1 new, 1 fixed" in html and "<strong>inf2</strong> 1 new, 1 fixed" in html
    assert html.count('<circle class="point blockers"') == 2 * 2  # two targets, two runs


def test_the_project_is_named_and_its_paths_are_relative_to_it(runs):
    html = runs["html"]
    assert "<title>demo-port: migration report</title>" in html
    assert "demo/model.py" not in html and "model.py:" in html
    assert "<strong>tests</strong>: 1" in html  # the tests folder was left out, and the page says so


@pytest.mark.parametrize("line", ['{"targets": {"trn2": {"errors": true}}}', '{"targets": []}', "[1]",
                                  '{"targets": {"trn2": {"errors": 1, "fingerprints": [{"a": 1}]}}}'])
def test_a_history_line_of_the_wrong_shape_is_refused(tmp_path, line):
    from portcheck.commands.history import read_history
    from portcheck.errors import UserError

    (tmp_path / "h.jsonl").write_text(line + "\n")
    with pytest.raises(UserError, match=r"h\.jsonl:1: not a portcheck history line"):
        read_history(tmp_path / "h.jsonl")


def test_a_history_that_is_not_one_is_refused_before_any_work(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    (tmp_path / "h.jsonl").write_text('{"targets": {"trn2": {"errors": 1}}}\nnot json\n')
    done = portcheck("report", "--isolated", "--no-cache", "--history", "h.jsonl", "-o", "r.html", ".", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "h.jsonl:2: not a portcheck history line" in done.stderr
    assert not (tmp_path / "r.html").exists() and (tmp_path / "h.jsonl").read_text().endswith("not json\n")


# ---- in a browser --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from chromium import Chromium, find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    with Chromium(binary, width=1280, height=1000) as opened:
        yield opened


def _open(browser, runs, width: int) -> None:
    browser.open(runs["top"] / "two.html")
    browser.call("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})


def _visible(browser, selector: str) -> list[bool]:
    return browser.evaluate(f"JSON.stringify([...document.querySelectorAll({json.dumps(selector)})]"
                            ".map(e => e.getClientRects().length > 0))")


@pytest.mark.parametrize("width", [1280, 390])
def test_chromium_shows_both_severities_of_a_shared_finding_and_nothing_overflows(runs, browser, width):
    _open(browser, runs, width)
    assert browser.evaluate("document.documentElement.scrollWidth") <= width
    shown = json.loads(browser.evaluate(
        "JSON.stringify([...document.querySelectorAll('article[data-code=PC302] li[data-for]')].map(li => "
        "{const r = li.getBoundingClientRect(); return [li.dataset.for, li.querySelector('.badge:not(.target)')"
        ".textContent, r.width > 0 && r.height > 0, r.right <= window.innerWidth]}))"))
    assert shown == [["trn2", "warning", True, True], ["inf2", "error", True, True]], shown


def _choose(browser, input_id: str) -> None:
    """Focus the filter's radio button and press Space, as a keyboard user would."""
    browser.evaluate(f"document.getElementById({json.dumps(input_id)}).focus()")
    for kind in ("keyDown", "keyUp"):
        browser.call("Input.dispatchKeyEvent", {"type": kind, "key": " ", "code": "Space", "windowsVirtualKeyCode": 32,
                                                **({"text": " "} if kind == "keyDown" else {})})
    assert json.loads(browser.evaluate(f"JSON.stringify(document.getElementById({json.dumps(input_id)}).checked)"))


def test_chromium_each_filter_hides_what_it_should(runs, browser):
    _open(browser, runs, 1280)
    articles = json.loads(browser.evaluate(
        "JSON.stringify([...document.querySelectorAll('article.finding')].map(a => [a.dataset.targets, "
        "a.dataset.severities, a.dataset.category, a.dataset.sevTrn2 || '', a.dataset.sevInf2 || '']))"))
    assert all(json.loads(_visible(browser, "article.finding")))
    _choose(browser, "ft-inf2")
    assert json.loads(_visible(browser, "article.finding")) == ["inf2" in a[0].split() for a in articles]
    assert json.loads(_visible(browser, ".card.decision")) == [False, True]
    _choose(browser, "fs-warning")  # inf2's warnings only
    assert json.loads(_visible(browser, "article.finding")) == [a[4] == "warning" for a in articles]
    _choose(browser, "ft-all")  # a warning on any target
    assert json.loads(_visible(browser, "article.finding")) == ["warning" in a[1].split() for a in articles]
    _choose(browser, "fs-all")
    _choose(browser, "fc-dtype")
    assert json.loads(_visible(browser, "article.finding")) == [a[2] == "dtype" for a in articles]
    assert json.loads(_visible(browser, "#matrix tr[data-category]")).count(True) == 1
    _choose(browser, "fc-all")
    assert all(json.loads(_visible(browser, "article.finding")))


def test_chromium_draws_one_point_a_history_line(runs, browser):
    _open(browser, runs, 1280)
    for chip in ("trn2", "inf2"):
        for series in ("blockers", "warnings"):
            points = json.loads(browser.evaluate(
                f"JSON.stringify([...document.querySelectorAll('#trend-{chip} circle.point.{series}')]"
                ".map(c => [Number(c.dataset.run), c.getBoundingClientRect().width > 0]))"))
            assert points == [[n, True] for n in range(1, len(runs["history"]) + 1)], (chip, series, points)


def test_a_page_that_cannot_be_written_records_no_run(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    (tmp_path / "taken").mkdir()  # -o names a folder: the page cannot be written there
    done = portcheck("report", "--isolated", "--no-cache", "--target", "trn2", "--history", "h.jsonl", "-o",
                     "taken", ".", cwd=tmp_path)
    assert done.returncode == 2 and "cannot write" in done.stderr, done.stderr
    assert not (tmp_path / "h.jsonl").exists()


def test_the_project_is_named_from_its_folder_when_it_has_no_usable_pyproject(tmp_path):
    from portcheck.commands.history import project_of

    folder = tmp_path / "mine"
    folder.mkdir()
    assert project_of(["."], folder)[0].name == "mine"  # never "."
    (folder / "pyproject.toml").write_text("[project\nname = ")  # not TOML: the folder's name still
    project = project_of(["mine"], tmp_path)[0]
    assert (project.name, project.prefix, project.relative("mine/a/b.py")) == ("mine", "mine/", "a/b.py")
    (folder / "pyproject.toml").write_text('[project]\nname = "the-name"\n')
    assert project_of(["mine/a.py"], tmp_path)[0].name == "the-name"


def test_the_trend_has_a_point_a_run_scaled_to_the_largest_count_and_compares_the_last_two():
    from portcheck.report.trend import HEIGHT, PAD, trend

    def run(errors: int, warnings: int, prints: list[str]) -> dict:
        return {"time": "t", "commit": None,
                "targets": {"trn2": {"errors": errors, "warnings": warnings, "infos": 0, "fingerprints": prints}}}

    shown = trend([run(4, 1, ["a", "b"]), run(8, 2, ["a", "b", "c"]), run(2, 0, ["c", "d"])], ["trn2", "inf2"])
    blockers, warnings = shown.charts[0].series
    assert [p.value for p in blockers.points] == [4, 8, 2] and [p.value for p in warnings.points] == [1, 2, 0]
    assert [p.x for p in blockers.points] == sorted(p.x for p in blockers.points) and len({p.x for p in
                                                                                            blockers.points}) == 3
    assert blockers.points[1].y == PAD and warnings.points[2].y == HEIGHT - PAD  # the largest at the top, 0 at the foot
    assert (shown.new["trn2"], shown.fixed["trn2"]) == (["d"], 2)
    assert [p.value for p in shown.charts[1].series[0].points] == [0, 0, 0]  # a target no run recorded: zeros
    assert trend([run(1, 1, [])], ["trn2"]).previous == ""  # the first run: nothing to compare with


def test_a_rules_remedy_is_the_sentence_of_its_note_that_says_what_to_do():
    from portcheck.knowledge import load
    from portcheck.report.decision import remedy

    info = load().rules["PC101"]
    said = remedy(info, [])
    assert said in info.neuron and said != info.neuron.split(". ")[0] and "instead" in said
    assert remedy(None, []) == ""
    from portcheck.findings import Finding

    found = Finding.of(info, "`nonzero` returns one row per element; keep the mask and use `torch.where`", "a.py", 1,
                       1, 1, 2)
    assert remedy(info, [found]) == "Keep the mask and use `torch.where`"  # the finding's own advice first
