"""Decode loops that feed back what a function of the project returns, read from Python's syntax tree: a call in a
loop whose result rebinds a name it is given (`tokens, completed = self.decoder.update(tokens, logits)`), where
another call of the same loop is given that name too (`logits = self.model.logits(tokens, audio)`). Function.passes
marks such a call (REGROWS), and the call graph keeps a finding about a parameter the callee grows and hands back
(`tokens = torch.cat([tokens, next_tokens], dim=-1)`, `return tokens, completed`) where one of its calls is one
(summaries.FED_BACK): the model's input is then one token longer every step."""

from __future__ import annotations

import ast

REGROWS = "regrows"  # a Passed marker (Function.passes' host values): the call is a decode loop's feedback


def regrow_calls(function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int]:
    """The ids of the calls of `function`'s own loops (not those of the functions it defines) that rebind a name
    they are given while another call of the loop is given it as well."""
    found: set[int] = set()
    for loop in _own(function.body):
        if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
            continue
        inside = _own(loop.body)
        candidates = [(n.targets[0], n.value) for n in inside if isinstance(n, ast.Assign) and len(n.targets) == 1
                      and isinstance(n.value, ast.Call)]
        if not candidates:
            continue
        calls = [call for call in ast.walk(loop) if isinstance(call, ast.Call)]
        bound = _bound(loop, inside)
        for target, call in candidates:
            names = {e.id for e in (target.elts if isinstance(target, ast.Tuple) else [target])
                     if isinstance(e, ast.Name)}
            given = [a.id for a in call.args if isinstance(a, ast.Name) and a.id in names]
            # what flows from one step to the next: bound before the loop, and in it only by this call's result
            if len(given) == 1 and bound.get(given[0]) == 1 and any(
                    other is not call and _given(other, given[0]) for other in calls):
                found.add(id(call))
    return frozenset(found)


def _bound(loop: ast.For | ast.AsyncFor | ast.While, inside: list[ast.AST]) -> dict[str, int]:
    """How often the loop binds each name: its own target (a new value every step) counts twice."""
    counts: dict[str, int] = {}
    targets: list[ast.expr] = [loop.target, loop.target] if isinstance(loop, (ast.For, ast.AsyncFor)) else []
    for node in inside:
        if isinstance(node, ast.Assign):
            targets.extend(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets.append(node.target)
    for target in targets:
        for name in ast.walk(target):
            if isinstance(name, ast.Name):
                counts[name.id] = counts.get(name.id, 0) + 1
    return counts


def _given(call: ast.Call, name: str) -> bool:
    return any(isinstance(a, ast.Name) and a.id == name for a in (*call.args, *(k.value for k in call.keywords)))


def _own(body: list[ast.stmt]) -> list[ast.AST]:
    """The statements of `body` and of the blocks inside it, not those of functions or classes it defines."""
    found: list[ast.AST] = []
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        found.append(node)
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                todo.extend(block)
    return found


__all__ = ["REGROWS", "regrow_calls"]
