""".ci/run, whose exit status is CI's verdict: it runs the README's test command, and a run in which pytest collected
no test (exit 5) is a failure. The script runs here against stand-ins for python3, the venv's pip and python (no
venv is made, nothing is installed), so what is tested is the script's own logic."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# python3 -m venv DIR makes DIR/bin/pip and DIR/bin/python; each records its arguments, and python exits with
# PYTEST_STATUS when it is asked to run pytest.
PYTHON3 = """#!/bin/sh
[ "$1 $2" = "-m venv" ] || exit 90
mkdir -p "$3/bin"
printf '#!/bin/sh\\necho "pip $*" >> "$CALLS"\\n' > "$3/bin/pip"
printf '#!/bin/sh\\necho "python $*" >> "$CALLS"\\n[ "$1 $2" = "-m pytest" ] && exit "$PYTEST_STATUS"\\nexit 0\\n' \\
  > "$3/bin/python"
chmod +x "$3/bin/pip" "$3/bin/python"
"""


def _ci_run(tmp_path: Path, pytest_status: int) -> tuple[subprocess.CompletedProcess, list[str]]:
    checkout = tmp_path / "checkout"
    (checkout / ".ci").mkdir(parents=True)
    shutil.copy2(ROOT / ".ci" / "run", checkout / ".ci" / "run")
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    for name, text in (("python3", PYTHON3), ("chromium", "#!/bin/sh\nexit 0\n")):  # chromium: nothing to install
        (stand_ins / name).write_text(text)
        (stand_ins / name).chmod(0o755)
    calls = tmp_path / "calls"
    env = {"PATH": f"{stand_ins}:/usr/bin:/bin", "CALLS": str(calls), "PYTEST_STATUS": str(pytest_status)}
    done = subprocess.run([str(checkout / ".ci" / "run")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    return done, calls.read_text().splitlines()


@pytest.mark.parametrize("status", [0, 1, 2])
def test_ci_passes_on_pytests_status(tmp_path, status):
    done, calls = _ci_run(tmp_path, status)
    assert done.returncode == status, done.stderr
    assert calls == ["pip install -q -e .[dev]", "python -m pytest"]
    assert "collected no tests" not in done.stderr


def test_ci_fails_when_pytest_collected_no_test(tmp_path):
    done, calls = _ci_run(tmp_path, 5)
    assert done.returncode == 5
    assert calls[-1] == "python -m pytest"
    assert ".ci/run: pytest collected no tests" in done.stderr


def test_ci_runs_the_readmes_test_command():
    readme = re.search(r"## Run the tests.*?```sh\n(.+?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert readme, "README.md lost its test command"
    assert readme.group(1) in (ROOT / ".ci" / "run").read_text().splitlines()
