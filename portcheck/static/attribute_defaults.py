"""What a `self.<name>` attribute holds when the class sets it once from a constructor's parameter or a literal:
`def __init__(self, dist_backend="nccl"): self.dist_backend = dist_backend` makes `self.dist_backend` "nccl"
unless a caller passes another value. Rules that follow a default into the call that uses it (a process group's
backend) read it through `ctx.constant` for names and this for attributes."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import parameters, self_attribute
from portcheck.static.walk import visit


def attribute_default(ctx: Context, node: cst.BaseExpression) -> tuple[str, cst.BaseExpression] | None:
    """("self.name", value) where the class being read assigns `self.name` exactly once in its methods, to a
    literal, a call, or a parameter of that method with a default (the default, then); None otherwise (assigned
    twice, from another expression, through `setattr`, or no class)."""
    name = self_attribute(node)
    cls = ctx.enclosing_class
    if name is None or cls is None:
        return None
    found = ctx.memo("attribute-defaults", cls, lambda: _assigned_once(cls))
    value = found.get(name)
    return None if value is None else (f"self.{name}", value)


Assignment = tuple[cst.FunctionDef | None, str, cst.BaseExpression | None]


def self_assignments(cls: cst.ClassDef) -> list[Assignment] | None:
    """Each assignment to a `self.<name>` in the class's methods, in order: (the method, the name, the value; None
    where one target of several, an augmented assignment, or an unpacked tuple gives it no single value). None
    where the class sets attributes through `setattr` (any name may be set). A nested class's `self` is another
    object's."""
    found: list[Assignment] = []
    methods: list[cst.FunctionDef] = []
    dynamic = False

    def note(target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        name = self_attribute(target)
        if name is not None:
            found.append((methods[-1] if methods else None, name, value))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                note(element.value, None)

    class Finder(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return node is cls

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            methods.append(node)

        def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
            methods.pop()

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                note(target.target, node.value if len(node.targets) == 1 else None)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            note(node.target, node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            note(node.target, None)

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal dynamic
            dynamic = dynamic or (isinstance(node.func, cst.Name) and node.func.value == "setattr")

    visit(cls, Finder())
    return None if dynamic else found


def _assigned_once(cls: cst.ClassDef) -> dict[str, cst.BaseExpression | None]:
    """Per attribute of `self` the class's methods assign: the value a single assignment gives it (a literal, or
    the default of the method's parameter it copies), else None."""
    found: dict[str, cst.BaseExpression | None] = {}
    for method, name, value in self_assignments(cls) or ():
        found[name] = None if name in found else _given(method, value)
    return found


def built_as(ctx: Context, node: cst.BaseExpression) -> str | None:
    """The qualified name of what built the object `node` names: `self.loss` that the class assigns once,
    `self.loss = nn.GaussianNLLLoss()`, or a local name bound once, `criterion = nn.GaussianNLLLoss()`."""
    bound = attribute_default(ctx, node) or ctx.constant(node)
    value = bound[1] if bound is not None else None
    return ctx.qualname(value.func) if isinstance(value, cst.Call) else None


def _given(method: cst.FunctionDef | None, value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """A literal or a call as it is; a parameter of `method` as its default."""
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float, cst.Call)):
        return value
    if isinstance(value, cst.Name) and method is not None:
        param = next((p for p in parameters(method) if p.name.value == value.value), None)
        return param.default if param is not None else None
    return None


__all__ = ["attribute_default", "built_as"]
