"""A decode loop's stop check: `if (ys == eos).any(-1).all(): break` in a bounded loop (`for i in range(max_len):`)
that calls the model every step. The loop is driven from the host and reads one value a step to end early; the
model's graph has no branch: a per-step stop check of a host-driven decode loop is harmless. A training
loop's check (`backward()`, `optimizer.step()` in the loop) is not one: there the read cuts every training step."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.dynamic_shape.states import target_names
from portcheck.static.walk import visit

# Calls that are no model: Python's own functions.
_BUILTINS = frozenset({"len", "print", "range", "enumerate", "zip", "list", "tuple", "dict", "set", "int", "float",
                       "bool", "str", "isinstance", "min", "max", "sum", "any", "all", "sorted", "abs", "round",
                       "getattr", "hasattr", "setattr", "type", "iter", "next", "reversed", "repr"})
_TRAINING = frozenset({"backward", "step", "zero_grad"})


def early_exit(ctx: Context, node: cst.CSTNode) -> str | None:
    """The model call (`self.decoder`, `model`) of the bounded `for` loop that `node`, an `if` whose body only
    leaves the loop (`break`, `return`), ends early; None for anything else, or a training loop."""
    if not isinstance(node, cst.If) or node.orelse is not None or not _only_leaves(node.body):
        return None
    loop: cst.CSTNode | None = None
    for statement in reversed(ctx.statements):
        if statement is node:
            continue
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.For, cst.While)):
            loop = statement
            break
    if not isinstance(loop, cst.For):
        return None  # a `while` loop's exit may be its only end: the read decides how long it runs
    return ctx.memo("stop-check-callee", loop, lambda: _model_call(ctx, loop))


def _only_leaves(body: cst.BaseSuite) -> bool:
    """Simple statements only, the last of which leaves the loop: `break`, or `return ...`."""
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    if not lines or not all(isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) for line in lines):
        return False
    last = lines[-1]
    return isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and bool(last.body) and isinstance(
        last.body[-1], (cst.Break, cst.Return))


def _model_call(ctx: Context, loop: cst.For) -> str | None:
    """The first call in `loop` of a module the code holds (`self.decoder(...)`, `model(...)`), or None; None as
    well where the loop trains (`loss.backward()`, `optimizer.step()`)."""
    found: list[str] = []
    training = False
    # a function of the module (`normalize(u)`) is a computation's step, not a model: the loop is an iteration's
    varying = {n.value for n in target_names(loop.target)} | ctx.memo("module-functions", ctx.module, lambda: {
        s.name.value for s in ctx.module.body if isinstance(s, cst.FunctionDef)})
    # likewise a method of the class (`self._neighbourhood(...)`, kornia's SIFT refinement): a submodule the object
    # holds (`self.decoder(...)`, `self.head(...)`) is what a decode loop calls
    cls = ctx.enclosing_class
    methods = set() if cls is None else ctx.memo("class-methods", cls, lambda: {
        s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef)})

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Call(self, call: cst.Call) -> None:
            nonlocal training
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _TRAINING:
                training = True
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                    and func.attr.value not in methods:
                found.append(f"self.{func.attr.value}")
            elif isinstance(func, cst.Name) and func.value not in _BUILTINS and func.value not in varying and (
                    ctx.qualname(func) is None):
                found.append(func.value)

    visit(loop.body, Finder())
    return None if training or not found else found[0]


__all__ = ["early_exit"]
