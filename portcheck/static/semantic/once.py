"""Code that runs once, not every step, as a file's syntax shows it: a lazy initialisation, whose body sets what
its test asks (`if self.cache is None: self.cache = ...`), itself or through a method of its class it calls (`if
not self.initialized: self._initialize_u_v()`, which ends `self.initialized.fill_(1)`); and the rest of a function
after `if self.initted: return` where that rest sets it (a codebook's k-means initialisation on the first batch)."""

from __future__ import annotations

import ast

from portcheck.static.semantic.kinds import CACHING
from portcheck.static.semantic.nodes import statements_in


def dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def cached(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated to cache its result (`@functools.cache`, `@lru_cache(...)`, `@cached_property`): its body runs once
    per argument or object."""
    return any((dotted(d.func if isinstance(d, ast.Call) else d) or "").rsplit(".", 1)[-1] in CACHING
               for d in function.decorator_list)


def initialises(stmt: ast.If, setters: Setters | None = None) -> bool:
    """`if X is None: X = ...`, `if not X: ... X = True`, `if not hasattr(o, "x"): o.x = ...`,
    `if not flag.item(): ... flag.fill_(1)`, `if not self.done > 0: ... self.done = torch.tensor(1.0)`: the body sets
    what its test asks, so it runs once; `setters` (setters_of the class) name the methods that set `self.X`, for a
    body that calls one (`self._initialize()`)."""
    subject = _tested(stmt.test)
    if subject is None or "." not in subject:
        return False  # a local or a parameter (`if mask is None: mask = ones(...)`) is tested again every call
    return _sets_in(stmt.body, subject, setters or Setters())


def initialised_after(stmt: ast.If, rest: list[ast.stmt], setters: Setters | None = None) -> bool:
    """`if self.initted: return` (the body only leaves) followed by `rest`, which sets `self.initted`: the rest runs
    once, on the first call."""
    if not stmt.body or not all(isinstance(s, (ast.Return, ast.Pass)) for s in stmt.body):
        return False
    subject = _truth_of(stmt.test)
    return subject is not None and subject.startswith("self.") and _sets_in(rest, subject, setters or Setters())


def setters_of(cls: ast.ClassDef) -> dict[str, frozenset[str]]:
    """The methods of `cls` (by name) and the `self.X` each sets in its own body (assigns, fills, copies into). A
    method that loops over data is left out: what it does grows with its data (trl's first-use estimate of V*
    generates for every prompt of the dataset), a workload whatever calls it, not set-up; a loop of a fixed count
    (`for _ in range(10):`, a seed search) is part of the initialisation."""
    found: dict[str, frozenset[str]] = {}
    for method in cls.body:
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and not any(
                _over_data(n) for n in statements_in(method)):
            subjects = {_subject(child) for node in method.body for child in ast.walk(node)}
            found[method.name] = frozenset(s for s in subjects if s is not None and s.startswith("self."))
    return found


class Setters:
    """`setters_of(cls)`, worked out the first time a test's body calls a method of the class: most classes never
    do, and reading every method of every class was a fifth of a file's summary."""

    def __init__(self, cls: ast.ClassDef | None = None) -> None:
        self._cls = cls
        self._found: dict[str, frozenset[str]] | None = None if cls is not None else {}

    def get(self, method: str) -> frozenset[str]:
        if self._found is None:
            assert self._cls is not None  # only a Setters of no class starts out found
            self._found = setters_of(self._cls)
        return self._found.get(method, frozenset())


def _over_data(node: ast.AST) -> bool:
    """A `while` loop, or a `for` loop over anything but `range(<a number>)`."""
    if isinstance(node, ast.While):
        return True
    if not isinstance(node, (ast.For, ast.AsyncFor)):
        return False
    it = node.iter
    return not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and all(
        isinstance(a, ast.Constant) and isinstance(a.value, int) for a in it.args))


def _sets_in(body: list[ast.stmt], subject: str, setters: Setters) -> bool:
    for node in body:
        for child in ast.walk(node):
            if _sets(child, subject):
                return True
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and isinstance(
                    child.func.value, ast.Name) and child.func.value.id == "self" and subject.startswith("self.") \
                    and subject in setters.get(child.func.attr):
                return True
    return False


def _truth_of(test: ast.expr) -> str | None:
    """What `X`, `X.item()`, `X.all()` or `X.any()` takes the truth of, as a dotted name."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and not test.args and \
            test.func.attr in ("item", "all", "any"):
        test = test.func.value
    return dotted(test)


def _tested(test: ast.expr) -> str | None:
    """What `X is None`, `not X`, `not X.item()` or `not hasattr(o, "x")` asks about, as a dotted name."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.Eq)) and \
            isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        return dotted(test.left)
    if not isinstance(test, ast.UnaryOp) or not isinstance(test.op, ast.Not):
        return None
    inner = test.operand
    if isinstance(inner, ast.Compare) and len(inner.ops) == 1 and isinstance(inner.ops[0], (ast.Gt, ast.NotEq)) \
            and isinstance(inner.comparators[0], ast.Constant) and inner.comparators[0].value in (0, False):
        return dotted(inner.left)  # `not self.done > 0.0`: not yet set to a positive value
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
    """`node` assigns `subject`, fills it in place (`fill_`, `copy_`, through `.data` too) or `setattr`s it."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(dotted(t) == subject for t in targets)
    return _subject(node) == subject


def _subject(node: ast.AST) -> str | None:
    """What a call fills in place or `setattr`s (`x.fill_(1)`, `x.data.copy_(t)`: `x`), or an assignment's single
    target, as a dotted name; None for anything else."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return dotted(node.targets[0])
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("fill_", "copy_"):
        filled = dotted(node.func.value)
        return filled[:-len(".data")] if filled is not None and filled.endswith(".data") else filled
    if isinstance(node.func, ast.Name) and node.func.id == "setattr":
        named = _attribute_named(node.args)
        return None if named is None else f"{named[0]}.{named[1]}"
    return None


__all__ = ["Setters", "dotted", "initialised_after", "initialises", "setters_of"]
