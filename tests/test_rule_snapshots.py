"""A snapshot per static rule and fixture file, as Ruff keeps one per rule: what `portcheck scan --format full`
prints for the rule alone over each fixture file that expects it (fixtures/static/, `# expect: PCxxx` markers), and
what its `--diff` would change where the rule fixes. A change to a rule's wording, its positions, its source lines or
its fixes shows up as a diff of that rule's own file in tests/__snapshots__/test_rule_snapshots/, one file per
(rule, fixture) pair, named after them.

Each pair is scanned on the first target the fixture expects the rule on (its `# expect(inf2):` markers and
`# fixture-targets:` line, tests/test_fixtures.py). After an intended change:

    python -m pytest tests/test_rule_snapshots.py --snapshot-update

and review the diff of the snapshot files with the change.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from portcheck.cli import main
from portcheck.rules import Pass, registry
from tests.test_fixtures import FILES, expected, targets

ROOT = Path(__file__).resolve().parent.parent


class TextSnapshot(SingleFileSnapshotExtension):
    """One text file a snapshot, so that each rule's output is reviewed as a diff of its own file."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"


def _pairs() -> list[tuple[str, Path, str, str]]:
    """(code, fixture, chip, stack) for every static rule and every fixture file that expects it somewhere."""
    out = []
    for code, cls in registry().items():
        if Pass.STATIC not in cls.passes:
            continue
        for path in FILES:
            on = [(chip, stack) for chip, stack in targets(path) if code in {c for _, c in expected(path, chip, stack)}]
            if on:
                out.append((code, path, *on[0]))
    return out


PAIRS = _pairs()


def test_every_static_rule_with_a_fixture_has_snapshots():
    fired = {code for code, *_ in PAIRS}
    assert len(fired) >= 60 and all(len(code) == 5 for code in fired)


@pytest.fixture
def plain(monkeypatch, tmp_path):
    """No colour, a fixed width, no configuration or cache outside the test, the checkout as working directory (the
    fixture's path is printed relative to it)."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("PORTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize(("code", "path", "chip", "stack"), PAIRS,
                         ids=[f"{code}-{path.relative_to(ROOT / 'fixtures' / 'static').as_posix().replace('/', '-')}"
                              for code, path, *_ in PAIRS])
def test_rule(code: str, path: Path, chip: str, stack: str, plain, capsys, snapshot):
    scan = ["scan", "--isolated", "--no-cache", "--select", code, "--target", chip, "--stack", stack,
            path.relative_to(ROOT).as_posix()]
    exit_code = main([*scan, "--format", "full"])
    out, err = capsys.readouterr()
    assert (exit_code, err) == (1, ""), err
    text = f"$ portcheck {' '.join(scan)} --format full\n{out}"
    if registry()[code].FIXABLE:  # safe and unsafe fixes alike, as Ruff's snapshots show both
        main([*scan, "--diff", "--unsafe-fixes"])
        diff, _ = capsys.readouterr()
        text += f"\n$ portcheck {' '.join(scan)} --diff --unsafe-fixes\n{diff}"
    assert text == snapshot.use_extension(TextSnapshot)
