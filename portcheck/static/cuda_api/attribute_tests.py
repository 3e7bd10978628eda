"""What a class assigns to a `self.<name>` flag, for guards written as the flag: `self.use_flash =
torch.cuda.is_available() and ...` in `__init__`, then `if not self.use_flash: return` there or `if self.use_flash:`
in `forward` (stable-audio-tools). Pure syntax: the caller judges each value (cuda_api.paths.polarity)."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck.static.attribute_defaults import self_assignments
from portcheck.static.check import Context
from portcheck.static.syntax import block_body, blocks, self_attribute


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
    for _, name, value in self_assignments(cls) or ():
        known = found.get(name, [])
        found[name] = None if known is None or value is None else [*known, value]
    return found


def false_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


Read = tuple[cst.CSTNode, cst.Attribute, list[cst.CSTNode]]  # (statement, the read, the statements after it)


def attribute_reads(ctx: Context, name: str) -> list[Read] | None:
    """Every read of `self.<name>` in the enclosing class's methods, with the statement holding it on its own lines
    and the statements that follow that one in its block (for `if not self.flag: return`); None where there is no
    class. A nested class's `self` is another object's."""
    cls = ctx.enclosing_class
    if cls is None:
        return None
    return ctx.memo("attribute-reads", cls, lambda: _reads(cls)).get(name, [])


def _reads(cls: cst.ClassDef) -> dict[str, list[Read]]:
    found: dict[str, list[Read]] = {}
    pending: list[Sequence[cst.BaseStatement]] = [block_body(cls.body)]
    while pending:
        block = pending.pop()
        for index, statement in enumerate(block):
            if isinstance(statement, cst.ClassDef):
                continue
            for read in _own_reads(statement):
                found.setdefault(read.attr.value, []).append((statement, read, list(block[index + 1:])))
            pending.extend(blocks(statement))
    return found


def _own_reads(statement: cst.CSTNode) -> list[cst.Attribute]:
    """`self.<name>` reads on the statement's own lines (not its blocks, not what an assignment binds)."""
    found: list[cst.Attribute] = []
    stack: list[cst.CSTNode] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.BaseSuite, cst.AssignTarget)):
            continue
        if isinstance(node, cst.Attribute) and self_attribute(node) is not None:
            found.append(node)
            continue
        stack.extend(c for c in node.children if not (isinstance(node, cst.AnnAssign) and c is node.target))
    return found
