"""Hostile world, third round (issue 32, what its second round left open): the baseline's memory, the Action's
outputs, and an adversarial round of its own. Each case failed before the change it names."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import FakeGitHub, run_command

from portcheck import baseline
from tests.test_hostile_world import _git, _repo

GOOD = "import torch\n\nx = torch.zeros(3).cuda()\n"
ROOT = Path(__file__).resolve().parent.parent


def portcheck(*args: str, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    return run_command(args, cwd=cwd, input=stdin, text=False, timeout=timeout, env=env)


# ---- the baseline: read an entry at a time --------------------------------------------------------------------


def test_a_large_baseline_is_read_in_memory_that_follows_the_findings(tmp_path):
    """A 93 MB baseline took 1 GB: the file, its text and a dict per entry were all held at once."""
    (tmp_path / "a.py").write_text(GOOD)
    with open(tmp_path / "base.json", "w") as out:
        out.write('{"kind": "portcheck-baseline", "version": 1, "findings": [\n')
        out.write(",\n".join(json.dumps({"fingerprint": f"{i * 7:016x}", "stem": f"{i:016x}", "code": "PC101",
                                         "path": f"src/pkg/module{i % 997}.py", "line": i}, indent=1)
                             for i in range(460_000)))
        out.write("\n]}\n")
    assert (tmp_path / "base.json").stat().st_size > 60_000_000
    # the peak of the scan alone: a fresh parent whose only child it is
    measure = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True); "
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "portcheck", "scan", "--isolated",
                           "--no-cache", "--baseline", "base.json", "a.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=True)
    code, peak_kib = map(int, done.stdout.split())
    assert code == 1  # the finding is not in the baseline: reported
    assert peak_kib < 120 * 1024, f"{peak_kib / 1024:.0f} MiB for a 63 MB baseline"  # was about 330 MiB


def _read_whole(path: Path) -> list[tuple[str, int, str, str]]:
    document = json.loads(path.read_text())
    return [(e["stem"], e.get("line") or 0, str(e.get("code", "")), str(e.get("path", "")))
            for e in document["findings"] if isinstance(e, dict) and e.get("stem")]


@pytest.mark.parametrize("text", [
    '{"findings": [{"stem": "a", "line": 12345, "code": "PC101", "path": "x.py"}], "kind": "portcheck-baseline"}',
    ' \n{ "kind" : "portcheck-baseline" , "extra": {"deep": [1, [2, {"x": "]}"}]]}, "findings" : [ ] } \n',
    '{"kind": "portcheck-baseline", "findings": [1, null, {"stem": ""}, {"stem": "s\\u00e9", "line": 987654321},'
    ' {"stem": "t", "line": 0, "path": "\\u00e9\\ud83d\\ude00.py"}]}',
    '{"kind": "portcheck-baseline", "findings": [' + ", ".join(
        f'{{"stem": "s{i % 7}", "line": {i * 1001}, "code": "PC{i % 3}", "path": "\u00e9{i}.py"}}'
        for i in range(300)) + ']}',
])
def test_the_streamed_baseline_reads_what_json_reads_across_every_piece_boundary(tmp_path, monkeypatch, text):
    (tmp_path / "b.json").write_text(text)
    expected = _read_whole(tmp_path / "b.json")
    for piece in (1, 2, 3, 7, 64, 2**20):
        monkeypatch.setattr(baseline._Stream, "PIECE", piece)
        assert list(baseline._read(tmp_path / "b.json")) == expected, piece


@pytest.mark.parametrize("text, expected", [
    ('{"kind": "portcheck-baseline", "findings": []} []', "extra data"),
    ('{"kind": "portcheck-baseline", "findings": [{"stem": "a"} {"stem": "b"}]}', "expected"),
    ('{"kind": "portcheck-baseline", "findings": [{"stem": "a"}', "ends too early"),
    ('{"kind": "portcheck-baseline", "findings": [{"stem": "' + "a" * 200_000 + '"}]}', "over 65,536 characters"),
    ('{"kind": "portcheck-baseline", "findings": [{"stem": "a", "line": -1}]}', "malformed"),
    ('{"kind": "other", "findings": []}', "write one with --write-baseline"),
    ('{"kind": "portcheck-baseline"}', "write one with --write-baseline"),
    ('{"kind": "portcheck-baseline", "findings": [' + "[" * 50_000 + "]" * 50_000 + "]}", "not a portcheck"),
    ("[]", "expected '{'"),
    ('{"kind": "portcheck-baseline", "findings": ["\xe9"]}'.encode("latin-1"), "not a portcheck baseline"),
], ids=["extra-data", "missing-comma", "truncated", "huge-entry", "negative-line", "other-kind", "no-findings",
        "deep", "array", "latin-1"])
def test_a_streamed_baseline_that_is_not_one_is_one_line(tmp_path, text, expected):
    (tmp_path / "a.py").write_text(GOOD)
    (tmp_path / "b.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    done = portcheck("scan", "--isolated", "--no-cache", "--baseline", "b.json", "a.py", cwd=tmp_path)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and expected in lines[0] and "Traceback" not in lines[0], lines


def _matched_by_scanning(findings, known):
    """The matching as it was before the bisection: each recorded line scans every free twin."""
    groups: dict[str, list] = {}
    for f in findings:
        groups.setdefault(f.stem, []).append(f)
    covered: set[int] = set()
    unmatched = []
    for stem, recorded in known.items():
        for line in sorted(recorded):
            free = [f for f in groups.get(stem, []) if id(f) not in covered]
            if not free:
                unmatched.append((stem, line))
                continue
            covered.add(id(min(free, key=lambda f: (abs(f.line - line), f.line))))
    return covered, unmatched


def test_matching_twins_by_bisection_picks_what_the_scan_over_every_twin_picked():
    generator = random.Random(32)
    for _ in range(300):
        findings = [SimpleNamespace(stem=generator.choice("ab"), line=generator.randint(1, 12))
                    for _ in range(generator.randint(0, 12))]
        known = {stem: [generator.randint(0, 14) for _ in range(generator.randint(0, 8))] for stem in "abc"}
        assert baseline._matched(findings, known) == _matched_by_scanning(findings, known)  # type: ignore[arg-type]


# ---- the GitHub Action: outputs outside the checkout the pull request controls ----------------------------------


def _based_repo(root: Path) -> Path:
    """A git repository with one commit, `a.py` holding only `import torch`."""
    _repo(root)
    (root / "a.py").write_text("import torch\n")
    _git("add", "-A", cwd=root)
    _git("commit", "-qm", "base", cwd=root)
    return root


def _expression(text: str, values: dict[str, str]) -> str:
    """`${{ name }}` in the action's env, from `values`: enough of GitHub's expressions for action.yml."""
    import re

    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", lambda m: values[m.group(1)], text)


def _run_action(workspace: Path, temp: Path, values: dict[str, str], environment: dict[str, str]) -> list[int]:
    """Runs action.yml's shell steps as a runner would (bash -eo pipefail, in the workspace, with a fresh
    GITHUB_OUTPUT a step): setup-python and the install are this test's interpreter. The exit status of each."""
    import yaml

    action = yaml.safe_load((ROOT / "action.yml").read_text())
    for name, spec in action["inputs"].items():
        values.setdefault(f"inputs.{name}", str(spec.get("default", "")))
    statuses = []
    for number, step in enumerate(action["runs"]["steps"]):
        if "uses" in step or "pip install" in step["run"]:
            continue
        output = temp / f"output-{number}"
        output.touch()
        env = {**environment, "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(temp),
               "GITHUB_WORKSPACE": str(workspace),
               "PATH": f"{Path(sys.executable).parent}:{environment['PATH']}",
               **{key: _expression(str(value), values) for key, value in step.get("env", {}).items()}}
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=workspace,
                              env=env, capture_output=True, text=True, timeout=300)
        assert "Traceback" not in done.stderr, done.stderr
        statuses.append(done.returncode)
        for line in output.read_text().splitlines():
            key, _, value = line.partition("=")
            values[f"steps.{step.get('id')}.outputs.{key}"] = value
    return statuses


