"""Every fixture file under fixtures/static/: the `# expect: PCxxx` lines fire those codes, every other
line stays quiet."""

import re
from pathlib import Path

import pytest

from portcheck.knowledge import load
from portcheck.static.engine import FileJob, analyse_file

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "static"
EXPECT = re.compile(r"#\s*expect:\s*(PC\d{3}(?:\s*,\s*PC\d{3})*)")


def expected(path: Path) -> set[tuple[int, str]]:
    out = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = EXPECT.search(line)
        if match:
            out |= {(number, code.strip()) for code in match.group(1).split(",")}
    return out


FILES = sorted(FIXTURES.rglob("*.py"))


def test_fixture_tree_is_not_empty():
    assert len(FILES) >= 4


@pytest.mark.parametrize("stack", ["native", "xla"])
@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture(path: Path, stack: str):
    result = analyse_file(FileJob(path=str(path), stack=stack, enabled=frozenset(load().rules), location=str(path)))
    assert result.errors == ()
    got = {(f.line, f.code) for f in result.findings}
    want = expected(path)
    assert sorted(got - want) == [], "fired where the fixture expects quiet"
    assert sorted(want - got) == [], "quiet where the fixture expects a finding"


def test_every_cuda_api_rule_has_a_firing_fixture():
    codes = {code for path in FILES for _, code in expected(path)}
    family = {code for code, info in load().rules.items() if info.category == "cuda-api"}
    assert family <= codes, f"no fixture fires {sorted(family - codes)}"
