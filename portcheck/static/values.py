"""What checks can tell about an expression or a statement without running it: is this a tensor method call,
an explicitly integer tensor, a reduction of tensor data; is this import guarded by a fallback?

Every answer errs towards "don't know": a check that cannot tell stays quiet.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.syntax import call_name, dotted_name, keyword, positional
from portcheck.static.walk import visit

INTEGER_DTYPES = frozenset({
    "torch.long", "torch.int64", "torch.int", "torch.int32", "torch.int16", "torch.int8", "torch.uint8",
    "torch.short", "torch.uint16", "torch.uint32", "torch.uint64",
})
_INTEGER_CASTS = {"long": "torch.int64", "int": "torch.int32", "short": "torch.int16", "byte": "torch.uint8"}
# Tensor methods whose result is computed from the tensor's values (not its shape).
REDUCTIONS = frozenset({
    "any", "all", "sum", "max", "min", "mean", "prod", "amax", "amin", "argmax", "argmin", "count_nonzero",
    "item", "norm", "std", "var", "median", "equal", "allclose", "nansum",
})
AVAILABILITY = re.compile(r"(^is_\w*available$|_available$|^find_spec$|^is_\w*installed$|^has_\w+$)")
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError", "RuntimeError"}


def method_call(node: cst.CSTNode, *names: str) -> cst.Call | None:
    """`node` as a call of one of these methods on some object (`x.nonzero()`), else None."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in names:
        return node
    return None


def dtype_of(ctx: Context, node: cst.BaseExpression) -> str | None:
    """The torch dtype an expression names: `torch.long` for `torch.long`, `th.int64` or `long` imported
    from torch."""
    qualname = ctx.qualname(node)
    return qualname if qualname is not None and qualname.startswith("torch.") else None


def integer_dtype(ctx: Context, node: cst.CSTNode) -> str | None:
    """The integer dtype an expression is explicitly given, or None when it is not known to be integer:
    `x.long()`, `x.to(torch.int32)`, `torch.zeros(n, dtype=torch.long)`, or a local name bound to one."""
    if isinstance(node, cst.Name):
        bound = ctx.constant(node)
        return integer_dtype(ctx, bound[1]) if bound else None
    if not isinstance(node, cst.Call):
        return None
    name = call_name(node)
    if (isinstance(node.func, cst.Attribute) and name in _INTEGER_CASTS and not node.args
            and ctx.qualname(node.func) is None):  # `x.long()`, not a module function
        return _INTEGER_CASTS[name]
    if name in ("to", "type"):
        arg = keyword(node, "dtype") or positional(node, 0)
        dtype = dtype_of(ctx, arg.value) if arg is not None else None
        return dtype if dtype in INTEGER_DTYPES else None
    dtype_arg = keyword(node, "dtype")
    if dtype_arg is not None:
        dtype = dtype_of(ctx, dtype_arg.value)
        return dtype if dtype in INTEGER_DTYPES else None
    return None


def reads_tensor_values(ctx: Context, node: cst.CSTNode) -> cst.Call | None:
    """A call inside `node` that reads tensor data into Python or a value-dependent result: `x.sum()`,
    `mask.any()`, `t.item()`, `torch.any(x)`. Shape queries (`x.size(0)`, `x.dim()`, `x.shape`) are not."""
    found: list[cst.Call] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            if found:
                return False
            name = call_name(call)
            if name in REDUCTIONS and isinstance(call.func, cst.Attribute):
                qualname = ctx.qualname(call.func)
                # a method on something tensor-like, or torch.any(...)
                if (qualname is not None and qualname.startswith("torch.")) or (
                        qualname is None and _receiver_is_tensor_like(ctx, call.func.value)):
                    found.append(call)
                    return False
            return True

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    visit(node, Finder())
    return found[0] if found else None


def _receiver_is_tensor_like(ctx: Context, node: cst.BaseExpression) -> bool:
    """`max`/`min`/`sum` are also builtins; as methods they need a receiver that is not a literal. Python lists
    have none of these methods; numpy arrays do, but they live on the host, so a receiver built by numpy
    (`np.where(a)[0].max()`) is not a tensor."""
    if isinstance(node, (cst.SimpleString, cst.Integer, cst.Float, cst.List, cst.Dict)):
        return False
    return not numpy_rooted(ctx, node)


