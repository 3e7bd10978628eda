"""Walks of Python's `ast` the summary reads a file with: the calls and branches of an expression, whether one
node lies within another, and whether a function's every `return` reads tensor data into Python."""

from __future__ import annotations

import ast
import re
import sys
from collections import deque
from collections.abc import Callable


def within(node: ast.expr, outer: ast.expr) -> bool:
    return (outer.lineno, outer.col_offset) <= (node.lineno, node.col_offset) and (
        node.end_lineno or 0, node.end_col_offset or 0) <= (outer.end_lineno or 0, outer.end_col_offset or 0)


def calls_and_branches(node: ast.AST) -> list[ast.Call | ast.IfExp | ast.BoolOp]:
    """The calls and conditional expressions in `node`, in `ast.walk`'s order; a third of a tree's nodes are
    `Load` / `Store` markers, which it never looks at."""
    found: list[ast.Call | ast.IfExp | ast.BoolOp] = []
    todo = deque([node])
    pop, push, extend = todo.popleft, todo.append, todo.extend
    while todo:
        current = pop()
        if isinstance(current, (ast.Call, ast.IfExp, ast.BoolOp)):
            found.append(current)
        for field in current._fields:
            value = getattr(current, field, None)
            if isinstance(value, list):
                extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST) and not isinstance(value, ast.expr_context):
                push(value)
    return found


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")
_WRAPPERS = frozenset({"int", "list", "tuple", "float"})


def statements_in(node: ast.AST) -> list[ast.stmt]:
    """Every statement under `node`, nested functions' and classes' too: what `ast.walk` finds of them without
    visiting the expressions, most of a tree."""
    found: list[ast.stmt] = []
    todo: list[ast.AST] = [node]
    while todo:
        current = todo.pop()
        for field in _BLOCKS:
            block = getattr(current, field, None)
            if isinstance(block, list):
                found.extend(item for item in block if isinstance(item, ast.stmt))
                todo.extend(block)
    return found


# Methods whose result is the same data as the tensor they are called on, still a tensor.
_VIEWS = frozenset({"detach", "view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous", "clone"})


def _read_of(value: ast.expr | None, params: set[str]) -> str | None:
    """"read" for a value that reads a parameter's data into Python or numpy (`t.tolist()`, `int(t.max().item())`,
    `t.detach().cpu().numpy()`), "same"
    for a parameter itself or a view of it (`t.detach()`, `t[0]`), else None."""
    while True:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _VIEWS:
            value = value.func.value
        elif isinstance(value, ast.Subscript):
            value = value.value
        else:
            break
    if isinstance(value, ast.Name) and value.id in params:
        return "same"
    while (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _WRAPPERS
           and len(value.args) == 1):
        value = value.args[0]
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in ("item", "tolist", "numpy") and not value.args):
        return None
    root: ast.expr = value.func.value
    while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
        root = root.func if isinstance(root, ast.Call) else root.value
    return "read" if isinstance(root, ast.Name) and root.id in params else None


