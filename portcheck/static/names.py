"""A light name resolver: what each imported or simply-assigned name stands for in one file.

libcst's ScopeProvider/QualifiedNameProvider make a pass ten times slower than the parse on real model
code (MEASURED.md §2). Rules only need to know that `th.cuda`, `from torch import cuda` or
`sync = torch.cuda.synchronize` name `torch.cuda...`, and that `DEVICE = "cuda"` holds a string. So this
walks statements only (never expressions) and records import aliases, module-level aliases of dotted
names, and string constants per scope. A name bound twice to different things is dropped, so that
ambiguity keeps rules quiet rather than wrong.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

import libcst as cst

from portcheck.static.syntax import block_body, blocks, dotted_name


class _Ambiguous(enum.Enum):
    """The mark of a name bound more than once, or to something other than one expression."""

    AMBIGUOUS = enum.auto()


_AMBIGUOUS: Final = _Ambiguous.AMBIGUOUS

_BLOCKS = (cst.If, cst.Else, cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally,
           cst.With, cst.For, cst.While, cst.Match)


@dataclass
class Scope:
    """Names bound in one function (or the module): string constants and what else was bound."""

    constants: dict[str, cst.BaseExpression | _Ambiguous] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)
    # how many plain `name = value` bindings each name has; -1 once something else binds it (a parameter, a loop
    # target, an unpacking, `+=`)
    plain: dict[str, int] = field(default_factory=dict)

    def constant(self, name: str) -> cst.BaseExpression | None:
        value = self.constants.get(name)
        return None if value is _AMBIGUOUS else value

    def rebound(self, name: str) -> bool:
        """Bound more than once, each time by a plain `name = value` (rebindings.rebindings reads the values)."""
        return self.plain.get(name, 0) > 1


class Names:
    def __init__(self, module: cst.Module) -> None:
        self.aliases: dict[str, str] = {}
        self.module_scope = Scope()
        self._ambiguous: set[str] = set()
        self._collect_imports(module.body, top=True)
        _collect_constants(module.body, self.module_scope)

    def _bind_alias(self, name: str, target: str) -> None:
        if name in self._ambiguous:
            return
        if self.aliases.get(name, target) != target:
            del self.aliases[name]
            self._ambiguous.add(name)
            return
        self.aliases[name] = target

    def _collect_imports(self, body: Iterable[cst.BaseStatement], top: bool) -> None:
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Import):
                        for alias in small.names:
                            full = dotted_name(alias.name)
                            if full is None:
                                continue
                            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                                self._bind_alias(alias.asname.name.value, full)
                            else:
                                head = full.split(".", 1)[0]
                                self._bind_alias(head, head)
                    elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
                        module = dotted_name(small.module)
                        if module is None or isinstance(small.names, cst.ImportStar):
                            continue
                        for alias in small.names:
                            name = dotted_name(alias.name)
                            if name is None:
                                continue
                            local = name
                            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                                local = alias.asname.name.value
                            self._bind_alias(local, f"{module}.{name}")
                    elif top and isinstance(small, cst.Assign) and len(small.targets) == 1:
                        target = small.targets[0].target
                        source = dotted_name(small.value)
                        if isinstance(target, cst.Name) and source is not None:
                            resolved = self.resolve_dotted(source)
                            if resolved is not None:
                                self._bind_alias(target.value, resolved)
            elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                self._collect_imports(block_body(stmt.body), top=False)
            elif isinstance(stmt, _BLOCKS):
                for block in blocks(stmt):
                    self._collect_imports(block, top=top)

    def resolve_dotted(self, dotted: str) -> str | None:
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def qualname(self, node: cst.BaseExpression) -> str | None:
        """The qualified name an expression stands for (`th.cuda.sync` -> `torch.cuda.sync`), or None."""
        dotted = dotted_name(node)
        return None if dotted is None else self.resolve_dotted(dotted)


def _collect_constants(body: Iterable[cst.BaseStatement], scope: Scope) -> None:
    """Record `NAME = <expr>` bindings of this scope; nested functions and classes are their own scopes."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        _bind(scope, target.target, small.value if len(small.targets) == 1 else None)
                elif isinstance(small, cst.AnnAssign) and small.value is not None:
                    _bind(scope, small.target, small.value)
                elif isinstance(small, cst.AugAssign):
                    _bind(scope, small.target, None)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            scope.bound.add(stmt.name.value)
        elif isinstance(stmt, _BLOCKS):
            if isinstance(stmt, cst.For):
                _bind(scope, stmt.target, None)
            for block in blocks(stmt):
                _collect_constants(block, scope)


def _bind(scope: Scope, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
    if isinstance(target, (cst.Tuple, cst.List)):
        # `bsz, max_len = x.size(0), lens.max().item()`: each name is bound to its own part of a tuple as long
        values = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
        paired = len(values) == len(target.elements) and not any(
            isinstance(e, cst.StarredElement) for e in (*values, *target.elements))
        for index, element in enumerate(target.elements):
            _bind(scope, element.value, values[index].value if paired else None)
        return
    if not isinstance(target, cst.Name):
        return
    name = target.value
    if value is None or scope.plain.get(name, 0) < 0 or (name in scope.bound and name not in scope.plain):
        scope.plain[name] = -1
    else:
        scope.plain[name] = scope.plain.get(name, 0) + 1
    if name in scope.constants or name in scope.bound or value is None:
        scope.constants[name] = _AMBIGUOUS
    else:
        scope.constants[name] = value
    scope.bound.add(name)


def function_scope(node: cst.FunctionDef) -> Scope:
    scope = Scope()
    params = node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        # A string default (`device="cuda"`, `backend="nccl"`) is the value every caller that passes none gets:
        # followed into its uses like a name bound once (a rebinding in the body makes it ambiguous).
        default = param.default
        scope.constants[param.name.value] = default if isinstance(default, cst.SimpleString) else _AMBIGUOUS
        scope.bound.add(param.name.value)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            scope.constants[star.name.value] = _AMBIGUOUS
            scope.bound.add(star.name.value)
    _collect_constants(block_body(node.body), scope)
    return scope
