"""Where nodes are in the file, worked out only for the nodes a finding or a suppression needs.

libcst's PositionProvider generates the code of the whole module to count lines and columns, which costs
about as much as the parse. A finding needs the position of a handful of nodes, so this generates only the
innermost statement holding each of them: Python's own parse (which the engine has already run, as a syntax
check) gives that statement's line, its indentation comes from the source line, and libcst's position-keeping
code generation does the rest from there, giving the same positions PositionProvider would. A node in the
header of a compound statement (an `if` test, a decorator) is placed by generating the header alone, the body
cut to `pass`. Anything that does not line up (a form feed before a statement, which libcst drops) falls back
to PositionProvider for the whole file. `tests/test_static_engine.py` compares the two on every node of every
fixture.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence

import libcst as cst
from libcst._position import CodePosition, CodeRange
from libcst.metadata import MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from portcheck.static.walk import STATEMENTS, UNWALKED, walk

_NEWLINE = re.compile(r"\r\n?|\n")


Chain = Sequence[cst.CSTNode]  # the statements enclosing a node, outermost first (a statement ends its own)


class _Recorder:
    """Stands in for the provider libcst's position-keeping codegen state writes into."""

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, CodeRange] = {}


class _Found(Exception):
    def __init__(self, chain: tuple[cst.CSTNode, ...]) -> None:
        self.chain = chain


_PASS = cst.SimpleStatementLine(body=(cst.Pass(),))
_HEADED = (cst.If, cst.For, cst.While, cst.With, cst.FunctionDef, cst.ClassDef)  # nothing but `else` after the body


