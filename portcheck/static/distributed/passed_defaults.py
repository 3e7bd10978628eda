"""A parameter's value from the functions of the same file that call with it (PC604): `def init_dist(launcher,
backend="nccl")` hands its `backend` on to `_init_dist_pytorch(backend)`, which builds the process group with it.
The default is the backend every caller that names none gets, and where the fix goes."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import parameters, string_value
from portcheck.static.walk import visit


def caller_defaults(ctx: Context, name: cst.Name) -> tuple[tuple[cst.BaseExpression, str], ...]:
    """For `name`, a parameter of the function being read (a module-level one, without a default of its own): the
    string default of the parameter a function of the same file passes into it, with that function's name (`"nccl"`
    of `init_dist(launcher, backend="nccl")` calling `_init_dist_pytorch(backend, **kwargs)`); or a string literal
    such a call passes. Each one found, in the file's order."""
    if len(ctx.functions) != 1:
        return ()
    function = ctx.functions[0]
    params = parameters(function)
    index = next((i for i, p in enumerate(params) if p.name.value == name.value), None)
    if index is None or params[index].default is not None:
        return ()
    return ctx.memo("passed-defaults", function, lambda: _passed(ctx.module, function, index, name.value))


def _passed(module: cst.Module, callee: cst.FunctionDef, index: int,
            param: str) -> tuple[tuple[cst.BaseExpression, str], ...]:
    target = callee.name.value
    result: list[tuple[cst.BaseExpression, str]] = []

    class Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.stack: list[cst.FunctionDef] = []

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            self.stack.append(node)
            return True

        def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
            self.stack.pop()

        def visit_Call(self, call: cst.Call) -> bool:
            if not self.stack or not isinstance(call.func, cst.Name) or call.func.value != target:
                return True
            given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == param), None)
            positional = [a for a in call.args if a.keyword is None and not a.star]
            if given is None and index < len(positional):
                given = positional[index].value
            if given is None:
                return True
            if string_value(given) is not None:
                result.append((given, self.stack[-1].name.value))
            elif isinstance(given, cst.Name):
                caller = self.stack[-1]
                default = next((p.default for p in parameters(caller) if p.name.value == given.value), None)
                if default is not None and string_value(default) is not None:
                    result.append((default, caller.name.value))
            return True

    visit(module, Finder())
    return tuple(result)


__all__ = ["caller_defaults"]
