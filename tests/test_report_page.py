"""`portcheck report`: the page renders the scan of the shipped examples for both targets; checked structurally
against the JSON of the same scans (every finding present, counts equal), with nothing loaded from elsewhere and
every piece of the scanned tree's text escaped."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import run_command

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "fixtures" / "examples"


def portcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_command(args, cwd=cwd, timeout=300)


class Page(HTMLParser):
    """What the test reads from the page: elements with their attributes, and the text of each element by id."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data):
        self.text.append(data)


def parsed(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


LLAMA = ROOT / "fixtures" / "models" / "hf" / "llama"
MISSING_MODEL = "no_such_model.py:build"


def _once(tmp_path_factory, name: str, make):
    """`make()` (a value pickle keeps: text, or the typed results of trace and advise) run once a session, whichever
    xdist workers ask for it: the first makes it under a lock, the others read it. (An xdist_group would not do: with
    pytest 9.2, xdist 3.8's group suffix never reaches the node ids, so a group's tests still go to every worker.)"""
    import fcntl
    import pickle

    from tests.conftest import shared_directory

    root = shared_directory(tmp_path_factory, "once")
    made = root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.is_file():
            made.write_bytes(pickle.dumps(make()))
        return pickle.loads(made.read_bytes())


@pytest.fixture(scope="module")
def report_run(tmp_path_factory):
    """The report of the shipped examples with two models: the tiny llama (traced once, planned for both targets)
    and one whose file does not exist; run with stderr on a terminal, so its progress shows."""
    import os

    def make() -> list[str]:
        out = tmp_path_factory.mktemp("report")
        env = {**{k: v for k, v in os.environ.items() if k != "CI"}, "COLUMNS": "250"}  # no step line cut short
        returncode, stderr = _on_a_terminal("report", "--isolated", "--no-cache", "--hf-config", str(LLAMA),
                                            "--model", MISSING_MODEL, "-o", str(out / "report.html"), ".", env=env)
        assert returncode == 0, stderr
        return [(out / "report.html").read_text(encoding="utf-8"), stderr]

    html, stderr = _once(tmp_path_factory, "report-page-examples", make)
    return html, stderr


@pytest.fixture(scope="module")
def examples(report_run):
    scans = {}
    for chip in ("trn2", "inf2"):
        scanned = portcheck("scan", "--isolated", "--no-cache", "--target", chip, "--format", "json", ".",
                            cwd=EXAMPLES)
        scans[chip] = json.loads(scanned.stdout)
    return report_run[0], scans


@pytest.fixture(scope="module")
def model_json(tmp_path_factory):
    """What `portcheck trace --format json` and `portcheck advise --format json` report for the tiny llama on each
    target, made by the same functions those commands call, from a trace of its own; and the ModelRun of the same
    results, typed."""
    from portcheck.findings import ScanResult
    from portcheck.report.advise import plan_report
    from portcheck.report.json import report_dict
    from portcheck.report.models import ModelRun, ModelTarget

    def make() -> dict:
        from portcheck.advise.cost import CostOptions
        from portcheck.advise.values import AdviseOptions as PlanOptions
        from portcheck.commands.advise import AdviseOptions, advise
        from portcheck.commands.trace import run_model, trace
        from portcheck.config import Layer, resolve
        from portcheck.dynamic.request import TraceRequest

        request = TraceRequest(hf_config=str(LLAMA))
        traced = run_model(request, EXAMPLES, 240, str(LLAMA))
        out = {}
        for chip in ("trn2", "inf2"):
            settings = resolve([Layer(target=chip)], EXAMPLES, None, "trace")
            plan = PlanOptions(chip, settings.stack, sdk=settings.sdk, cost=CostOptions(prices=settings.prices))
            outcome = advise(AdviseOptions(settings, EXAMPLES, plan, request=request), traced=traced)
            out[chip] = ModelTarget(chip, trace(traced, settings, EXAMPLES, static=False), outcome.plan,
                                    outcome.result.findings)
        return out

    targets = _once(tmp_path_factory, "report-page-llama", make)
    out = {chip: [report_dict(t.trace), plan_report(t.plan, ScanResult(t.trace.target, findings=t.plan_findings))]
           for chip, t in targets.items()}
    return out, ModelRun(str(LLAMA), targets=list(targets.values()))


def test_every_finding_of_every_target_is_on_the_page(examples):
    html, scans = examples
    page = parsed(html)
    articles = [attrs for tag, attrs in page.elements if tag == "article"]
    codes_on_page = Counter(a["data-code"] for a in articles)
    # one entry per rule, file and line (the n-th of a line with the n-th): a finding both targets share is one
    # entry, whatever each target's wording
    expected = Counter()
    for code_path_line in {key for report in scans.values() for key in _occurrences(report["findings"])}:
        expected[code_path_line[0]] += 1
    assert codes_on_page == expected and sum(expected.values()) > 20
    text = "".join(page.text)
    for report in scans.values():
        for f in report["findings"]:
            assert f"{f['path']}:{f['line']}:" in text


def _occurrences(findings):
    seen = Counter()
    for f in findings:
        place = (f["code"], f["path"], f["line"])
        yield (*place, seen[place])
        seen[place] += 1


def test_the_verdict_counts_match_the_json(examples):
    html, scans = examples
    page = parsed(html)
    cards = [attrs["data-target"] for tag, attrs in page.elements if attrs.get("class") == "card decision"]
    assert cards == ["trn2", "inf2"]
    for chip, report in scans.items():
        counts = Counter(f["severity"] for f in report["findings"])
        fixes = Counter(f["fix"]["applicability"] for f in report["findings"] if f.get("fix"))
        shown = _card_counts(html, chip)
        assert [shown["errors"], shown["warnings"], shown["infos"]] == [
            counts["error"], counts["warning"], counts["info"]], (chip, shown)
        assert (shown["safe-fixes"], shown["unsafe-fixes"]) == (fixes["safe"], fixes["unsafe"])
        assert shown["files-affected"] == len({f["path"] for f in report["findings"]})


def _card(html: str, chip: str) -> str:
    start = html.index(f'<div class="card decision" data-target="{chip}"')
    return html[start:html.index('<ul class="work">', start)] + html[html.index('<ul class="work">', start):][:2000]


def _card_counts(html: str, chip: str) -> dict[str, int]:
    """The numbers a target's decision card shows, by their data-count name (the first of each: the card's own)."""
    found: dict[str, int] = {}
    for name, value in re.findall(r'data-count="([\w-]+)">(\d+)<', _card(html, chip)):
        found.setdefault(name, int(value))
    return found


def test_nothing_is_loaded_from_anywhere_else(examples):
    html, _ = examples
    page = parsed(html)
    for tag, attrs in page.elements:
        assert tag not in ("script", "link", "iframe", "object", "embed"), tag
        assert not attrs.get("src"), (tag, attrs)
    assert "url(" not in html and "@import" not in html
    assert "default-src 'none'" in html  # and the browser is told so


def test_the_source_renders_as_a_link_to_the_published_documentation(examples):
    html, _ = examples
    hrefs = [attrs["href"] for tag, attrs in parsed(html).elements if tag == "a" and "href" in attrs]
    assert any(h.startswith("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/") and h.endswith(".html")
               for h in hrefs)
    internal = {h[1:] for h in hrefs if h.startswith("#")}
    ids = {attrs["id"] for _, attrs in parsed(html).elements if "id" in attrs}
    assert internal <= ids  # every in-page link lands


def test_text_from_the_scanned_tree_is_escaped(tmp_path):
    name = "<script>alert(1)<script>.py"  # a file name cannot hold "/"
    (tmp_path / name).write_text('import torch\n\nx = torch.zeros(3).cuda()  # </pre><img src=x onerror=alert(2)>\n')
    done = portcheck("report", "--isolated", "--no-cache", "--target", "trn2", "-o", "out.html", ".", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "out.html").read_text()
    page = parsed(html)
    assert not [tag for tag, _ in page.elements if tag in ("script", "img")]
    assert "&lt;script&gt;alert(1)&lt;script&gt;.py" in html
    done = portcheck("report", "--isolated", "--no-cache", "--target", "trn2", "--format", "markdown", ".",
                     cwd=tmp_path)
    rows = [line for line in done.stdout.splitlines() if "PC101" in line and line.startswith("| `")]
    outside_code = re.sub(r"(`+).*?\1", "", rows[0])  # in a code span, markdown shows `<script>` as text
    assert len(rows) == 1 and "<" not in outside_code and len(re.split(r"(?<!\\)\|", rows[0])) == 7, rows


def test_against_a_baseline_it_shows_what_is_new_and_what_was_fixed(tmp_path):
    (tmp_path / "a.py").write_text("import torch\n\nx = torch.zeros(3).cuda()\ny = torch.ones(2).double()\n")
    assert portcheck("scan", "--isolated", "--no-cache", "--write-baseline", "base.json", "a.py",
                     cwd=tmp_path).returncode == 0
    # one finding fixed (the .cuda()), one new (torch.cuda.synchronize)
    (tmp_path / "a.py").write_text("import torch\n\nx = torch.zeros(3)\ny = torch.ones(2).double()\n"
                                   "torch.cuda.synchronize()\n")
    done = portcheck("report", "--isolated", "--no-cache", "--target", "trn2", "--baseline", "base.json",
                     "--format", "markdown", "a.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "**Since the baseline:** 1 new, 1 fixed." in done.stdout


def _on_a_terminal(*args: str, env: dict[str, str], cwd: Path = EXAMPLES) -> tuple[int, str]:
    """portcheck ARGS with its stderr on a terminal: the exit code and what the terminal showed. The terminal is
    read while the command runs: a full terminal buffer would stop it."""
    import os
    import pty
    import threading

    leader, follower = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other side is closed: all read
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        done = subprocess.run([sys.executable, "-m", "portcheck", *args], cwd=cwd, stdout=subprocess.PIPE,
                              stderr=follower, env=env, timeout=300)
    finally:
        os.close(follower)
        reader.join(timeout=10)
        os.close(leader)
    return done.returncode, b"".join(chunks).decode(errors="replace")


def _stderr_on_a_terminal(*args: str, env: dict[str, str]) -> str:
    returncode, shown = _on_a_terminal(*args, env=env)
    assert returncode == 1
    return shown


def test_a_progress_bar_on_a_terminal_and_nothing_otherwise():
    import os

    env = {k: v for k, v in os.environ.items() if k != "CI"}
    shown = _stderr_on_a_terminal("scan", "--isolated", "--no-cache", "--jobs", "1", ".", env=env)
    assert "2/2" in shown and "scanning" in shown, shown
    for args, extra in ((("--format", "json"), {}), ((), {"CI": "true"})):
        quiet = _stderr_on_a_terminal("scan", "--isolated", "--no-cache", *args, ".", env={**env, **extra})
        assert "scanning" not in quiet, (args, extra, quiet)
    piped = portcheck("scan", "--isolated", "--no-cache", ".", cwd=EXAMPLES)
    assert "scanning" not in piped.stderr


@pytest.mark.parametrize("source, url", [
    ("SDK:frameworks/torch/pytorch-native-overview.rst (backend)",
     "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/frameworks/torch/pytorch-native-overview.html"),
    ("NeuronDocs:en/v2.33.0/neuron-runtime/explore/device-memory.html (model code)",
     "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/neuron-runtime/explore/device-memory.html"),
    ("NeuronDocs:_sources/release-notes/components/torchneuron.rst (public beta)",
     "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html"),
    ("SDK@v2.29.0:release-notes/components/pytorch.rst",
     "https://github.com/aws-neuron/aws-neuron-sdk/blob/v2.29.0/release-notes/components/pytorch.rst"),
    ("aws-neuron/neuronx-distributed#53", "https://github.com/aws-neuron/neuronx-distributed/issues/53"),
    ("pytorch/vision:torchvision/ops/boxes.py (nms)",
     "https://github.com/pytorch/vision/blob/HEAD/torchvision/ops/boxes.py"),
    ("rules/ops.toml (per op)", None), ("observed: torch 2.13.0+cpu", None), ("KNOWLEDGE.md §3.7", None),
])
def test_sources_link_to_where_they_are_published(source, url):
    from portcheck.report.links import source_links

    assert source_links(source)[0].url == url


def test_every_rule_source_that_names_a_page_links_to_an_https_url():
    from portcheck.knowledge import load
    from portcheck.report.links import source_links

    links = [link for rule in load().rules.values() for link in source_links(rule.source)]
    linked = [link.url for link in links if link.url]
    assert len(linked) > 150 and all(u.startswith("https://") and " " not in u for u in linked)


def _model_card(html: str, chip: str) -> str:
    """The HTML of the tiny llama's card for one target."""
    start = html.index(f'data-chip="{chip}"')
    return html[start:html.index('<div class="card" data-model=', start) if chip == "trn2" else
                html.index("</section>", start)]


def test_each_model_shows_its_capture_ops_and_plan_per_target_as_trace_and_advise_report_them(report_run, model_json):
    html, _ = report_run
    expected, _ = model_json
    page = parsed(html)
    cards = [(a["data-model"], a["data-chip"]) for tag, a in page.elements if tag == "div" and "data-chip" in a]
    assert [chip for _, chip in cards] == ["trn2", "inf2"] and len({model for model, _ in cards}) == 1
    for chip, (traced, planned) in expected.items():
        card = _model_card(html, chip)
        ops = Counter(op["status"][chip] for op in traced["ops"])
        shown = dict(re.findall(r'<tr data-status="([\w-]+)"><th scope="row">[^<]+</th><td class="num">(\d+)</td>',
                                card))
        assert {status: int(n) for status, n in shown.items()} == dict(ops) and sum(ops.values()) > 20, (chip, shown)
        assert f"{len(traced['ops'])} distinct ATen ops" in card
        assert f'data-graph-breaks="{traced["graph"]["graph_breaks"]}"' in card
        for axis in traced["shapes"]["axes"]:
            assert (f"{axis['input']}:{axis['axis']} ({axis['label']}" in card) == axis["dynamic"], axis
        plan = planned["plan"]
        rows = dict(re.findall(r'<tr><th scope="row">([^<]+)</th><td>(.*?)</td></tr>', card))
        assert rows["instance"] == plan["instance"] and rows["tensor parallelism (TP)"] == str(plan["tp_degree"])
        assert rows["NeuronCores"] == str(plan["cores"]) and rows["serving path"] == plan["serving"]["title"]
        assert rows["compiler flags"] == f"<code>{' '.join(plan['compiler_args'])}</code>"
        assert rows["environment"].count("<code>") == len(plan["env"]) > 0
        for key, value in plan["env"].items():
            assert f"<code>{key}={value}</code>" in rows["environment"]
        memory = plan["memory"]
        chart = re.search(r'<svg id="memory-model-\w+-' + chip + r'".*?</svg>', card, re.S)
        assert chart, chip
        assert f"memory per core: {memory['per_core_gib']:.2f} of {memory['budget_per_core_gib']:g} GiB" in chart[0]
        widths = {title: float(width) for width, title in re.findall(
            r'<rect x="[\d.]+" y="2" width="([\d.]+)" height="10" fill="#\w+"><title>([^:]+):', chart[0])}
        assert set(widths) == {"weights", "KV cache", "activations", "overhead"}
        scale = max(memory["per_core_gib"], memory["budget_per_core_gib"]) / 100
        for name, key in (("weights", "weights_gib"), ("overhead", "overhead_gib"), ("KV cache", "kv_cache_gib")):
            assert abs(widths[name] * scale - memory[key]) < 0.01, (chip, name)
        assert len(re.findall(r"<li><strong>", card)) == len(plan["reasons"]) > 5
        codes = Counter(a["data-code"] for tag, a in parsed(card).elements if tag == "li" and "data-code" in a)
        assert codes == Counter(f["code"] for f in planned["findings"]) and codes, chip
    # the model that could not be built is on the page, said so, and counted as blocked on each target
    assert f"<code>{MISSING_MODEL}</code>" in html and html.count('<span class="badge error">not traced</span>') == 1
    blocked = {chip: 1 + bool(any(f["severity"] == "error" for f in planned["findings"]))
               for chip, (_, planned) in expected.items()}
    for chip in ("trn2", "inf2"):
        models = _card(html, chip).split("<h4>Models</h4>")[1].split("</ul>")[0]
        assert models.count("<li>") == 2 and models.count('class="over"') == blocked[chip], (chip, models)


def test_the_report_shows_each_model_step_on_a_terminal(report_run):
    _, stderr = report_run
    for step in ("building the model", "capturing its graph", "checking the ops and planning for inf2",
                 "scanning for trn2"):
        assert step in stderr, (step, stderr[-2000:])
    assert f"warning: {MISSING_MODEL}:" in stderr


def test_advise_and_trace_show_their_steps_on_a_terminal_and_nothing_otherwise():
    import os

    from portcheck.report.trace import step_progress

    env = {k: v for k, v in os.environ.items() if k != "CI"}
    sized = ("advise", "--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32")
    returncode, shown = _on_a_terminal(*sized, env=env)
    assert returncode == 0 and "planning for trn2" in shown, shown
    for extra, more in ((("--format", "json"), {}), ((), {"CI": "true"})):
        returncode, quiet = _on_a_terminal(*sized, *extra, env={**env, **more})
        assert returncode == 0 and "planning" not in quiet, (extra, more, quiet)
    with step_progress("json") as step:  # and piped (pytest's stderr is no terminal): nothing either
        assert step is None
    returncode, shown = _on_a_terminal("trace", "--isolated", "--no-static", "--no-shapes",
                                       str(ROOT / "fixtures" / "models" / "clean_mlp.py") + ":build",
                                       env={**env, "COLUMNS": "250"})
    assert returncode == 0, shown
    for step in ("building the model", "running it once", "capturing its graph", "checking its ops against Neuron"):
        assert step in shown, (step, shown[-2000:])


def test_markdown_has_the_models_and_their_plans(model_json):
    from portcheck.commands.report import report_page

    expected, run = model_json
    text = report_page([], ["."], lambda _: [], None, "markdown", [run])
    table = text[text.index("### Models"):]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| ") and line.count("|") == 4}
    assert rows[""] == [f"{t['chip']} ({t['stack']} stack, Neuron SDK {t['sdk']})"
                        for t in (traced["target"] for traced, _ in expected.values())]
    priced = 0
    for at, (traced, planned) in enumerate(expected.values()):
        plan = planned["plan"]
        assert rows["instance"][at] == plan["instance"]
        assert rows["serving path"][at] == plan["serving"]["title"]
        assert rows["compiler flags"][at] == " ".join(plan["compiler_args"])
        assert rows["ops (distinct)"][at].startswith(f"{len(traced['ops'])}: ")
        assert rows["memory per core (GiB)"][at].startswith(
            f"{plan['memory']['per_core_gib']:.2f} of {plan['memory']['budget_per_core_gib']:g}")
        assert rows["graph"][at].endswith(f"{traced['graph']['graph_breaks']} graph breaks")
        priced += plan["cost"]["usd_per_hour"] is not None
        if plan["cost"]["usd_per_hour"] is not None:  # a dollar sign escaped: GitHub reads $…$ as mathematics
            assert rows["cost"][at].startswith(f"\\${plan['cost']['usd_per_hour']:,.2f} per hour (")
    assert priced  # inf2.xlarge has a price in rules/prices.toml


def test_a_plan_field_the_page_does_not_know_is_shown_under_its_own_name():
    from portcheck.report.models import plan_rows

    rows = plan_rows({"instance": "trn2.48xlarge", "spot_usd_per_hour": 14.5, "tp_degree": 64,
                      "placement": {"group": "cluster", "zones": ["a", "b"]}, "memory": None, "reasons": []})
    assert rows == [("instance", "trn2.48xlarge"), ("tensor parallelism (TP)", "64"),
                    ("spot usd per hour", "14.5"), ("placement", "group cluster, zones a, b")]


def test_every_field_the_page_labels_is_a_field_of_the_plan(model_json):
    """The plan's table is drawn from `Plan.to_json()` by name: a field renamed there must not silently drop its
    row (mypy cannot see it; this can)."""
    from portcheck.report.models import PLAN_LABELS

    _, run = model_json
    for target in run.targets:
        assert target.plan is not None
        assert set(PLAN_LABELS) - set(target.plan.to_json()) == set()


def test_the_memory_chart_marks_a_plan_over_the_budget():
    from portcheck.advise.sizing import Memory
    from portcheck.report.models import memory_chart

    chart = memory_chart(Memory(tp=1, weights=20.0, kv_cache=8.0, activations=1.0, overhead=3.0, budget=24.0).as_dict())
    assert not chart.fits and chart.budget_x == 75.0
    assert [(p.name, p.x, p.width) for p in chart.parts] == [
        ("weights", 0.0, 62.5), ("KV cache", 62.5, 25.0), ("activations", 87.5, 3.125), ("overhead", 90.625, 9.375)]


# ---- in a browser --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium (Debian's package) for every check of the module, over the DevTools protocol."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from chromium import Chromium, find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium when it runs as root with "
                    "apt-get; elsewhere: apt-get install chromium)")
    with Chromium(binary, width=1280, height=1600) as opened:
        yield opened


def test_chromium_opens_the_report_with_no_console_errors(report_run, browser, tmp_path):
    html, _ = report_run
    (tmp_path / "report.html").write_text(html, encoding="utf-8")
    assert browser.open(tmp_path / "report.html").console == []
    # the same check hears a page that breaks the rules: a remote image (blocked by the page's policy) and an error
    (tmp_path / "broken.html").write_text(html.replace("</main>", '<img src="https://example.com/x.png"></main>'),
                                          encoding="utf-8")
    said = browser.open(tmp_path / "broken.html").console
    assert len(said) == 1 and "example.com/x.png" in said[0] and "Content Security Policy" in said[0], said


def test_a_screenshot_shows_the_verdict_the_matrix_the_heat_map_and_the_memory_chart(report_run, browser, tmp_path):
    html, _ = report_run
    (tmp_path / "report.html").write_text(html, encoding="utf-8")
    browser.open(tmp_path / "report.html")
    chart = re.search(r'<svg id="(memory-model-\w+-trn2)"', html)[1]
    ids = json.dumps(["counts-trn2", "matrix", "heatmap", chart])
    places = json.loads(browser.evaluate(f"JSON.stringify({ids}.map(id => {{ const e = document.getElementById(id); "
                                         "if (!e) return [id, null]; const r = e.getBoundingClientRect(); "
                                         "return [id, [r.x, r.y + window.scrollY, r.width, r.height]]; }))"))
    placed = dict(places)
    assert all(box and box[2] > 100 and box[3] > 20 for box in placed.values()), placed
    # each region, as the screen shows it, holds what it is drawn with: the verdict's and the matrix's severity
    # badges, the heat map's tiles (the examples' files have errors: the error colour), the chart's parts and line
    colours = {"error": "#D55E00", "warning": "#E69F00", "info": "#0072B2", "overhead": "#999999",
               "budget": "#000000", "paper": "#FFFFFF"}
    wanted = {"counts-trn2": ("error", "warning", "info"), "matrix": ("error", "warning", "info"),
              "heatmap": ("error",), chart: ("overhead", "budget")}
    for name, box in placed.items():
        shot = browser.screenshot(*box)
        assert shot.width >= box[2] - 1 and len(shot.colours()) > 8, name  # drawn, not a blank region
        assert shot.share_near(colours["paper"]) < 0.97, name
        for colour in wanted[name]:
            assert shot.share_near(colours[colour], tolerance=6) > 0.002, (name, colour)
    heatmap = browser.screenshot(*placed["heatmap"])
    assert heatmap.share_near(colours["error"], tolerance=6) > 0.1  # the tiles are big, the text on them small


def test_a_fix_preview_is_the_diff_of_the_lines_its_edits_touch_with_a_hunk_for_each_place():
    import difflib

    from portcheck.findings import Edit
    from portcheck.report.page import fix_preview

    lines = [f"x{n} = {n}" for n in range(1, 41)]
    edits = (Edit(30, 7, 30, 9, "torch.ones(3)"), Edit(1, 1, 1, 1, "import torch\n"), Edit(31, 1, 32, 1, ""))
    after = ["import torch", *lines[:29], "x30 = torch.ones(3)", *lines[31:]]
    expected = "".join(difflib.unified_diff([line + "\n" for line in lines], [line + "\n" for line in after],
                                           "a/m.py", "b/m.py", n=2))
    assert fix_preview("m.py", lines, edits) == expected and expected.count("@@ -") == 2


def test_a_plan_across_instances_shows_its_fleet_interconnect_and_cost():
    from portcheck.report.models import plan_rows

    done = portcheck("advise", "--isolated", "--params", "1e12", "--layers", "126", "--hidden", "16384", "--heads",
                     "128", "--kv-heads", "8", "--price-per-hour", "40", "--tokens-per-second", "1000", "--format",
                     "json", cwd=ROOT)
    plan = json.loads(done.stdout)["plan"]
    rows = dict(plan_rows(plan))
    fleet, cost = plan["fleet"], plan["cost"]
    assert rows["instances"] == str(plan["instance_count"]) and plan["instance_count"] > 1
    assert rows["across instances"].startswith(f"{fleet['name']}: {fleet['instance_count']} × {fleet['instance']}, "
                                               f"TP {fleet['tp_degree_per_instance']} per instance")
    assert rows["interconnect"].startswith(f"within instance {plan['interconnect']['within_instance']}")
    assert rows["cost"] == (f"${cost['usd_per_hour']:,.2f} per hour ({cost['instance_count']} × {cost['instance']} "
                            f"at $40.000, from --price-per-hour); ${cost['usd_per_million_tokens']:,.4f} per million "
                            "tokens at 1000 tokens/s")
