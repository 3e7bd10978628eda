"""`portcheck scan --fix / --diff / --unsafe-fixes / --fix-only / --show-fixes`, run as a user runs them, on
real files in temporary directories: what is written, what is kept (mode, encoding, BOM, line endings), and
what is refused (a file changed since it was read, a fix that would not compile)."""

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

from portcheck.findings import Edit, Finding, Fix, Severity
from portcheck.knowledge import load
from portcheck.static import rewrite
from portcheck.static.engine import FileJob
from tests.conftest import ROOT, run_portcheck

SAFE = 'import torch\nmodel = torch.compile(model, backend="neuronx")  # keep this comment\n'
SAFE_FIXED = 'import torch\nmodel = torch.compile(model, backend="neuron")  # keep this comment\n'
UNSAFE = "import torch\nx = torch.zeros(3).double()\n"


def write(path: Path, text: str, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), **kwargs)
    return path


def test_fix_writes_the_safe_fix_and_keeps_the_rest(tmp_path):
    target = write(tmp_path / "m.py", SAFE + UNSAFE.split("\n", 1)[1])
    done = run_portcheck("scan", "--fix", "--isolated", "m.py", cwd=tmp_path)
    assert target.read_text() == SAFE_FIXED + "x = torch.zeros(3).double()\n"
    assert done.returncode == 1, "the unsafe finding remains"
    assert "1 fixed, 1 remaining (1 with an unsafe fix: --unsafe-fixes)." in done.stdout
    assert "PC303" in done.stdout and "PC714" not in done.stdout


