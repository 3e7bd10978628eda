"""A pre-order walk over a libcst tree that reads the nodes' fields instead of going through `node.visit`.

libcst's `visit` rebuilds every node it passes, since a transformer may have replaced a child: on real model
code that is two thirds of a scan (benchmarks/speed.py). portcheck's checks never replace nodes, so this
walks the same nodes in the same source order straight from the dataclass fields. Whitespace, brackets and
operator tokens are left out unless `comments=True` (only a file that may hold a suppression needs its
comments). `tests/test_static_engine.py` holds the order to libcst's own visit on every fixture.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import libcst as cst
from libcst._nodes import op as _op
from libcst._nodes import whitespace as _whitespace

# Types whose subtrees hold nothing but whitespace, comments and fixed tokens.
_TOKENS = (cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace,
           cst.RightCurlyBrace, cst.EmptyLine, cst.TrailingWhitespace, cst.Newline, cst.Comment,
           cst.Asynchronous)
UNWALKED: frozenset[type] = frozenset(
    kind for module in (_op, _whitespace) for kind in vars(module).values()
    if isinstance(kind, type) and issubclass(kind, cst.CSTNode) and kind.__module__ == module.__name__
) | frozenset(_TOKENS)

# The statements the traversal keeps a stack of: a finding's suppression comment may sit on any line of the
# innermost one, and positions are worked out one statement at a time.
STATEMENTS: frozenset[type] = frozenset({
    cst.SimpleStatementLine, cst.If, cst.For, cst.While, cst.With, cst.Try, cst.TryStar, cst.FunctionDef,
    cst.ClassDef, cst.Match,
})

# Where a node's dataclass fields are not in the order their code is written: decorators come before the
# `def`, a keyword before its value, the body of `a if c else b` before its test.
_SOURCE_ORDER: dict[type, tuple[str, ...]] = {
    cst.FunctionDef: ("leading_lines", "decorators", "lines_after_decorators", "asynchronous", "name",
                      "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("leading_lines", "decorators", "lines_after_decorators", "name", "type_parameters", "lpar",
                   "bases", "keywords", "rpar", "body"),
    cst.Arg: ("star", "keyword", "equal", "value", "comma"),
    cst.Param: ("star", "name", "annotation", "equal", "default", "comma"),
    cst.Parameters: ("posonly_params", "posonly_ind", "params", "star_arg", "kwonly_params", "star_kwarg"),
    cst.IfExp: ("lpar", "body", "test", "orelse", "rpar"),
    cst.ExceptHandler: ("leading_lines", "type", "name", "body"),
    cst.ExceptStarHandler: ("leading_lines", "type", "name", "body"),
    cst.With: ("leading_lines", "asynchronous", "lpar", "items", "rpar", "body"),
    cst.For: ("leading_lines", "asynchronous", "target", "iter", "body", "orelse"),
    cst.CompFor: ("asynchronous", "target", "iter", "ifs", "inner_for_in"),
    cst.MatchCase: ("leading_lines", "pattern", "guard", "body"),
    cst.Decorator: ("leading_lines", "decorator", "trailing_whitespace"),
    cst.SimpleStatementLine: ("leading_lines", "body", "trailing_whitespace"),
    cst.IndentedBlock: ("header", "body", "footer"),
    cst.Module: ("header", "body", "footer"),
    cst.Subscript: ("lpar", "value", "lbracket", "slice", "rbracket", "rpar"),
    cst.UnaryOperation: ("lpar", "operator", "expression", "rpar"),
}


# Fields that hold only whitespace, brackets or fixed tokens, left alone unless comments are wanted.
_TOKEN_FIELDS = frozenset({
    "lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace", "leading_lines", "lines_after_decorators",
    "trailing_whitespace", "header", "footer", "comma", "semicolon", "equal", "dot", "colon", "first_colon",
    "second_colon", "asynchronous", "newline", "leading_whitespace", "relative", "operator", "star", "indent",
    "encoding", "default_indent", "default_newline", "has_trailing_newline",
})

_FIELDS: dict[type, tuple[str, ...]] = {}
_FIELDS_ALL: dict[type, tuple[str, ...]] = {}


def child_fields(kind: type, comments: bool) -> tuple[str, ...]:
    """The fields of `kind` that may hold child nodes, in source order."""
    cache = _FIELDS_ALL if comments else _FIELDS
    names = cache.get(kind)
    if names is None:
        declared = [f.name for f in dataclasses.fields(kind) if not _plain(f.type)]
        order = _SOURCE_ORDER.get(kind, ())
        ordered = [n for n in order if n in declared] + [n for n in declared if n not in order]
        if not comments:
            ordered = [n for n in ordered if n not in _TOKEN_FIELDS and not n.startswith("whitespace")]
        names = cache[kind] = tuple(ordered)
    return names


def _plain(annotation: object) -> bool:
    """A field declared as a plain value (`value: str` of a Name): never a node."""
    return isinstance(annotation, type) and not issubclass(annotation, cst.CSTNode)


Enter = Callable[[cst.CSTNode], "bool | None"]
Leave = Callable[[cst.CSTNode], None]


def walk(root: cst.CSTNode, enter: Enter, leave: Leave | None = None, *, comments: bool = False,
         only: frozenset[type] | None = None) -> None:
    """Call `enter` on every node below and including `root` in source order (its children are skipped when it
    returns False) and `leave` after each node's children. With `only`, the callbacks run for nodes of those
    types alone and the walk passes through the others without a call."""
    walked = _WALKED_ALL if comments else _WALKED
    fields = _FIELDS_ALL if comments else _FIELDS

    def go(node: cst.CSTNode) -> None:
        kind = node.__class__
        called = only is None or kind in only
        if called and enter(node) is False:
            if leave is not None:
                leave(node)
            return
        names = fields.get(kind)
        for name in child_fields(kind, comments) if names is None else names:
            value = getattr(node, name)
            value_kind = value.__class__
            if value_kind is tuple or value_kind is list:
                for child in value:
                    child_kind = child.__class__
                    flag = walked.get(child_kind)
                    if flag or (flag is None and _learn(walked, child_kind, comments)):
                        go(child)
            else:
                flag = walked.get(value_kind)
                if flag or (flag is None and _learn(walked, value_kind, comments)):
                    go(value)
        if called and leave is not None:
            leave(node)

    go(root)


def _learn(walked: dict[type, bool], kind: type, comments: bool) -> bool:
    answer = walked[kind] = issubclass(kind, cst.CSTNode) and (comments or kind not in UNWALKED)
    return answer


_WALKED: dict[type, bool] = {}
_WALKED_ALL: dict[type, bool] = {}


def visit(root: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`root.visit(visitor)` for a visitor that only reads: its visit_/leave_ methods in the same order. The walk
    calls the visitor only for the node types it has methods for (libcst's own dispatch looks a method up by name
    at every node: most of a check's walk was that lookup); a visitor that overrides `on_visit` / `on_leave` sees
    every node."""
    kind = type(visitor)
    if kind.on_visit is not _BASE_VISIT or kind.on_leave is not _BASE_LEAVE:
        walk(root, visitor.on_visit, visitor.on_leave)
        return
    visits, leaves = _handlers(kind)

    def enter(node: cst.CSTNode) -> bool | None:
        method = visits.get(node.__class__)
        return None if method is None else method(visitor, node)

    def leave(node: cst.CSTNode) -> None:
        method = leaves.get(node.__class__)
        if method is not None:
            method(visitor, node)

    walk(root, enter, leave if leaves else None, only=frozenset(visits) | frozenset(leaves))


