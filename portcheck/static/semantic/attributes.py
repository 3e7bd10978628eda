"""What a class's attributes hold: `self.encoder = Encoder(cfg)` or `self.dist = make_distribution(space)` in any of
its methods, read from Python's syntax tree (summary), and the classes such a binding may build (call graph). The
graph follows `self.dist.proba_distribution(x)` into the methods of those classes: a constructor names its class, a
function of the project the classes its `return`s build (`return DiagGaussian(dim)`). Library classes (`nn.Linear`)
are none of the tree's, and an attribute bound from anything else (a parameter, a lookup) names nothing."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from portcheck.static.semantic.nodes import statements_in

# Builders never of the tree's classes: kept out of the summary (most attributes of a model are torch modules).
_LIBRARIES = ("torch.", "numpy.", "math.", "collections.", "typing.")
DEPTH = 2  # a function that returns what another function of the project returns, and no deeper


def attribute_bindings(function: ast.FunctionDef | ast.AsyncFunctionDef, cls: str,
                       resolve: Callable[[ast.expr], str | None]) -> list[tuple[str, str, str]]:
    """(class, attribute, what builds it) for each `self.attr = Builder(...)` in method `function` of `cls`; both
    sides of a conditional expression (`A(...) if cond else B(...)`) and of `or`/`and`."""
    found: list[tuple[str, str, str]] = []
    for node in statements_in(function):  # an assignment is a statement: the expressions need no walk
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                found.extend((cls, target.attr, ref) for call in _builders(value)
                             if (ref := resolve(call.func)) is not None and not ref.startswith(_LIBRARIES))
    return found


def _builders(value: ast.expr) -> list[ast.Call]:
    if isinstance(value, ast.Call):
        return [value]
    if isinstance(value, ast.IfExp):
        return _builders(value.body) + _builders(value.orelse)
    if isinstance(value, ast.BoolOp):
        return [call for v in value.values for call in _builders(v)]
    return []


def held_methods(project: Any, cls: str, attribute: str, method: str, depth: int = 0) -> list[str]:
    """The functions `self.<attribute>.<method>(...)` may call from a method of `cls`: `method` of every class the
    attribute is bound to build, in `cls` or one of its bases. (`project` is the semantic.project.Project that asks:
    typed loosely, since that module imports this one.)"""
    found: list[str] = []
    for ref, module, package in project.attributes.get(f"{cls}.{attribute}", ()):
        for built in _built(project, ref, module, package, 0):
            found.extend(project.method_of(built, method))
    if depth < DEPTH:
        for base in project.classes.get(cls, ()):
            for known in project.base_classes(cls, base):
                found.extend(held_methods(project, known, attribute, method, depth + 1))
    return sorted(set(found))


def _built(project: Any, ref: str, module: str, package: bool, depth: int) -> list[str]:
    """The tree's classes a call of `ref` (as the summary of `module` recorded it) builds."""
    if ref.startswith(":"):
        full = f"{module}.{ref[1:]}" if module else ref[1:]
        target = project.exports.get(full, full)
    else:
        target = project.absolute(ref, module, package)
    classes: list[str] = project.known_classes(target)
    if classes or depth >= DEPTH:
        return classes
    built: list[str] = []
    for function in project.find(target):
        node = project.nodes[function]
        if not function.endswith(".__init__"):
            inner_module, inner_package = project.files[node.path][:2]
            for returned in node.function.returns:
                built.extend(_built(project, returned, inner_module, inner_package, depth + 1))
    return built


__all__ = ["attribute_bindings", "held_methods"]
