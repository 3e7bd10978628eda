"""Names that hold host values by what the code says about them: Python numbers and numpy / pandas values by their
annotation, host copies by their name.

- A parameter annotated `int`, `float` or `bool`, or a name unpacked from a parameter annotated as a tuple of them
  (`h, w = resolution` with `resolution: tuple[int, int]`), is a Python number.
- A parameter annotated as a numpy array or a pandas object (`x: np.ndarray`, `npt.NDArray[...]`) is a host value.
- A name the author marks as a host copy (`x1_host`, `boxes_cpu`, `mask_np`, `host_ids`) is one.

Both feed `scope.host_value`; like it, they err towards "don't know".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from portcheck.static.ancestry import taken_ifs
from portcheck.static.check import Context
from portcheck.static.syntax import parameters
from portcheck.static.walk import visit

_NUMBER = r"(int|float|bool)"
_NUMBER_ANNOTATION = re.compile(rf"{_NUMBER}")
_NUMBER_TUPLE = re.compile(rf"(typing\.)?[Tt]uple\[{_NUMBER}(, *({_NUMBER}|\.\.\.))*\]")
# An annotation naming no tensor: a number, text, a choice of literals, a function, or a union of them
# (`cost_func: Callable | Literal["mse", "mae"]`, `mode: Optional[str]`).
_PLAIN = r"(int|float|bool|str|None|(typing\.)?(Literal|Callable)(\[.*\])?)"
_PYTHON_VALUE = re.compile(rf"{_PLAIN}( *\| *{_PLAIN})*|(typing\.)?Optional\[{_PLAIN}\]")
_HOST_NAME = re.compile(r"(^|_)(host|cpu|np|numpy)$|^(host|cpu)_")


def marked_host(name: str) -> bool:
    """The name says the value is a host copy: `x1_host`, `boxes_cpu`, `mask_np`, `host_ids`."""
    return _HOST_NAME.search(name) is not None


def python_number(ctx: Context, name: str) -> bool:
    """`name`, in the current function, is a Python number by its annotation."""
    if not ctx.functions:
        return False
    function = ctx.functions[-1]
    return name in ctx.memo("annotated-numbers", function, lambda: _numbers(ctx, function))


def typed_host(ctx: Context, name: str) -> bool:
    """`name` is a Python number by its annotation, or a host value by a type test the code runs before using it:
    in the body of `if isinstance(x, np.ndarray):` (numpy, pandas or scipy types, Python numbers), `if
    sparse.issparse(x):` or `if np.isscalar(x):`."""
    return python_number(ctx, name) or any(
        _host_test(ctx, s.test, name) and not _rebinds(s.body.body[:s.body.body.index(inner)], name)
        for s, inner in taken_ifs(ctx))


def _rebinds(statements: Sequence[cst.CSTNode], name: str) -> bool:
    """One of `statements` binds `name` again (`x = torch.from_numpy(x).to(device)`): after it, the type test no
    longer says what `name` holds."""
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            found = found or node.value == name

    targets = [t for statement in statements for node in _binding_nodes(statement) for t in node]
    for target in targets:
        visit(target, Finder())
    return found


def _binding_nodes(statement: cst.CSTNode) -> list[list[cst.CSTNode]]:
    found: list[list[cst.CSTNode]] = []

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            found.append([t.target for t in node.targets])

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            found.append([node.target])

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            found.append([node.target])

        def visit_For(self, node: cst.For) -> None:
            found.append([node.target])

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            found.append([node.target])

        def visit_AsName(self, node: cst.AsName) -> None:
            found.append([node.name])

    visit(statement, Finder())
    return found


_HOST_TYPES = ("numpy.", "pandas.", "scipy.")
_PYTHON_TYPES = frozenset({"int", "float", "bool", "str", "complex"})  # not containers, which may hold tensors
_HOST_PREDICATES = frozenset({"scipy.sparse.issparse", "numpy.isscalar"})


def _host_test(ctx: Context, test: cst.BaseExpression, name: str) -> bool:
    """`isinstance(name, np.ndarray)`, `isinstance(name, (int, float))`, `sparse.issparse(name)`, alone or as an
    operand of `and`."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _host_test(ctx, test.left, name) or _host_test(ctx, test.right, name)
    if not isinstance(test, cst.Call) or not test.args or not isinstance(first := test.args[0].value, cst.Name) \
            or first.value != name:
        return False
    if ctx.qualname(test.func) in _HOST_PREDICATES:
        return True
    if not (isinstance(test.func, cst.Name) and test.func.value == "isinstance" and len(test.args) == 2):
        return False
    kinds = test.args[1].value
    parts = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
    return all((ctx.qualname(p) or "").startswith(_HOST_TYPES) or (isinstance(p, cst.Name) and p.value in
               _PYTHON_TYPES and p.value not in ctx.names.aliases) for p in parts)


def _annotation(ctx: Context, param: cst.Param) -> str:
    return " ".join(ctx.source(param.annotation.annotation).split()) if param.annotation is not None else ""


def _host_typed(ctx: Context, param: cst.Param) -> bool:
    """A parameter annotated as a numpy array or a pandas object (`x: np.ndarray`, `npt.NDArray[np.float32]`,
    `df: pd.DataFrame`): a host value, whatever its name."""
    if param.annotation is None:
        return False
    annotation = param.annotation.annotation
    if isinstance(annotation, cst.Subscript):
        annotation = annotation.value
    return (ctx.qualname(annotation) or "").startswith(("numpy.", "pandas."))


def _numbers(ctx: Context, function: cst.FunctionDef) -> frozenset[str]:
    every = parameters(function)
    numbers = {p.name.value for p in every if _NUMBER_ANNOTATION.fullmatch(_annotation(ctx, p)) or _host_typed(ctx, p)}
    tuples = {p.name.value for p in every if _NUMBER_TUPLE.fullmatch(_annotation(ctx, p))}
    if not tuples:
        return frozenset(numbers)

    class Unpacking(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function  # a nested function has its own parameters

        def visit_Assign(self, node: cst.Assign) -> None:
            if not (isinstance(node.value, cst.Name) and node.value.value in tuples):
                return
            for target in node.targets:
                if isinstance(target.target, (cst.Tuple, cst.List)):
                    numbers.update(e.value.value for e in target.target.elements if isinstance(e.value, cst.Name))

    visit(function, Unpacking())
    return frozenset(numbers)


def python_value(ctx: Context, name: str) -> bool:
    """`name` is a parameter of the current function annotated as a Python value that holds no tensor."""
    if not ctx.functions:
        return False
    function = ctx.functions[-1]
    return name in ctx.memo("annotated-python-values", function, lambda: frozenset(
        p.name.value for p in parameters(function) if _PYTHON_VALUE.fullmatch(_annotation(ctx, p))))
