"""What a local name is bound to across its function: every value plain bindings give it, read in one walk of
the function for all its names (`x = f(); x = x[ok]`, `values, counts = np.unique(x)`)."""

from __future__ import annotations

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import bound_names
from portcheck.static.walk import visit


def rebindings(ctx: Context, name: str) -> tuple[cst.BaseExpression, ...]:
    """Every value a name bound several times in the current function gets (`x = f(); x = x[ok]`), or () when
    one of its bindings is not a plain `name = value` (a parameter, a loop target, an unpacking, `+=`)."""
    if not ctx.functions:
        return ()
    values, other, logical = _collected(ctx, ctx.functions[-1])
    return () if name in other or name in logical else values.get(name, ())


def updated_in_place(ctx: Context, name: str) -> tuple[cst.BaseExpression, ...]:
    """For a name bound by plain bindings and otherwise only updated in place by a logical operator (`ok = ...`,
    then `ok &= x > 0`), the values its plain bindings give it; () for any other name."""
    if not ctx.functions:
        return ()
    values, other, logical = _collected(ctx, ctx.functions[-1])
    return values.get(name, ()) if name in logical and name not in other else ()


def _collected(ctx: Context, function: cst.FunctionDef) -> tuple[dict[str, tuple[cst.BaseExpression, ...]], set[str],
                                                                  set[str]]:
    """`_collect_rebindings` of `function`, walked once however many names are asked about."""
    return ctx.memo("rebindings", function, lambda: _collect_rebindings(function))


def _collect_rebindings(function: cst.FunctionDef) -> tuple[dict[str, tuple[cst.BaseExpression, ...]], set[str],
                                                            set[str]]:
    """One walk of the function for every name: name -> the values plain bindings give it (for `a, b = f()`,
    the whole of `f()`: each is a part of it), the names some other binding (a parameter, a loop target,
    `+=`) binds, and the names updated in place by `&=`, `|=` or `^=`."""
    params = function.params
    other = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    logical: set[str] = set()
    values: dict[str, list[cst.BaseExpression]] = {}

    def bound_otherwise(target: cst.CSTNode) -> None:
        other.update(bound_names(target))

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            single = len(node.targets) == 1
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    if single:
                        values.setdefault(target.target.value, []).append(node.value)
                    else:
                        bound_otherwise(target.target)
                    continue
                unpacked = single and isinstance(target.target, (cst.Tuple, cst.List)) and not isinstance(
                    node.value, (cst.Tuple, cst.List))
                for name in bound_names(target.target):
                    part = paired(target.target, node.value, name) if single else None
                    if part is not None:
                        values.setdefault(name, []).append(part)
                    elif unpacked:  # `values, counts = np.unique(x)`: a part of what the call returns
                        values.setdefault(name, []).append(node.value)
                    else:
                        other.add(name)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name) and isinstance(node.operator, (
                    cst.BitAndAssign, cst.BitOrAssign, cst.BitXorAssign)):
                logical.add(node.target.value)
                return
            bound_otherwise(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            bound_otherwise(node.target)

        def visit_For(self, node: cst.For) -> None:
            bound_otherwise(node.target)

        def visit_AsName(self, node: cst.AsName) -> None:
            bound_otherwise(node.name)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            bound_otherwise(node.target)

    visit(function, Finder())
    return {name: tuple(found) for name, found in values.items()}, other, logical


def paired(target: cst.BaseExpression, value: cst.BaseExpression, name: str) -> cst.BaseExpression | None:
    """`b` for `name` in `a, name = x, b` (tuples of the same length, no starred element), else None."""
    if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(value, (cst.Tuple, cst.List)):
        return None
    if len(target.elements) != len(value.elements) or any(
            isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)):
        return None
    for left, right in zip(target.elements, value.elements, strict=True):
        if isinstance(left.value, cst.Name) and left.value.value == name:
            return right.value
    return None


__all__ = ["paired", "rebindings", "updated_in_place"]
