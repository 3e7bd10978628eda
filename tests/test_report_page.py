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

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "fixtures" / "examples"


def portcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "portcheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


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


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    done = portcheck("report", "--isolated", "--no-cache", "-o", str(out / "report.html"), ".", cwd=EXAMPLES)
    assert done.returncode == 0, done.stderr
    scans = {}
    for chip in ("trn2", "inf2"):
        scanned = portcheck("scan", "--isolated", "--no-cache", "--target", chip, "--format", "json", ".",
                            cwd=EXAMPLES)
        scans[chip] = json.loads(scanned.stdout)
    return (out / "report.html").read_text(encoding="utf-8"), scans


def test_every_finding_of_every_target_is_on_the_page(examples):
    html, scans = examples
    page = parsed(html)
    articles = [attrs for tag, attrs in page.elements if tag == "article"]
    codes_on_page = Counter(a["data-code"] for a in articles)
    # one entry per place, code and message: a finding both targets share is one entry with two target badges
    expected = Counter()
    seen = set()
    for report in scans.values():
        for f in report["findings"]:
            key = (f["path"], f["line"], f["column"], f["code"], f["message"])
            if key not in seen:
                seen.add(key)
                expected[f["code"]] += 1
    assert codes_on_page == expected and sum(expected.values()) > 20
    text = "".join(page.text)
    for report in scans.values():
        for f in report["findings"]:
            assert f"{f['path']}:{f['line']}:{f['column']}" in text


def test_the_verdict_counts_match_the_json(examples):
    html, scans = examples
    page = parsed(html)
    cards = [attrs["data-target"] for tag, attrs in page.elements if tag == "div" and "data-target" in attrs]
    assert cards == ["trn2", "inf2"]
    for chip, report in scans.items():
        counts = Counter(f["severity"] for f in report["findings"])
        fixes = Counter(f["fix"]["applicability"] for f in report["findings"] if f.get("fix"))
        start = html.index(f'data-target="{chip}"')
        card = html[start:html.index("</div>\n</div>", start)]
        badges = [int(part.split("</span>")[0]) for part in card.split('class="badge ')[1:4]
                  for part in [part.split(">", 1)[1]]]
        assert badges == [counts["error"], counts["warning"], counts["info"]], (chip, badges)
        assert f"<strong>{fixes['safe']}</strong> safe, <strong>{fixes['unsafe']}</strong> unsafe" in card


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
    rows = [line for line in done.stdout.splitlines() if "PC101" in line]
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


def _stderr_on_a_terminal(*args: str, env: dict[str, str]) -> str:
    import os
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "portcheck", *args], cwd=EXAMPLES, stdout=subprocess.PIPE,
                              stderr=follower, env=env, timeout=300)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other side is closed: all read
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert done.returncode == 1
        return b"".join(chunks).decode(errors="replace")
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)


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
