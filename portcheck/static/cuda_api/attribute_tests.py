"""What a class assigns to a `self.<name>` flag, for guards written as the flag: `self.use_flash =
torch.cuda.is_available() and ...` in `__init__`, then `if not self.use_flash: return` there or `if self.use_flash:`
in `forward` (stable-audio-tools). Pure syntax: the caller judges each value (cuda_api.paths.polarity)."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import self_attribute


def attribute_values(ctx: Context, node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """Every value the enclosing class's methods assign to `self.<name>` that `node` reads; None where one is not
    known (an augmented assignment, a tuple unpacked, `setattr`), the class assigns none, or `node` is no such
    attribute."""
    name = self_attribute(node)
    cls = ctx.enclosing_class
    if name is None or cls is None:
        return None
    return ctx.memo("attribute-values", cls, lambda: _assignments(cls)).get(name)


def _assignments(cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression] | None]:
    found: dict[str, list[cst.BaseExpression] | None] = {}

    def note(target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        name = self_attribute(target)
        if name is None:
            if isinstance(target, (cst.Tuple, cst.List)):
                for element in target.elements:
                    note(element.value, None)
            return
        known = found.get(name, [])
        found[name] = None if known is None or value is None else [*known, value]

    class Finder(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return node is cls  # a nested class's `self` is another object

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                note(target.target, node.value if len(node.targets) == 1 else None)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            note(node.target, node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            note(node.target, None)

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "setattr":
                found["*"] = None

    cls.visit(Finder())
    return {} if "*" in found else found


def false_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"
