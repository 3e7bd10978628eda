"""A CUDA probe whose value decides nothing where it stands: only shown (printed, logged, formatted into text or
made an entry of a report: `{"CUDA available": torch.cuda.is_available()}`, `info["GPUs"] = torch.cuda.device_count()`,
`add(info, "Has CUDA", lambda: torch.cuda.is_available())`, a local name used only that way), so
False on Neuron changes the report and nothing else; or only returned by a function that does nothing else (`def
is_cuda_available(): return torch.cuda.is_available()`), which answers rightly on Neuron."""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context
from portcheck.static.name_reads import bound_name, reads_in_scope
from portcheck.static.syntax import call_name

# Calls that show what they are given: print, logging, text conversion and formatting, a stream's write.
_SHOWING = frozenset({"print", "fprint", "echo", "str", "repr", "format", "write", "info", "debug", "warning",
                      "warn", "error", "critical", "exception", "log"})
_TEXT = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def _shows(holder: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """`holder` shows what `inner` (one of its children) holds."""
    if isinstance(holder, cst.FormattedStringExpression):
        return True
    if isinstance(holder, cst.DictElement):  # a report's entry: a text key, the value shown
        return inner is holder.value and isinstance(holder.key, _TEXT)
    if isinstance(holder, cst.Call):
        return inner is not holder.func and call_name(holder) in _SHOWING
    if isinstance(holder, cst.Assign):  # `info["CUDA available"] = ...`: an entry of a report, set by its text key
        return inner is holder.value and all(
            isinstance(t.target, cst.Subscript) and len(t.target.slice) == 1
            and isinstance(t.target.slice[0].slice, cst.Index)
            and isinstance(t.target.slice[0].slice.value, _TEXT) for t in holder.targets)
    return False


def _decides(holder: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """`holder` makes a decision of what `inner` holds: a test, a comparison, a boolean operation."""
    if isinstance(holder, (cst.If, cst.While, cst.IfExp, cst.Assert)):
        return inner is holder.test
    return isinstance(holder, (cst.Comparison, cst.BooleanOperation)) or (
        isinstance(holder, cst.UnaryOperation) and isinstance(holder.operator, cst.Not))


def _labelled(path: list[cst.CSTNode], index: int) -> bool:
    """`path[index]` is a lambda handed to a call beside a text label: a report's entry made lazily
    (monai's `_dict_append(output, "Has CUDA", lambda: bool(torch.cuda.is_available()))`)."""
    if index < 2 or not isinstance(path[index], cst.Lambda) or not isinstance(path[index - 1], cst.Arg):
        return False
    call = path[index - 2]
    return isinstance(call, cst.Call) and any(
        a.keyword is None and isinstance(a.value, _TEXT) for a in call.args if a is not path[index - 1])


def shown_on(path: list[cst.CSTNode], node: cst.CSTNode) -> bool:
    """Some call or entry on `path` (outermost first, down to `node`) shows the value, and nothing there decides
    by it (`if str(probe) == "True":` decides)."""
    pairs = list(zip(path, [*path[1:], node], strict=True))
    return not any(_decides(h, i) for h, i in pairs) and (
        any(_shows(h, i) for h, i in pairs) or any(_labelled(path, i) for i in range(len(path))))


def only_shown(ctx: Context, node: cst.CSTNode, stmt: cst.CSTNode | None) -> bool:
    """The probe's value is only shown: directly, or through a local name bound to it whose every use shows it."""
    if stmt is None:
        return False
    path = ancestors(ctx, node)
    if shown_on(path, node):
        return True
    bound = bound_name(stmt, [*path, node])
    if bound is None:
        return False
    name, value = bound
    if not (value is node or (isinstance(value, cst.Call) and value.func is node)):
        return False  # the name holds something made from the probe, not its value
    paths = reads_in_scope(ctx, name).paths
    return bool(paths) and all(shown_on(read[:-1], read[-1]) for read in paths)


def only_returned(ctx: Context, node: cst.CSTNode, stmt: cst.CSTNode | None) -> bool:
    """The probe's value is all its function returns, and the function does nothing else (`def
    is_cuda_available(): return torch.cuda.is_available()`): it answers whether CUDA is there, rightly False on
    Neuron; the choice is made where it is called."""
    if not ctx.functions or not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    returned = stmt.body[0]
    if not isinstance(returned, cst.Return) or returned.value is None:
        return False
    value = returned.value
    if isinstance(value, cst.Call) and call_name(value) in ("bool", "int") and len(value.args) == 1:
        value = value.args[0].value  # `bool(torch.cuda.is_available())`
    if not (value is node or (isinstance(value, cst.Call) and value.func is node)):
        return False
    body = ctx.functions[-1].body
    lines = list(body.body) if isinstance(body, cst.IndentedBlock) else [body]
    if lines and _docstring(lines[0]):
        lines = lines[1:]
    return lines == [stmt]


def _docstring(line: cst.CSTNode) -> bool:
    return (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(line.body[0], cst.Expr)
            and isinstance(line.body[0].value, _TEXT))


__all__ = ["only_returned", "only_shown", "shown_on"]
