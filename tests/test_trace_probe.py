"""The shape probe's budget is work (questions to export's shape solver), not time: the same probe gives the same
answer on a quiet machine and on a loaded one, and a probe that drops the image axes still reports its graph."""

from __future__ import annotations

import importlib.util
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