def test_unsafe_fixes_and_show_fixes(tmp_path):
    target = write(tmp_path / "m.py", SAFE + "x = torch.zeros(3).double()\n")
    done = run_portcheck("scan", "--fix", "--unsafe-fixes", "--show-fixes", "--isolated", "m.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "x = torch.zeros(3).float()" in target.read_text()
    assert "fixed m.py:2:" in done.stdout and "fixed m.py:3:" in done.stdout
    assert "2 fixed, 0 remaining." in done.stdout


def test_diff_writes_nothing_and_exits_1(tmp_path):
    target = write(tmp_path / "m.py", SAFE)
    done = run_portcheck("scan", "--diff", "--isolated", "m.py", cwd=tmp_path)
    assert done.returncode == 1
    assert target.read_text() == SAFE
    assert "--- a/m.py" in done.stdout and '-model = torch.compile(model, backend="neuronx")' in done.stdout
    assert '+model = torch.compile(model, backend="neuron")  # keep this comment' in done.stdout
    assert "1 to fix" in done.stderr
    clean = write(tmp_path / "clean.py", SAFE_FIXED)
    done = run_portcheck("scan", "--diff", "--isolated", str(clean.name), cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == ""


def test_fix_only_exits_0_and_fixing_twice_is_fixing_once(tmp_path):
    target = write(tmp_path / "m.py", SAFE + "x = torch.zeros(3).double()\n")
    done = run_portcheck("scan", "--fix-only", "--isolated", "m.py", cwd=tmp_path)
    assert done.returncode == 0 and "1 fixed, 1 remaining." in done.stdout
    once = target.read_bytes()
    done = run_portcheck("scan", "--fix-only", "--isolated", "m.py", cwd=tmp_path)
    assert target.read_bytes() == once and "0 fixed" in done.stdout


def test_mode_encoding_bom_and_line_endings_are_kept(tmp_path):
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(SAFE.replace("\n", "\r\n").encode())
    os.chmod(crlf, 0o640)
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n# café\n" + SAFE).encode("latin-1"))
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + SAFE.encode())
    done = run_portcheck("scan", "--fix", "--isolated", ".", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert crlf.read_bytes() == SAFE_FIXED.replace("\n", "\r\n").encode()
    assert stat.S_IMODE(crlf.stat().st_mode) == 0o640
    assert latin.read_bytes() == ("# -*- coding: latin-1 -*-\n# café\n" + SAFE_FIXED).encode("latin-1")
    assert bom.read_bytes() == b"\xef\xbb\xbf" + SAFE_FIXED.encode()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")], "no temporary file left behind"


def test_stdin_fix_prints_the_fixed_source(tmp_path):
    done = run_portcheck("scan", "--fix", "--isolated", "-", "--stdin-filename", "m.py", stdin=SAFE, cwd=tmp_path)
    assert done.stdout == SAFE_FIXED
    assert done.returncode == 0 and "1 fixed, 0 remaining." in done.stderr


def test_a_file_changed_since_it_was_read_is_not_written(tmp_path):
    target = write(tmp_path / "m.py", SAFE)
    read = target.read_bytes()
    target.write_text(SAFE + "# edited meanwhile\n")
    problem = rewrite.replace_if_unchanged(target, SAFE_FIXED, "utf-8", read)
    assert problem is not None and "changed on disk" in problem
    assert target.read_text() == SAFE + "# edited meanwhile\n"


def test_a_fix_that_would_not_compile_is_never_written(tmp_path, monkeypatch):
    broken = Finding(code="PC714", name="x", category="compile", severity=Severity.WARNING, message="m",
                     path="m.py", line=2, column=1, end_line=2, end_column=6,
                     fix=Fix("safe", "break it", (Edit(2, 1, 2, 6, "model = = "),)))
    real_analyse = rewrite.analyse_text

    def analyse(text, *args):
        result = real_analyse(text, *args)
        return type(result)(result.path, (broken,), result.errors) if text == SAFE else result

    monkeypatch.setattr(rewrite, "analyse_text", analyse)
    job = FileJob(path="m.py", chip="trn2", stack="native", enabled=load().applicable("trn2", "native"))
    outcome = rewrite.fix_text(SAFE, job, unsafe=False)
    assert outcome.text is None and outcome.fixed == []
    assert outcome.result.errors and "would have broken the file" in outcome.result.errors[0].message


def test_fixing_the_shipped_examples_touches_only_fixed_lines(tmp_path):
    """benchmarks/fix_check.py on the examples: fixed copies compile, the fixed findings are gone from a rescan,
    and the diff holds only the lines of fixed findings and added imports (both targets)."""
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, "benchmarks/fix_check.py", "fixtures/examples/", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text())
    assert len(rows) == 4 and all(r["compiles"] and r["only_fixed_lines"] for r in rows)
    assert sum(r["fixed"] for r in rows) >= 8, "the examples exercise real fixes"
    assert all(r["remaining_fixable"] == 0 for r in rows), "nothing fixable is left after --unsafe-fixes"


def test_fixes_that_clash_are_applied_one_at_a_time(monkeypatch):
    """Two deletions, each fine alone, would together empty a block: one is applied, the file still compiles."""
    text = "if flag:\n    a = 1\n    b = 2\n"

    def deletion(line: int) -> Finding:
        return Finding(code="PC109", name="x", category="cuda-api", severity=Severity.WARNING, message="m",
                       path="m.py", line=line, column=5, end_line=line, end_column=10,
                       fix=Fix("safe", "delete", (Edit(line, 1, line + 1, 1, ""),)))

    real_analyse = rewrite.analyse_text

    def analyse(source, *args):
        result = real_analyse(source, *args)
        return type(result)(result.path, (deletion(2), deletion(3)), ()) if source == text else result

    monkeypatch.setattr(rewrite, "analyse_text", analyse)
    job = FileJob(path="m.py", chip="trn2", stack="native", enabled=load().applicable("trn2", "native"))
    outcome = rewrite.fix_text(text, job, unsafe=False)
    assert outcome.text == "if flag:\n    b = 2\n" and len(outcome.fixed) == 1
    assert outcome.result.errors == ()


def test_an_edit_two_fixes_share_counts_for_both(tmp_path):
    source = 'import torch\nDEVICE = "cuda"\nx = torch.zeros(2).to(DEVICE)\ny = torch.ones(2).to(DEVICE)\n'
    write(tmp_path / "m.py", source)
    done = run_portcheck("scan", "--fix", "--isolated", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_text() == source.replace('"cuda"', '"neuron"')
    assert "2 fixed, 0 remaining." in done.stdout, done.stdout
