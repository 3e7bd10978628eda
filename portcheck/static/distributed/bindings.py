"""Backends bound in branches: `if xpu: backend = "xccl" else: backend = "nccl"`, for PC604."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import string_value
from portcheck.static.walk import visit

# Backends a branch may bind besides "nccl" that a Neuron host never takes (other vendors' collectives).
_VENDOR_BACKENDS = frozenset({"nccl", "xccl", "hccl", "ccl", "cncl", "mccl", "rccl"})


def _branch_bindings(ctx: Context, name: str) -> list[cst.BaseExpression] | None:
    """The values of every `name = ...` in the enclosing function (or the module), nested functions aside; None
    when the name is bound otherwise too (a parameter, a loop target, `... as name`, an augmented assignment)."""
    scope: cst.CSTNode = ctx.functions[-1] if ctx.functions else ctx.module
    values: list[cst.BaseExpression] = []
    other = False

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            nonlocal other
            if node is scope:
                params = (*node.params.params, *node.params.kwonly_params, *node.params.posonly_params)
                other = other or any(param.name.value == name for param in params)
                return True
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    values.append(node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            nonlocal other
            other = other or (isinstance(node.target, cst.Name) and node.target.value == name)

        def visit_For(self, node: cst.For) -> None:
            nonlocal other
            other = other or name in ctx.source(node.target).replace(",", " ").split()

        def visit_AsName(self, node: cst.AsName) -> None:
            nonlocal other
            other = other or (isinstance(node.name, cst.Name) and node.name.value == name)

    visit(scope, Finder())
    return None if other or not values else values


def falls_back_to_nccl(ctx: Context, node: cst.BaseExpression) -> bool:
    """`node` is a name whose bindings are all vendor backends, one of them "nccl": the branch a Neuron host
    takes (neither xpu's nor hpu's) asks for NCCL."""
    if not isinstance(node, cst.Name) or ctx.constant(node) is not None:
        return False
    values = _branch_bindings(ctx, node.value)
    texts = [string_value(value) for value in values] if values is not None and len(values) > 1 else []
    return bool(texts) and "nccl" in texts and all(text in _VENDOR_BACKENDS for text in texts)


__all__ = ["falls_back_to_nccl"]
