"""Attributes that hold host values: `self.offset = torch.tensor(0)` made without a device and never registered as
a buffer or a parameter. `nn.Module.to(device)` moves parameters and buffers only, so such a tensor stays on the CPU
unless the class itself assigns the attribute something else (`self.offset = self.offset.to(x.device)`)."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import call_name, keyword, self_attribute, string_value
from portcheck.static.walk import visit

# torch factories whose result is on the CPU without `device=`, whatever their arguments (sizes, fill values).
_SIZED = frozenset(f"torch.{n}" for n in ("zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye",
                                           "rand", "randn", "randint", "randperm"))
# these copy their data, and keep a tensor's device: on the CPU only when the data is Python numbers.
_COPIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.LongTensor", "torch.FloatTensor"})
_DTYPE_METHODS = frozenset({"float", "double", "long", "int", "bool", "half", "clone", "contiguous"})
_REGISTERS = frozenset({"register_buffer", "register_parameter"})


def _python_data(node: cst.BaseExpression) -> bool:
    """Numbers, or lists and tuples of them (`0`, `[1.0, -2]`, `((1, 2), (3, 4))`)."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _python_data(node.expression)
    if isinstance(node, (cst.List, cst.Tuple)):
        return all(_python_data(e.value) for e in node.elements)
    return False


def _made_on_host(ctx: Context, value: cst.BaseExpression) -> bool:
    """A CPU tensor or a numpy value, as the assignment itself shows."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and ctx.qualname(value.func) is None:
        if call_name(value) not in _DTYPE_METHODS or value.args:
            return False
        value = value.func.value  # `torch.zeros(3).long()`
    if not isinstance(value, cst.Call):
        return False
    qualname = ctx.qualname(value.func) or ""
    if qualname.startswith("numpy."):
        return True
    if keyword(value, "device") is not None:
        return False
    if qualname in _SIZED:
        return True
    return qualname in _COPIES and bool(value.args) and _python_data(value.args[0].value)


def _assignments(ctx: Context, cls: cst.ClassDef) -> dict[str, bool]:
    """Per attribute of `self` the class assigns: whether every assignment makes a host value (and the attribute is
    never a buffer or a parameter, nor bound otherwise: unpacking, `+=`)."""
    found: dict[str, bool] = {}

    def note(target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if (name := self_attribute(target)) is not None:
            found[name] = found.get(name, True) and value is not None and _made_on_host(ctx, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                note(element.value, None)

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                note(target.target, node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            note(node.target, node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            note(node.target, None)

        def visit_Call(self, node: cst.Call) -> None:
            if call_name(node) in _REGISTERS and node.args and (name := string_value(node.args[0].value)):
                found[name] = False
            elif call_name(node) == "setattr":
                found.clear()  # attributes named at run time: no reading of any of them holds
                found["*"] = False

    visit(cls, Finder())
    return found


def host_attribute(ctx: Context, name: str) -> bool:
    """`self.<name>` in the class being read holds a host value: every assignment of it in the class makes a CPU
    tensor or a numpy value, and it is no buffer or parameter."""
    cls = ctx.enclosing_class
    if cls is None:
        return False
    found = ctx.memo("host-attributes", cls, lambda: _assignments(ctx, cls))
    return "*" not in found and found.get(name, False)


__all__ = ["host_attribute"]
