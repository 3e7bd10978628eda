"""What a file's import statements say, read from Python's syntax tree: the names they bind, the modules a call
imports by name, and whether an import runs only where an optional dependency is installed."""

from __future__ import annotations

import ast

from portcheck.static.semantic.once import dotted
from portcheck.static.values import AVAILABILITY


def import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted name, for every import in the file (a relative import keeps its dots). Only statements
    are walked: an import is one, and expressions are most of a tree."""
    aliases: dict[str, str] = {}
    pending: list[list[ast.stmt]] = [tree.body]
    while pending:
        for node in pending.pop():
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        aliases.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.name != "*":
                        joined = f"{base}.{alias.name}" if base and not base.endswith(".") else base + alias.name
                        aliases[alias.asname or alias.name] = joined
            elif isinstance(node, ast.Assign):
                lazy = lazy_import(node.value)
                # `trt = importlib.import_module("tensorrt")`, `trt, _ = optional_import("tensorrt")`
                target = node.targets[0]
                if isinstance(target, ast.Tuple) and target.elts:
                    target = target.elts[0]
                if lazy is not None and isinstance(target, ast.Name):
                    aliases[target.id] = lazy
            else:
                for field in ("body", "orelse", "finalbody"):
                    block = getattr(node, field, None)
                    if isinstance(block, list):
                        pending.append(block)
                for handler in getattr(node, "handlers", ()):
                    pending.append(handler.body)
    return aliases


def lazy_import(value: ast.expr) -> str | None:
    """The module a call imports by name (`importlib.import_module("m")`, `optional_import("m")`), or None."""
    if not isinstance(value, ast.Call) or not value.args:
        return None
    name = dotted(value.func) or ""
    first = value.args[0]
    if name.rsplit(".", 1)[-1] in ("import_module", "optional_import", "__import__") and isinstance(
            first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def optional_test(test: ast.expr) -> bool:
    """`if is_bnb_available():`, `if _APEX_AVAILABLE and x:`, `if importlib.util.find_spec("m"):`: the block runs
    only where an optional dependency is installed."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(optional_test(value) for value in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot):
        test = test.left  # `find_spec("m") is not None`
    name = dotted(test.func if isinstance(test, ast.Call) else test) or ""
    last = name.rsplit(".", 1)[-1]
    if name.endswith("cuda.is_available"):
        return False  # a CUDA guard, which the call graph reads as one
    return bool(AVAILABILITY.search(last)) or (last.isupper() and "AVAILABLE" in last)


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((dotted(k) or "") in ("ImportError", "ModuleNotFoundError") for k in kinds if k is not None)


__all__ = ["catches_import_error", "import_aliases", "lazy_import", "optional_test"]
