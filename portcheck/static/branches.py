"""Branches a Neuron port never takes, told from the code around a statement: the fallback for an older library
version (`else` of `if _XLA_GREATER_EQUAL_2_1:`, the code after `if _TORCH_GE_2_4: return ...`,
`new() if TORCH_GE else old()`), and TPU-only branches (`is_torch_xla_available(check_is_tpu=True)`).

Neuron's stacks pin recent releases (torch-neuronx runs torch-xla 2.x, TorchNeuron native a current torch:
KNOWLEDGE.md §0.1), so an API used only below a version test is not what the port runs. Like `values.guard`,
every answer errs towards "don't know" (None), and a check that gets None reports as before.
"""

from __future__ import annotations

import re
from dataclasses import replace

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.check import Context, Hit
from portcheck.static.syntax import block_body, dotted_name, import_statements, keyword, suites
from portcheck.static.values import and_operands, contains
from portcheck.static.walk import visit

# A name that is true on newer releases (`_XLA_GREATER_EQUAL_2_1`, `_TORCH_GE_2_4`, `is_torch_version_at_least`)
# or on older ones (`_TORCH_LESS_2_0`, `TORCH_BELOW_2`).
_NEWER = re.compile(r"(GREATER|(^|_)GE?Q?_\d|AT_LEAST|NEWER|_GTE?_\d|MIN_VERSION|\d_?PLUS$)", re.IGNORECASE)
_OLDER = re.compile(r"(LESS|LOWER|OLDER|BELOW|(^|_)LT_\d|(^|_)LE_\d)", re.IGNORECASE)
_VERSIONISH = re.compile(r"(version|__version__|VERSION)")
_EXITS = (cst.Return, cst.Raise, cst.Continue, cst.Break)


def version_polarity(test: cst.BaseExpression) -> str | None:
    """"newer" when `test` holds on newer library versions only, "older" when on older ones only, else None."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = version_polarity(test.expression)
        return {"newer": "older", "older": "newer"}.get(inner or "")
    if isinstance(test, cst.Call) and not test.args:  # `_TORCH_GREATER_EQUAL_2_4()` style probes
        return version_polarity(test.func)
    name = dotted_name(test)
    if name is not None:
        last = name.rsplit(".", 1)[-1]
        if _OLDER.search(last) and ("VERSION" in last.upper() or re.search(r"\d", last)):
            return "older"
        if _NEWER.search(last) and ("VERSION" in last.upper() or re.search(r"\d", last)):
            return "newer"
        return None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        left = cst.Module(body=()).code_for_node(test.left)
        right = cst.Module(body=()).code_for_node(target.comparator)
        if not (_VERSIONISH.search(left) or _VERSIONISH.search(right)):
            return None
        flipped = not _VERSIONISH.search(left)  # `Version("2.1") <= torch.__version__`
        operator = target.operator
        if isinstance(operator, (cst.GreaterThanEqual, cst.GreaterThan)):
            return "older" if flipped else "newer"
        if isinstance(operator, (cst.LessThan, cst.LessThanEqual)):
            return "newer" if flipped else "older"
    return None


def _old_side(test: cst.BaseExpression, body: cst.CSTNode, orelse: cst.CSTNode | None,
              inner: cst.CSTNode) -> bool:
    polarity = version_polarity(test)
    if isinstance(test, cst.BooleanOperation):  # `a or TORCH_GE_1_10`: its `else` runs only on older releases
        sides = (version_polarity(test.left), version_polarity(test.right))
        polarity = ("newer" if isinstance(test.operator, cst.Or) and "newer" in sides else
                    "older" if isinstance(test.operator, cst.And) and "older" in sides else None)
    if polarity == "newer":
        return contains(orelse, inner)
    if polarity == "older":
        return contains(body, inner)
    return False


def _exits(block: cst.BaseSuite) -> bool:
    """The block always leaves its function or loop: its last statement returns, raises or jumps."""
    if isinstance(block, cst.IndentedBlock):
        last = block.body[-1] if block.body else None
        return isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], _EXITS)
    return isinstance(block, cst.SimpleStatementSuite) and isinstance(block.body[-1], _EXITS)


def siblings_before(holder: cst.CSTNode | None, ctx: Context, stmt: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements before `stmt` in the block of `holder` (None: the module) that holds it."""
    return _siblings(holder, ctx.module, stmt)


