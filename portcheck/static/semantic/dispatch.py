"""Generic functions (`functools.singledispatch`): a call of the generic function runs the implementations
`@f.register` adds to it, so the call graph gives the generic function a call of each."""

from __future__ import annotations

import ast
from dataclasses import replace

from portcheck.static.semantic.once import dotted
from portcheck.summaries import Function

_GENERIC = frozenset({"singledispatch", "singledispatchmethod"})


class Generics:
    def __init__(self) -> None:
        self._generic: set[str] = set()  # `@singledispatch` functions (and `@singledispatchmethod` methods)
        self._registered: dict[str, list[str]] = {}  # generic function -> the implementations registered for it

    def note(self, node: ast.FunctionDef | ast.AsyncFunctionDef, name: str, scope: str) -> None:
        """Note a generic function, or an implementation registered for one defined before it in its scope."""
        for decorator in node.decorator_list:
            func = decorator.func if isinstance(decorator, ast.Call) else decorator
            if (dotted(func) or "").rsplit(".", 1)[-1] in _GENERIC:
                self._generic.add(name)
            elif isinstance(func, ast.Attribute) and func.attr == "register" and isinstance(func.value, ast.Name):
                generic = f"{scope}.{func.value.id}" if scope else func.value.id
                if generic in self._generic:
                    self._registered.setdefault(generic, []).append(name)

    def dispatched(self, functions: list[Function]) -> list[Function]:
        """`functions`, each generic one calling every implementation registered for it: a call of
        `permutate(y1, y2)` runs `@permutate.register def permutate_torch(...)` for tensors."""
        out = []
        for f in functions:
            added = tuple((f":{impl.rsplit('.', 1)[-1]}", "") for impl in self._registered.get(f.name, ()))
            out.append(replace(f, calls=(*f.calls, *added)) if added else f)
        return out
