"""End to end, as a user runs it: `python -m portcheck` in a child process, on real files and git repos."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ROOT, run_portcheck

EXAMPLE = "fixtures/examples/train_gpu.py"
FINDING_KEYS = {"code", "name", "category", "severity", "message", "path", "line", "column", "end_line",
                "end_column", "evidence", "fix", "fingerprint"}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_concise_scan_of_the_shipped_example():
    done = run_portcheck("scan", EXAMPLE)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert f"{EXAMPLE}:9:1: PC110" in lines[0]
    codes = [line.split(": ")[1].split()[0] for line in lines[:-1]]
    assert set(codes) == {"PC101", "PC105", "PC106", "PC109", "PC110"}
    assert lines[-1].startswith("Found 8 findings")
    assert done.stderr == ""


def test_the_larger_example_meets_every_family_on_each_target():
    """The shipped MoE training script: what a user sees for trn2 (native) and inf2 (xla). Its `loss.item()` sits
    under `if ... step % 50 == 0:`, a logging interval, so PC701 stays quiet (issue 17)."""
    expected = {
        "trn2": {"PC101", "PC105", "PC201", "PC302", "PC401", "PC402", "PC501", "PC601", "PC602", "PC604", "PC606",
                 "PC711", "PC712"},
        "inf2": {"PC101", "PC105", "PC201", "PC302", "PC401", "PC402", "PC501", "PC601", "PC602", "PC604", "PC605",
                 "PC606", "PC607", "PC713"},
    }
    for chip, codes in expected.items():
        done = run_portcheck("scan", "--format", "json", "--target", chip, "fixtures/examples/llm_gpu.py")
        assert done.returncode == 1, done.stderr
        report = json.loads(done.stdout)
        assert {f["code"] for f in report["findings"]} == codes, chip
        severities = {(f["code"], f["severity"]) for f in report["findings"]}
        assert ("PC402", "info") in severities and ("PC501", "info") in severities, "guarded flash-attn is info"


def test_json_has_exactly_schema_1():
    done = run_portcheck("scan", "--format", "json", EXAMPLE)
    report = json.loads(done.stdout)
    assert set(report) == {"schema_version", "portcheck_version", "target", "findings", "errors", "summary"}
    assert report["schema_version"] == 1 and report["target"] == {"chip": "trn2", "stack": "native", "sdk": "2.34"}
    assert report["findings"], "the example has findings"
    for finding in report["findings"]:
        assert set(finding) == FINDING_KEYS
        assert finding["evidence"] == ["static"]
        if finding["fix"] is not None:
            assert set(finding["fix"]) == {"applicability", "title", "edits"}
            assert finding["fix"]["applicability"] in ("safe", "unsafe") and finding["fix"]["edits"]
            for edit in finding["fix"]["edits"]:
                assert set(edit) == {"line", "column", "end_line", "end_column", "content"}
        assert finding["line"] >= 1 and finding["column"] >= 1 and len(finding["fingerprint"]) == 16
    assert set(report["summary"]) == {"files", "findings", "by_category", "by_severity"}
    assert report["summary"]["findings"] == len(report["findings"])


def test_fingerprint_survives_lines_moving_above(tmp_path):
    body = "import torch\nx = torch.zeros(1).cuda()\n"
    write(tmp_path / "a.py", body)
    first = json.loads(run_portcheck("scan", "--format", "json", "a.py", cwd=tmp_path).stdout)
    write(tmp_path / "a.py", "# a new comment\n\n" + body)
    second = json.loads(run_portcheck("scan", "--format", "json", "a.py", cwd=tmp_path).stdout)
    assert first["findings"][0]["line"] + 2 == second["findings"][0]["line"]
    assert first["findings"][0]["fingerprint"] == second["findings"][0]["fingerprint"]


def test_json_lines_and_output_file(tmp_path):
    out = tmp_path / "report.jsonl"
    done = run_portcheck("scan", "--format", "json-lines", "--output", str(out), EXAMPLE)
    assert done.returncode == 1 and done.stdout == ""
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(set(row) == FINDING_KEYS for row in rows)
    assert not list(tmp_path.glob(".report.jsonl.*")), "no temporary file left behind"


def test_full_format_shows_frame_reason_and_source():
    done = run_portcheck("scan", "--format", "full", EXAMPLE)
    assert done.returncode == 1
    assert "^^^^" in done.stdout and "on Neuron:" in done.stdout and "source: SDK:" in done.stdout
    assert "\x1b[" not in done.stdout, "no colour when not a terminal"


def test_statistics():
    done = run_portcheck("scan", "--statistics", EXAMPLE)
    assert "PC101  cuda-tensor-placement" in done.stdout and "cuda-api" in done.stdout


def test_target_and_stack_change_the_advice():
    inf2 = run_portcheck("scan", "--target", "inf2", "--format", "json", EXAMPLE)
    report = json.loads(inf2.stdout)
    assert report["target"] == {"chip": "inf2", "stack": "xla", "sdk": "2.34"}
    assert any("torch_xla.device()" in f["message"] for f in report["findings"])
    bad = run_portcheck("scan", "--target", "inf2", "--stack", "native", EXAMPLE)
    assert bad.returncode == 2 and "does not run on inf2" in bad.stderr and "Traceback" not in bad.stderr


def test_clean_file_exits_zero(tmp_path):
    write(tmp_path / "ok.py", "import torch\nx = torch.zeros(2).to('neuron')\n")
    done = run_portcheck("scan", "ok.py", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("All checks passed")


def test_fail_level_and_exit_zero(tmp_path):
    write(tmp_path / "w.py", "import torch\nok = torch.cuda.is_available()\n")  # a warning only
    assert run_portcheck("scan", "w.py", cwd=tmp_path).returncode == 1
    assert run_portcheck("scan", "--fail-level", "error", "w.py", cwd=tmp_path).returncode == 0
    write(tmp_path / "e.py", "x = y.cuda()\n")
    assert run_portcheck("scan", "--exit-zero", "e.py", cwd=tmp_path).returncode == 0


def test_missing_path_is_one_line_and_exit_2(tmp_path):
    done = run_portcheck("scan", "nope.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "portcheck: error: nope.py: no such file or directory"


def test_unreadable_and_broken_files_are_error_entries(tmp_path):
    write(tmp_path / "good.py", "x = y.cuda()\n")
    write(tmp_path / "broken.py", "def f(:\n    pass\n")
    (tmp_path / "latin.py").write_bytes(b"x = '\xe9'\n")
    (tmp_path / "blob.py").write_bytes(b"\x00\x01\x02binary")
    # thousands of nested brackets crash libcst's native parser: Python's parser must refuse them first
    write(tmp_path / "deep.py", "x = " + "(" * 5000 + "y.cuda()" + ")" * 5000 + "\n")
    write(tmp_path / "long.py", "x = " + "+".join(["a"] * 100_000) + "\n")
    done = run_portcheck("scan", "--format", "json", ".", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    errors = {e["path"]: e for e in report["errors"]}
    assert set(errors) == {"broken.py", "latin.py", "blob.py", "deep.py", "long.py"}
    assert "nested" in errors["deep.py"]["message"] and "nested" in errors["long.py"]["message"]
    assert errors["broken.py"]["line"] == 1 and "syntax error" in errors["broken.py"]["message"]
    assert "utf-8" in errors["latin.py"]["message"]
    assert "binary" in errors["blob.py"]["message"]
    assert [f["path"] for f in report["findings"]] == ["good.py"]
    concise = run_portcheck("scan", ".", cwd=tmp_path)
    assert "broken.py:1: error: syntax error" in concise.stdout


def test_coding_cookie_and_bom_are_honoured(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\nx = y.cuda()\n")
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbfx = y.cuda()\n")
    report = json.loads(run_portcheck("scan", "--format", "json", ".", cwd=tmp_path).stdout)
    assert report["errors"] == []
    assert sorted((f["path"], f["line"], f["column"]) for f in report["findings"]) == [
        ("bom.py", 1, 5), ("latin.py", 3, 5)]


def test_stdin(tmp_path):
    done = run_portcheck("scan", "-", "--stdin-filename", "models/net.py", stdin="x = y.cuda()\n", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("models/net.py:1:5: PC101")


def test_config_discovery_select_and_per_file_ignores(tmp_path):
    write(tmp_path / "pyproject.toml", """
        [tool.portcheck]
        ignore = ["PC109"]
        per-file-ignores = { "tests/*" = ["PC1"] }
    """)
    code = "import torch\ntorch.backends.cudnn.benchmark = True\nx = y.cuda()\n"
    write(tmp_path / "src" / "a.py", code)
    write(tmp_path / "tests" / "t.py", code)
    done = run_portcheck("scan", "--format", "json", ".", cwd=tmp_path / "src")
    assert [f["code"] for f in json.loads(done.stdout)["findings"]] == ["PC101"], "found from a subdirectory"
    done = run_portcheck("scan", "--format", "json", ".", cwd=tmp_path)
    assert [(f["path"], f["code"]) for f in json.loads(done.stdout)["findings"]] == [("src/a.py", "PC101")]
    # the command line overrides the file
    done = run_portcheck("scan", "--format", "json", "--select", "PC109", "src", cwd=tmp_path)
    assert [f["code"] for f in json.loads(done.stdout)["findings"]] == ["PC109"]
    done = run_portcheck("scan", "--format", "json", "--isolated", "src", cwd=tmp_path)
    assert sorted(f["code"] for f in json.loads(done.stdout)["findings"]) == ["PC101", "PC109"]


def test_portcheck_toml_and_explicit_config(tmp_path):
    write(tmp_path / "portcheck.toml", 'target = "inf2"\nselect = ["cuda-tensor-placement"]\n')
    write(tmp_path / "a.py", "import torch\ntorch.cuda.synchronize()\nx = y.cuda()\n")
    report = json.loads(run_portcheck("scan", "--format", "json", "a.py", cwd=tmp_path).stdout)
    assert report["target"]["chip"] == "inf2" and [f["code"] for f in report["findings"]] == ["PC101"]
    write(tmp_path / "other.toml", 'select = ["PC105"]\n')
    done = run_portcheck("scan", "--format", "json", "--config", "other.toml", "a.py", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert [f["code"] for f in report["findings"]] == ["PC105"]


def test_bad_configuration_is_exit_2_with_file_and_line(tmp_path):
    write(tmp_path / "a.py", "x = 1\n")
    cases = {
        '[tool.portcheck]\nselct = ["PC1"]\n': ("pyproject.toml:2: unknown key 'selct'", "did you mean 'select'"),
        '[tool.portcheck]\nselect = ["PC11O"]\n': ("pyproject.toml:2: unknown rule selector 'PC11O'", "PC110"),
        '[tool.portcheck]\nselect = "PC1"\n': ("pyproject.toml:2: 'select' must be a list of strings", ""),
        '[tool.portcheck]\nselect = [\n': ("error: pyproject.toml:2: invalid TOML", ""),
    }
    for text, (expected, hint) in cases.items():
        (tmp_path / "pyproject.toml").write_text(text)
        done = run_portcheck("scan", "a.py", cwd=tmp_path)
        assert done.returncode == 2, text
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert expected in done.stderr and hint in done.stderr, done.stderr
        assert str(tmp_path) not in done.stderr, "the config file is named relative to the working directory"
    (tmp_path / "pyproject.toml").unlink()
    done = run_portcheck("scan", "--ignore", "PC1O1", "a.py", cwd=tmp_path)
    assert done.returncode == 2 and "did you mean" in done.stderr and "PC101" in done.stderr


def test_suppressions_end_to_end(tmp_path):
    write(tmp_path / "s.py", """
        import torch
        a = torch.zeros(2).cuda()  # noqa: PC101
        b = torch.zeros(
            2, device="cuda")  # portcheck: ignore[PC103]
        c = torch.zeros(2)  # noqa: PC101
    """)
    report = json.loads(run_portcheck("scan", "--format", "json", "s.py", cwd=tmp_path).stdout)
    assert [(f["code"], f["line"]) for f in report["findings"]] == [("PC900", 6)]
    write(tmp_path / "f.py", "# portcheck: noqa\nx = y.cuda()\n")
    assert run_portcheck("scan", "f.py", cwd=tmp_path).returncode == 0


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_gitignore_exclude_and_force_exclude(tmp_path):
    git(tmp_path, "init", "-q")
    write(tmp_path / ".gitignore", "generated/\n")
    bad = "x = y.cuda()\n"
    write(tmp_path / "src" / "a.py", bad)
    write(tmp_path / "generated" / "g.py", bad)
    write(tmp_path / "vendor" / "v.py", bad)
    write(tmp_path / "stub.pyi", bad)
    write(tmp_path / "notes.txt", bad)
    write(tmp_path / "portcheck.toml", 'extend-exclude = ["vendor"]\n')

    def paths(*args):
        done = run_portcheck("scan", "--format", "json", *args, cwd=tmp_path)
        return sorted({f["path"] for f in json.loads(done.stdout)["findings"]})

    assert paths(".") == ["src/a.py", "stub.pyi"]
    assert paths(".", "--no-respect-gitignore") == ["generated/g.py", "src/a.py", "stub.pyi"]
    # explicit files are read (as ruff does) unless --force-exclude, which pre-commit relies on
    assert paths("vendor/v.py", "generated/g.py") == ["generated/g.py", "vendor/v.py"]
    assert paths("--force-exclude", "vendor/v.py", "generated/g.py", "src/a.py") == ["src/a.py"]


def test_rules_and_rule_commands():
    table = run_portcheck("rules")
    assert table.returncode == 0 and "PC101  cuda-tensor-placement" in table.stdout
    rows = json.loads(run_portcheck("rules", "--format", "json").stdout)
    assert {r["code"] for r in rows} >= {f"PC1{n:02d}" for n in range(1, 12)}
    doc = run_portcheck("rule", "pc104")
    assert doc.returncode == 0 and "## Why it matters on Neuron" in doc.stdout and "Source:" in doc.stdout
    assert run_portcheck("rule", "cuda-graph").stdout.startswith("# PC108 cuda-graph")
    unknown = run_portcheck("rule", "PC10")
    assert unknown.returncode == 2 and "unknown rule 'PC10'" in unknown.stderr
    # a code cut short suggests the codes it begins, not look-alikes from other families (PC310, PC210)
    assert "did you mean PC101 or PC102 or PC103?" in unknown.stderr
    assert "did you mean PC701 or PC702 or PC703?" in run_portcheck("rule", "PC7").stderr
    assert "did you mean PC110 or PC111 or PC112?" in run_portcheck("rule", "PC11O").stderr  # a typo: its neighbours


def test_static_pass_never_imports_torch():
    probe = (
        "import sys; from portcheck.cli import main; code = main(['scan', '--exit-zero', 'fixtures']);"
        "sys.stdout.write(repr(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_scan_does_not_run_the_scanned_code(tmp_path):
    marker = tmp_path / "ran"
    write(tmp_path / "evil.py", f"open({str(marker)!r}, 'w').write('x')\nimport torch\nx = y.cuda()\n")
    assert run_portcheck("scan", "evil.py", cwd=tmp_path).returncode == 1
    assert not marker.exists()


def test_colour_only_when_asked_for_and_no_color_wins(tmp_path):
    write(tmp_path / "a.py", "x = y.cuda()\n")
    forced = run_portcheck("scan", "a.py", cwd=tmp_path, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert "\x1b[" in forced.stdout
    assert "\x1b[" not in run_portcheck("scan", "a.py", cwd=tmp_path, env={"FORCE_COLOR": "1"}).stdout


def test_parallel_scan_gives_the_same_report_in_the_same_order():
    one = run_portcheck("scan", "--isolated", "--format", "json", "-j", "1", "fixtures/static")
    two = run_portcheck("scan", "--isolated", "--format", "json", "-j", "2", "fixtures/static")
    assert one.returncode == two.returncode == 1
    assert json.loads(one.stdout)["summary"]["files"] >= 20
    assert one.stdout == two.stdout
    bad = run_portcheck("scan", "-j", "0", "fixtures/static")
    assert bad.returncode == 2 and "--jobs must be 1 or more" in bad.stderr


def test_test_files_are_left_out_unless_included(tmp_path):
    """`tests = "exclude"` (the default) skips test files found in folders; `--tests include` or the config key
    reads them; a test folder named on the command line is read either way."""
    bad = "x = y.cuda()\n"
    for name in ("src/model.py", "tests/helpers.py", "conftest.py"):
        write(tmp_path / name, bad)
    for name in ("src/test_model.py", "src/model_test.py"):  # named and written as tests
        write(tmp_path / name, "import pytest\n" + bad)

    def paths(*args, cwd=tmp_path):
        done = run_portcheck("scan", "--format", "json", *args, cwd=cwd)
        return sorted({f["path"] for f in json.loads(done.stdout)["findings"]})

    everything = ["conftest.py", "src/model.py", "src/model_test.py", "src/test_model.py", "tests/helpers.py"]
    assert paths(".") == ["src/model.py"]
    assert paths("--tests", "include", ".") == everything
    assert paths("tests") == ["tests/helpers.py"]
    write(tmp_path / "portcheck.toml", 'tests = "include"\n')
    assert paths(".") == everything
    write(tmp_path / "portcheck.toml", 'tests = "some"\n')
    done = run_portcheck("scan", ".", cwd=tmp_path)
    assert done.returncode == 2 and "unknown tests setting 'some'" in done.stderr


def test_statistics_align_both_tables_on_one_count_column(tmp_path):
    # two codes found 5 times each, one category found 10 times: the category's count sets the column's width
    lines = [f"x{i} = torch.zeros(3).cuda()\nd{i} = torch.device('cuda')" for i in range(5)]
    (tmp_path / "m.py").write_text("import torch\n" + "\n".join(lines) + "\n", encoding="utf-8")
    done = run_portcheck("scan", "--isolated", "--no-cache", "--statistics", "--select", "PC101,PC102",
                         str(tmp_path / "m.py"))
    rows = [line for line in done.stdout.splitlines() if "PC10" in line or line.endswith("cuda-api")]
    assert rows == [" 5  PC101  cuda-tensor-placement", " 5  PC102  cuda-device-object", "10  cuda-api"]


# ---- what a new user tripped on (issue 31) -------------------------------------------------------------------


def test_concise_lines_carry_the_severity_and_the_summary_says_how_many_files_had_findings(tmp_path):
    write(tmp_path / "a.py", "import torch\nx = torch.zeros(2).cuda()\ntorch.backends.cudnn.benchmark = True\n")
    write(tmp_path / "clean.py", "import torch\nx = torch.zeros(2)\n")
    done = run_portcheck("scan", "--isolated", "--no-cache", str(tmp_path), cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert any(": PC101 error: " in line for line in lines) and any(": PC109 info: " in line for line in lines)
    assert " in 1 of 2 files. " in lines[-1]
    alone = run_portcheck("scan", "--isolated", "--no-cache", str(tmp_path / "a.py"), cwd=tmp_path)
    assert " in 1 file. " in alone.stdout.splitlines()[-1]


def test_statistics_in_json_are_the_counts(tmp_path):
    write(tmp_path / "a.py", "import torch\nx = torch.zeros(2).cuda()\ny = torch.zeros(2).cuda()\n")
    done = run_portcheck("scan", "--isolated", "--no-cache", "--statistics", "--format", "json", str(tmp_path),
                         cwd=tmp_path)
    statistics = json.loads(done.stdout)["statistics"]
    assert statistics["by_code"] == [{"code": "PC101", "name": "cuda-tensor-placement", "count": 2}]
    assert statistics["findings"] == 2 and statistics["files"] == statistics["files_with_findings"] == 1
    assert "findings" not in json.loads(done.stdout)


def test_the_progress_bar_hides_while_files_are_found_and_for_one_file(monkeypatch):
    import rich.progress

    from portcheck.report import trace

    calls = []

    class Recording:
        def __init__(self, *columns, **options):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def add_task(self, description, **fields):
            calls.append(("add", fields.get("visible", True)))
            return 0

        def update(self, task, **fields):
            calls.append(("update", fields.get("visible", True)))

    monkeypatch.setattr(trace, "_shown_progress", lambda output_format: True)
    monkeypatch.setattr(rich.progress, "Progress", Recording)
    with trace.file_progress("concise") as advance:
        advance(1, 1, "one.py")
        advance(1, 2, "a.py")
    assert calls == [("add", False), ("update", False), ("update", True)]


def test_server_without_its_extra_is_one_line_and_exit_2():
    # pygls missing (the `server` extra not installed): what to install, not an ImportError's traceback
    code = ("import sys; sys.modules['pygls'] = None; from portcheck.cli import main; "
            "sys.exit(main(['server']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("portcheck: error: the language server needs pygls and lsprotocol: "
                           "pip install 'portcheck[server]'\n")
