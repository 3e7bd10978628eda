"""A host read whose value only host code uses: the model's output handed to the host (PC701 / PC702's reading
on PyTorch/XLA). `flags = (scores > t).tolist()` then `if any(flags): logger.warning(...)` and `for i, f in
enumerate(flags): images[i] = np.zeros(...)`, or `dist = cos(emb, ref).cpu().numpy()` read by numpy, `round` and
`len` only: nothing the read produces goes back into a tensor op, so the device's graph ends there and the read is
its result's transfer (a safety checker's verdict, a decoder's final tokens logged or returned), not a cut in the
middle of the model. What is followed: the read's own expression up to its statement, and through local names
bound to it (and loop variables over it), every read of those names in the function; a use this cannot follow (a
project function, a tensor method, a module call, an attribute stored on `self`) keeps the finding."""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context
from portcheck.static.name_reads import reads_in_scope
from portcheck.static.rebindings import rebindings
from portcheck.static.scope import host_value, literal, number
from portcheck.static.syntax import block_body, call_name, parameters
from portcheck.static.values import contains
from portcheck.static.walk import visit

# Python builtins whose result, given host values, is a host value
_BUILTINS = frozenset({"abs", "all", "any", "bool", "dict", "enumerate", "float", "format", "int", "list", "max",
                       "min", "range", "repr", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip"})
# calls that consume a value on the host and give nothing back to compute with
_SINKS = frozenset({"print", "isinstance", "len"})  # `len`: the size, known before the read
_LOG_RECEIVERS = frozenset({"logger", "logging", "log", "warnings", "LOGGER", "_logger"})
_CONTAINER_METHODS = frozenset({"append", "extend", "add", "insert", "update", "setdefault"})
_HOST_MODULES = ("numpy.", "math.", "pandas.", "logging.", "warnings.", "json.", "scipy.")
_DEPTH = 4


def hand_off(ctx: Context, node: cst.CSTNode, place: str) -> str | None:
    """Why the read at `node`, in `forward` itself, costs no cut on PyTorch/XLA, or None. In a helper, or a
    function defined in `forward`, what its caller computes after the call is not in view."""
    if ctx.stack != "xla" or place != "forward" or len(ctx.functions) != 1 or not only_host_uses(
            ctx, node, returns=True):
        return None
    return (" (here only host code uses what it reads: the model's result handed to the host, where the device's "
            "graph ends; trace or compile the model up to it)")


def only_host_uses(ctx: Context, node: cst.CSTNode, *, returns: bool) -> bool:
    """Every use of the value the read at `node` produces is host code, and the function computes nothing on the
    device after it. `returns`: a `return` of it is its hand-off (the model's `forward` giving its result to the
    host); False where a caller may compute with it."""
    path = ancestors(ctx, node)
    if not path or not _nothing_after(ctx):
        return False
    return _flows_to_host(ctx, path, node, returns, 0, frozenset())


def _nothing_after(ctx: Context) -> bool:
    """What runs after the statement being visited, to the function's end (and the rest of each loop around it,
    which runs again), is host code: its calls are host calls or host reads, and it returns only host values, the
    function's own parameters or constants. A read with device work after it (`loss.item()` for a stats dict, then
    `return loss, stats`) cuts the model's graph in two."""
    if not ctx.functions:
        return False
    function = ctx.functions[-1]
    params = {p.name.value for p in parameters(function)
              if not reads_in_scope(ctx, p.name.value).bindings}  # handed back as they came
    current = ctx.statements[-1] if ctx.statements else None
    if isinstance(current, cst.SimpleStatementLine):  # what the read's own statement binds: its flow is followed
        params |= {n for small in current.body if isinstance(small, cst.Assign) for t in small.targets
                   for n in _targets(t.target)}
    after: list[cst.CSTNode] = []
    chain = ctx.statements
    start = next((i for i, s in enumerate(chain) if s is function), None)
    if start is None:
        return False
    for outer, inner in zip(chain[start:], chain[start + 1:], strict=False):
        suite = getattr(outer, "body", None)  # a `match` has cases, no body
        body: list[cst.CSTNode] = list(block_body(suite)) if isinstance(suite, cst.BaseSuite) else []
        if isinstance(outer, (cst.For, cst.While)):
            after.extend(body)  # the loop runs its body again
        elif inner in body:
            after.extend(body[body.index(inner) + 1:])
    verdict = True

    class After(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False  # defined here, run elsewhere

        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal verdict
            if not _host_call(ctx, call):
                verdict = False
            return verdict

        def visit_Return(self, node: cst.Return) -> bool:
            nonlocal verdict
            values = node.value.elements if isinstance(node.value, (cst.Tuple, cst.List)) else (
                [] if node.value is None else [cst.Element(node.value)])
            if not all(_returned_host(ctx, e.value, params) for e in values):
                verdict = False
            return verdict

    for statement in after:
        visit(statement, After())
        if not verdict:
            return False
    return True


def _returned_host(ctx: Context, value: cst.BaseExpression, params: set[str]) -> bool:
    """A constant, a parameter handed back (or a name the read binds), a host value, or a name bound only to
    containers built here
    (`result = []` then `result.append(...)`: what went in was checked where it was put)."""
    if literal(value) or host_value(ctx, value):
        return True
    if not isinstance(value, cst.Name):
        return False
    if value.value in params:
        return True
    bound = rebindings(ctx, value.value) or ((c[1],) if (c := ctx.constant(value)) is not None else ())
    return bool(bound) and all(isinstance(v, (cst.List, cst.Dict, cst.Set)) and not (
        v.elements) for v in bound)


_READS = frozenset({"item", "tolist", "cpu", "numpy", "detach"})


def _host_call(ctx: Context, call: cst.Call) -> bool:
    """A call that computes nothing on the device: a builtin, a logging, numpy or math call, a container's
    method, `torch.is_tensor`, a host read (`.item()`, `.cpu()`), or a method of a host value."""
    name = call_name(call) or ""
    qualname = ctx.qualname(call.func) or ""
    if isinstance(call.func, cst.Name) and (name in _BUILTINS or name in _SINKS):
        return True
    if qualname.startswith(_HOST_MODULES) or qualname in ("torch.is_tensor", "isinstance"):
        return True
    if isinstance(call.func, cst.Attribute):
        receiver = call.func.value
        if isinstance(receiver, cst.Name) and receiver.value in _LOG_RECEIVERS:
            return True
        if name in _CONTAINER_METHODS or name in _READS:
            return True
        if isinstance(receiver, (cst.SimpleString, cst.ConcatenatedString)) or host_value(ctx, receiver):
            return True
    return False


def _flows_to_host(ctx: Context, path: list[cst.CSTNode], node: cst.CSTNode, returns: bool, depth: int,
                   seen: frozenset[str]) -> bool:
    """The value at `node` (held by `path`, outermost first) reaches only host code."""
    current = node
    for holder in reversed(path):
        verdict = _step(ctx, holder, current, returns, depth, seen)
        if verdict is not None:
            return verdict
        current = holder
    return False


def _step(ctx: Context, holder: cst.CSTNode, inner: cst.CSTNode, returns: bool, depth: int,
          seen: frozenset[str]) -> bool | None:
    """One holder of a host value: True (it ends in host code), False (it may go back to the device, or this
    cannot tell), None (the holder is a host value too: go on up)."""
    if isinstance(holder, (cst.Arg, cst.Element, cst.DictElement, cst.StarredElement, cst.Index, cst.SubscriptElement,
                           cst.FormattedStringExpression, cst.FormattedString, cst.ConcatenatedString,
                           cst.ParenthesizedWhitespace, cst.Tuple, cst.List, cst.Dict, cst.Set)):
        if isinstance(holder, (cst.FormattedStringExpression, cst.FormattedString)):
            return True  # formatted into text
        return None
    if isinstance(holder, cst.Subscript):
        return None if inner is holder.value else False  # a host value's part; as an index: the indexed decides
    if isinstance(holder, cst.Attribute):
        if inner is holder.value and holder.attr.value in ("shape", "ndim", "dtype", "size"):
            return True  # metadata, known before the read
        return None if inner is holder.value else False
    if isinstance(holder, cst.Call):
        return _call(ctx, holder, inner)
    if isinstance(holder, (cst.BinaryOperation, cst.Comparison, cst.ComparisonTarget, cst.BooleanOperation,
                           cst.UnaryOperation)):
        return None if _other_operands_plain(ctx, holder, inner) else False
    if isinstance(holder, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.CompFor, cst.CompIf)):
        return None  # a comprehension over host values is one
    if isinstance(holder, cst.Return):
        return returns
    if isinstance(holder, cst.Expr):
        return True  # its value is dropped
    if isinstance(holder, (cst.If, cst.While)):
        return inner is holder.test and _host_block(ctx, holder)
    if isinstance(holder, (cst.For, cst.CompFor)) and inner is holder.target:
        return True  # the loop binds the name here: no use of it
    if isinstance(holder, cst.For):
        if inner is not holder.iter:
            return False
        names = _targets(holder.target)
        if isinstance(holder.iter, cst.Call) and call_name(holder.iter) == "enumerate" and len(names) == 2:
            names = names[1:]  # `for i, flag in enumerate(flags)`: `i` counts, only `flag` is the value
        return bool(names) and _names_to_host(ctx, names, returns, depth, seen)
    if isinstance(holder, cst.Assign):
        if inner is not holder.value or len(holder.targets) != 1:
            return False
        target = holder.targets[0].target
        if isinstance(target, cst.Subscript):
            return True  # stored into a container (`images[i] = ...`, `scores[k] = ...`)
        names = _targets(target)
        first = reads_in_scope(ctx, target.value).reads_before.get(id(target), 0) if isinstance(target, cst.Name) else 0
        return bool(names) and _names_to_host(ctx, names, returns, depth, seen, first)
    if isinstance(holder, (cst.SimpleStatementLine, cst.AssignTarget)):
        return None
    return False


def _call(ctx: Context, call: cst.Call, inner: cst.CSTNode) -> bool | None:
    """`inner` is the called function (`x.tolist`) or an argument of `call`."""
    if inner is call.func:
        name = call_name(call)
        return False if name in ("to", "cuda", "xla") else None  # a method of a host value gives a host value
    qualname = ctx.qualname(call.func) or ""
    name = call_name(call) or ""
    if isinstance(call.func, cst.Name) and name in _SINKS:
        return True
    if isinstance(call.func, cst.Name) and name in _BUILTINS and name not in ctx.names.aliases:
        return None
    if qualname.startswith(_HOST_MODULES):
        return True if qualname.startswith(("logging.", "warnings.")) else None
    if isinstance(call.func, cst.Attribute):
        receiver = call.func.value
        if isinstance(receiver, cst.Name) and receiver.value in _LOG_RECEIVERS:
            return True  # logger.warning(...)
        if name in _CONTAINER_METHODS and isinstance(receiver, cst.Name):
            return True  # kept in a local list or dict
        if name == "format" and isinstance(receiver, (cst.SimpleString, cst.ConcatenatedString)):
            return True
    return False


def _other_operands_plain(ctx: Context, holder: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """The other operands of an operation are numbers, strings or host values (`round(cos - threshold + adj, 3)`
    with `cos` read from a numpy array, `flag > 0`): the result is a host value. Anything else may be a tensor."""
    if isinstance(holder, cst.UnaryOperation):
        return True
    if isinstance(holder, cst.BinaryOperation):
        others: list[cst.BaseExpression] = [holder.left, holder.right]
    elif isinstance(holder, cst.BooleanOperation):
        others = [holder.left, holder.right]
    elif isinstance(holder, cst.ComparisonTarget):
        others = [holder.comparator]
    else:
        assert isinstance(holder, cst.Comparison)
        others = [holder.left, *(c.comparator for c in holder.comparisons)]
    return all(o is inner or number(o) or literal(o) or isinstance(o, cst.ComparisonTarget) or contains(o, inner)
               or host_value(ctx, o) for o in others)


def _host_block(ctx: Context, statement: cst.If | cst.While) -> bool:
    """What the test decides runs host code only: every call in the body (and `else`) is a builtin, a logging
    or numpy call, or a container's; `raise`, assignments and `continue` / `break` as they come."""
    ok = True

    class Calls(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal ok
            if _host_call(ctx, call):
                return True
            ok = False
            return False

    parts: list[cst.CSTNode] = [statement.body]
    if statement.orelse is not None:
        parts.append(statement.orelse)
    for part in parts:
        visit(part, Calls())
    return ok


def _targets(target: cst.BaseExpression) -> list[str]:
    """The names a `for` or an assignment binds (`i, flag` of `for i, flag in enumerate(...)`); [] when any part
    is not a plain name."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        names = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
        return names if len(names) == len(target.elements) else []
    return []


def _names_to_host(ctx: Context, names: list[str], returns: bool, depth: int, seen: frozenset[str],
                   first: int = 0) -> bool:
    """Every read of each name in the function reaches only host code; `first`: of one name bound by an
    assignment, the reads before it (`flags = flags.tolist()` reads the old `flags`) are not of this value."""
    if depth >= _DEPTH:
        return False
    for name in names:
        if name in seen:
            continue
        for read in reads_in_scope(ctx, name).paths[first:]:
            holders, node = read[:-1], read[-1]
            if not _flows_to_host(ctx, holders, node, returns, depth + 1, seen | set(names)):
                return False
    return True


__all__ = ["hand_off", "only_host_uses"]
