"""Code that runs once every N steps, as a file's syntax shows it: the body of `if step % N == 0:`, or the rest of a
block after `if step % N != 0: return` (a demo callback's `if (trainer.global_step - 1) % self.demo_every != 0:
return`). JUDGING counts logging, demos and checkpoints behind such an interval as harmless: what they compute
runs once in N steps, not in the step.

The remainder must be a counter's: a loop's target (`for step, batch in enumerate(loader)`), a name or attribute
the file increments (`self.step += 1`), or a trainer's own count (`global_step`, `current_epoch`). `if n % 2 == 1:`
on a size is a shape's parity, not an interval. A block that holds a training step of its own is no interval
either: gradient accumulation's `if (i + 1) % k == 0: optimizer.step()` is the step."""

from __future__ import annotations

import ast

from portcheck.static.semantic.once import dotted

# The step and epoch counts a training framework keeps on its trainer or state (Lightning's `trainer.global_step`
# and `current_epoch`, transformers' `state.global_step`): counters the project never increments itself.
_FRAMEWORK_COUNTERS = frozenset({"global_step", "current_epoch"})
# What a training step calls: a block calling it holds a step of its own. (`backward()` alone is no step: a demo
# takes gradients for a saliency image and clears them.)
_STEP_CALLS = frozenset({"step"})


def counters(tree: ast.Module) -> frozenset[str]:
    """The dotted names the file counts with: every `for` loop's targets (`i`, `step` of `for step, batch in ...`)
    and every name or attribute incremented by a constant (`self.n += 1`, `it = it + 1`)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
            found.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.value, ast.Constant):
            if (name := dotted(node.target)) is not None:
                found.add(name)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp) and \
                isinstance(node.value.op, ast.Add) and isinstance(node.value.right, ast.Constant):
            name = dotted(node.targets[0])
            if name is not None and name == dotted(node.value.left):
                found.add(name)
    return frozenset(found)


def _counted(remainder: ast.expr, known: frozenset[str]) -> bool:
    """`step % N`, `(trainer.global_step - 1) % N`, `(i + 1) % N`: the remainder of a counter."""
    if not isinstance(remainder, ast.BinOp) or not isinstance(remainder.op, ast.Mod):
        return False
    left = remainder.left
    while isinstance(left, ast.BinOp) and isinstance(left.op, (ast.Add, ast.Sub)) and isinstance(
            left.right, ast.Constant):
        left = left.left
    name = dotted(left)
    return name is not None and (name in known or name.rsplit(".", 1)[-1] in _FRAMEWORK_COUNTERS)


def _zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _operands(test: ast.expr, op: type[ast.boolop]) -> list[ast.expr]:
    return list(test.values) if isinstance(test, ast.BoolOp) and isinstance(test.op, op) else [test]


def at_interval(test: ast.expr, known: frozenset[str]) -> bool:
    """`if step % N == 0:` (and other conditions with it; `if not step % N:`): the body runs at the interval."""
    for operand in _operands(test, ast.And):
        if isinstance(operand, ast.UnaryOp) and isinstance(operand.op, ast.Not) and _counted(operand.operand, known):
            return True
        if isinstance(operand, ast.Compare) and len(operand.ops) == 1 and isinstance(operand.ops[0], ast.Eq) and (
                _zero(operand.comparators[0]) and _counted(operand.left, known)):
            return True
    return False


def off_interval(stmt: ast.If, known: frozenset[str]) -> bool:
    """`if step % N != 0: return` (or `continue`; other conditions `or`-ed with it): the rest of the block runs only
    at the interval."""
    if stmt.orelse or not stmt.body or not isinstance(stmt.body[-1], (ast.Return, ast.Continue)):
        return False
    for operand in _operands(stmt.test, ast.Or):
        if _counted(operand, known):
            return True  # `if step % N: return`
        if isinstance(operand, ast.Compare) and len(operand.ops) == 1 and isinstance(operand.ops[0], ast.NotEq) and (
                _zero(operand.comparators[0]) and _counted(operand.left, known)):
            return True
    return False


def steps(body: list[ast.stmt]) -> bool:
    """The statements call `step()` (an optimizer's, a scheduler's): a training step of their own."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STEP_CALLS
               for stmt in body for node in ast.walk(stmt))


class Intervals:
    """The interval tests of one file (a summary asks inside functions only); its counters are read from the tree
    the first time a test takes a remainder."""

    def __init__(self, tree: ast.Module | None) -> None:
        self._tree = tree
        self._known: frozenset[str] | None = None

    def _counters(self, test: ast.expr) -> frozenset[str] | None:
        """The file's counters, or None where `test` takes no remainder (most tests: no need to read the tree)."""
        if not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test)):
            return None
        if self._known is None:
            self._known = counters(self._tree) if self._tree is not None else frozenset()
        return self._known

    def body(self, stmt: ast.If) -> bool:
        """The body of `stmt` runs at an interval and steps nothing."""
        known = self._counters(stmt.test)
        return known is not None and at_interval(stmt.test, known) and not steps(stmt.body)

    def rest(self, stmt: ast.If, rest: list[ast.stmt]) -> bool:
        """`rest`, the statements after `stmt` in its block, run only at an interval and step nothing."""
        known = self._counters(stmt.test)
        return known is not None and off_interval(stmt, known) and not steps(rest)


__all__ = ["Intervals", "at_interval", "counters", "off_interval", "steps"]
