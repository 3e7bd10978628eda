"""The bindings of a local name that reach a use of it, read backwards through the blocks around the use: in
`iou = iou * keep` then `iou = iou.cpu().numpy()`, a later `iou[...]` reads the numpy array, whatever the
parameter `iou` was. Straight-line bindings count, and an `if` chain each branch of which binds the name at most
once, in a plain statement (its value after the `if` is one of the branches' or the one before); a binding nested
deeper, a loop whose body binds the name again after the use, or an unpacking into a starred name leaves the
question to the name's other bindings."""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context
from portcheck.static.rebindings import paired
from portcheck.static.syntax import block_body, blocks, bound_names
from portcheck.static.walk import visit


def reaching(ctx: Context, node: cst.Name) -> tuple[tuple[cst.BaseExpression, ...], bool] | None:
    """The values the bindings of `node`'s name reaching it give, newest first: each one's value, where it reads
    the name, reads the next one's. With whether the chain is complete (the oldest does not read the name). None
    where the nearest binding is not a plain one in a block around the use (or none is), or a loop around the use
    binds the name again after it."""
    name = node.value
    if not ctx.functions or _bound_around(ctx, node):
        return None
    function = ctx.functions[-1]
    chain = ctx.statements
    start = next((i for i in range(len(chain) - 1, -1, -1) if chain[i] is function), None)
    if start is None:
        return None
    values: list[cst.BaseExpression] = []
    for level in range(len(chain) - 1, start, -1):
        stmt, holder = chain[level], chain[level - 1]
        held = blocks(holder)
        block = next((b for b in held if any(s is stmt for s in b)), None)
        if block is None:
            return _found(values)
        index = next(i for i, s in enumerate(block) if s is stmt)
        if not values and isinstance(holder, (cst.For, cst.While)) and block is held[0] and (
                any(name in _bound_in(ctx, s) for s in block[index:])
                or (isinstance(holder, cst.For) and name in bound_names(holder.target))):
            return None  # the loop's next pass may read what the rest of its body binds
        for earlier in reversed(block[:index]):
            if name not in _bound_in(ctx, earlier):
                continue
            value = _plain_value(earlier, name) if not isinstance(earlier, cst.If) else _branches(ctx, earlier, name)
            if value is None:
                return _found(values, complete=False)
            values.append(value)
            if not _reads(value, name):
                return tuple(values), True
        if isinstance(holder, (cst.For, cst.With)) and name in _bound_in_header(holder):
            return _found(values, complete=False)
    return _found(values, complete=False)


def _branches(ctx: Context, stmt: cst.If, name: str) -> cst.BaseExpression | None:
    """What `name` holds after `if a: x = x.float()` / `elif b: x = g(x)`, where each branch binds it at most once, in
    a plain statement of its own block: any one branch's value, or the value before (where a branch binds nothing or
    there is no `else`; a value reading the name reads it too). Given as a tuple of those alternatives (`(x.float(),
    g(x), x)`), which holds for a property every alternative has (a host value). None where a branch binds it
    otherwise (in a loop, twice)."""
    values: list[cst.BaseExpression] = []
    branch: cst.If | cst.Else | None = stmt
    passes_on = False  # some path through the `if` keeps the value before
    while branch is not None:
        if not isinstance(branch.body, cst.IndentedBlock):  # `if a: x = f(x)` on one line
            return None
        block = block_body(branch.body)
        binding = [s for s in block if name in _bound_in(ctx, s)]
        if len(binding) > 1:
            return None
        if binding:
            value = _plain_value(binding[0], name)
            if value is None:
                return None
            values.append(value)
        passes_on = passes_on or not binding or (isinstance(branch, cst.If) and branch.orelse is None)
        branch = branch.orelse if isinstance(branch, cst.If) else None
    if passes_on:
        values.append(cst.Name(name))  # the value before, which a branch without a binding (or no `else`) keeps
    return cst.Tuple([cst.Element(v) for v in values])


def _bound_around(ctx: Context, node: cst.Name) -> bool:
    """A comprehension or lambda around `node` binds its name itself (`[x[m] for x in xs]`)."""
    for holder in ancestors(ctx, node):
        if isinstance(holder, cst.Lambda) and any(p.name.value == node.value for p in holder.params.params):
            return True
        if isinstance(holder, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            loop: cst.CompFor | None = holder.for_in
            while loop is not None:
                if node.value in bound_names(loop.target):
                    return True
                loop = loop.inner_for_in
    return False


def _found(values: list[cst.BaseExpression], complete: bool = False) -> tuple[tuple[cst.BaseExpression, ...],
                                                                           bool] | None:
    return (tuple(values), complete) if values else None


def _plain_value(stmt: cst.BaseStatement, name: str) -> cst.BaseExpression | None:
    """What a simple statement line's single binding of `name` gives it: the value of `name = value`, its part of
    `a, name = x, y`, or the whole of `a, name = f()` (each part is a part of what `f` returns); None for any
    other binding (a branch, `+=`, an annotation, several targets, a starred name)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return None
    found: cst.BaseExpression | None = None
    for small in stmt.body:
        if not isinstance(small, cst.Assign):
            if isinstance(small, (cst.AugAssign, cst.AnnAssign)) and name in bound_names(small.target):
                return None
            continue
        if not any(name in bound_names(t.target) for t in small.targets):
            continue
        if len(small.targets) != 1:
            return None
        target = small.targets[0].target
        if isinstance(target, cst.Name):
            found = small.value
        elif isinstance(target, (cst.Tuple, cst.List)) and not any(
                isinstance(e, cst.StarredElement) for e in target.elements):
            found = small.value if not isinstance(small.value, (cst.Tuple, cst.List)) else paired(
                target, small.value, name)
        else:
            return None
        if found is None:
            return None
    return found


def _reads(value: cst.BaseExpression, name: str) -> bool:
    class Reader(cst.CSTVisitor):
        found = False

        def visit_Name(self, node: cst.Name) -> None:
            self.found = self.found or node.value == name

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    reader = Reader()
    visit(value, reader)
    return reader.found


def _bound_in_header(holder: cst.CSTNode) -> set[str]:
    if isinstance(holder, cst.For):
        return set(bound_names(holder.target))
    if isinstance(holder, cst.With):
        return {n for item in holder.items if item.asname is not None for n in bound_names(item.asname.name)}
    return set()


def _bound_in(ctx: Context, stmt: cst.CSTNode) -> frozenset[str]:
    """Every name a statement binds anywhere inside it (not inside the functions and classes it defines)."""
    return ctx.memo("bound-in", stmt, lambda: _collect(stmt))


def _collect(stmt: cst.CSTNode) -> frozenset[str]:
    names: set[str] = set()

    class Binder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            names.add(node.name.value)
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            names.add(node.name.value)
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            names.update(bound_names(node.target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            names.update(bound_names(node.target))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            names.update(bound_names(node.target))

        def visit_For(self, node: cst.For) -> None:
            names.update(bound_names(node.target))

        def visit_AsName(self, node: cst.AsName) -> None:
            names.update(bound_names(node.name))

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            names.update(bound_names(node.target))

    visit(stmt, Binder())
    return frozenset(names)


__all__ = ["reaching"]
