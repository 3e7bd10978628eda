"""`portcheck trace`'s exit code: advice every model gets (info: its buckets, SDPA's kernel) does not make a clean
model exit like a broken one. trace's fail level is `warning` unless `--fail-level` or the configuration says."""

from __future__ import annotations

import importlib.util
import json

import pytest

if importlib.util.find_spec("torch") is None:
    pytest.skip("portcheck trace needs torch (pip install 'portcheck[trace]')", allow_module_level=True)

CLEAN = ("trace", "fixtures/models/clean_mlp.py:build", "--format", "json")


def test_a_clean_model_with_advice_only_exits_0(shared_run):
    done = shared_run(*CLEAN)
    assert done.returncode == 0, done.stderr
    findings = json.loads(done.stdout)["findings"]
    assert findings and {f["severity"] for f in findings} == {"info"}  # the bucket note is there, and is advice


def test_the_fail_level_of_trace_is_warning_unless_told(tmp_path):
    from portcheck.config import Layer, resolve
    from portcheck.findings import Severity

    assert resolve([Layer()], tmp_path, None, command="trace").fail_level is Severity.WARNING
    assert resolve([Layer(fail_level="info")], tmp_path, None, command="trace").fail_level is Severity.INFO
    assert resolve([Layer()], tmp_path, None, command="scan").fail_level is Severity.INFO