class Positions:
    def __init__(self, module: cst.Module, tree: ast.Module, text: str) -> None:
        self.module = module
        self.tree = tree
        self.lines = _NEWLINE.split(text)  # as Python numbers lines: \r\n, \r and \n end one, \f does not
        self._generated: dict[cst.CSTNode, tuple[CodeRange, int]] = {}  # node -> (range from line 1, shift)
        self._done: set[tuple[int, bool]] = set()  # (statement id, header only) already generated
        self._located: dict[int, ast.stmt | None] = {}
        self._indexes: dict[tuple[int, int], dict[int, int]] = {}  # block -> id(statement) -> Python's index
        self._places: dict[int, tuple[list[ast.stmt], int]] = {}  # id(statement) -> (ast block, index)
        self._whole: dict[cst.CSTNode, CodeRange] | None = None

    def of(self, node: cst.CSTNode, chain: Chain) -> CodeRange:
        """Where `node` is; `chain` is the statements that hold it, outermost first, as the traversal saw them
        (the innermost may hold it deep inside its body, or not at all: a fix may edit another statement)."""
        found = self._known(node)
        if found is None and self._whole is None:
            for _ in self._attempts(node, tuple(chain)):
                found = self._known(node)
                if found is not None:
                    break
        return found if found is not None else self._form_feeds(self._everything()[node])

    def _form_feeds(self, where: CodeRange) -> CodeRange:
        """libcst drops a form feed from a line's indentation, and counts its columns without it: put it back."""
        def shifted(position: CodePosition) -> CodePosition:
            line = self.lines[position.line - 1] if 0 < position.line <= len(self.lines) else ""
            return CodePosition(position.line, file_column(line, position.column))

        end = where.end if where.end.column == 0 else shifted(where.end)  # a line's start, before its form feed
        return CodeRange(shifted(where.start), end)

    def _attempts(self, node: cst.CSTNode, chain: tuple[cst.CSTNode, ...]) -> Iterator[None]:
        """Generate ever more code around `node` until its position is known, cheapest first."""
        if not chain:
            self._module_margins()
            yield
        tried = set()
        for candidate in (chain, ()) if chain else ((),):
            refined = self._refine(node, candidate)
            if not refined or refined in tried:
                continue
            tried.add(refined)
            statement = refined[-1]
            located = self._locate(refined)
            if located is None:
                continue
            if statement is not node and not isinstance(statement, cst.SimpleStatementLine):
                self._generate(statement, located, header_only=True)
                yield
            self._generate(statement, located, header_only=False)
            yield

    def statement_lines(self, statement: cst.CSTNode, chain: Chain) -> tuple[int, int]:
        """The first line of a statement and the last line a suppression comment for it may sit on: a simple
        statement's last line, or for a compound statement the line its body starts on. From Python's own
        tree with no code generation, or, where the statement is not found there, from generated positions."""
        lines = self._lines_from_tree(statement, chain)
        return lines if lines is not None else self._lines_from_code(statement, chain)

    def _lines_from_code(self, statement: cst.CSTNode, chain: Chain) -> tuple[int, int]:
        where = self.of(statement, chain)
        body = getattr(statement, "body", None)
        if isinstance(statement, cst.SimpleStatementLine):
            return where.start.line, where.end.line
        if isinstance(body, cst.BaseSuite):
            return where.start.line, self.of(body, chain).start.line
        return where.start.line, where.start.line

    def _lines_from_tree(self, statement: cst.CSTNode, chain: Chain) -> tuple[int, int] | None:
        located = self._locate(chain)
        if located is None:
            return None
        if isinstance(statement, cst.SimpleStatementLine):
            last = self._locate_last(chain, statement)
            return (located.lineno, last.end_lineno or last.lineno) if last is not None else None
        body = getattr(located, "body", None)
        if isinstance(getattr(statement, "body", None), cst.BaseSuite) and body:
            return located.lineno, body[0].lineno
        return located.lineno, located.lineno

    def _known(self, node: cst.CSTNode) -> CodeRange | None:
        if self._whole is not None:
            whole = self._whole.get(node)
            return self._form_feeds(whole) if whole is not None else None
        found = self._generated.get(node)
        return _shifted(*found) if found is not None else None

    def _everything(self) -> dict[cst.CSTNode, CodeRange]:
        if self._whole is None:
            self._whole = dict(MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider))
        return self._whole

    def _refine(self, node: cst.CSTNode, chain: tuple[cst.CSTNode, ...]) -> tuple[cst.CSTNode, ...]:
        """The chain down to the innermost statement that holds `node`: below chain[-1] (a check on a `def`
        may report a call deep inside it), or, for an empty chain, anywhere in the module."""
        top: cst.CSTNode = chain[-1] if chain else self.module
        if top is node or isinstance(top, cst.SimpleStatementLine):
            return chain
        inner: list[cst.CSTNode] = []

        def enter(current: cst.CSTNode) -> None:
            if current is node:
                raise _Found((*inner, node) if type(node) in STATEMENTS else tuple(inner))
            if current is not top and type(current) in STATEMENTS:
                inner.append(current)

        def leave(current: cst.CSTNode) -> None:
            if inner and inner[-1] is current:
                inner.pop()

        try:
            walk(top, enter, leave, comments=type(node) in UNWALKED)
        except _Found as found:
            return chain + found.chain
        return chain

    # -- the statement's line, from Python's own tree -------------------------------------------------------
    def _locate(self, chain: Chain) -> ast.stmt | None:
        """The ast statement that starts where chain[-1] does (for a line of `a; b`, the `a`)."""
        key = id(chain[-1])
        if key not in self._located:
            self._located[key] = self._search(chain)
        return self._located[key]

    def _search(self, chain: Chain) -> ast.stmt | None:
        # (the node that owns the block and its number there, the block, Python's block)
        blocks: list[tuple[tuple[int, int], Sequence[cst.CSTNode], list[ast.stmt]]] = [
            ((id(self.module), 0), self.module.body, self.tree.body)]
        found: ast.stmt | None = None
        for statement in chain:
            found = None
            for key, cst_block, ast_block in blocks:
                index = self._index(key, cst_block).get(id(statement))
                if index is not None:
                    found = ast_block[index] if index < len(ast_block) else None
                    if found is not None:
                        self._places[id(statement)] = (ast_block, index)
                    break
            if found is None:
                return None
            inner, outer = _cst_blocks(statement), _ast_blocks(found)
            if len(inner) != len(outer):
                return None
            blocks = [((id(statement), number), cst_block, ast_block)
                      for number, (cst_block, ast_block) in enumerate(zip(inner, outer, strict=True))]
        return found

    def _index(self, key: tuple[int, int], block: Sequence[cst.CSTNode]) -> dict[int, int]:
        """Where each statement of `block` sits, counted as Python counts statements (`a; b` is two); once per
        block, since a generated file's module may hold a hundred thousand statements."""
        index = self._indexes.get(key)
        if index is None:
            index, count = {}, 0
            for item in block:
                index[id(item)] = count
                count += len(item.body) if isinstance(item, cst.SimpleStatementLine) else 1
            self._indexes[key] = index
        return index

    def _locate_last(self, chain: Chain, line: cst.SimpleStatementLine) -> ast.stmt | None:
        """For a line of small statements, the ast statement of its last one."""
        if self._locate(chain) is None:
            return None
        block, index = self._places[id(line)]
        last = index + len(line.body) - 1
        return block[last] if last < len(block) else None

    def _generate(self, statement: cst.CSTNode, located: ast.stmt, header_only: bool) -> None:
        key = (id(statement), header_only)
        if key in self._done:
            return
        self._done.add(key)
        line = self.lines[located.lineno - 1] if located.lineno <= len(self.lines) else ""
        indent = line[: len(line) - len(line.lstrip(" \t\f"))]
        if "\f" in indent or len(indent.encode()) != located.col_offset:
            return  # libcst drops a form feed from the text it keeps: its columns are not the file's there
        shown = _header(statement) if header_only else statement
        if shown is None:
            return
        recorder = _Recorder()
        state = PositionProvidingCodegenState(
            default_indent=self.module.default_indent, default_newline=self.module.default_newline,
            provider=recorder,  # type: ignore[arg-type]  # a stand-in: the state only writes provider._computed
            indent_tokens=[indent] if indent else [],
        )
        shown._codegen(state)
        start = recorder._computed[shown].start
        if start.column != len(indent):
            return
        if header_only:
            del recorder._computed[shown]  # the stand-in's own range ends where the stub does
        self._keep(recorder._computed, located.lineno - start.line)

    def _keep(self, ranges: dict[cst.CSTNode, CodeRange], shift: int) -> None:
        generated = self._generated
        for node, where in ranges.items():
            if node not in generated:
                generated[node] = (where, shift)

    def _module_margins(self) -> None:
        """Comments above the first statement and below the last one: whole lines at either end."""
        if (-1, False) in self._done:
            return
        self._done.add((-1, False))
        module = self.module
        margins = [(module.header, 1)]
        if module.footer:
            count = len(self.lines) - (1 if self.lines and not self.lines[-1] else 0)
            margins.append((module.footer, count - len(module.footer) + 1))
        for lines, first in margins:
            for offset, empty in enumerate(lines):
                recorder = _Recorder()
                state = PositionProvidingCodegenState(
                    default_indent=module.default_indent, default_newline=module.default_newline,
                    provider=recorder,  # type: ignore[arg-type]  # a stand-in, as in _generate
                    line=first + offset)
                empty._codegen(state)
                self._keep(recorder._computed, 0)