def _siblings(holder: cst.CSTNode | None, module: cst.Module, stmt: cst.CSTNode) -> list[cst.CSTNode]:
    bodies: list[tuple[cst.CSTNode, ...]] = []
    if holder is None:
        bodies.append(tuple(module.body))
    else:
        bodies.extend(tuple(suite.body) for suite in suites(holder) if isinstance(suite, cst.IndentedBlock))
    for body in bodies:
        for index, item in enumerate(body):
            if item is stmt:
                return list(body[:index])
    return []


def version_fallback(ctx: Context, node: cst.CSTNode) -> str | None:
    """The version test that makes `node` a fallback for older releases, or None: `node` is in the `else` of
    `if NEWER:` (or the body of `if OLDER:`), after `if NEWER: ... return` in the same block, or on the old side
    of `new if NEWER else old`."""
    return _fallback(ctx, ctx.statements, node)


def _fallback(ctx: Context, chain: tuple[cst.CSTNode, ...] | list[cst.CSTNode], node: cst.CSTNode) -> str | None:
    module = ctx.module
    for index, stmt in enumerate(chain):
        inner = chain[index + 1] if index + 1 < len(chain) else node
        if isinstance(stmt, cst.If) and _old_side(stmt.test, stmt.body, stmt.orelse, inner):
            return _shown(stmt.test)
        holder = chain[index - 1] if index else None
        for sibling in _siblings(holder, module, stmt):
            if (isinstance(sibling, cst.If) and sibling.orelse is None and _exits(sibling.body)
                    and version_polarity(sibling.test) == "newer"):
                return _shown(sibling.test)
    statement = chain[-1] if chain else None
    if statement is None:
        return None
    # the statement's conditionals are found once however many hits it holds (read whole for each, a statement
    # of hundreds of findings was quadratic)
    return next((_shown(expr.test) for expr in ctx.memo("conditionals", statement, lambda: _conditionals(statement))
                 if _old_side(expr.test, expr.body, expr.orelse, node)), None)


def _conditionals(statement: cst.CSTNode) -> tuple[cst.IfExp, ...]:
    """The `a if t else b` expressions of a statement, in source order."""
    found: list[cst.IfExp] = []

    class Finder(cst.CSTVisitor):
        def visit_IfExp(self, expr: cst.IfExp) -> None:
            found.append(expr)

    visit(statement, Finder())
    return tuple(found)


# The first version number a test names: `"1.10"`, `1_13` of `is_torch_greater_or_equal_than_1_13`.
_RELEASE = re.compile(r"(?<![\d.])(\d+)[._](\d+)")


def for_old_torch(hit: Hit, ctx: Context) -> Hit:
    """The hit, as info, where its code is the fallback for torch 1.x: a version test that names torch and a release
    below 2 (`else` of `if TORCH_GE_1_10:`, the body of `if torch.__version__ < "1.10":`). Every Neuron stack runs
    torch 2 (torch-neuronx 2.x, TorchNeuron native), so that branch never runs on Neuron."""
    if hit.severity is Severity.INFO or not hit.chain:
        return hit
    test = _fallback(ctx, hit.chain, hit.node)
    found = _RELEASE.search(test) if test is not None and "torch" in test.lower() else None
    if test is None or found is None or int(found.group(1)) >= 2:
        return hit
    return replace(hit, severity=Severity.INFO, fix=None,
                   message=f"{hit.message} (only for torch 1.x, under `{test}`: Neuron runs torch 2)")