def test_the_action_writes_nothing_into_the_checkout_and_follows_none_of_its_symlinks(tmp_path, github):
    """The action wrote portcheck.sarif and portcheck-review.md inside the pull request's checkout: a committed
    symlink of either name (or a committed .portcheck_cache) decided where the writes went, or failed the step."""
    import os

    workspace = tmp_path / "checkout"
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    victims = tmp_path / "victims"
    victims.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=workspace, check=True, capture_output=True, text=True).stdout

    _based_repo(workspace)
    base = git("rev-parse", "HEAD").strip()
    (workspace / "a.py").write_text(GOOD)
    for name in ("portcheck.sarif", "portcheck-review.md", ".portcheck_cache", "portcheck-report.html"):
        (workspace / name).symlink_to(victims / name)
    (victims / ".portcheck_cache").mkdir()
    git("add", "-A")
    git("commit", "-qm", "head")
    head = git("rev-parse", "HEAD").strip()

    (tmp_path / "event.json").write_text(json.dumps({"number": 7, "pull_request": {"number": 7}}))
    values = {"inputs.review": "true", "github.token": "ghs_t0ken", "github.event_name": "pull_request",
              "github.event.pull_request.base.sha": base, "github.event.pull_request.head.sha": head}
    environment = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_REPOSITORY": "o/r",
                   "GITHUB_API_URL": github, "GITHUB_EVENT_PATH": str(tmp_path / "event.json")}
    statuses = _run_action(workspace, temp, values, environment)
    assert statuses == [0, 0, 0, 1], statuses  # the last: annotations, failing on the error found
    assert sorted(p.name for p in victims.iterdir()) == [".portcheck_cache"] and not any(
        (victims / ".portcheck_cache").iterdir())
    assert git("status", "--porcelain", "--ignored") == ""  # nothing written in the checkout
    sarif = Path(values["steps.place.outputs.sarif-file"])
    review = Path(values["steps.place.outputs.review-file"])
    assert sarif.parent.parent == temp and review.parent == sarif.parent
    assert json.loads(sarif.read_text())["runs"][0]["results"][0]["ruleId"] == "PC101"
    assert "PC101" in review.read_text() and len(FakeGitHub.requests) == 1


