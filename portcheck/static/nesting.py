"""Keeping libcst's native parser from overflowing its stack: a file it would crash on is an error entry.

libcst parses in native code that recurses once per level of its concrete syntax tree, and a stack overflow
there kills the whole process (SIGSEGV), not one file. Two measures keep the parse inside its stack:

- The parse runs on a thread with a stack of `PARSE_STACK` bytes, so the room it has does not depend on
  `ulimit -s` or on which thread calls it.
- Python's own parser, which runs first, already refuses what is nested deeper than about 3,000 levels in
  `ast` (and brackets deeper than 200). What it keeps flat, libcst nests: a chain of `and`/`or` is one
  `ast.BoolOp` but one libcst node per operator, and `import a.b.c` is one name in `ast` but a chain of
  attributes in libcst. `flat_chain_depth` counts those links along the deepest path.

Measured here (libcst 1.9, x86-64): a parse overflowed an 8 MiB stack at about 7,000 `and` terms, 8,100 unary
operators, 3,500 nested lambdas and 1,270 nested parentheses: at most 6.5 KiB a level. On a 64 MiB stack the
3,000 levels `ast` allows and 200 brackets take under 10 MiB, and `MAX_FLAT_LINKS` links of a chain at most
12 MiB more (1.2 KiB a link): a margin of more than two.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import io
import re
import sys
import threading
import tokenize
from collections.abc import Callable
from typing import TypeVar

PARSE_STACK = 64 * 2**20
MAX_FLAT_LINKS = 10_000

_LINKS = re.compile(r"\b(?:and|or)\b|\.")
_OPERATORS = re.compile(r"\b(?:and|or)\b|[-+*/%@|&^.]")

T = TypeVar("T")


def flat_chain_depth(tree: ast.Module, text: str) -> tuple[int, int]:
    """The most `and`/`or` operators and dotted-import links along one path of the tree, and the line where
    that path starts (0 when there are too few in the whole text to matter)."""
    if sum(1 for _ in _LINKS.finditer(text)) <= MAX_FLAT_LINKS:
        return 0, 0  # an upper bound over the whole file: nearly every file stops here
    deepest, line = 0, 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, links = stack.pop()
        if isinstance(node, ast.BoolOp):
            links += len(node.values) - 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
            links += max(name.count(".") for name in names)
        if links > deepest:
            deepest, line = links, getattr(node, "lineno", 0)
        stack.extend((child, links) for child in ast.iter_child_nodes(node))
    return deepest, line


MAX_CONCATENATED = 3_000  # implicitly concatenated strings libcst 1.9's parser takes in one expression (measured)


def longest_concatenation(text: str) -> tuple[int, int]:
    """The most string literals written one after another (implicitly concatenated) in the file, and the line
    where they start. Python keeps them as one constant; libcst's parser refuses more than MAX_CONCATENATED."""
    longest, line, run, start = 0, 0, 0, 0
    skipped = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
    with contextlib.suppress(tokenize.TokenError, SyntaxError):
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING:
                run, start = run + 1, start if run else token.start[0]
                if run > longest:
                    longest, line = run, start
            elif token.type not in skipped or token.type == tokenize.NEWLINE:
                run = 0
    return longest, line


def operator_count(text: str) -> int:
    """How many `and`/`or` words, dots and arithmetic operator characters the text holds (in code, comments and
    strings alike): an upper bound of any chain's links (`a and b`, `a + b`, `a.b`, each nested a link a term)."""
    return sum(1 for _ in _OPERATORS.finditer(text))


def link_count(text: str) -> int:
    """How many `and`/`or` operators and dots the text holds: an upper bound of any chain's links."""
    return sum(1 for _ in _LINKS.finditer(text))


def on_parse_stack(function: Callable[[], T], recursion: int = 0) -> T:
    """`function()` on a thread with `PARSE_STACK` bytes of stack; its exception is raised here. With
    `recursion`, Python's recursion limit is raised to it meanwhile (the deep stack has room for the frames)."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        previous = sys.getrecursionlimit()
        if recursion > previous:
            sys.setrecursionlimit(recursion)
        try:
            outcome.append(function())
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)
        finally:
            sys.setrecursionlimit(previous)

    previous = threading.stack_size(PARSE_STACK)
    try:
        state = contextvars.copy_context()  # what the caller set for this file (check.LOCATION) holds there too
        worker = threading.Thread(target=state.run, args=(run,), name="portcheck-parse", daemon=True)
        worker.start()
    finally:
        threading.stack_size(previous)
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]