def returns_read(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """"all" where the `return`s of `function` (nested functions have their own) read the data of one of its
    parameters into Python (`return t.tolist()`, `return int(t.max().item())`, `return self.counts.tolist()`), one of
    them at least, and the others pass a parameter through, itself or a view of it (`return x if isinstance(x,
    float) else x.item()`), or the branch a tensor argument takes does (`if isinstance(x, torch.Tensor): return
    x.detach().cpu().numpy()`, whatever the helper does with numbers, lists and dicts); "off-xla" where that holds
    only of the returns outside a test for an XLA tensor, and those under one pass the value through (fairseq's
    `item(tensor)`: `tensor.detach()` where `tensor.device.type == "xla"`, `tensor.item()` otherwise): it reads
    what the native stack hands it, not what PyTorch/XLA does; else ""."""
    arguments = function.args
    params = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    found = {False: False, True: False}  # under an XLA test: a return there reads
    seen_xla = False
    if any(isinstance(node, ast.If) and _tests_tensor(node.test, params) and any(
            isinstance(s, ast.Return) and _read_of(s.value, params) == "read" for s in node.body)
           for node in function.body):
        return "all"  # `if isinstance(x, torch.Tensor): return x.detach().cpu().numpy()`: what a tensor gets
    todo: list[tuple[ast.AST, bool]] = [(statement, False) for statement in function.body]
    while todo:
        node, xla = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            value = node.value
            # `return x if isinstance(x, Number) else x.item()`: a value already in Python passes through
            sides = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            kinds = [_read_of(side, params) for side in sides]
            if None in kinds:
                return ""
            found[xla] = found[xla] or "read" in kinds
            seen_xla = seen_xla or xla
            continue
        inner = xla or (isinstance(node, ast.If) and _tests_xla(node.test))
        for field in _BLOCKS:
            block = getattr(node, field, None)
            if isinstance(block, list):
                # an `else` of an XLA test is what every other tensor takes
                todo.extend((item, xla if field == "orelse" else inner) for item in block)
    if not found[False]:
        return ""
    return "off-xla" if seen_xla and not found[True] else "all"


def _tests_tensor(test: ast.expr, params: set[str]) -> bool:
    """`isinstance(x, torch.Tensor)`, `torch.is_tensor(x)` of a parameter: the branch a tensor argument takes (the
    helper's other branches convert numbers, lists, dicts...)."""
    if not (isinstance(test, ast.Call) and test.args and isinstance(test.args[0], ast.Name)
            and test.args[0].id in params):
        return False
    func = test.func
    if isinstance(func, ast.Name) and func.id == "isinstance" and len(test.args) == 2:
        kind = test.args[1]
        return (isinstance(kind, ast.Attribute) and kind.attr == "Tensor") or (isinstance(kind, ast.Name) and (
            kind.id == "Tensor"))
    return isinstance(func, ast.Attribute) and func.attr == "is_tensor" and len(test.args) == 1


def _tests_xla(test: ast.expr) -> bool:
    """`t.device.type == "xla"`, `is_xla_tensor(t)`, `xm.is_xla_tensor(t)`: a test for a PyTorch/XLA tensor (an
    `and` holding one too)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_tests_xla(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        return any(isinstance(side, ast.Constant) and side.value == "xla" for side in (test.left, *test.comparators))
    if isinstance(test, ast.Call):
        func = test.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return name == "is_xla_tensor"
    return False


def positional(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> tuple[str, ...]:
    """The parameters positional arguments fill, in order: a method's first (`self`, `cls`) left out."""
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    return tuple(names[1:] if names and method and not static else names)


def exits(body: list[ast.stmt]) -> bool:
    """The block ends by leaving: `return`, `raise`, `continue`, `break`."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def end_line(node: ast.AST) -> int:
    end = getattr(node, "end_lineno", None) or getattr(node, "lineno", None)
    return end if isinstance(end, int) else 0


_LIBRARIES = frozenset(sys.stdlib_module_names) | {"torch", "numpy", "scipy", "pandas", "transformers", "jax",
                                                   "tensorflow", "sklearn", "einops", "typing_extensions"}


_CHAIN = re.compile(r"(?:\.\w+)+")
_STAR = re.compile(r"^\s*from\s+([.\w]+)\s+import\s+\*", re.M)


def mentions(text: str, aliases: dict[str, str]) -> tuple[str, ...]:
    """Summary.mentions: every attribute the file reads off a name it imports (`rnnt.multiblank_loss`, `pkg.mod.f`),
    and "*" + the module for `getattr(alias, name)` with a name the code computes or for `from module import *`."""
    # what a project's module is read for: not the standard library's or the big numeric libraries' names (most of
    # the dotted names a model file holds: `torch.cat`, `nn.Linear`, `np.zeros`), and only names it dots at all
    dotted = [a for a, target in aliases.items() if target.split(".")[0] not in _LIBRARIES and f"{a}." in text]
    found: set[str] = set()
    for alias in dotted:
        start = text.find(f"{alias}.")
        while start >= 0:
            if start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "_."):
                chain = _CHAIN.match(text, start + len(alias))
                if chain is not None:
                    found.update(chain.group()[1:].split("."))
            start = text.find(f"{alias}.", start + 1)
    if "import *" in text:  # `from .ops import *`: every public name of that module is the package's too
        found.update("*" + module for module in _STAR.findall(text))
    if aliases and "getattr(" in text:
        roots = "|".join(re.escape(a) for a in sorted(aliases, key=len, reverse=True))
        found.update("*" + aliases[a] for a in re.findall(rf"\bgetattr\(\s*({roots})\s*,\s*(?![\"'\s])", text))
    return tuple(sorted(found))


# What looks a function up by a name the code builds: a file doing it may call any of its functions.
_LOOKUPS = ("globals()", "locals()", "vars()", "sys.modules", "__getattr__", "getattr(")


class OwnNames:
    """Which functions a file's text names only inside themselves (their `def`, docstring, recursive calls). A
    file that looks names up at run time (`globals()[f"emulate_{method}"]`) names none that way: it may call any."""

    def __init__(self, text: str) -> None:
        self.text = "" if any(lookup in text for lookup in _LOOKUPS) else text
        self._lines: list[str] | None = None

    def only_within(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """And the function takes an argument: one callable with none may be an entry point that packaging
        metadata names (`[project.scripts] tool = "pkg.cli:main"`), which is no Python the scan reads."""
        arguments = node.args
        required = len(arguments.posonlyargs) + len(arguments.args) - len(arguments.defaults) + sum(
            default is None for default in arguments.kw_defaults)
        if not self.text or required == 0:
            return False
        if self._lines is None:
            self._lines = self.text.splitlines()
        own = "\n".join(self._lines[node.lineno - 1:node.end_lineno or node.lineno])
        return self.text.count(node.name) == own.count(node.name)


def runs_as_script(test: ast.expr) -> bool:
    """`__name__ == "__main__"`, either way round: what runs only when the file is run as a script."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(a, ast.Name) and a.id == "__name__" for a in sides) and any(
        isinstance(c, ast.Constant) and c.value == "__main__" for c in sides)



