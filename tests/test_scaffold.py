"""scripts/add_rule.py makes a rule skeleton that passes the rule tests as it is, and refuses what it must.

The skeletons are made in a copy of the checkout (portcheck/, rules/, fixtures/, tests/, scripts/, pyproject.toml),
never in this one: one rule in a new module, one added to an existing module (`--module`). The copy's rule tests run
in a child process with the copy first on PYTHONPATH.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from portcheck.knowledge import load

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("portcheck", "rules", "fixtures", "tests", "scripts", "pyproject.toml")
EXPECT = re.compile(r"#\s*expect:\s*PC\d{3}")
RULE_TESTS = ("tests/test_rules.py", "tests/test_fixtures.py", "tests/test_fix_pairs.py")


def copy_checkout(to: Path) -> Path:
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, to / name, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
        else:
            shutil.copy2(source, to / name)
    return to


def run(checkout: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(checkout), "NO_COLOR": "1", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    return subprocess.run([sys.executable, *args], cwd=checkout, capture_output=True, text=True, env=env,
                          timeout=timeout)


def add_rule(checkout: Path, *args: str) -> subprocess.CompletedProcess:
    return run(checkout, "scripts/add_rule.py", *args)


def free_codes(count: int) -> list[str]:
    """Codes of the unsupported-op family that nothing uses (highest first, away from the real ones)."""
    used = set(load().rules) | set(load().retired)
    return [code for code in (f"PC3{n:02d}" for n in range(99, 0, -1)) if code not in used][:count]


INIT = "portcheck/static/unsupported_op/__init__.py"


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory) -> tuple[Path, list[str]]:
    checkout = copy_checkout(tmp_path_factory.mktemp("scaffold"))
    new, appended = free_codes(2)
    done = add_rule(checkout, "--code", new, "--name", "scaffold-probe", "--category", "unsupported-op",
                    "--severity", "warning")
    assert done.returncode == 0, done.stderr
    done = add_rule(checkout, "--code", appended, "--name", "scaffold-probe-two", "--category", "unsupported-op",
                    "--severity", "error", "--module", "sort")
    assert done.returncode == 0, done.stderr
    return checkout, [new, appended]


def test_the_skeletons_pass_the_rule_tests(scaffolded):
    checkout, codes = scaffolded
    where = run(checkout, "-c", "import portcheck; print(portcheck.__file__)")
    assert where.stdout.strip().startswith(str(checkout)), "the child must import the copy's portcheck"
    # Every rule's tests, and the fixtures of the category the skeletons went into (the other fixtures are the
    # suite's own test_fixtures.py, which this copy does not change).
    done = run(checkout, "-m", "pytest", "-v", "-x", "-p", "no:cacheprovider", "-o", "addopts=", "-k",
               "not test_fixture or unsupported or firing_fixture or fixture_tree", *RULE_TESTS, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    for code in codes:  # the new rules were among those tested
        for test in ("test_invalid_examples_fire", "test_valid_examples_stay_quiet", "test_docs_have_the_sections",
                     "test_every_rule_has_a_firing_fixture_in_its_category_folder"):
            assert f"::{test}[{code}] PASSED" in done.stdout, (test, code)


def test_the_new_rules_are_listed_and_fire_on_their_fixtures(scaffolded):
    checkout, codes = scaffolded
    listed = run(checkout, "-m", "portcheck", "rules", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    rules = {r["code"]: r for r in json.loads(listed.stdout)}
    assert rules[codes[0]]["name"] == "scaffold-probe" and rules[codes[1]]["severity"] == "error"
    for code, fixture in zip(codes, ("scaffold_probe.py", "scaffold_probe_two.py"), strict=True):
        path = f"fixtures/static/unsupported-op/{fixture}"
        scanned = run(checkout, "-m", "portcheck", "scan", "--isolated", "--no-cache", "--format", "json", path)
        found = [(f["code"], f["line"]) for f in json.loads(scanned.stdout)["findings"]]
        marked = [n for n, line in enumerate((checkout / path).read_text().splitlines(), 1) if EXPECT.search(line)]
        assert found == [(code, line) for line in marked] and marked, found


def test_a_new_module_is_found_without_a_line_in_the_package_init(scaffolded):
    """The registry lists the category's package: the scaffold's new module is registered (the two tests above) and
    the package's `__init__.py` is the checkout's, byte for byte."""
    checkout, _ = scaffolded
    assert (checkout / "portcheck/static/unsupported_op/scaffold_probe.py").is_file()
    assert (checkout / INIT).read_bytes() == (ROOT / INIT).read_bytes()


def test_the_skeletons_are_ruff_clean(scaffolded):
    checkout, _ = scaffolded
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the dev extra)")
    done = subprocess.run([ruff, "check", "--no-cache", "portcheck/static/unsupported_op/"], cwd=checkout,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def digest(checkout: Path) -> str:
    h = hashlib.sha256()
    for folder in ("portcheck", "rules", "fixtures"):
        for path in sorted((checkout / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(checkout)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return copy_checkout(tmp_path_factory.mktemp("refusals"))


# case -> (arguments, what the one line says)
REFUSALS = {
    "code in use": (["--code", "PC301", "--name", "brand-new", "--category", "unsupported-op"], "already used"),
    "name in use": (["--code", "{free}", "--name", "fft", "--category", "unsupported-op"], "name fft is already used"),
    "not PC and three digits": (["--code", "PC30", "--name", "brand-new", "--category", "unsupported-op"], "bad code"),
    "not PC": (["--code", "XY399", "--name", "brand-new", "--category", "unsupported-op"], "bad code"),
    "outside the family": (["--code", "PC199", "--name", "brand-new", "--category", "unsupported-op"],
                           "outside the unsupported-op family"),
    "unknown category": (["--code", "{free}", "--name", "brand-new", "--category", "gpu-stuff"], "unknown category"),
    "advise-only category": (["--code", "PC899", "--name", "brand-new", "--category", "memory"], "portcheck advise"),
    "bad name": (["--code", "{free}", "--name", "Brand_New", "--category", "unsupported-op"], "bad name"),
    "module exists": (["--code", "{free}", "--name", "sort", "--category", "unsupported-op"], "--module sort"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_are_one_line_exit_2_and_write_nothing(case, pristine):
    before = digest(pristine)
    arguments, reason = REFUSALS[case]
    args = [arg.format(free=free_codes(1)[0]) for arg in arguments]
    done = add_rule(pristine, *args, "--severity", "warning")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1 and done.stderr.startswith("add_rule: ")
    assert reason in done.stderr, done.stderr
    assert digest(pristine) == before
