"""Integrations: code whose only purpose is a CUDA-only library, run only when the user chooses that library.

A class or function named for the library (peft's `Linear8bitLt`, Lightning's `TransformerEnginePrecision`, a
`dequantize_bnb_weight` helper), a test decorated `@require_bnb`, a branch `elif method.startswith("xformers"):`, an
NVIDIA profiler (`xformers.profiler`): importing the library there is not what blocks a port, since nothing reaches
it unless the user picks the library. The finding stays (info) to say so; an import in model code keeps its
severity. A file's name decides nothing: `bitsandbytes_train.py` is a training script like any other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import dotted_name
from portcheck.static.walk import visit

_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_TOOLS = ("profiler", "nvtx")


def words(text: str) -> list[str]:
    """`Bnb8bitBackend` → ["bnb", "8", "bit", "backend"]; `transformer_engine.py` → ["transformer", "engine", "py"]."""
    return [w.lower() for w in _WORDS.findall(text)]


def has_words(found: Sequence[str], name: Sequence[str]) -> bool:
    """The words `name` appear in `found`, side by side and in order (`words` of both)."""
    name = list(name)
    return any(list(found[i:i + len(name)]) == name for i in range(len(found) - len(name) + 1))


def _names(text: str, names: list[list[str]]) -> bool:
    found = words(text)
    return any(has_words(found, name) for name in names)


def integration(ctx: Context, qualname: str, modules: tuple[str, ...], aliases: tuple[str, ...]) -> str | None:
    """Where the import of `qualname` (a module of a library called `modules` / `aliases`) sits in code that exists
    for that library, or None."""
    tops = {m.split(".")[0] for m in modules} | set(aliases)
    names = [words(t) for t in tops if len(t) >= 3]
    if any(part in _TOOLS for part in qualname.split(".")[1:]):
        return "an opt-in profiling tool"
    for stmt in reversed(ctx.statements):
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            if _names(stmt.name.value, names):
                return f"`{stmt.name.value}`, an integration of it"
            for decorator in stmt.decorators:
                expr = decorator.decorator
                text = dotted_name(expr.func if isinstance(expr, cst.Call) else expr) or ""
                if _names(text.rsplit(".", 1)[-1], names):
                    return f"a function decorated `@{text}`"
        elif isinstance(stmt, cst.If) and _names(" ".join(_strings_and_names(stmt.test)), names):
            return f"a branch for it (`if {' '.join(ctx.source(stmt.test).split())}`)"
    return None


def _strings_and_names(test: cst.BaseExpression) -> list[str]:
    found: list[str] = []

    class Finder(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node.value)

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            value = node.evaluated_value
            found.append(value if isinstance(value, str) else "")

    visit(test, Finder())
    return found


__all__ = ["has_words", "integration", "words"]
