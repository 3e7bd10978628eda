"""The results cache (issue 8): warm runs report exactly what cold ones do, a changed file is analysed again,
damaged entries heal, concurrent runs share a directory safely, and the directory is the user's to choose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_command

from portcheck.cache import Cache, code_version, content_hash
from portcheck.findings import FileError, FileResult

ROOT = Path(__file__).resolve().parent.parent

MODEL = "import torch\n\ndef f(x):\n    return x.cuda()  # noqa: PC999\n"
OTHER = "import torch\n\ny = torch.zeros(3).to('cuda')\nz = torch.nonzero(y)\n"


def scan(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "PORTCHECK_CACHE_DIR"}
    full.update({"NO_COLOR": "1", **(env or {})})
    return run_command(["scan", "--format", "json", *args], cwd=cwd, env=full, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "other.py").write_text(OTHER)
    (tmp_path / "bad.py").write_text("def broken(:\n")
    return tmp_path


def entries(directory: Path) -> list[Path]:
    return sorted((directory / "v1").glob("*.json"))


def test_a_warm_run_reports_exactly_what_the_cold_run_did_without_analysing_again(project):
    cold = scan(project, ".")
    cache = project / ".portcheck_cache"
    assert cold.returncode == 1 and len(entries(cache)) == 3, cold.stderr
    assert (cache / ".gitignore").read_text().strip().endswith("*") and (cache / "CACHEDIR.TAG").is_file()
    warm = scan(project, ".")
    assert warm.stdout == cold.stdout and warm.returncode == cold.returncode
    # Proof that the warm run read the entries: doctor one, and its message comes back.
    entry = next(e for e in entries(cache) if "other.py" in e.read_text())
    data = json.loads(entry.read_text())
    data["result"]["findings"][0][4] = "from the cache"
    entry.write_text(json.dumps(data))
    again = json.loads(scan(project, ".").stdout)
    assert "from the cache" in [f["message"] for f in again["findings"]]


def test_a_changed_file_is_analysed_again_and_its_entry_replaced(project):
    scan(project, ".")
    before = {e.name: e.read_text() for e in entries(project / ".portcheck_cache")}
    (project / "other.py").write_text(OTHER.replace("torch.nonzero(y)", "y.sum()"))
    report = json.loads(scan(project, ".").stdout)
    assert not [f for f in report["findings"] if f["code"] == "PC201"]
    after = {e.name: e.read_text() for e in entries(project / ".portcheck_cache")}
    assert before.keys() == after.keys()  # one entry per file, rewritten in place
    assert sum(before[name] != after[name] for name in before) == 1


@pytest.mark.parametrize("damage", [b"", b"\x00\xff garbage", b'{"content": 1}', b"[1, 2, 3]",
                                    b'{"content": "x", "result": {"path": 3}}'])
def test_a_damaged_entry_is_a_miss_and_is_rewritten(project, damage):
    cold = scan(project, ".")
    for entry in entries(project / ".portcheck_cache"):
        entry.write_bytes(damage)
    healed = scan(project, ".")
    assert healed.stdout == cold.stdout and healed.returncode == cold.returncode, healed.stderr
    assert "Traceback" not in healed.stderr
    for entry in entries(project / ".portcheck_cache"):
        assert json.loads(entry.read_text())["content"]  # whole, valid entries again


def test_a_doctored_content_hash_is_never_trusted(project):
    scan(project, ".")
    for entry in entries(project / ".portcheck_cache"):
        data = json.loads(entry.read_text())
        data["content"] = content_hash(b"something else")
        data["result"]["findings"] = []
        entry.write_text(json.dumps(data))
    assert json.loads(scan(project, ".").stdout)["findings"]


def test_concurrent_runs_sharing_a_cache_all_report_the_same_and_leave_whole_entries(tmp_path):
    for index in range(40):
        (tmp_path / f"m{index}.py").write_text(OTHER + f"w{index} = {index}\n")
    cache = tmp_path / "shared"
    env = {**{k: v for k, v in os.environ.items() if k != "PORTCHECK_CACHE_DIR"}, "NO_COLOR": "1"}
    runs = [subprocess.Popen([sys.executable, "-m", "portcheck", "scan", "--format", "json", "-j", "1",
                              "--cache-dir", str(cache), "."], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert all(run.returncode == 1 for run in runs), [err for _, err in outputs]
    assert len({out for out, _ in outputs}) == 1
    assert len(entries(cache)) == 40
    assert not [p for p in (cache / "v1").iterdir() if p.suffix != ".json"]  # no temporary files left
    for entry in entries(cache):
        json.loads(entry.read_text())
    assert scan(tmp_path, "--cache-dir", str(cache), ".").stdout == outputs[0][0]


def test_no_cache_writes_nothing_and_the_directory_can_be_chosen(project, tmp_path_factory):
    scan(project, "--no-cache", ".")
    assert not (project / ".portcheck_cache").exists()
    chosen = tmp_path_factory.mktemp("chosen")
    scan(project, "--cache-dir", str(chosen / "c"), ".")
    assert len(entries(chosen / "c")) == 3 and not (project / ".portcheck_cache").exists()
    from_env = tmp_path_factory.mktemp("env")
    scan(project, ".", env={"PORTCHECK_CACHE_DIR": str(from_env)})
    assert len(entries(from_env)) == 3
    # --cache-dir wins over the environment, --no-cache over both
    flag = tmp_path_factory.mktemp("flag")
    scan(project, "--cache-dir", str(flag), ".", env={"PORTCHECK_CACHE_DIR": str(from_env / "unused")})
    assert len(entries(flag)) == 3 and not (from_env / "unused").exists()
    scan(project, "--no-cache", "--cache-dir", str(flag / "none"), ".")
    assert not (flag / "none").exists()


def test_the_cache_lives_at_the_project_root_found_from_the_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.portcheck]\ntarget = 'trn2'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    scan(tmp_path / "pkg", "model.py")
    assert len(entries(tmp_path / ".portcheck_cache")) == 1
    assert not (tmp_path / "pkg" / ".portcheck_cache").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_an_unwritable_cache_is_one_warning_and_the_scan_goes_on(project):
    locked = project / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        done = scan(project, "--cache-dir", str(locked / "cache"), "model.py", "other.py")
    finally:
        locked.chmod(0o700)
    assert done.returncode == 1 and json.loads(done.stdout)["findings"]
    assert done.stderr.count("cannot write the cache") == 1 and "Traceback" not in done.stderr


def test_an_unwritable_cache_as_root_is_one_warning_too(project):
    blocker = project / "blocker"
    blocker.write_text("a file where the cache directory would go")
    done = scan(project, "--cache-dir", str(blocker / "cache"), "model.py", "other.py")
    assert done.returncode == 1 and json.loads(done.stdout)["findings"]
    assert done.stderr.count("cannot write the cache") == 1 and "Traceback" not in done.stderr


def test_entries_are_keyed_by_target_selection_and_path(tmp_path):
    cache = Cache(tmp_path)
    keys = {
        cache.key("a.py", "trn2", "native", frozenset({"PC101"})),
        cache.key("a.py", "inf2", "xla", frozenset({"PC101"})),
        cache.key("a.py", "trn2", "native", frozenset({"PC101", "PC201"})),
        cache.key("b.py", "trn2", "native", frozenset({"PC101"})),
    }
    assert len(keys) == 4
    assert len(code_version()) == 64


def test_a_different_selection_is_not_served_from_another_selections_entry(project):
    everything = json.loads(scan(project, ".").stdout)
    only_cuda = json.loads(scan(project, "--select", "PC1", ".").stdout)
    assert {f["code"][:3] for f in only_cuda["findings"]} == {"PC1"}
    assert {f["code"][:3] for f in everything["findings"]} > {"PC1"}


def test_entries_round_trip_every_field_of_a_result(tmp_path):
    from portcheck.rules import registry
    from portcheck.static.engine import analyse_text

    text = (ROOT / "fixtures" / "fix" / "PC101" / "method.in.py").read_text()
    result = analyse_text(text + "x = 1  # portcheck: ignore[PC101]\n", "m.py", "trn2", "native",
                          frozenset(registry()))
    assert result.findings and any(f.fix for f in result.findings)
    cache = Cache(tmp_path)
    cache.put("k", "c", result)
    assert cache.get("k", "c", "m.py") == result and cache.get("k", "other", "m.py") is None
    broken = FileResult("bad.py", errors=(FileError("bad.py", "syntax error: invalid syntax", 3),
                                          FileError("bad.py", "binary file")))
    cache.put("e", "c", broken)
    assert cache.get("e", "c", "bad.py") == broken and cache.get("e", "c", "m.py") is None


def test_without_a_config_the_cache_lives_in_the_scanned_directory_not_the_working_one(tmp_path):
    """README: the project root is where the configuration file is, else the scanned directory."""
    (tmp_path / "work").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text(MODEL)
    scan(tmp_path / "work", "--isolated", "../src")
    assert len(entries(tmp_path / "src" / ".portcheck_cache")) == 1
    assert not (tmp_path / "work" / ".portcheck_cache").exists()
    scan(tmp_path / "work", "--isolated", "../src/model.py")  # a file: its own directory
    assert len(entries(tmp_path / "src" / ".portcheck_cache")) == 1
