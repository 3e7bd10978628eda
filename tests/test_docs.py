"""Documents that are generated stay generated: README.md's rule counts and table are the catalog's
(`portcheck rules --format markdown`, written by scripts/readme_rules.py)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_rules():
    spec = importlib.util.spec_from_file_location("readme_rules", ROOT / "scripts" / "readme_rules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_rule_table_is_the_catalogs():
    readme_rules = _readme_rules()
    found = readme_rules.BLOCK.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, "README.md lost its rules:start / rules:end markers"
    assert found.group(0) == readme_rules.generated(), "stale: run .venv/bin/python scripts/readme_rules.py"


def test_the_markdown_format_of_rules_is_what_the_readme_holds():
    done = subprocess.run([sys.executable, "-m", "portcheck", "rules", "--format", "markdown"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{len(lines) - 4} rules in ")  # the sentence, a blank line, the header and rule
    assert "| PC315 | int64-tensor | dtype | info | scan | all | no | off |" in lines
    assert "| PC801 | exceeds-core-memory | memory | warning | advise | all | no | on |" in lines


def test_rules_shows_whether_a_rule_is_on_by_default():
    done = subprocess.run([sys.executable, "-m", "portcheck", "rules"], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    header, *rows = done.stdout.splitlines()
    assert header.split()[-1] == "default"
    assert {row.split()[0]: row.split()[-1] for row in rows}["PC315"] == "off"
    assert {row.split()[0]: row.split()[-1] for row in rows}["PC101"] == "on"