_BASE_VISIT, _BASE_LEAVE = cst.CSTVisitor.on_visit, cst.CSTVisitor.on_leave


def _handlers(kind: type) -> tuple[dict[type, Callable[..., bool | None]], dict[type, Callable[..., None]]]:
    """The node type -> `visit_<Type>` and `leave_<Type>` methods a visitor class defines (its own and its bases'
    below CSTVisitor): attribute visitors (`visit_Call_func`) name no node type and are not called, as before."""
    visits: dict[type, Callable[..., bool | None]] = {}
    leaves: dict[type, Callable[..., None]] = {}
    for klass in reversed(kind.__mro__):
        if klass.__module__.startswith("libcst") or klass is object:
            continue
        for name, method in vars(klass).items():
            prefix, _, node_name = name.partition("_")
            if prefix not in ("visit", "leave") or not callable(method):
                continue
            node_type = getattr(cst, node_name, None)
            if isinstance(node_type, type) and issubclass(node_type, cst.CSTNode):
                (visits if prefix == "visit" else leaves)[node_type] = method
    return visits, leaves


def any_call(root: cst.CSTNode, match: Callable[[cst.Call], bool]) -> bool:
    """Some call below `root` (nested functions and lambdas included) is one `match` accepts; the walk stops
    descending once one is found."""
    found = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        found = found or (isinstance(node, cst.Call) and match(node))
        return not found

    walk(root, enter, only=_CALLS)
    return found


_CALLS = frozenset({cst.Call})


def returns_of(function: cst.FunctionDef) -> list[cst.Return]:
    """The `return` statements of `function` itself, not of the functions and lambdas it defines."""
    found: list[cst.Return] = []

    class Returns(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

    visit(function, Returns())
    return found


_CHAINS = (cst.BooleanOperation, cst.BinaryOperation)


def parents_of(statement: cst.CSTNode) -> dict[int, cst.CSTNode]:
    """id(node) -> the node holding it, on the statement's own lines (not in the blocks it holds). The links of an
    `and`/`or` or arithmetic chain lead straight to the chain's outermost link: `a and b and ...` is nested one
    link a term, and reading 5,000 links up for each of its 5,000 findings was quadratic. Built once a statement
    (`Context.memo("parents", ...)`) for the nodes that hold a node (`ancestry`) and the fallbacks that hold a
    finding (`params`)."""
    parents: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.IndentedBlock):
            return False
        if stack:
            holder = stack[-1]
            if type(node) is type(holder) and isinstance(node, _CHAINS):
                holder = parents.get(id(holder), holder) if type(parents.get(id(holder))) is type(node) else holder
            parents[id(node)] = holder
        stack.append(node)
        return True

    def leave(node: cst.CSTNode) -> None:
        if stack and stack[-1] is node:
            stack.pop()

    walk(statement, enter, leave)
    return parents
