"""Complex tensors made by arithmetic with a Python complex number (PC302): `mag * (x + 1j * y)` in an ISTFT head,
`torch.exp(-1j * torch.pi * torch.arange(n) / n)` for a twiddle table. The literal alone is a Python number; it is
its product or sum with a tensor that holds complex data."""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context, check
from portcheck.static.dtype.references import ComplexDtype, report_complex
from portcheck.static.scope import host_code, host_value, number


@check(cst.BinaryOperation, rules=(ComplexDtype,), tokens=("j",))
def check_imaginary(node: cst.BinaryOperation, ctx: Context) -> None:
    """`x + 1j * y`, `torch.exp(-1j * torch.pi * torch.arange(n))`: a Python complex number (an imaginary literal,
    or arithmetic of one with Python numbers) times, plus or minus a value that may be a tensor makes a complex
    tensor. With Python, `math` or numpy numbers, or inside a numpy function's arguments, it is a Python or numpy
    complex."""
    if not isinstance(node.operator, (cst.Multiply, cst.Add, cst.Subtract, cst.Divide)):
        return
    constant = [side for side in (node.left, node.right) if _complex_constant(ctx, side)]
    if len(constant) != 1:
        return  # no complex number, or complex arithmetic of Python numbers
    other = node.right if constant[0] is node.left else node.left
    if _plain_number(ctx, other) or host_value(ctx, other) or host_code(ctx) is not None:
        return
    if any(isinstance(h, cst.Call) and (ctx.qualname(h.func) or "").startswith(_NUMBERS)
           for h in ancestors(ctx, node)):
        return  # `np.exp(1j * beta)`: numpy's complex
    report_complex(ctx, node, " ".join(ctx.source(node).split())[:60])


# Modules whose values are Python or numpy numbers, and torch's own Python constants.
_NUMBERS = ("math.", "cmath.", "numpy.", "scipy.")
_TORCH_NUMBERS = frozenset({"torch.pi", "torch.e", "torch.inf", "torch.nan"})


def _complex_constant(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> bool:
    """`1j`, `-2j`, `-1j * torch.pi`, `2j * math.pi / n`: a Python complex number."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return _complex_constant(ctx, node.expression, depth + 1)
    if isinstance(node, cst.Imaginary):
        return True
    return isinstance(node, cst.BinaryOperation) and depth < 6 and _plain_number(ctx, node) and (
        _complex_constant(ctx, node.left, depth + 1) or _complex_constant(ctx, node.right, depth + 1))


def _plain_number(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> bool:
    """A Python or numpy number as far as can be seen: a literal, `math.pi`, `torch.pi`, `np.pi * k`, `len(frames)`,
    a name bound once to one (`TAU = math.tau`), arithmetic of them."""
    if depth > 6:
        return False
    if number(node) or isinstance(node, cst.Imaginary):
        return True
    if isinstance(node, cst.BinaryOperation):
        return _plain_number(ctx, node.left, depth + 1) and _plain_number(ctx, node.right, depth + 1)
    if isinstance(node, cst.UnaryOperation):
        return _plain_number(ctx, node.expression, depth + 1)
    if isinstance(node, cst.Name) and (bound := ctx.constant(node)) is not None:
        return _plain_number(ctx, bound[1], depth + 1)
    if isinstance(node, cst.Call):
        return ctx.qualname(node.func) in ("builtins.len", "builtins.int", "builtins.float")  # Python numbers
    qualname = ctx.qualname(node) if isinstance(node, (cst.Attribute, cst.Name)) else None
    return qualname is not None and (qualname.startswith(_NUMBERS) or qualname in _TORCH_NUMBERS)
