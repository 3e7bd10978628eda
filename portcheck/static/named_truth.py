"""A test that takes the truth of a local name bound to a tensor's value: `has_nan = torch.isnan(x).any()` then
`if has_nan:`, `peak = x.max()` then `if peak > 0:`, `has_pads = on_xla or mask.any()` then `if has_pads:`. The name
holds a 0-d tensor, and the `if` asks it for a bool, which reads it on the host as a test of the reduction itself
would (PC208 inside the device step, PC701 in a training loop)."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.values import predicate_truth, reads_tensor_values, truth_operands

_VALUE_COMPARISONS = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan,
                      cst.GreaterThanEqual)


def named_truth(ctx: Context, test: cst.BaseExpression, depth: int = 0) -> cst.Call | None:
    """The read a test's truth depends on through a local name bound once: the name is the test (or an operand of
    `not`, `and`, `or`), or a side of a value comparison, and its binding is itself such a test of tensor data
    (a reduction or a torch predicate, a comparison with one, a boolean operation over one)."""
    if depth > 2:
        return None
    for part in truth_operands(test):
        names = [part] if isinstance(part, cst.Name) else [
            side for side in (part.left, *(c.comparator for c in part.comparisons)) if isinstance(side, cst.Name)
        ] if isinstance(part, cst.Comparison) and all(
            isinstance(c.operator, _VALUE_COMPARISONS) for c in part.comparisons) else []
        for name in names:
            bound = ctx.constant(name)
            if bound is not None and (read := _truth_read(ctx, bound[1], depth)) is not None:
                return read
    return None


def _truth_read(ctx: Context, value: cst.BaseExpression, depth: int) -> cst.Call | None:
    """The read `value`'s truth depends on, where `value` is a test of tensor data in its own right. On the xla
    stack, not what an `or` reaches only after a test for an XLA tensor (`t.device.type == "xla" or m.any()`)."""
    if ctx.stack == "xla" and isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.Or) \
            and _tests_xla(value.left):
        return None
    for part in truth_operands(value):
        if isinstance(part, cst.Call):
            read = reads_tensor_values(ctx, part)
            if read is part or (read is None and (read := predicate_truth(ctx, part)) is not None):
                return read
        elif isinstance(part, cst.Comparison) and all(isinstance(c.operator, _VALUE_COMPARISONS)
                                                      for c in part.comparisons):
            sides = (part.left, *(c.comparator for c in part.comparisons))
            for side in sides:
                if isinstance(side, cst.Call) and (read := reads_tensor_values(ctx, side)) is side:
                    return read
            if (read := named_truth(ctx, part, depth + 1)) is not None:
                return read
        elif isinstance(part, cst.Name) and (read := named_truth(ctx, part, depth + 1)) is not None:
            return read
    return None


def _tests_xla(test: cst.BaseExpression) -> bool:
    """`t.device.type == "xla"`, `is_xla_tensor(t)`: a test for a PyTorch/XLA tensor."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, cst.Equal):
        return any(isinstance(side, cst.SimpleString) and side.evaluated_value == "xla"
                   for side in (test.left, test.comparisons[0].comparator))
    if isinstance(test, cst.Call):
        func = test.func
        return (func.attr.value if isinstance(func, cst.Attribute) else
                func.value if isinstance(func, cst.Name) else "") == "is_xla_tensor"
    return False


__all__ = ["named_truth"]