# ---- own round: what a cloned repository can make portcheck do ---------------------------------------------------


def test_a_deep_folder_chain_is_walked_in_time_linear_in_its_depth(tmp_path, monkeypatch):
    """600 nested folders took 35 s (3 s for one): every folder matched every parent against every exclude and
    test pattern again, and realpath'd its whole chain."""
    import fnmatch
    import os

    from portcheck import config
    from portcheck.config import Layer, resolve
    from portcheck.static.discover import discover

    deep = tmp_path / "/".join(["d"] * 300)
    deep.mkdir(parents=True)
    (deep / "x.py").write_text(GOOD)
    (tmp_path / "build").mkdir()  # a default exclude still applies at the top
    (tmp_path / "build" / "y.py").write_text(GOOD)
    (deep / "tests").mkdir()  # and deep down
    (deep / "tests" / "test_z.py").write_text("import pytest\n")
    settings = resolve([Layer()], tmp_path, None)
    calls = {"match": 0, "lstat": 0}
    real_match, real_lstat = fnmatch.fnmatchcase, os.lstat

    def counted_match(name, pattern):
        calls["match"] += 1
        return real_match(name, pattern)

    def counted_lstat(*args, **kwargs):
        calls["lstat"] += 1
        return real_lstat(*args, **kwargs)

    monkeypatch.setattr(config.fnmatch, "fnmatchcase", counted_match)
    monkeypatch.setattr(os, "lstat", counted_lstat)
    found = [c.display for c in discover(["."], settings, tmp_path)]
    assert found == ["/".join(["d"] * 300) + "/x.py"]
    # linear: a few dozen patterns and lstats a level (it was about 150,000 matches and 45,000 lstats)
    assert calls["match"] < 40 * 300 and calls["lstat"] < 10 * 300, calls


def _chain_work(monkeypatch, text: str) -> int:
    """How many and/or links the analysis read: each call of polarity and probe_in (both recurse a link a call),
    and each node of every ancestors() list handed out."""
    from portcheck.knowledge import load
    from portcheck.static import ancestry
    from portcheck.static.cuda_api import paths, probes
    from portcheck.static.engine import analyse_text

    work = 0

    def counted(original, measure=lambda result: 1):
        def wrapper(*args, **kwargs):
            nonlocal work
            result = original(*args, **kwargs)
            work += measure(result)
            return result
        return wrapper

    originals = {"polarity": paths.polarity, "probe_in": probes.probe_in, "ancestors": ancestry.ancestors}
    for module in list(sys.modules.values()):
        for name, original in originals.items():
            if getattr(module, "__name__", "").startswith("portcheck") and getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, counted(original, len if name == "ancestors" else lambda r: 1))
    result = analyse_text(text, "m.py", "trn2", "native", frozenset(load().rules))
    monkeypatch.undo()
    assert result.findings and not result.errors, result.errors
    return work