def _header(statement: cst.CSTNode) -> cst.CSTNode | None:
    """A stand-in for a compound statement with its indented body cut to one `pass` and no `else`: the nodes
    before the body (and a body on the header's own line, and the comment after the colon) are the same objects
    at the same places, without generating a body that may run to hundreds of lines. None where something
    after the body would move (a `try`'s handlers)."""
    if not isinstance(statement, _HEADED):
        return None
    changes: dict[str, object] = {}
    body = statement.body
    if isinstance(body, cst.IndentedBlock):
        changes["body"] = body.with_changes(body=(_PASS,), footer=())
    if isinstance(statement, (cst.If, cst.For, cst.While)) and statement.orelse is not None:
        changes["orelse"] = None
    return statement.with_changes(**changes) if changes else statement


def _shifted(where: CodeRange, shift: int) -> CodeRange:
    if not shift:
        return where
    return CodeRange(CodePosition(where.start.line + shift, where.start.column),
                     CodePosition(where.end.line + shift, where.end.column))


def _suite(suite: cst.BaseSuite | None) -> Sequence[cst.CSTNode]:
    if isinstance(suite, cst.IndentedBlock):
        return suite.body
    if isinstance(suite, cst.SimpleStatementSuite):
        return suite.body
    return ()


def _cst_blocks(statement: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    """The statement lists inside a compound statement, in the order `_ast_blocks` gives Python's."""
    if isinstance(statement, cst.If):
        orelse = statement.orelse
        tail = [orelse] if isinstance(orelse, cst.If) else _suite(orelse.body) if orelse is not None else ()
        return [_suite(statement.body), tail]
    if isinstance(statement, (cst.For, cst.While)):
        return [_suite(statement.body), _suite(statement.orelse.body) if statement.orelse else ()]
    if isinstance(statement, (cst.Try, cst.TryStar)):
        return [_suite(statement.body), *(_suite(h.body) for h in statement.handlers),
                _suite(statement.orelse.body) if statement.orelse else (),
                _suite(statement.finalbody.body) if statement.finalbody else ()]
    if isinstance(statement, cst.Match):
        return [_suite(case.body) for case in statement.cases]
    if isinstance(statement, (cst.With, cst.FunctionDef, cst.ClassDef)):
        return [_suite(statement.body)]
    return []


def _ast_blocks(statement: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While)):
        return [statement.body, statement.orelse]
    if isinstance(statement, (ast.Try, ast.TryStar)):
        return [statement.body, *(h.body for h in statement.handlers), statement.orelse, statement.finalbody]
    if isinstance(statement, ast.Match):
        return [case.body for case in statement.cases]
    if isinstance(statement, (ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [statement.body]
    return []


def file_column(line: str, column: int) -> int:
    """The column in the file's `line` of libcst's `column`, which counts the line without the form feeds of its
    indentation."""
    indent = line[: len(line) - len(line.lstrip(" \t\f"))]
    if "\f" not in indent:
        return column
    kept = 0
    for index, char in enumerate(indent):
        if char == "\f":
            continue
        if kept == column:
            return index
        kept += 1
    return column + indent.count("\f")  # past the indentation: every form feed of it is before

