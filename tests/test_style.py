"""The project holds itself to its own bar: ruff clean, and `portcheck scan` of its own code quiet."""

import shutil
import subprocess

import pytest

from tests.conftest import ROOT


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(ROOT / ".venv" / "bin")) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the dev extra)")
    done = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_portcheck_scans_its_own_code_quiet(portcheck):
    done = portcheck("scan", "portcheck/", "benchmarks/")
    assert done.returncode == 0, done.stdout + done.stderr
