"""Syntax helpers every check shares, written once: names, literals, call arguments, the blocks of a compound
statement, and the import statements of a module."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import libcst as cst


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` as text, or None when the expression is not a plain dotted name."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def self_attribute(node: cst.BaseExpression) -> str | None:
    """`name` of `self.name`, else None."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def parameters(function: cst.FunctionDef) -> list[cst.Param]:
    """The parameters a call can name: positional-only, ordinary and keyword-only (not `*args` / `**kwargs`)."""
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def string_value(node: cst.BaseExpression) -> str | None:
    """The text of a string literal (plain or implicitly concatenated), or None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def string_prefix(node: cst.BaseExpression) -> str | None:
    """The literal text a string expression starts with: `"cuda:"` for `f"cuda:{rank}"`, `"cuda:" + r`,
    `"cuda:%d" % r` or `"cuda:{}".format(r)`; the whole text for a plain literal."""
    value = string_value(node)
    if value is not None:
        return value
    if isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        return first.value if isinstance(first, cst.FormattedStringText) else ""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Modulo)):
        return string_prefix(node.left)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "format":
        return string_prefix(node.func.value)
    return None


def call_name(node: cst.Call) -> str | None:
    """The last segment of what is called: `to` for `x.to(...)`, `device` for `torch.device(...)`."""
    func = node.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def keyword(node: cst.Call, name: str) -> cst.Arg | None:
    return next((arg for arg in node.args if arg.keyword is not None and arg.keyword.value == name), None)


def positional(node: cst.Call, index: int) -> cst.Arg | None:
    args = [arg for arg in node.args if arg.keyword is None and not arg.star]
    return args[index] if index < len(args) else None


def block_body(block: cst.BaseSuite) -> tuple[cst.BaseStatement, ...]:
    """The statements of an indented block; none for a one-line suite (`if x: y`)."""
    return tuple(block.body) if isinstance(block, cst.IndentedBlock) else ()


def blocks(stmt: cst.CSTNode) -> list[tuple[cst.BaseStatement, ...]]:
    """The statement lists a compound statement holds, in source order: body, each `elif`'s body, `else`,
    the `except` handlers and `finally` of a `try`, the cases of a `match`."""
    found: list[tuple[cst.BaseStatement, ...]] = []
    for attr in ("body", "orelse", "finalbody"):
        part = getattr(stmt, attr, None)
        if part is None:
            continue
        if isinstance(part, (cst.Else, cst.Finally)):
            found.append(block_body(part.body))
        elif isinstance(part, cst.If):  # elif chain: its body and its own orelse
            found.extend(blocks(part))
        elif isinstance(part, cst.BaseSuite):
            found.append(block_body(part))
        if attr == "body":
            found.extend(block_body(handler.body) for handler in getattr(stmt, "handlers", ()))
    if isinstance(stmt, cst.Match):
        found.extend(block_body(case.body) for case in stmt.cases)
    return found


def suites(stmt: cst.CSTNode) -> Iterator[cst.BaseSuite]:
    """Every suite a compound statement holds, in source order: its body, the `except` handlers', the `else`
    and `finally` bodies, the cases of a `match` (an `elif` is a statement of its own, not a suite)."""
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.BaseSuite):
        yield body
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for part in (getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None)):
        if isinstance(part, (cst.Else, cst.Finally)):
            yield part.body
    if isinstance(stmt, cst.Match):
        for case in stmt.cases:
            yield case.body


def one_line_suites(stmt: cst.CSTNode) -> list[cst.SimpleStatementSuite]:
    """The bodies of a compound statement written on the line of their header (`if x: y`, `else: y`)."""
    return [suite for suite in suites(stmt) if isinstance(suite, cst.SimpleStatementSuite)]


def small_statements(body: Iterable[cst.BaseStatement]) -> Iterator[cst.BaseSmallStatement]:
    """The small statements (`x = 1`, `import a`) of the simple statement lines of a block."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body


def import_statements(body: Iterable[cst.BaseStatement], *, nested: bool = True,
                      at_top: bool = True) -> Iterator[tuple[cst.Import | cst.ImportFrom, bool]]:
    """Every `import` / `from ... import` of a block, with whether it is at the top level (not inside a function
    or class); with `nested`, also those inside compound statements, functions and classes."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    yield small, at_top
        elif not nested:
            continue
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            yield from import_statements(block_body(stmt.body), nested=True, at_top=False)
        else:
            for block in blocks(stmt):
                yield from import_statements(block, nested=True, at_top=at_top)


def bound_name(alias: cst.ImportAlias) -> str:
    """The local name an import alias binds: `x` for `import a.b as x`, `a.b` for `import a.b`."""
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return dotted_name(alias.name) or ""


def bound_names(target: cst.CSTNode) -> list[str]:
    """The names `target` binds (a name, a tuple or list of them, a starred one): what `binds` asks of each."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for e in target.elements for name in bound_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return bound_names(target.value)
    return []


def binds(target: cst.CSTNode, name: str) -> bool:
    """`target` (a name, a tuple or list of them, a starred one) binds `name`."""
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(binds(e.value, name) for e in target.elements)
    if isinstance(target, cst.StarredElement):
        return binds(target.value, name)
    return False


def only_raises(node: cst.CSTNode) -> bool:
    """`if <test>: raise ...` with no `else`: a check in disguise, like `assert`; calls before the `raise` (`print`,
    `logger.error(...)`: the check's diagnostics) keep it one."""
    if not isinstance(node, cst.If) or node.orelse is not None:
        return False
    if isinstance(node.body, cst.SimpleStatementSuite):
        smalls = list(node.body.body)
    else:
        lines = block_body(node.body)  # an IndentedBlock's statements
        if not all(isinstance(line, cst.SimpleStatementLine) for line in lines):
            return False
        smalls = list(small_statements(lines))
    return bool(smalls) and isinstance(smalls[-1], cst.Raise) and all(
        isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) for small in smalls[:-1])


def last_name(node: cst.BaseExpression) -> str:
    """The name an expression ends in: `ngpu` of `ngpu` and of `args.ngpu`; "" for anything else (a call, a
    subscript)."""
    return node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""


def item_root(node: cst.BaseExpression) -> str | None:
    """The name items and attributes are read from: `past` of `past[0]`, `past.key`, `past.cached_kv[0]`."""
    while isinstance(node, (cst.Subscript, cst.Attribute)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def root_name(node: cst.BaseExpression) -> str | None:
    """The name a chain of calls, attributes and indexing starts from (`mask.long().sum(1)`: `mask`;
    `tcnn.Network(3, 3)`: `tcnn`; `helper(x)[0]`: `helper`), or None where it starts from something else."""
    while isinstance(node, (cst.Attribute, cst.Call, cst.Subscript)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None
