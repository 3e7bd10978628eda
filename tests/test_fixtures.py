"""Every fixture file under fixtures/static/: the `# expect: PCxxx` lines fire those codes, every other
line stays quiet.

A marker may be limited to a chip or a stack, `# expect(inf2): PC607` or `# expect(xla): PC703`, for rules
that differ by target. Each fixture is checked on trn2 with the native stack and on inf2 with the xla
stack, or only on the targets its `# fixture-targets: trn2:native trn1:xla` line names.

Rules run as a user gets them: the default set, plus an off-by-default rule when the fixture expects it or
names it on a `# fixture-select: PC315` line (so a quiet fixture can prove an opt-in rule stays quiet).
"""

import re
from pathlib import Path

import pytest

from portcheck.knowledge import load
from portcheck.rules import Pass, registry
from portcheck.static.engine import FileJob, analyse_file
from portcheck.static.manifests import kind
from portcheck.static.semantic.graph import apply

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "static"
EXPECT = re.compile(r"#\s*expect(?:\((?P<where>[\w-]+)\))?:\s*(?P<codes>PC\d{3}(?:\s*,\s*PC\d{3})*)")
TARGETS_LINE = re.compile(r"#\s*fixture-targets:\s*(.+)")
SELECT_LINE = re.compile(r"#\s*fixture-select:\s*(.+)")
DEFAULT_TARGETS = (("trn2", "native"), ("inf2", "xla"))


def expected(path: Path, chip: str | None = None, stack: str | None = None) -> set[tuple[int, str]]:
    """(line, code) pairs the fixture expects; with no chip and stack, every marker whatever its target."""
    out = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in EXPECT.finditer(line):
            where = match.group("where")
            if where is None or chip is None or where in (chip, stack):
                out |= {(number, code.strip()) for code in match.group("codes").split(",")}
    return out


def targets(path: Path) -> tuple[tuple[str, str], ...]:
    match = TARGETS_LINE.search(path.read_text(encoding="utf-8"))
    if not match:
        return DEFAULT_TARGETS
    return tuple(tuple(item.split(":")) for item in match.group(1).split())  # type: ignore[misc]


def enabled(path: Path, chip: str, stack: str) -> frozenset[str]:
    knowledge = load()
    opted = {code for _, code in expected(path)}
    for match in SELECT_LINE.finditer(path.read_text(encoding="utf-8")):
        opted |= {code.strip() for code in match.group(1).split(",")}
    return frozenset(code for code in knowledge.applicable(chip, stack)
                     if knowledge.rules[code].default or code in opted)


# Python fixtures, and dependency files (requirements*.txt, pyproject.toml, environment.yml) whose `#` comments
# carry the same markers.
FILES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and (p.suffix == ".py" or kind(p.as_posix())))
CASES = [(path, target) for path in FILES for target in targets(path)]


def test_fixture_tree_is_not_empty():
    assert len(FILES) >= 4


@pytest.mark.parametrize(("path", "target"), CASES,
                         ids=[f"{p.relative_to(FIXTURES)}-{c}-{s}" for p, (c, s) in CASES])
def test_fixture(path: Path, target: tuple[str, str]):
    chip, stack = target
    (result,), _ = apply([analyse_file(FileJob(path=str(path), chip=chip, stack=stack,
                                               enabled=enabled(path, chip, stack), location=str(path)))])
    assert result.errors == ()
    got = {(f.line, f.code) for f in result.findings}
    want = expected(path, chip, stack)
    assert sorted(got - want) == [], "fired where the fixture expects quiet"
    assert sorted(want - got) == [], "quiet where the fixture expects a finding"


@pytest.mark.parametrize("code", sorted(c for c, r in registry().items() if c != "PC900" and Pass.STATIC in r.passes))
def test_every_rule_has_a_firing_fixture_in_its_category_folder(code):
    # Rules only `trace` reports have their firing models in fixtures/models/ (tests/test_trace.py).
    category = load().rules[code].category
    folder = FIXTURES / category
    fired = {c for path in folder.rglob("*") if path in FILES for _, c in expected(path)}
    assert code in fired, f"no fixture under fixtures/static/{category}/ fires {code}"


def test_every_category_folder_has_a_quiet_fixture():
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        assert any(not expected(path) for path in folder.rglob("*.py")), f"{folder.name} has no all-quiet fixture"
