"""The shape probe's budget is work (questions to export's shape solver), not time: the same probe gives the same
answer on a quiet machine and on a loaded one, and a probe that drops the image axes still reports its graph."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("torch") is None:
    pytest.skip("portcheck trace needs torch (pip install 'portcheck[trace]')", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
BUSY = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end:\n    pass\n"


def _without_timings(data: dict) -> dict:
    return {key: value for key, value in data.items() if key != "seconds"}


@pytest.mark.xdist_group("in-process-torch")  # as tests/test_advise.py: one worker imports torch into its process
def test_the_probe_gives_the_same_answer_under_load():
    from portcheck.dynamic.load import load_model
    from portcheck.dynamic.request import TraceRequest
    from portcheck.dynamic.shapes import find_axes, probe_shapes

    loaded = load_model(TraceRequest(model=str(ROOT / "fixtures/models/window_image.py") + ":build", device="cpu"))
    axes = find_axes(loaded, ())
    assert [a.label for a in axes] == ["batch", "height", "width"]
    # a budget the image axes need more than: they are dropped, on a quiet machine ...
    quiet = probe_shapes(loaded, axes, budget=3)
    # ... and on one with a busy process per core
    load = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2)]
    try:
        loaded_run = probe_shapes(loaded, axes, budget=3)
    finally:
        for process in load:
            process.kill()
            process.wait()
    assert _without_timings(quiet.to_json()) == _without_timings(loaded_run.to_json())
    assert quiet.ok and "shape solver needed more than 3 steps" in quiet.detail
    assert [(a.label, a.dynamic) for a in quiet.axes] == [("batch", True), ("height", None), ("width", None)]
    assert quiet.nodes > 0  # the graph of the try that kept batch is reported, not 0
    # with the shipped budget the image axes are probed
    whole = probe_shapes(loaded, axes)
    assert [(a.label, a.dynamic) for a in whole.axes] == [("batch", True), ("height", True), ("width", True)]


@pytest.mark.xdist_group("in-process-torch")
def test_an_axis_export_fixes_is_pinned_only_where_the_model_cannot_run_at_another_size():
    from portcheck.dynamic.load import load_model
    from portcheck.dynamic.request import TraceRequest
    from portcheck.dynamic.shapes import find_axes, probe_shapes

    def probe(name: str):
        loaded = load_model(TraceRequest(model=str(ROOT / "fixtures/models" / name) + ":build", device="cpu"))
        return {a.label: a for a in probe_shapes(loaded, find_axes(loaded, ())).axes}

    branch = probe("size_branch.py")["batch"]  # export fixes batch 2 (a branch on it); batch 3 runs
    assert branch.dynamic is False and branch.runs_at_other is True and branch.pinned_at is None
    pinned = probe("pinned_shape.py")  # a learned (2, 16, 8) table: no other size runs, and the line says why
    for label, other in (("batch", 3), ("seq", 17)):
        assert pinned[label].runs_at_other is False and pinned[label].other == other
        assert pinned[label].pinned_at.line == 15 and "must match" in pinned[label].pinned_by


def test_pc212_is_at_the_pinning_line_and_an_axis_that_runs_at_other_sizes_is_advice():
    from portcheck.config import Layer, resolve
    from portcheck.dynamic.outcome import ModelFacts, TraceOutcome
    from portcheck.dynamic.results import build_report
    from portcheck.traced import GraphFacts, Place, ShapeAxis, ShapeProbe

    model = ROOT / "fixtures/models/size_branch.py"
    axes = (ShapeAxis("features", 0, "batch", 1, False, 2, 2, probed=2, other=3, runs_at_other=True),
            ShapeAxis("input_ids", 1, "seq", 16, False, 16, 16, other=17, runs_at_other=False,
                      pinned_at=Place(str(model), 15), pinned_by="RuntimeError: size mismatch"),
            ShapeAxis("pixel_values", 2, "height", 32, False, 32, 32, other=33))  # no run at all (meta): unsure
    outcome = TraceOutcome(model=ModelFacts("size_branch.SizeBranch", 0, "cpu", build_place=Place(str(model), 19)),
                           graph=GraphFacts("torch.export", 3, 0), shapes=ShapeProbe(True, 0.1, "", axes, 3))
    settings = resolve([Layer(target="trn2")], ROOT, None, command="trace")
    found = build_report(outcome, settings, ROOT, static=False).findings
    unsure = [f for f in found if f.code == "PC212" and f.severity.name == "INFO"]
    assert len(unsure) == 1 and "could not be tried here" in unsure[0].message  # advice, not a warning
    findings = {f.code: f for f in found if f not in unsure}
    assert findings["PC212"].line == 15 and "`input_ids` axis 1 (seq) runs only at 16: at 17" in \
        findings["PC212"].message and "batch" not in findings["PC212"].message
    assert "portcheck's probe made it 2; the example has 1" in findings["PC211"].message
    assert "the model also runs at 3" in findings["PC211"].message


TIMINGS = re.compile(rb'"seconds": [0-9.e-]+')


def test_the_whole_command_gives_byte_identical_json_under_load(tmp_path):
    # `portcheck trace --format json` twice, the second with the machine busy: the same bytes but the timings
    command = [sys.executable, "-m", "portcheck", "trace", str(ROOT / "fixtures/models/window_image.py") + ":build",
               "--format", "json", "--isolated"]

    def run(name: str) -> bytes:
        out = tmp_path / name
        done = subprocess.run([*command, "--output", str(out)], cwd=ROOT, capture_output=True, timeout=600)
        assert done.returncode in (0, 1) and b"Traceback" not in done.stderr, done.stderr
        return TIMINGS.sub(b'"seconds": 0', out.read_bytes())

    quiet = run("quiet.json")
    load = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2)]
    try:
        busy = run("busy.json")
    finally:
        for process in load:
            process.kill()
            process.wait()
    assert b'"seconds": 0' in quiet and b'"nodes": 0' not in quiet
    assert quiet == busy