def numpy_rooted(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> bool:
    """`node` is built by a numpy call: `np.where(a)[0]`, `np.asarray(x).max(0)`, or a local name bound to one."""
    while True:
        if isinstance(node, cst.Call):
            qualname = ctx.qualname(node.func)
            if qualname is not None:
                return qualname.startswith("numpy.")
            if not isinstance(node.func, cst.Attribute):
                return False
            node = node.func.value
        elif isinstance(node, (cst.Subscript, cst.Attribute)):
            node = node.value
        elif isinstance(node, cst.Name) and depth < 2:
            bound = ctx.constant(node)
            return bound is not None and numpy_rooted(ctx, bound[1], depth + 1)
        else:
            return False


def under_type_checking(ctx: Context) -> bool:
    for stmt in ctx.statements:
        if isinstance(stmt, cst.If) and dotted_name(stmt.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            return True
    return False


def guard(ctx: Context, node: cst.CSTNode | None = None) -> str | None:
    """Why the current statement has a fallback, or None: inside `try:` with an ImportError handler that carries
    on (one that only raises again is a better message, not a fallback), or under an `if` that probes availability
    (`is_flash_attn_available()`, `importlib.util.find_spec(...)`, `torch.cuda.is_available()`).

    Code that runs only with CUDA (`if x.device.type == "cuda":`, after `if not torch.cuda.is_available():
    return`, in a CUDA-gated test) is a different question: `portcheck.static.cuda_api.paths.cuda_path`."""
    for stmt in reversed(ctx.statements):
        if isinstance(stmt, (cst.Try, cst.TryStar)) and catches_import_error(stmt) and not all(
                _reraises(handler) for handler in stmt.handlers):
            return "inside `try` with an `except ImportError` fallback"
        if isinstance(stmt, cst.If):
            probe = availability_probe(stmt.test, ctx)
            if probe:
                return f"under `if {probe}`"
    for function in reversed(ctx.functions):
        probe = _probe_in_decorators(function)
        if probe:
            return probe
    return None


# `torch.compile` (Dynamo) answers True to these while it traces, so a branch they close is not in the graph.
# transformers' `is_torchdynamo_compiling` wraps the first, as the projects' own `is_compiling` helpers do
# (`torch_geometric.is_compiling`, `kornia.core.utils.is_compiling`); they are matched by name.
# (torch_neuronx.trace runs the model eagerly on XLA tensors: it sets none of them, nor `torch.jit.is_tracing()`.)
_COMPILING = frozenset({"torch.compiler.is_compiling", "torch._dynamo.is_compiling"})
_COMPILING_HELPERS = frozenset({"is_torchdynamo_compiling", "is_compiling", "is_dynamo_compiling"})
# transformers' `is_tracing(tensor)` is True while Dynamo compiles or exports (it asks `is_torchdynamo_compiling()`
# first), or while torch.jit or torch.fx trace: the branch it closes is not in a `torch.compile` graph either.
_TRACING_HELPERS = frozenset({"transformers.utils.is_tracing", "transformers.utils.import_utils.is_tracing"})


def _compiling_call(ctx: Context, node: cst.BaseExpression) -> bool:
    if not isinstance(node, cst.Call):
        return False
    qualname = ctx.qualname(node.func)
    relative = (qualname is None or qualname.startswith(".")) and call_name(node) == "is_tracing"
    if len(node.args) <= 1 and (qualname in _TRACING_HELPERS or relative):
        return True  # `is_tracing(mask)`, imported from transformers or, inside transformers, relatively
    if node.args:
        return False
    if qualname is not None:
        return qualname in _COMPILING or qualname.rsplit(".", 1)[-1] in _COMPILING_HELPERS
    return call_name(node) in _COMPILING_HELPERS


def _compile_polarity(ctx: Context, test: cst.BaseExpression) -> str | None:
    """"not" when the test is false while compiling (`not is_compiling()`, or an `and` holding it), "is" when
    it is true while compiling (`is_compiling()`, or an `or` holding it), else None."""
    if _compiling_call(ctx, test):
        return "is"
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return "not" if _compiling_call(ctx, test.expression) else None
    if isinstance(test, cst.BooleanOperation):
        wanted = "not" if isinstance(test.operator, cst.And) else "is"
        if wanted in (_compile_polarity(ctx, test.left), _compile_polarity(ctx, test.right)):
            return wanted
    return None


def contains(tree: cst.CSTNode | None, target: cst.CSTNode) -> bool:
    """`target` is `tree` or lies inside it (an identity search: call it when reporting, not per node)."""
    if tree is None:
        return False
    if tree is target:
        return True
    found = False

    class Finder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            found = found or node is target
            return not found

    visit(tree, Finder())
    return found


def named_or_branched(ctx: Context, node: cst.CSTNode, names: re.Pattern[str],
                      test: Callable[[cst.BaseExpression], bool]) -> bool:
    """`node` runs in a function whose name `names` matches (`def _ssim_cpu`, `def compile_xla`), or in the body of
    an enclosing `if` whose test `test` accepts: code that says which device or stack it is written for."""
    if any(names.search(function.name.value) for function in ctx.functions):
        return True
    chain = ctx.statements
    for index, stmt in enumerate(chain):
        inner = chain[index + 1] if index + 1 < len(chain) else node
        if isinstance(stmt, cst.If) and contains(stmt.body, inner) and test(stmt.test):
            return True
    return False


def skipped_when_compiling(ctx: Context, node: cst.CSTNode) -> str | None:
    """The test that keeps `node` out of a `torch.compile` graph, or None: `node` sits in the body of
    `if not is_torchdynamo_compiling():` (or of an `and` holding it), or in the `else` of
    `if torch.compiler.is_compiling():`. Only tests of enclosing `if` statements count."""
    for index, stmt in enumerate(ctx.statements):
        if not isinstance(stmt, (cst.If, cst.While)):
            continue
        inner = ctx.statements[index + 1] if index + 1 < len(ctx.statements) else node
        if inner is node and _short_circuited(ctx, stmt.test, node):
            return " ".join(ctx.module.code_for_node(stmt.test).split())
        polarity = _compile_polarity(ctx, stmt.test) if isinstance(stmt, cst.If) else None
        if polarity is None:
            continue
        branch = stmt.body if polarity == "not" else stmt.orelse
        if contains(branch, inner):
            return " ".join(ctx.module.code_for_node(stmt.test).split())
    return None


def and_operands(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of `a and b and c`, left to right (the test itself when it is not an `and`)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*and_operands(test.left), *and_operands(test.right)]
    return [test]


def or_operands(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of `a or b or c`, left to right (the test itself when it is not an `or`)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return [*or_operands(test.left), *or_operands(test.right)]
    return [test]


def _short_circuited(ctx: Context, test: cst.BaseExpression, node: cst.CSTNode) -> bool:
    """`not is_compiling() and <node>`, `is_compiling() or <node>`: the operands after the guard are not
    evaluated while compiling."""
    for operands, polarity in ((and_operands(test), "not"), (or_operands(test), "is")):
        for index, operand in enumerate(operands[:-1]):
            if _compile_polarity(ctx, operand) == polarity:
                return any(contains(later, node) for later in operands[index + 1:])
    return False


def _reraises(handler: cst.ExceptHandler | cst.ExceptStarHandler) -> bool:
    """The handler ends by raising: it reports the missing library better, it does not fall back."""
    body = handler.body.body
    last = body[-1] if body else None
    smalls = last.body if isinstance(last, cst.SimpleStatementLine) else body if isinstance(
        handler.body, cst.SimpleStatementSuite) else ()
    return any(isinstance(small, cst.Raise) for small in smalls)


def _caught(handler: cst.ExceptHandler | cst.ExceptStarHandler) -> list[str] | None:
    """The exceptions a handler names, dotted as written; None for a bare `except:`."""
    if handler.type is None:
        return None
    kinds = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
    names = []
    for kind in kinds:
        expr = kind.value if isinstance(kind, cst.Element) else kind
        # A `*starred` element (an expression too) names no exception: dotted_name answers None for it.
        name = dotted_name(expr) if isinstance(expr, cst.BaseExpression) else None
        if name is not None:
            names.append(name)
    return names


def catches_import_error(stmt: cst.Try | cst.TryStar) -> bool:
    for handler in stmt.handlers:
        names = _caught(handler)
        if names is None or any(name.rsplit(".", 1)[-1] in _IMPORT_ERRORS for name in names):
            return True
    return False


def catching_everything(ctx: Context, node: cst.CSTNode) -> str | None:
    """`node` runs in the body of a `try` whose handler catches every exception (bare, `Exception`,
    `BaseException`) and carries on: the handler, as written (`except Exception`), or None. A call that raises on
    Neuron there takes the handler's path instead."""
    for stmt in reversed(ctx.statements):
        if not isinstance(stmt, (cst.Try, cst.TryStar)) or not contains(stmt.body, node):
            continue
        for handler in stmt.handlers:
            if _reraises(handler):
                continue
            names = _caught(handler)
            if names is None:
                return "except:"
            for name in names:
                if name in ("Exception", "BaseException", "builtins.Exception", "builtins.BaseException"):
                    return f"except {name.rsplit('.', 1)[-1]}"
    return None


def availability_probe(test: cst.BaseExpression, ctx: Context | None = None) -> str | None:
    """The availability test `test` makes (`is_flash_attn_available()`, `HAS_APEX`), or None; with `ctx`, also
    through a name bound once to one (`_CAN_USE_FLASH = is_flash_attn_available() and ...`, `if _CAN_USE_FLASH:`)."""
    found: list[str] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            name = call_name(call)
            dotted = dotted_name(call.func) or ""
            if name and (AVAILABILITY.search(name) or dotted.endswith("cuda.is_available")):
                found.append(f"{dotted or name}()")
            return not found

        def visit_Name(self, node: cst.Name) -> None:
            if AVAILABILITY.search(node.value) or (node.value.isupper() and "AVAILABLE" in node.value) or (
                    ctx is not None and (bound := ctx.constant(node)) is not None
                    and availability_probe(bound[1]) is not None):
                found.append(node.value)

    visit(test, Finder())
    return found[0] if found else None


def _probe_in_decorators(function: cst.FunctionDef) -> str | None:
    for decorator in function.decorators:
        text = dotted_name(decorator.decorator.func if isinstance(decorator.decorator, cst.Call)
                           else decorator.decorator) or ""
        if text.endswith(("require_backends", "requires_backends", "requires")):
            return f"in a function decorated `@{text}`"
    return None


# Torch functions that answer elementwise with a boolean tensor: as a test (`if torch.isnan(loss):`) its single
# element is read on the host, as `.item()` would.
PREDICATES = frozenset(f"torch.{n}" for n in ("isnan", "isinf", "isfinite", "isneginf", "isposinf", "isreal",
                                               "logical_and", "logical_or", "logical_not", "logical_xor"))


def truth_operands(test: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """What a test takes the truth of, in the order Python evaluates it: the test itself, what `not` negates, the
    operands of `and` / `or`."""
    todo = [test]
    while todo:
        part = todo.pop()
        if isinstance(part, cst.UnaryOperation) and isinstance(part.operator, cst.Not):
            todo.append(part.expression)
        elif isinstance(part, cst.BooleanOperation):
            todo.extend((part.right, part.left))  # the left operand first, as Python evaluates it
        else:
            yield part


def predicate_truth(ctx: Context, test: cst.BaseExpression) -> cst.Call | None:
    """The torch predicate a test takes the truth of: the test itself, `not` it, or an operand of `and` / `or`."""
    return next((part for part in truth_operands(test)
                 if isinstance(part, cst.Call) and ctx.qualname(part.func) in PREDICATES), None)


__all__ = [
    "AVAILABILITY",
    "INTEGER_DTYPES",
    "PREDICATES",
    "REDUCTIONS",
    "and_operands",
    "availability_probe",
    "catches_import_error",
    "contains",
    "dtype_of",
    "guard",
    "integer_dtype",
    "method_call",
    "numpy_rooted",
    "or_operands",
    "predicate_truth",
    "reads_tensor_values",
    "skipped_when_compiling",
    "truth_operands",
    "under_type_checking",
]
