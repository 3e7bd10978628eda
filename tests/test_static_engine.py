"""The static pass's fast paths against the slow, obvious ones they replace (issue 8): the field walk against
libcst's visit, positions for a few nodes against PositionProvider for all, per-check token filtering against
running every check, and the parse without node validation against libcst's own parse."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from portcheck.rules import Pass, registry
from portcheck.static import engine
from portcheck.static.positions import Positions
from portcheck.static.source import decode
from portcheck.static.walk import STATEMENTS, UNWALKED, walk

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "portcheck" / "static").glob("*.py"))

# Layouts the position arithmetic must survive: decorators and comments between them, async, elif chains and
# one-line suites, try/except*/else/finally, match, parenthesised with, `a; b`, backslash continuations,
# comments in headers and at the ends of blocks and of the file, tabs, a form feed, non-ASCII text.
TRICKY = (
    "#!/usr/bin/env python\n# header comment\n\nimport torch  # noqa: PC101\n\n"
    "@dec  # on the decorator\n# between decorators\n@other(\n    1,\n)\nasync def f(x: int = 1) -> int:  # c\n"
    "    async with a as b, c:\n        await x.cuda()\n    async for i in y: pass\n    return x\n\n"
    "class K(Base, metaclass=M):\n    '''doc'''\n    def m(self):\n        if a: b = 1; c = 2\n"
    "        elif d:  # elif comment\n            e = (\n                1  # inside\n            )\n"
    "        else: f = 3\n        # end of block comment\n\n"
    "try:\n    x = 1\nexcept* ValueError as e:\n    pass\nexcept* TypeError:\n    y = \\\n        2\n"
    "else:\n    z = 'é' * 2; w = 'ü'\nfinally:\n    del x\n"
    "match p:\n    case [1, *rest] if rest:\n        q = rest\n    case {'k': v}:\n        q = v\n    case _:\n"
    "        pass\n"
    "with (open(a) as f,\n      open(b) as g):\n\tpass\n"
    "def t():\n\tif x:\n\t\treturn torch.zeros(3).cuda()\n\tfor i in r:\n\t\tpass\n\telse:\n\t\tpass\n"
    "\x0cdef after_form_feed():\n    while True: break\n    return [i for i in range(3) if i]\n"
    "lam = lambda a, *b, c=1, **d: (a, b, c, d)\nv = x if y else z\n"
    "# trailing comment\n# another\n"
)


def _modules():
    yield "tricky.py", TRICKY
    yield "tricky_crlf.py", TRICKY.replace("\n", "\r\n")
    yield "no_newline.py", TRICKY.rstrip("\n")
    for path in SOURCES:
        yield str(path.relative_to(ROOT)), decode(path.read_bytes()).text


MODULES = list(_modules())
# The tests that parse every module and ask PositionProvider for its positions share one parse and one answer a
# text: libcst's trees are immutable, and the position map is keyed by the nodes of that one tree. They run on one
# xdist worker, which parses each module once.
SHARED_TREES = pytest.mark.xdist_group("static-engine-trees")


@functools.cache
def _parsed(text: str) -> cst.Module:
    return cst.parse_module(text)


@functools.cache
def _generated(text: str):
    return MetadataWrapper(_parsed(text), unsafe_skip_copy=True).resolve(PositionProvider)


@SHARED_TREES
@pytest.mark.parametrize("comments", [False, True])
def test_the_walk_visits_what_libcsts_visit_does_in_the_same_order(comments):
    for name, text in MODULES:
        module = _parsed(text)

        class Recorder(cst.CSTVisitor):
            def __init__(self) -> None:
                self.seen: list[cst.CSTNode] = []

            def on_visit(self, node: cst.CSTNode) -> bool:
                if not comments and type(node) in UNWALKED:
                    return False
                self.seen.append(node)
                return True

        recorder = Recorder()
        module.visit(recorder)
        seen = recorder.seen
        walked: list[cst.CSTNode] = []
        walk(module, walked.append, comments=comments)
        # Whitespace is walked in field order with comments=True: the rest must keep libcst's order exactly.
        assert [id(n) for n in walked if type(n) not in UNWALKED] == [
            id(n) for n in seen if type(n) not in UNWALKED], name
        assert {id(n) for n in walked} == {id(n) for n in seen}, name


def test_a_false_from_enter_skips_the_children_and_leave_still_runs():
    module = cst.parse_module("def f():\n    x.cuda()\ny.cuda()\n")
    entered, left = [], []

    def enter(node):
        entered.append(type(node).__name__)
        return not isinstance(node, cst.FunctionDef)

    walk(module, enter, lambda node: left.append(type(node).__name__))
    assert "FunctionDef" in entered and entered.count("Call") == 1
    assert sorted(left) == sorted(entered)


def _chains(module: cst.Module, comments: bool = True):
    """Every node with the statements holding it, as the engine's traversal records them."""
    stack: list[cst.CSTNode] = []
    out = []

    def enter(node):
        if type(node) in STATEMENTS:
            stack.append(node)
        out.append((node, tuple(stack)))

    def leave(node):
        if type(node) in STATEMENTS:
            stack.pop()

    walk(module, enter, leave, comments=comments)
    return out


