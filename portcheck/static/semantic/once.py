"""Code that runs once, not every step, as a file's syntax shows it: a lazy initialisation, whose body sets what
its test asks (`if self.cache is None: self.cache = ...`)."""

from __future__ import annotations

import ast


def dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def initialises(stmt: ast.If) -> bool:
    """`if X is None: X = ...`, `if not X: ... X = True`, `if not hasattr(o, "x"): o.x = ...`,
    `if not flag.item(): ... flag.fill_(1)`: the body sets what its test asks, so it runs once."""
    subject = _tested(stmt.test)
    if subject is None or "." not in subject:
        return False  # a local or a parameter (`if mask is None: mask = ones(...)`) is tested again every call
    return any(_sets(child, subject) for node in stmt.body for child in ast.walk(node))


def _tested(test: ast.expr) -> str | None:
    """What `X is None`, `not X`, `not X.item()` or `not hasattr(o, "x")` asks about, as a dotted name."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.Eq)) and \
            isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        return dotted(test.left)
    if not isinstance(test, ast.UnaryOp) or not isinstance(test.op, ast.Not):
        return None
    inner = test.operand
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "hasattr":
        named = _attribute_named(inner.args)
        return None if named is None else f"{named[0]}.{named[1]}"
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and not inner.args and \
            inner.func.attr in ("item", "all", "any"):
        inner = inner.func.value
    return dotted(inner)


def _attribute_named(args: list[ast.expr]) -> tuple[str, str] | None:
    """(`o`, `x`) for the arguments `o, "x"` of `hasattr` / `setattr`."""
    if len(args) < 2 or not isinstance(args[1], ast.Constant) or not isinstance(args[1].value, str):
        return None
    base = dotted(args[0])
    return None if base is None else (base, args[1].value)


def _sets(node: ast.AST, subject: str) -> bool:
    """`node` assigns `subject`, fills it in place (`fill_`, `copy_`) or `setattr`s it."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(dotted(t) == subject for t in targets)
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("fill_", "copy_"):
        return dotted(node.func.value) == subject
    if isinstance(node.func, ast.Name) and node.func.id == "setattr":
        named = _attribute_named(node.args)
        return named is not None and f"{named[0]}.{named[1]}" == subject
    return False


__all__ = ["dotted", "initialises"]
