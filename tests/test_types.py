"""portcheck's own types: mypy passes on portcheck/ with the settings of pyproject.toml's [tool.mypy], and every
`# type: ignore` left in the code names the error it silences and says why."""

import importlib.util
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "portcheck"

# `# type: ignore[code]  # why` or `# type: ignore[code, other]  # why`: the codes, then a comment of its own.
_IGNORE = re.compile(r"#\s*type:\s*ignore\[[a-z0-9-]+(?:,\s*[a-z0-9-]+)*\]\s+#\s*\S")
_MENTION = re.compile(r"type:\s*ignore")


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (it is in the dev extra: pip install -e '.[dev]')")
def test_mypy_passes_on_portcheck():
    # A cold cache reads torch's own annotations: minutes; .mypy_cache makes the later runs seconds.
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"mypy failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"


def _comments(path: Path) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return [(token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]


def test_every_type_ignore_names_its_error_and_a_reason():
    bare = [f"{path.relative_to(ROOT)}:{line}: {comment}"
            for path in sorted(PACKAGE.rglob("*.py")) for line, comment in _comments(path)
            if _MENTION.search(comment) and not _IGNORE.match(comment)]
    assert bare == [], "a `# type: ignore` needs its error code and a reason: `# type: ignore[code]  # why`"


def test_the_ignore_check_itself_can_fail():
    assert _IGNORE.match("# type: ignore[arg-type]  # a stand-in for libcst's provider")
    assert _IGNORE.match("# type: ignore[union-attr, arg-type]  # why")
    for wrong in ("# type: ignore", "# type: ignore[arg-type]", "# type: ignore  # why",
                  "# type: ignore[arg-type] why", "# reason  # type: ignore[arg-type]"):
        assert not _IGNORE.match(wrong), wrong