def training_branch(hit: Hit, ctx: Context) -> Hit:
    """The hit, as info, on a chip that only runs inference (inf2) where its code is in a branch only training
    takes: the body of `if self.training:` (an `and` of it too), the `else` of `if not self.training:`. A model is
    put in eval mode before it is traced or compiled for inference, so the branch never runs there. Training itself
    (PC607) keeps its severity."""
    if hit.code == "PC607" or hit.severity is Severity.INFO or not hit.chain or not ctx.inference_only:
        return hit
    for index, stmt in enumerate(hit.chain[:-1]):
        if not isinstance(stmt, cst.If):
            continue
        inner = hit.chain[index + 1]
        training = _training_test(stmt.test)
        in_body = isinstance(stmt.body, cst.IndentedBlock) and inner in stmt.body.body
        if (training is True and in_body) or (training is False and not in_body and stmt.orelse is not None):
            where = "under" if in_body else "in the `else` of"
            return replace(hit, severity=Severity.INFO, fix=None,
                           message=f"{hit.message} (only while training, {where} `if {_shown(stmt.test)}:`: "
                                   f"{ctx.chip} runs the model in eval mode, so this branch is not taken there)")
    return hit


def float64_branch(hit: Hit, ctx: Context) -> Hit:
    """The hit, as info, where its code runs only for float64 data: the body of `if w.dtype == torch.float64:` (an
    `and` of it, `in (torch.float64, torch.double)`, a name bound to a value's dtype alike), the `else` of `!=`, the
    float64 side of `a if x.dtype == torch.float64 else b`. No NeuronCore has an FP64 type (PC303), so a model ported
    to Neuron holds float32 or bfloat16 and takes the other branch, where its own findings are."""
    if hit.severity is Severity.INFO or not hit.chain:
        return hit
    function = next((s for s in reversed(hit.chain) if isinstance(s, cst.FunctionDef)), None)
    dtypes = ctx.memo("dtype-names", function, lambda: _dtype_names(function)) if function is not None else set()
    for index, stmt in enumerate(hit.chain):
        inner = hit.chain[index + 1] if index + 1 < len(hit.chain) else hit.node
        if isinstance(stmt, cst.If) and _wide_side(ctx, dtypes, stmt.test, stmt.body, stmt.orelse, inner):
            return _narrowed(hit, stmt.test)
    statement = hit.chain[-1]
    for expr in ctx.memo("conditionals", statement, lambda: _conditionals(statement)):
        if _wide_side(ctx, dtypes, expr.test, expr.body, expr.orelse, hit.node):
            return _narrowed(hit, expr.test)
    return hit


def _dtype_names(function: cst.FunctionDef) -> set[str]:
    """The names the function binds only to a value's dtype (`W_dtype = self.W.dtype`)."""
    bound: dict[str, bool] = {}

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    name = target.target.value
                    bound[name] = bound.get(name, True) and _of_data(node.value) and len(node.targets) == 1

    visit(function, Finder())
    return {name for name, only in bound.items() if only}


def _of_data(node: cst.BaseExpression) -> bool:
    """`x.dtype`: the dtype a value has (not a dtype asked for, such as a `dtype` parameter)."""
    return isinstance(node, cst.Attribute) and node.attr.value == "dtype"


def _narrowed(hit: Hit, test: cst.BaseExpression) -> Hit:
    return replace(hit, severity=Severity.INFO, fix=None,
                   message=f"{hit.message} (only for float64 data, under `{_shown(test)}`: no NeuronCore has an FP64 "
                           "type, so a model ported to Neuron takes the other branch)")


_WIDE_DTYPES = frozenset({"torch.float64", "torch.double"})


def _wide_side(ctx: Context, dtypes: set[str], test: cst.BaseExpression, body: cst.CSTNode,
               orelse: cst.CSTNode | None, inner: cst.CSTNode) -> bool:
    """`inner` sits on the side of `test` that only float64 data takes."""
    polarity = _wide_test(ctx, dtypes, test)
    if polarity is None and isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        polarity = True if any(_wide_test(ctx, dtypes, o) is True for o in and_operands(test)) else None
    if polarity is True:
        return contains(body, inner)
    return polarity is False and orelse is not None and contains(orelse, inner)