CHAINS = {
    # 5,000 terms took over 300 s (8 s on separate lines): the test's polarity and probes read once a finding
    "if test": lambda n: "import torch\n\ndef f():\n    if " + " and ".join(f"a{i}.cuda()" for i in range(n))
    + ":\n        pass\n",
    # 159 s: each finding read its ancestors up the whole chain
    "probes in an or chain": lambda n: "import torch\n\nok = " + " or ".join(
        f"a{i}.cuda()" if i % 2 else "torch.cuda.is_available()" for i in range(n)) + "\n",
}


@pytest.mark.parametrize("shape", sorted(CHAINS))
def test_a_chains_findings_cost_what_they_cost_on_separate_lines(monkeypatch, shape):
    small, large = _chain_work(monkeypatch, CHAINS[shape](200)), _chain_work(monkeypatch, CHAINS[shape](800))
    assert large < 5 * small, (small, large)  # linear: 4x; quadratic: 16x


@pytest.mark.parametrize("terms", [400, 480, 900])
def test_an_if_test_of_hundreds_of_terms_is_analysed_not_too_deep(terms):
    """A 400-term test with a probe in an `if`, a 500-term chain of `.cuda()` terms and an 800-term sum were error
    entries `too deeply nested (recursion limit)`: below the chain length that moved the analysis onto the parse's
    stack, two recursions down the chain (the walk, and a probe or the test's text inside it) passed 1,000
    frames."""
    from portcheck.knowledge import load
    from portcheck.static.engine import analyse_text

    for text in ("import torch\n\ndef f():\n    if torch.cuda.is_available() and "
                 + " and ".join(f"a{i}" for i in range(terms)) + ":\n        x.cuda()\n",
                 "import torch\n\ndef f():\n    if " + " and ".join(f"a{i}.cuda()" for i in range(terms))
                 + ":\n        x.cuda()\n",
                 "import torch\n\nx = " + " + ".join(f"a{i}.cuda()" for i in range(terms * 2)) + "\n"):
        result = analyse_text(text, "m.py", "trn2", "native", frozenset(load().rules))
        assert result.findings and not result.errors, result.errors


def test_a_huge_configuration_is_refused_and_a_repeated_selector_is_read_once(tmp_path):
    """A 16 MB pyproject.toml of 2,000,000 `"PC101"` ignores ran for minutes (each selector matched against every
    code again; the file read whole, however large)."""
    from portcheck import config

    (tmp_path / "a.py").write_text(GOOD)
    (tmp_path / "pyproject.toml").write_text("[tool.portcheck]\nignore = [" + ",".join(['"PC101"'] * 600_000) + "]\n")
    done = portcheck("scan", "--no-cache", "a.py", cwd=tmp_path, timeout=60)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "over 4 MiB" in lines[0], lines
    config.selector_codes.cache_clear()
    for _ in range(1000):
        config.selector_codes("PC101")
    assert config.selector_codes.cache_info().misses == 1


def test_a_committed_symlink_to_a_file_outside_the_tree_is_not_read(tmp_path):
    """`scan .` read `link.py -> /somewhere/else.py` and showed its code in frames and annotations (in the
    Action: a pull request's symlink to a file of the runner); `review` read it through the working tree too."""
    outside = tmp_path / "outside.py"
    outside.write_text("import torch; SECRET = torch.zeros(1).cuda()  # hunter2\n")  # line 1: the link's hunk
    repo = _based_repo(tmp_path / "repo")

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    (repo / "inner.py").write_text(GOOD)
    (repo / "link.py").symlink_to(outside)
    (repo / "inside.py").symlink_to("inner.py")  # a link within the tree is read as before
    (repo / "a.py").write_text(GOOD)
    git("add", "-A")
    for command in (("scan", "--no-cache", "--format", "full", "."), ("review", "--base", "HEAD", "--format", "full")):
        done = portcheck(*command, cwd=repo)
        assert done.returncode == 1 and b"hunter2" not in done.stdout and b"link.py" not in done.stdout, done.stdout
        assert b"a.py" in done.stdout
    shown = portcheck("scan", "--no-cache", "--show-files", ".", cwd=repo)
    assert "link.py  (left out: symlink out of the tree, " in shown.stdout.decode()
    named = portcheck("scan", "--no-cache", "link.py", cwd=repo)  # named on the command line: the user's choice
    assert named.returncode == 1 and b"SECRET" in portcheck("scan", "--no-cache", "--format", "full", "link.py",
                                                             cwd=repo).stdout
