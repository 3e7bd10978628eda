"""Every fix pair under fixtures/fix/<code>/: `<case>.in.py` fixed for a stack equals its expected output, the
output parses, and fixing it again changes nothing.

The expected output is `<case>.<stack>.out.py` (native: trn2; xla: inf2) or `<case>.out.py` for both stacks;
a stack without an expected file is not checked. A `# fix: unsafe` line in the input turns on unsafe fixes.
Rules run as a user gets them (the default set) plus the pair's own code.
"""

import ast
from pathlib import Path

import pytest

from portcheck.knowledge import load
from portcheck.static.engine import FileJob
from portcheck.static.rewrite import fix_text

PAIRS = Path(__file__).resolve().parent.parent / "fixtures" / "fix"
STACKS = {"native": "trn2", "xla": "inf2"}


def cases() -> list[tuple[Path, str, Path]]:
    found = []
    for source in sorted(PAIRS.rglob("*.in.py")):
        stem = source.name[: -len(".in.py")]
        for stack in STACKS:
            for name in (f"{stem}.{stack}.out.py", f"{stem}.out.py"):
                expected = source.with_name(name)
                if expected.is_file():
                    found.append((source, stack, expected))
                    break
    return found


CASES = cases()


def fix(text: str, code: str, stack: str, unsafe: bool):
    chip = STACKS[stack]
    knowledge = load()
    enabled = frozenset(c for c in knowledge.applicable(chip, stack) if knowledge.rules[c].default or c == code)
    return fix_text(text, FileJob(path="case.py", chip=chip, stack=stack, enabled=enabled), unsafe)


def test_there_are_fix_pairs():
    assert len(CASES) >= 4
    for source in PAIRS.rglob("*.in.py"):
        assert any(c[0] == source for c in CASES), f"{source} has no expected output"


@pytest.mark.parametrize(("source", "stack", "expected"), CASES,
                         ids=[f"{s.parent.name}/{s.name[:-6]}-{st}" for s, st, _ in CASES])
def test_fix_pair(source: Path, stack: str, expected: Path):
    text = source.read_text(encoding="utf-8")
    unsafe = "# fix: unsafe" in text
    code = source.parent.name
    outcome = fix(text, code, stack, unsafe)
    assert outcome.result.errors == ()
    assert code in {f.code for f in outcome.fixed}, f"no {code} fix was applied"
    got = outcome.text if outcome.text is not None else text
    assert got == expected.read_text(encoding="utf-8")
    ast.parse(got)
    again = fix(got, code, stack, unsafe)
    assert again.text is None, "fixing the fixed output changed it again"


def test_fixable_rules_and_fix_pairs_agree():
    from portcheck.rules import registry

    with_pairs = {source.parent.name for source, _, _ in CASES}
    declared = {code for code, rule in registry().items() if rule.FIXABLE}
    assert declared == with_pairs, "a rule declares FIXABLE exactly when fixtures/fix/<code>/ has pairs"


@pytest.mark.parametrize(("case", "code", "stack"), [("PC109/settings", "PC109", "native"),
                                                     ("PC109/settings", "PC109", "xla"),
                                                     ("PC106/remove", "PC106", "xla")])
def test_removals_need_unsafe_fixes(case: str, code: str, stack: str):
    """Removing a setting or a call Neuron ignores changes what the same code does on a GPU: only with
    --unsafe-fixes."""
    text = (PAIRS / f"{case}.in.py").read_text(encoding="utf-8")
    assert "# fix: unsafe" in text
    outcome = fix(text, code, stack, unsafe=False)
    assert code not in {f.code for f in outcome.fixed}
    assert fix(text, code, stack, unsafe=True).fixed  # the same input does take the fix with it