def _wide_test(ctx: Context, dtypes: set[str], test: cst.BaseExpression) -> bool | None:
    """True for a test that holds only for float64 data (`x.dtype == torch.float64`, `w_dtype is torch.double` with
    `w_dtype = w.dtype`, `x.dtype in (torch.float64, torch.double)`), False for one that holds for all other data
    (`!=`, `is not`), else None. A dtype asked for (`if dtype == torch.float64: self.double()`) is no data's."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    operator, other = test.comparisons[0].operator, test.comparisons[0].comparator
    if not (_of_data(test.left) or (isinstance(test.left, cst.Name) and test.left.value in dtypes)):
        return None
    if isinstance(operator, (cst.In, cst.NotIn)):
        elements = other.elements if isinstance(other, (cst.Tuple, cst.List, cst.Set)) else ()
        wide = bool(elements) and all(ctx.qualname(e.value) in _WIDE_DTYPES for e in elements)
        return isinstance(operator, cst.In) if wide else None
    if ctx.qualname(other) not in _WIDE_DTYPES:
        return None
    if isinstance(operator, (cst.Equal, cst.Is)):
        return True
    return False if isinstance(operator, (cst.NotEqual, cst.IsNot)) else None


def _training_test(test: cst.BaseExpression) -> bool | None:
    """True for `self.training` (or an `and` holding it), False for `not self.training`, None otherwise."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return False if training_flag(test.expression) else None
    return True if any(training_flag(operand) for operand in and_operands(test)) else None


def training_flag(node: cst.BaseExpression) -> bool:
    """`self.training`, `model.training`: a module's own train/eval flag."""
    return isinstance(node, cst.Attribute) and node.attr.value == "training" and isinstance(node.value, cst.Name)


def tpu_only(ctx: Context, node: cst.CSTNode) -> str | None:
    """The test that limits `node` to Google TPUs, or None: the body of an `if` whose test asks
    `...(check_is_tpu=True)` (accelerate's `is_torch_xla_available`), never true on a Neuron host."""
    chain = ctx.statements
    for index, stmt in enumerate(chain):
        inner = chain[index + 1] if index + 1 < len(chain) else node
        if isinstance(stmt, cst.If) and _asks_tpu(stmt.test) and contains(stmt.body, inner):
            return _shown(stmt.test)
    return None


def _asks_tpu(test: cst.BaseExpression) -> bool:
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            nonlocal found
            flag = keyword(call, "check_is_tpu")
            found = found or (flag is not None and dotted_name(flag.value) == "True")
            return not found

        def visit_UnaryOperation(self, op: cst.UnaryOperation) -> bool:
            return not isinstance(op.operator, cst.Not)  # `not is_tpu(...)` is the other side

    visit(test, Finder())
    return found


def _shown(test: cst.BaseExpression) -> str:
    return " ".join(cst.Module(body=()).code_for_node(test).split())




# Libraries that run only on NVIDIA GPUs (rules/libraries.toml: "for NVIDIA GPUs"): a function or class that
# imports one is that library's integration, chosen only on NVIDIA hardware.
_NVIDIA_ONLY = ("transformer_engine",)


def nvidia_integration(ctx: Context) -> str | None:
    """The NVIDIA-only library the enclosing function or class imports (Lightning's Transformer Engine
    precision plugin), or None."""
    for stmt in reversed(ctx.statements):
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            for imported, _ in import_statements(block_body(stmt.body)):
                module = imported.module if isinstance(imported, cst.ImportFrom) else None
                names = [dotted_name(module)] if module is not None else [
                    dotted_name(alias.name) for alias in imported.names] if isinstance(imported, cst.Import) else []
                for name in names:
                    if name is not None and name.split(".")[0] in _NVIDIA_ONLY:
                        return name.split(".")[0]
    return None


__all__ = ["float64_branch", "for_old_torch", "nvidia_integration", "siblings_before", "tpu_only", "training_branch",
           "training_flag", "version_fallback", "version_polarity"]
