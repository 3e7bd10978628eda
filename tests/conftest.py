import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# Runs share one results cache outside the checkout (tests of the cache itself choose their own).
CACHE = Path(tempfile.mkdtemp(prefix="portcheck-test-cache-"))


def run_portcheck(*args, cwd=None, stdin=None, env=None):
    """portcheck as a user runs it: a child process, its exit code, stdout and stderr."""
    full_env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    full_env.update({"NO_COLOR": "1", "PORTCHECK_CACHE_DIR": str(CACHE), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "portcheck", *args], cwd=cwd or ROOT, input=stdin,
        capture_output=True, text=isinstance(stdin, str) or stdin is None, env=full_env, timeout=120,
    )


@pytest.fixture
def portcheck():
    return run_portcheck
