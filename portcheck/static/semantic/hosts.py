"""Host values at a call site, read from Python's syntax tree for the file's summary: an argument that is a tensor
copied to the host (`x.cpu()`, `x.to("cpu")`), a numpy, pandas or scipy value, or what indexing, arithmetic and
tensor methods make of one, directly or through a local name bound once before the call.

The call graph reads these per parameter: where every call of a function passes a host value for a parameter, the
function works on the host there (Function.passes, Finding.host_if).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from portcheck.static.scope import HOST_RESULTS

# Libraries whose values live on the host.
_HOST_LIBRARIES = ("numpy.", "pandas.", "scipy.", "sklearn.")
# Methods that can move a value to the device: their result is not known to be on the host.
_MOVES = frozenset({"to", "cuda", "xpu", "type", "pin_memory"})


class Bindings:
    """Local names bound once to a host value (True) or to something else (False), in the order a function's
    statements bind them; a name bound twice, or by a loop, `with` or unpacking, is unknown (None)."""

    def __init__(self, resolve: Callable[[ast.expr], str | None], params: frozenset[str] = frozenset(),
                 local: bool = True) -> None:
        self.resolve = resolve
        self.names: dict[str, bool | None] = {}
        self.params = params  # the function's own parameters: an argument made of one is passed on as it came
        self.local = local  # a function's names (False: the module's, which its imports may share)

    def bind(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets: list[ast.expr] = list(stmt.targets) if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                name = targets[0].id
                self.names[name] = None if name in self.names else self.host(stmt.value)
                return
            self._unknown(targets)
        elif isinstance(stmt, (ast.AugAssign, ast.For, ast.AsyncFor)):
            self._unknown([stmt.target])
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self._unknown([item.optional_vars for item in stmt.items if item.optional_vars is not None])

    def binds(self, name: str) -> bool:
        """`name` is a parameter or a local bound so far: there it is not what the file imports under that name."""
        return self.local and (name in self.params or name in self.names)

    def _unknown(self, targets: list[ast.expr]) -> None:
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    self.names[node.id] = None

    def host(self, node: ast.expr, depth: int = 0) -> bool:
        if depth > 8:
            return False
        if isinstance(node, ast.Call):
            target = self.resolve(node.func) or ""
            if target.startswith(_HOST_LIBRARIES):
                return True
            if not isinstance(node.func, ast.Attribute):
                return False
            method = node.func.attr
            if method in HOST_RESULTS:
                return True
            if method == "to":
                first = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg == "device"), None)
                return first is not None and _cpu(first)
            if method in _MOVES:
                return False
            return self.host(node.func.value, depth + 1)
        if isinstance(node, ast.Subscript):
            return self.host(node.value, depth + 1)
        if isinstance(node, ast.BinOp):
            sides = [s for s in (node.left, node.right) if not isinstance(s, ast.Constant)]
            return bool(sides) and all(self.host(s, depth + 1) for s in sides)
        if isinstance(node, ast.UnaryOp):
            return self.host(node.operand, depth + 1)
        if isinstance(node, ast.Name):
            return self.names.get(node.id) is True
        return False

    def parameter(self, node: ast.expr, depth: int = 0) -> str | None:
        """The function's parameter `node` is made of, as it came: the parameter itself (never rebound), indexed,
        or through methods that keep a value where it is (`p.double()`, `p[mask]`); None for anything else."""
        if depth > 8:
            return None
        if isinstance(node, ast.Name):
            return node.id if node.id in self.params and node.id not in self.names else None
        if isinstance(node, ast.Subscript):
            return self.parameter(node.value, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr not in _MOVES:
            return self.parameter(node.func.value, depth + 1)  # a method of the parameter: `p.double()`
        return None


def _cpu(node: ast.expr) -> bool:
    """`"cpu"` or `torch.device("cpu")`."""
    if isinstance(node, ast.Constant):
        return node.value == "cpu"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "device"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "cpu")


def host_arguments(bindings: Bindings, call: ast.Call) -> tuple[str, ...]:
    """Which of `call`'s arguments are host values: `#i` for the i-th positional one, the keyword's name else; and
    which pass on one of the caller's parameters as it came: `#i@p`, `keyword@p` (host where every call of the
    caller passes a host value for `p`)."""
    found: list[str] = []
    arguments = [(f"#{i}", arg) for i, arg in enumerate(call.args) if not isinstance(arg, ast.Starred)]
    arguments.extend((k.arg, k.value) for k in call.keywords if k.arg is not None)
    for where, arg in arguments:
        if bindings.host(arg):
            found.append(where)
        elif (param := bindings.parameter(arg)) is not None:
            found.append(f"{where}@{param}")
    return tuple(found)


__all__ = ["Bindings", "host_arguments"]