# torch.library's registrations that name the devices an implementation serves: `custom_op(..., device_types=)`,
# `impl(name, types)` (or the older `impl(lib, name, dispatch_key)`), `register_kernel(op, device_types)`; and an op
# object's own `@op.register_kernel("cuda")`.
_REGISTRATIONS = frozenset({"torch.library.custom_op", "torch.library.impl", "torch.library.register_kernel"})


def registered_for_cuda(function: ast.FunctionDef | ast.AsyncFunctionDef,
                        resolve: Callable[[ast.expr], str | None]) -> bool:
    """A decorator of `function` registers it as an op's implementation for CUDA devices only."""
    return any(_registers_for_cuda(d, resolve) for d in function.decorator_list)


def _registers_for_cuda(decorator: ast.expr, resolve: Callable[[ast.expr], str | None]) -> bool:
    """`@torch.library.custom_op("ns::op", mutates_args=(), device_types="cuda")`, `@torch.library.impl("ns::op",
    "CUDA")`, `@my_op.register_kernel("cuda")`: the dispatcher sends this function only tensors on a CUDA device, so
    it runs only where CUDA is present. A registration for other devices too, or for none named (every device), is
    not."""
    if not isinstance(decorator, ast.Call):
        return False
    name = resolve(decorator.func) or ""
    if name in _REGISTRATIONS:
        keyword = "device_types" if name != "torch.library.impl" else "types"
        given = next((k.value for k in decorator.keywords if k.arg in (keyword, "dispatch_key")), None)
        if given is None and name != "torch.library.custom_op" and len(decorator.args) >= 2:
            given = decorator.args[-1]  # `impl("ns::op", "cuda")`, `impl(lib, "op", "CUDA")`
    elif isinstance(decorator.func, ast.Attribute) and decorator.func.attr == "register_kernel":
        given = next((k.value for k in decorator.keywords if k.arg == "device_types"),
                     decorator.args[0] if decorator.args else None)
    else:
        return False
    return given is not None and _only_cuda(given)


def _only_cuda(node: ast.expr) -> bool:
    """"cuda", "CUDA", ("cuda",), ["cuda", "cuda"]: device names, all CUDA's."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return bool(items) and all(isinstance(i, ast.Constant) and isinstance(i.value, str) and
                               i.value.lower() in ("cuda", "sparsecuda", "autogradcuda") for i in items)


__all__ = [
    "OwnNames",
    "calls_and_branches",
    "end_line",
    "exits",
    "mentions",
    "positional",
    "registered_for_cuda",
    "returns_read",
    "runs_as_script",
    "statements_in",
    "within",
]
