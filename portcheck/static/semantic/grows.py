"""Functions that hand back a parameter grown by `torch.cat`, read from Python's syntax tree: a `return` gives
(itself, or as an element of a tuple) `torch.cat([param, more])` or a local name bound to that, where `param` is one
of the function's parameters (`def update(self, tokens, logits): tokens = torch.cat([tokens, next_tokens], -1);
return tokens, completed`). A decode loop that rebinds its input to what such a function returns and feeds it to the
model grows that input every step (summaries.GROWS_OF)."""

from __future__ import annotations

import ast

GROWS = "grows"  # a `return` hands back a parameter grown by concatenation (summary role)

_CONCAT = frozenset({"cat", "concat", "concatenate", "hstack", "column_stack"})
_KEEPS = frozenset({"to", "detach", "contiguous", "long", "int", "clone"})


def returns_grown(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A `return` of `function` (nested functions have their own) hands back one of its parameters grown by
    concatenation, itself or as an element of a tuple."""
    arguments = function.args
    params = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)} - {"self"}
    if not params:
        return False
    grown: set[str] = set()  # local names bound to a parameter grown by concatenation
    returns: list[ast.expr] = []
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            returns.append(node.value)
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and _concatenates(node.value, params | grown)):
            grown.add(node.targets[0].id)
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                todo.extend(block)
    for value in returns:
        parts = value.elts if isinstance(value, ast.Tuple) else [value]
        if any((isinstance(p, ast.Name) and p.id in grown) or _concatenates(p, params) for p in parts):
            return True
    return False


def _concatenates(value: ast.expr, names: set[str]) -> bool:
    """`torch.cat([tokens, x], dim=-1)` (also `.detach()`-ed) with one of `names` among the parts."""
    while (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _KEEPS
           and isinstance(value.func.value, ast.Call)):
        value = value.func.value
    if not (isinstance(value, ast.Call) and value.args and isinstance(value.args[0], (ast.List, ast.Tuple))):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in _CONCAT or len(value.args[0].elts) < 2:
        return False
    return any(isinstance(e, ast.Name) and e.id in names for e in value.args[0].elts)


__all__ = ["GROWS", "returns_grown"]
