"""The test processes' zygotes (tests/zygote.py): a command forked from one is what a fresh interpreter gives, and
a trace's child is forked where it can be (else the suite is minutes slower and nothing says so)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import BASE_ENV, run_command

ROOT = Path(__file__).resolve().parent.parent

# The model writes how its process was started: a fresh interpreter's command line, or the zygote's.
STARTED = """import sys
import torch


def build():
    with open("started.txt", "w") as handle:
        handle.write(open("/proc/self/cmdline", "rb").read().replace(b"\\0", b" ").decode())
        handle.write("\\n" + repr(sys.path[0]) + " " + str(sys.flags.hash_randomization))
    return torch.nn.Linear(4, 2), (torch.randn(1, 4),)
"""


def _same(args: list[str], cwd: Path, env: dict[str, str] = BASE_ENV, **options) -> tuple:
    forked = run_command(args, cwd=cwd, env=env, **options)
    fresh = run_command(args, cwd=cwd, env=env, fresh=True, **options)
    assert (forked.args, forked.returncode, forked.stdout, forked.stderr) == \
           (fresh.args, fresh.returncode, fresh.stdout, fresh.stderr)
    return forked.returncode, forked.stdout, forked.stderr


def test_a_forked_command_gives_what_a_fresh_one_gives(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(3).cuda()\n")
    assert _same(["scan", "--isolated", "--no-cache", "a.py"], tmp_path)[0] == 1
    assert _same(["scan", "--isolated", "--no-cache", "--format", "json", "-"], tmp_path,
                 input=b"import torch\nx.cuda()\n", text=False)[0] == 1
    assert _same(["scan", "--no-such-option"], tmp_path)[0] == 2
    assert _same(["rule", "PC101"], tmp_path)[0] == 0


def test_a_module_in_the_working_directory_is_imported_as_a_fresh_interpreter_would(tmp_path):
    # `python -m` puts the working directory first on sys.path: its json.py is the json portcheck imports
    (tmp_path / "json.py").write_text("raise SystemExit('the json.py here was imported')\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    code, _, stderr = _same(["scan", "--isolated", "--no-cache", "--format", "json", "a.py"], tmp_path)
    assert code == 1 and "the json.py here was imported" in stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="portcheck trace needs torch")
@pytest.mark.parametrize("fresh", [False, True])
def test_a_trace_child_is_forked_from_the_zygote_unless_asked_fresh(tmp_path, fresh):
    (tmp_path / "started.py").write_text(STARTED)
    done = run_command(["trace", "--isolated", "--no-static", "--no-shapes", "started.py:build"], cwd=tmp_path,
                       env=BASE_ENV, fresh=fresh)
    assert done.returncode in (0, 1), done.stderr
    command, path = (tmp_path / "started.txt").read_text().split("\n")
    if fresh:  # portcheck's own way: a fresh interpreter, -P (no working directory on sys.path), hash seed 0
        assert " -P -m portcheck.dynamic.child " in command
    else:
        assert "tests/zygote.py" in command and "portcheck.dynamic.child" not in command
    assert path == f"{str(tmp_path)!r} 0"  # the model's directory first (load.py), hash randomisation off


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="portcheck trace needs torch")
def test_a_forked_trace_reports_what_a_fresh_one_does():
    args = ["trace", "fixtures/models/custom_op.py:build", "--format", "json"]  # its eager run imports torch._dynamo
    forked, fresh = (run_command(args, env=BASE_ENV, fresh=f) for f in (False, True))
    assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr)

    def timeless(value):
        if isinstance(value, dict):
            return {k: timeless(v) for k, v in value.items() if k != "seconds"}
        return [timeless(v) for v in value] if isinstance(value, list) else value

    assert timeless(json.loads(forked.stdout)) == timeless(json.loads(fresh.stdout))


def test_a_variable_read_as_python_starts_is_read_as_a_fresh_interpreter_would(tmp_path):
    (tmp_path / "名.py").write_text("import torch\nx = torch.zeros(3).cuda()\n")
    # the encoding of stdout, fixed as Python starts: the file's name is written in it, or escaped
    env = {**BASE_ENV, "PYTHONIOENCODING": "latin-1"}
    assert _same(["scan", "--isolated", "--no-cache", "名.py"], tmp_path, env=env)[0] == 1


# A trace child that writes its sys.modules (in order) as the model's eager run begins, then goes on as usual.
# How tests/data/zygote_*.txt were made (zygote_hf.txt: what every model of its list had).
AT_EAGER_RUN = """import runpy
import sys

from portcheck.dynamic import load

eager = load.run_eagerly


def run_eagerly(loaded):
    with open(sys.argv[3], "w") as handle:
        handle.write("\\n".join(name for name in sys.modules if name not in ("__main__", "portcheck.dynamic.child")))
    return eager(loaded)


load.run_eagerly = run_eagerly
runpy.run_module("portcheck.dynamic.child", run_name="__main__", alter_sys=True)  # as `python -P -m` runs it
"""


def _at_eager_run(model: str, hf_config: str, tmp_path: Path) -> list[str]:
    """sys.modules of a fresh trace child as the model's eager run begins, less __main__ and the model's module."""
    import subprocess
    import sys

    from portcheck.dynamic.request import TraceRequest
    from portcheck.dynamic.runner import child_environment

    request = tmp_path / "request.json"
    request.write_text(TraceRequest(model=model, hf_config=hf_config, shapes=False).to_json())
    listed = tmp_path / "modules.txt"
    done = subprocess.run([sys.executable, "-P", "-c", AT_EAGER_RUN, str(request), str(tmp_path / "result.json"),
                           str(listed)], cwd=ROOT, env=child_environment(BASE_ENV), capture_output=True, timeout=300)
    assert done.returncode == 0 and listed.exists(), done.stdout[-2000:]
    stem = Path(model.partition(":")[0]).stem
    return [name for name in listed.read_text().split("\n") if name != stem]


def _listed(kind: str) -> list[str]:
    text = (ROOT / "tests" / "data" / f"zygote_{kind}.txt").read_text()
    return [line for line in text.split("\n") if line and not line.startswith("#")]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="portcheck trace needs torch")
def test_the_plain_zygote_imports_what_a_child_has_as_the_eager_run_begins(tmp_path):
    """No more (a module a model's eager run imports would not be recorded as run in a fork) and no less (a fork
    would import it again). On a failure, tests/data/zygote_plain.txt is to be this list: a module.txt here."""
    found = _at_eager_run("fixtures/models/clean_mlp.py:build", "", tmp_path)
    assert set(found) == set(_listed("plain")), (tmp_path / "modules.txt")


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
def test_the_hf_zygote_imports_only_what_an_hf_child_has_as_the_eager_run_begins(tmp_path):
    found = set(_at_eager_run("", "fixtures/models/hf/llama", tmp_path))
    plain, hf = set(_listed("plain")), set(_listed("hf"))
    assert plain <= hf and hf <= found, sorted(hf - found)
