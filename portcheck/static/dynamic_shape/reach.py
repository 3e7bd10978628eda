"""Which code reaches a compiled graph: every dynamic-shape rule reports through `report_compiled`, which stays
quiet in host-side functions and, on the native stack, in code `torch.compile` skips."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule
from portcheck.static.check import Context
from portcheck.static.error_paths import error_path
from portcheck.static.scope import host_argument, host_code, host_value
from portcheck.static.values import skipped_when_compiling
from portcheck.static.walk import any_call, returns_of

STATIC = ("the Neuron compiler needs every shape static (NCC_EMOD025) and `torch_neuronx.trace` rejects "
          "data-dependent shapes")

# Functions that run on the host around the compiled model, never inside it: construction, data loading,
# transformers' generation loop and its input helpers, post-processing of outputs.
_HOST_FUNCTIONS = re.compile(
    r"(__init__|__getitem__|generate|_generate|\w+_for_generation|_?post_?process\w*|collate\w*)")
# Of those, the generation loop: its data-dependent ops run on device tensors between the model's steps.
_GENERATION = re.compile(r"generate|_generate|\w+_for_generation")
_PICKLING = frozenset({"pickle.loads", "pickle.dumps", "pickle.load", "pickle.dump"})


def host_function(ctx: Context) -> str | None:
    """The enclosing function that runs on the host: named as one of _HOST_FUNCTIONS, one that pickles objects, or
    one declared to return a Python float or bool (`-> float`, `-> bool`) or whose every `return` gives one
    (`return float(correct), float(total)`): a measure (a metric, a statistic) or a
    predicate on the data, which reads its tensors back, so it is not part of a compiled graph, whose results are
    tensors. (`-> int` is not: a size helper such as `maybe_num_nodes` is called from `forward`, and its
    data-dependent result is the problem.)"""
    return next((f.name.value for f in ctx.functions if _HOST_FUNCTIONS.fullmatch(f.name.value)
                 or _returns_python_scalar(ctx, f) or _pickles(ctx, f)), None)


def _pickles(ctx: Context, function: cst.FunctionDef) -> bool:
    """The function (un)pickles Python objects (`pickle.loads(buffer[:size].cpu().numpy().tobytes())`): it moves
    objects between processes as bytes, on the host side of the step (accelerate's `gather_object`)."""
    return ctx.memo("pickles", function,
                    lambda: any_call(function, lambda call: (ctx.qualname(call.func) or "") in _PICKLING))


def _returns_python_scalar(ctx: Context, function: cst.FunctionDef) -> bool:
    """Declared to return a float or bool, or every `return` gives `float(...)` / `bool(...)` or a tuple of them
    (`return float(correct), float(total)`)."""
    returns = function.returns.annotation if function.returns is not None else None
    if isinstance(returns, cst.Name) and returns.value in ("float", "bool"):
        return True
    return ctx.memo("returns-scalars", function, lambda: _scalar_returns(function))


def _scalar_returns(function: cst.FunctionDef) -> bool:
    def scalar(value: cst.BaseExpression | None) -> bool:
        if isinstance(value, (cst.Tuple, cst.List)):
            return bool(value.elements) and all(scalar(e.value) for e in value.elements)
        return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in (
            "float", "bool")

    values = [r.value for r in returns_of(function)]
    return bool(values) and all(scalar(v) for v in values)


def report_compiled(ctx: Context, rule: type[Rule], node: cst.CSTNode, message: str | None = None,
                    severity: Severity | None = None, read: cst.CSTNode | None = None,
                    value: cst.BaseExpression | None = None, requires: str = "", start: cst.CSTNode | None = None,
                    **fields: object) -> None:
    """Report unless the code never reaches a compiled graph: it runs in a host-side function or file
    (scope.host_code), it only words an error (`if bad: ...; raise`), the tensor it works on (`value`) is a host
    value (numpy, pandas, a CPU tensor), or (native stack) it sits under a test that `torch.compile` answers by
    skipping it (`if not is_torchdynamo_compiling():`). Worded by `message`, or else by the rule's template and
    `fields`; `start`: where the construct begins, earlier in the same function (the finding spans both)."""
    where = host_function(ctx)
    generation = where is not None and _GENERATION.fullmatch(where) is not None
    if (where is not None and not generation) or host_code(ctx) is not None or error_path(ctx, node):
        return
    if (value is not None and host_value(ctx, value)) or host_argument(ctx, node):
        return
    if ctx.stack == "native" and skipped_when_compiling(ctx, read or node) is not None:
        return
    if generation:  # the loop around the model: its ops run between compiled steps, so info, saying where
        message = (message if message is not None else rule.format(**fields)) + (
            f" (here in `{where}`, the decoding loop the host drives around the compiled model: the op runs between "
            "its steps, not inside its graph; it matters where the loop itself is compiled or its result feeds the "
            "next step's input)")
        severity = Severity.INFO
    # no fix: `fields` are the template's alone
    ctx.report(rule, node, message, severity, None, requires, False, start, **fields)
