"""`portcheck trace` reports static findings only from code on the traced path: the user's files whole, a
library's (site-packages) only on the lines that ran, from the same files for every target; terminal lines say
which pass saw a finding and show no absolute paths. Real torch, real transformers, real child processes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_command

from portcheck.dynamic.ran import RanCode, Scope
from portcheck.report.concise import terminal_path

if importlib.util.find_spec("torch") is None:
    pytest.skip("portcheck trace needs torch (pip install 'portcheck[trace]')", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "fixtures" / "models" / "library_path"
MARK = re.compile(r"#\s*(ran|dead):\s*(PC\d{3})")
TARGETS = ("trn2", "inf2")


def run(*args: str, cwd: Path = ROOT, pythonpath: tuple[Path, ...] = ()) -> subprocess.CompletedProcess:
    path = os.pathsep.join([*map(str, (*pythonpath, ROOT)), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": path}
    done = run_command(args, cwd=cwd, timeout=300, env=env)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    return done


def marked(path: Path) -> dict[str, set[tuple[int, str]]]:
    out: dict[str, set[tuple[int, str]]] = {"ran": set(), "dead": set()}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if match := MARK.search(line):
            out[match[1]].add((number, match[2]))
    return out


def trace_library(*extra: str) -> subprocess.CompletedProcess:
    return run("trace", "model.py:build", "--no-shapes", *extra, cwd=LIBRARY, pythonpath=(LIBRARY / "site-packages",))


@pytest.fixture(scope="module")
def library() -> dict[str, dict]:
    """The model of fixtures/models/library_path traced for each target (JSON)."""
    return {t: json.loads(trace_library("--target", t, "--format", "json").stdout) for t in TARGETS}


def found(report: dict, path: str) -> set[tuple[int, str]]:
    return {(f["line"], f["code"]) for f in report["findings"] if f["path"] == path and "static" in f["evidence"]}


def test_the_markers_are_what_scan_finds():
    """Every marked line fires when the file is scanned: the trace tests below cannot pass by the rules changing."""
    for name in ("model.py", "site-packages/tinylib.py"):
        path = LIBRARY / name
        report = json.loads(run("scan", "--isolated", "--no-cache", "--format", "json", str(path)).stdout)
        marks = marked(path)
        assert marks["ran"] | marks["dead"] == {(f["line"], f["code"]) for f in report["findings"]}, name


def test_a_library_reports_only_lines_that_ran_and_the_user_file_whole(library):
    lib, model = marked(LIBRARY / "site-packages" / "tinylib.py"), marked(LIBRARY / "model.py")
    assert lib["ran"] and lib["dead"] and model["ran"]
    for target, report in library.items():
        assert found(report, "site-packages/tinylib.py") == lib["ran"], target
        assert found(report, "model.py") == model["ran"], target  # `unused` never runs, but the user owns it
        assert report["static_scope"]["witness"] == "eager run"


def test_the_files_read_do_not_depend_on_the_target(library):
    scopes = [report["static_scope"]["files"] for report in library.values()]
    assert scopes[0] == scopes[1] and set(scopes[0]) == {"model.py", "site-packages/tinylib.py"}


def test_on_the_meta_device_the_stack_traces_are_the_witness():
    report = json.loads(trace_library("--device", "meta", "--format", "json").stdout)
    assert report["static_scope"]["witness"] == "graph stack traces"
    # No eager run: the cudnn line adds no op to the graph, so nothing says it ran.
    assert found(report, "site-packages/tinylib.py") == set()
    assert found(report, "model.py") == marked(LIBRARY / "model.py")["ran"]


def test_concise_lines_say_which_pass_saw_a_finding():
    out = trace_library("--format", "concise").stdout
    assert "model.py:19:12: PC101 error: [static] " in out
    assert "static: 2 files read; yours whole, libraries' findings only on lines an eager run" in out


# ---- transformers: a library the tiny model runs only part of ----------------------------------------------------


@pytest.fixture(scope="module")
def llama() -> dict[str, dict]:
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("needs transformers")
    return {t: json.loads(run("trace", "--hf-config", "fixtures/models/hf/llama", "--no-shapes", "--target", t,
                              "--format", "json").stdout) for t in TARGETS}


def test_transformers_files_read_and_their_findings_are_the_same_for_both_targets(llama):
    files = [tuple(report["static_scope"]["files"]) for report in llama.values()]
    assert files[0] == files[1]
    shown = [terminal_path(f) for f in files[0]]
    assert "transformers/models/llama/modeling_llama.py" in shown and "transformers/modeling_utils.py" in shown
    assert not any(f.startswith("torch/") for f in shown)
    # (PC208 differs by stack: transformers' `is_tracing()` closes its masking branch under torch.compile only.)
    static = [{(f["code"], f["path"], f["line"]) for f in report["findings"]
               if "static" in f["evidence"] and f["code"] != "PC208"} for report in llama.values()]
    assert static[0] == static[1]


def test_transformers_code_the_model_never_ran_is_not_reported(llama):
    """modeling_utils.py runs for every model, but its CUDA paths (`.cuda()`, device capability) never do."""
    path = next(f for f in llama["trn2"]["static_scope"]["files"] if f.endswith("transformers/modeling_utils.py"))
    scanned = json.loads(run("scan", "--isolated", "--no-cache", "--format", "json", path).stdout)["findings"]
    assert [f for f in scanned if f["severity"] != "info"]
    for report in llama.values():
        assert not [f for f in report["findings"] if f["path"] == path]


def test_one_construct_one_finding_with_both_witnesses(shared_run):
    # the run test_trace.py's test_fixture_models_report_their_markers[mask_index_fallback] makes (conftest.SharedRuns)
    done = shared_run("trace", "fixtures/models/mask_index_fallback.py:build", "--no-shapes", "--format", "json")
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    line = next(n for n, text in enumerate((ROOT / "fixtures/models/mask_index_fallback.py").read_text()
                                           .splitlines(), 1) if "y[y > 0]" in text)
    here = [f for f in report["findings"] if f["line"] == line and f["code"] != "PC720"]
    assert len(here) == 1, here
    assert here[0]["code"] == "PC204" and here[0]["evidence"] == ["static", "traced"]
    assert "aten::nonzero" in here[0]["message"]


# ---- the pieces, without a trace -------------------------------------------------------------------------------


def test_what_ran_crosses_to_the_parent_as_ranges():
    ran = RanCode("eager run", {"/x/a.py": frozenset({3, 4, 5, 9})}, {"/x/a.py": ("f",)})
    data = ran.to_json()
    assert data["files"]["/x/a.py"] == {"lines": [[3, 5], [9, 9]], "functions": ["f"]}
    back = RanCode.from_json(json.loads(json.dumps(data)))
    assert back == ran
    assert back.ran("/x/a.py", 6, 9) and not back.ran("/x/a.py", 6, 8) and not back.ran("/x/b.py", 3, 3)


def test_whose_files_are_whose(tmp_path):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    scope = Scope(project, [str(elsewhere / "build.py")])
    assert scope.owned(str(project / "pkg" / "model.py"))
    assert scope.owned(str(elsewhere / "build.py"))  # the build file, wherever it is
    assert not scope.owned(str(elsewhere / "other.py"))
    assert not scope.owned(str(project / ".venv" / "lib" / "python3.11" / "site-packages" / "lib.py"))
    assert not scope.owned(str(Path(sys.base_prefix) / "lib" / "os.py"))


def test_terminal_paths_are_never_absolute(tmp_path):
    site = "/opt/venv/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py"
    assert terminal_path(site) == "transformers/models/llama/modeling_llama.py"
    assert terminal_path("/usr/lib/python3/dist-packages/torch/nn/x.py") == "torch/nn/x.py"
    assert terminal_path("models/net.py") == "models/net.py"
    assert not terminal_path(str(tmp_path / "build.py")).startswith("/")
