"""What a finding's code reads of its function's parameters, for the call graph to settle with the calls it sees
(Finding.default_of, Finding.host_if, Finding.unless_passed). Pure functions of the syntax tree: the context passes
its name lookups in.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import libcst as cst

from portcheck.static.syntax import bound_names, parameters
from portcheck.static.walk import visit

Constant = Callable[[cst.BaseExpression], "tuple[str, cst.BaseExpression] | None"]
Qualname = Callable[[cst.BaseExpression], "str | None"]

# Builtins and what keeps a value where it is: `int(x.sum())` reads the same data `x` holds.
_SAME_PLACE = frozenset({"int", "float", "bool", "len", "abs", "min", "max", "sum", "round", "list", "tuple",
                         "sorted", "any", "all", "str", "print", "repr", "format"})
_MOVES = frozenset({"to", "cuda", "xpu", "type", "pin_memory", "new_tensor", "new_zeros", "new_ones", "new_empty",
                    "new_full"})
_BUDGET = 64  # nodes read per finding


def default_read(function: cst.FunctionDef, node: cst.CSTNode, constant: Constant, header: bool = False) -> str:
    """The parameter of `function` whose string default a name in `node` stands for, or, for a `node` in the
    function's `header` (its signature), whose default `node` sits in (`device=torch.device("cuda")`), marked "="
    (the finding is the default itself), or ""."""
    for param in parameters(function):
        # in the signature, anything inside a default; elsewhere (a use reported at the default it reads), the
        # default itself
        if param.default is not None and (param.default is node or (header and _inside(node, param.default))):
            return f"={param.name.value}"
    defaults = {p.name.value: p.default for p in parameters(function) if isinstance(p.default, cst.SimpleString)}
    if not defaults:
        return ""
    names: list[cst.Name] = []
    stack: list[cst.CSTNode] = [node]
    while stack and len(names) < _BUDGET:
        current = stack.pop()
        if isinstance(current, cst.Name):
            names.append(current)
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)  # `x.device` is no read of a name `device`
        else:
            stack.extend(current.children)
    for name in names:
        bound = constant(name) if name.value in defaults else None
        if bound is not None and bound[1] is defaults[name.value]:
            return name.value
    return ""


def _inside(node: cst.CSTNode, tree: cst.CSTNode) -> bool:
    """`node` is `tree` or in it (a parameter's default: a few nodes, read at most _BUDGET of them)."""
    stack = [tree]
    seen = 0
    while stack and seen < _BUDGET:
        current = stack.pop()
        if current is node:
            return True
        seen += 1
        stack.extend(current.children)
    return False


# What binds a name, and the field holding the target: assignments, loops, `with ... as`, the walrus.
_BINDERS: dict[type[cst.CSTNode], str] = {cst.AssignTarget: "target", cst.AugAssign: "target",
                                          cst.AnnAssign: "target", cst.For: "target", cst.AsName: "name",
                                          cst.NamedExpr: "target"}


def assigned(function: cst.FunctionDef) -> frozenset[str]:
    """Names the function's body binds (assignments, loops, `with`, augmented assignments, walrus)."""
    found: set[str] = set()

    class Finder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            field = _BINDERS.get(type(node))
            if field is not None:
                found.update(bound_names(getattr(node, field)))
            return True

    visit(function.body, Finder())
    return frozenset(found)


def param_roots(function: cst.FunctionDef, node: cst.CSTNode, constant: Constant, qualname: Qualname,
                assigned: Callable[[], frozenset[str]]) -> tuple[str, ...]:
    """The parameters of `function` (a method's `self` / `cls` left out, and none the body rebinds) that the value
    at `node` is made of, through local names bound once, indexing, arithmetic, tensor methods and torch or builtin
    functions; () when any part of it comes from elsewhere (the object's state, a global, another function's
    result, a move to a device)."""
    params = {p.name.value for p in parameters(function)} - {"self", "cls"}
    if not params:
        return ()
    roots: set[str] = set()
    todo: list[cst.CSTNode] = [node]
    seen = 0
    while todo:
        seen += 1
        if seen > _BUDGET:
            return ()
        current = todo.pop()
        if isinstance(current, cst.Name):
            if current.value in params and current.value not in assigned():
                roots.add(current.value)
                continue
            if current.value in ("True", "False", "None"):
                continue
            bound = constant(current)
            if bound is None:
                return ()
            todo.append(bound[1])
        elif isinstance(current, cst.Attribute):
            if current.attr.value in _MOVES:
                return ()
            todo.append(current.value)
        elif isinstance(current, cst.Call):
            func = current.func
            if isinstance(func, cst.Name):
                if func.value not in _SAME_PLACE:
                    return ()
            elif isinstance(func, cst.Attribute) and not (qualname(func) or "").startswith("torch."):
                if func.attr.value in _MOVES or qualname(func) is not None:
                    return ()  # a move, or another library's function
                todo.append(func.value)  # a method: the receiver's data
            elif not isinstance(func, cst.Attribute):
                return ()
            todo.extend(arg.value for arg in current.args)
        elif isinstance(current, (cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary, cst.Ellipsis)):
            continue
        elif isinstance(current, (cst.Lambda, cst.GeneratorExp, cst.ListComp, cst.SetComp, cst.DictComp)):
            return ()
        else:
            todo.extend(current.children)
    return tuple(sorted(roots))


def branch_parameter(function: cst.FunctionDef, chain: list[cst.CSTNode], node: cst.CSTNode,
                     assigned: Callable[[], frozenset[str]],
                     parents: Callable[[cst.CSTNode], dict[int, cst.CSTNode]]) -> str:
    """The parameter (default None or False, never rebound in the function) that an enclosing `if` of `node`
    tests for being given (`if mask is not None:`, `if mask:`), the branch holding `node`; or, marked "!", the
    parameter (default None) whose absence it tests (`if size is None: size = int(index.max()) + 1`, or the
    fallback of an expression), bound only from that branch on; "" where none. `parents` gives a statement's map
    of parents (walk.parents_of, built once a statement by the caller)."""
    optional = {p.name.value for p in parameters(function)
                if isinstance(p.default, cst.Name) and p.default.value in ("None", "False")}
    if not optional:
        return ""
    if chain and isinstance(chain[-1], cst.SimpleStatementLine) and (
            absent := _fallback_expression(chain[-1], node, parents(chain[-1]))) in optional and _rebound_only_in(
            function, absent, chain[-1]):
        return f"!{absent}"
    for index, statement in enumerate(chain):
        if not isinstance(statement, cst.If):
            continue
        inner = chain[index + 1] if index + 1 < len(chain) else node
        body = statement.body.body if isinstance(statement.body, cst.IndentedBlock) else (statement.body,)
        if not any(part is inner for part in body):
            continue
        test = statement.test
        absent = _absence_tested(test)
        if absent in optional and _rebound_only_in(function, absent, statement):
            return f"!{absent}"
        if (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
                and isinstance(test.comparisons[0].operator, cst.IsNot)
                and isinstance(test.comparisons[0].comparator, cst.Name)
                and test.comparisons[0].comparator.value == "None"):
            test = test.left
        if isinstance(test, cst.Name) and test.value in optional and test.value not in assigned():
            return test.value
    return ""


def _fallback_expression(statement: cst.CSTNode, node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> str:
    """`p` where `node` is the fallback of an expression for a parameter not given: the other side of `p if p is
    not None else <node>`, of `<node> if p is None else p`, or the right of `p or <node>`; else "". Read up the
    statement's map of parents, which leads a chain's links straight to its outermost (`a or b or ...`)."""
    path = [node]
    while id(path[-1]) in parents:
        path.append(parents[id(path[-1])])
    if path[-1] is not statement:
        return ""
    path.reverse()
    for holder, inner in itertools.pairwise(path):
        if isinstance(holder, cst.IfExp):
            present = _presence_tested(holder.test)
            if present and inner is holder.orelse:
                return present
            if _absence_tested(holder.test) and inner is holder.body:
                return _absence_tested(holder.test)
        elif (isinstance(holder, cst.BooleanOperation) and isinstance(holder.operator, cst.Or)
              and inner is holder.right and isinstance(holder.left, cst.Name)):
            return holder.left.value
    return ""


def _presence_tested(test: cst.BaseExpression) -> str:
    """`p` of `p is not None`, else ""."""
    return _none_tested(test, cst.IsNot)


def _absence_tested(test: cst.BaseExpression) -> str:
    """`p` of `if p is None:`, else ""."""
    return _none_tested(test, cst.Is)


def _none_tested(test: cst.BaseExpression, operator: type[cst.Is] | type[cst.IsNot]) -> str:
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name)):
        return ""
    part = test.comparisons[0]
    none = isinstance(part.comparator, cst.Name) and part.comparator.value == "None"
    return test.left.value if isinstance(part.operator, operator) and none else ""


def _rebound_only_in(function: cst.FunctionDef, name: str, branch: cst.CSTNode) -> bool:
    """No statement of `function` before `branch` binds `name` (nested functions and classes have their own): the
    branch tests the parameter as the caller gave it. What the function binds after it (`size = (size, size)`)
    does not decide whether it runs."""
    found = reached = False

    class Finder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found, reached
            reached = reached or node is branch
            if found or reached or (node is not function and isinstance(node, (cst.FunctionDef, cst.ClassDef,
                                                                                cst.Lambda))):
                return False
            kind = type(node)
            if kind in _BINDERS:
                target = getattr(node, _BINDERS[kind])
                found = target is not None and name in bound_names(target)
            return not found

    visit(function, Finder())
    return not found


__all__ = ["assigned", "branch_parameter", "default_read", "param_roots"]