def _both(name: str, text: str):
    """The module, the positions PositionProvider gives every node, and portcheck's Positions for it."""
    module = _parsed(text)
    tree = compile(text, name, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    return module, _generated(text), Positions(module, tree, text)


def _with_form_feeds(where, text: str):
    """libcst counts a line's columns without the form feeds of its indentation; Python (and portcheck) with them.
    A start moves past the form feeds before it; an end at a line's start (the newline before) stays there."""
    lines = text.split("\n")

    def shifted(position):
        line = lines[position.line - 1] if 0 < position.line <= len(lines) else ""
        kept = column = 0
        while column < len(line) and (line[column] == "\f" or kept < position.column):
            kept += line[column] != "\f"
            column += 1
        return type(position)(position.line, column) if "\f" in line[:column] else position

    end = where.end if where.end.column == 0 else shifted(where.end)
    return type(where)(shifted(where.start), end)


@SHARED_TREES
def test_positions_of_any_node_match_position_provider_without_generating_the_module():
    for name, text in MODULES:
        module, expected, positions = _both(name, text)
        for node, chain in _chains(module):
            if node is module or node not in expected:  # libcst positions a few whitespace nodes of `match` nowhere
                continue
            assert positions.of(node, chain) == _with_form_feeds(expected[node], text), \
                (name, type(node).__name__, expected[node])
        # A form feed before a statement is the one layout that falls back to generating everything.
        assert (positions._whole is None) == ("\f" not in text), f"{name}: fell back to generating the whole module"


def test_a_node_outside_its_chain_is_found_by_searching_and_the_chain_may_be_wrong():
    text = "import torch\nDEVICE = 'cuda'\n\ndef f(x):\n    if x:\n        y = 1\n    else: return x.to(DEVICE)\n"
    module, expected, _ = _both("m.py", text)
    wrong_chain = (module.body[0],)
    for node, _ in _chains(module):
        if node is not module:
            positions = Positions(module, compile(text, "m.py", "exec", flags=ast.PyCF_ONLY_AST), text)
            assert positions.of(node, wrong_chain) == expected[node]
            assert positions._whole is None, (type(node).__name__, expected[node])


@SHARED_TREES
def test_statement_lines_match_what_generated_positions_say():
    for name, text in MODULES:
        module, expected, positions = _both(name, text)
        for node, chain in _chains(module, comments=False):
            if type(node) not in STATEMENTS:
                continue
            where = expected[node]
            body = getattr(node, "body", None)
            if isinstance(node, cst.SimpleStatementLine):
                wanted = (where.start.line, where.end.line)
            elif isinstance(body, cst.BaseSuite):
                wanted = (where.start.line, expected[body].start.line)
            else:
                wanted = (where.start.line, where.start.line)
            assert positions.statement_lines(node, chain) == wanted, (name, type(node).__name__, where)


def _slow_analysis(text: str, path: str, target: tuple[str, str], enabled: frozenset[str], monkeypatch):
    """The engine as it was: every check on every file that holds any token, positions for the whole module."""

    class Everything(Positions):
        def of(self, node, chain):
            return self._everything()[node]

        def statement_lines(self, statement, chain):
            return self._lines_from_code(statement, chain)

    with monkeypatch.context() as patch:
        patch.setattr(engine, "Positions", Everything)
        patch.setattr(engine, "_table", lambda checks, text: engine._dispatch(checks))
        return engine.analyse_text(text, path, *target, enabled)


@pytest.mark.parametrize("target", [("trn2", "native"), ("inf2", "xla")])
def test_the_fast_engine_reports_what_the_slow_one_does_on_every_fixture(target, monkeypatch):
    enabled = frozenset(code for code, rule in registry().items() if Pass.STATIC in rule.passes)
    findings = 0
    for name, text in MODULES:
        if name.startswith("portcheck"):  # portcheck's own sources hold no finding: the fixtures and TRICKY do
            continue
        fast = engine.analyse_text(text, name, *target, enabled)
        assert fast == _slow_analysis(text, name, target, enabled, monkeypatch), name
        findings += len(fast.findings) + len(fast.suppressed)
    assert findings > 300  # the comparison covered real findings, fixes and suppressions


def test_every_check_with_its_own_tokens_still_fires_on_its_rules_invalid_examples():
    # test_rules.py runs the examples through the whole engine; here, each INVALID example alone must hold one
    # of the tokens of a check that reports its code, or that check never runs on a file like it.
    from portcheck.static.check import CHECKS

    for code, rule in registry().items():
        if not rule.EXAMPLE_FILE.endswith(".py"):
            continue  # a dependency file's rules read every such file, without checks or tokens
        tokens = [t for c in CHECKS if code in c.codes for t in c.tokens]
        for source in rule.INVALID:
            assert any(token in source for token in tokens), f"{code}: no token of its checks in {source!r}"


def test_the_parse_without_validation_gives_the_same_tree_and_validation_comes_back():
    for name, text in MODULES[:3]:
        assert engine.parse(text).deep_equals(cst.parse_module(text)), name
    engine.parse("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")  # a node built by hand is validated again after the parse
    with pytest.raises(cst.ParserSyntaxError):
        engine.parse("def (:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("still validated after a failed parse")


def test_the_static_pass_still_does_not_import_torch():
    # Checked in a child so that other tests' imports do not count.
    import subprocess

    done = subprocess.run([sys.executable, "-c", (
        "import sys; from portcheck.static import engine; "
        "engine.analyse_text('import torch\\nx = torch.zeros(3).cuda()\\n', 'm.py', 'trn2', 'native', "
        "frozenset({'PC101'})); print('torch' in sys.modules, 'rich' in sys.modules)")],
        capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == ["False", "False"]
