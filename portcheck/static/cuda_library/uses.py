"""Uses of a CUDA-only library whose guarded import leaves nothing behind (PC501): `try: import tinycudann as tcnn /
except ImportError: tcnn = None`, then `tcnn.Network(...)` in a model's `__init__` with no test of `tcnn`. The
import's own finding is info (it has a fallback); the use is where a host without the library fails: `None` has no
`Network`, and a name the handler never bound raises NameError.

A use is guarded, and quiet, where a test around it or before it in its function names the library's bound name or
a flag the `try` sets (`if tcnn is not None:`, `if HAS_APEX:`, `if not _tcnn_ok: raise ...`), where a `try` catches
its failure, or where a test names the library (`if implementation == "tcnn":`, info: an integration the user
picks). An `except` that binds the name to something else (`from torch.nn import LayerNorm`) is a real fallback."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge.libraries import Library, library_of
from portcheck.static.check import Context, check
from portcheck.static.cuda_api.paths import cuda_path
from portcheck.static.cuda_library.imports import IMPORT_TOKENS, CudaOnlyLibrary, one_line
from portcheck.static.cuda_library.integrations import integration
from portcheck.static.syntax import block_body, blocks, root_name
from portcheck.static.values import catches_import_error, guard, under_type_checking
from portcheck.static.walk import visit


@dataclass(frozen=True)
class Unbound:
    """What a file's guarded imports leave unbound: name -> (its library, the imported path, the import's line)."""

    names: dict[str, tuple[Library, str, cst.CSTNode]]
    flags: frozenset[str]  # names the `try` or its handlers set to True or False


def unbound(ctx: Context) -> Unbound:
    return ctx.memo("unbound-libraries", ctx.module, lambda: _collect(ctx))


def _collect(ctx: Context) -> Unbound:
    names: dict[str, tuple[Library, str, cst.CSTNode]] = {}
    flags: set[str] = set()
    todo: list[cst.CSTNode] = list(ctx.module.body)
    while todo:  # module-level `try`s, also inside module-level `if`s
        stmt = todo.pop()
        if isinstance(stmt, cst.If):
            todo.extend(s for block in blocks(stmt) for s in block)
            continue
        if not isinstance(stmt, cst.Try) or not catches_import_error(stmt):
            continue
        imported = {bound: (library, path, where) for line in block_body(stmt.body)
                    for bound, library, path, where in _imports(ctx, line)}
        if not imported:
            continue
        rebound: set[str] = set()
        for handler in stmt.handlers:
            for line in block_body(handler.body):
                rebound |= _rebinds(line)
        for part in (stmt.body, *(h.body for h in stmt.handlers), *([stmt.orelse.body] if stmt.orelse else [])):
            flags |= {name for line in block_body(part) for name in _flags(line)}
        names.update({name: found for name, found in imported.items() if name not in rebound})
    return Unbound(names, frozenset(flags))


def _imports(ctx: Context, line: cst.CSTNode) -> list[tuple[str, Library, str, cst.CSTNode]]:
    """(bound name, library, imported path, where) for each CUDA-only library an import line binds."""
    if not isinstance(line, cst.SimpleStatementLine):
        return []
    found: list[tuple[str, Library, str, cst.CSTNode]] = []
    for small in line.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                path = ctx.source(alias.name)
                library = library_of(path)
                if library is not None:
                    bound = alias.asname.name if alias.asname is not None else None
                    name = bound.value if isinstance(bound, cst.Name) else path.split(".")[0]
                    found.append((name, library, path, alias))
        elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative and not isinstance(
                small.names, cst.ImportStar):
            module = ctx.source(small.module)
            for alias in small.names:
                path = f"{module}.{ctx.source(alias.name)}"
                library = library_of(path)
                named: cst.BaseExpression = alias.asname.name if alias.asname is not None else alias.name
                if library is not None and isinstance(named, cst.Name):
                    found.append((named.value, library, path, alias))
    return found


def _rebinds(line: cst.CSTNode) -> set[str]:
    """Names a handler line binds to something other than None (another import, a class, a function)."""
    found: set[str] = set()
    if isinstance(line, (cst.FunctionDef, cst.ClassDef)):
        return {line.name.value}
    if not isinstance(line, cst.SimpleStatementLine):
        return found
    for small in line.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
            for alias in small.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(bound, cst.Name):
                    found.add(bound.value)
                elif isinstance(bound, cst.Attribute):
                    found.add(cst.Module([]).code_for_node(bound).split(".")[0])
        elif isinstance(small, cst.Assign) and not (isinstance(small.value, cst.Name) and small.value.value == "None"):
            found |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
    return found


def _flags(line: cst.CSTNode) -> set[str]:
    if not isinstance(line, cst.SimpleStatementLine):
        return set()
    return {t.target.value for small in line.body if isinstance(small, cst.Assign)
            and isinstance(small.value, cst.Name) and small.value.value in ("True", "False")
            for t in small.targets if isinstance(t.target, cst.Name)}


def _mentions(test: cst.CSTNode, names: set[str]) -> bool:
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            found = found or node.value in names

    visit(test, Finder())
    return found


def _guarded(ctx: Context, node: cst.Call, names: set[str]) -> bool:
    """A test around the use, or an earlier one in its function, names the library's names or flags; or a `try`
    around it catches what it raises."""
    chain = ctx.statements
    for index, stmt in enumerate(chain):
        if isinstance(stmt, (cst.If, cst.While)) and _mentions(stmt.test, names):
            return True
        if isinstance(stmt, (cst.Try, cst.TryStar)) and stmt.handlers and index + 1 < len(chain) and any(
                s is chain[index + 1] for s in block_body(stmt.body)):
            return True
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and index + 1 < len(chain):
            for line in block_body(stmt.body):
                if line is chain[index + 1]:
                    break
                if isinstance(line, cst.If) and _mentions(line.test, names):
                    return True
    found = False

    class Finder(cst.CSTVisitor):  # `tcnn.X(...) if tcnn is not None else nn.Linear(...)`, `ok and tcnn.X()`
        def visit_IfExp(self, expr: cst.IfExp) -> None:
            nonlocal found
            found = found or _mentions(expr.test, names)

        def visit_BooleanOperation(self, expr: cst.BooleanOperation) -> None:
            nonlocal found
            found = found or _mentions(expr.left, names)

    visit(chain[-1] if chain else node, Finder())
    return found


@check(cst.Call, rules=(CudaOnlyLibrary,), tokens=IMPORT_TOKENS)
def check_library_use(node: cst.Call, ctx: Context) -> None:
    if not ctx.functions:
        return  # module level: the import statement's own finding speaks for it
    found = unbound(ctx)
    name = root_name(node.func)
    if name is None or name not in found.names or under_type_checking(ctx) or (
            ctx.scopes and name in ctx.scopes[-1].bound):
        return  # `def f(tcnn): tcnn.Network(...)`: the function's own name, not the import
    library, path, _ = found.names[name]
    siblings = {n for n, (lib, _, _) in found.names.items() if lib is library}
    if _guarded(ctx, node, siblings | set(found.flags)) or guard(ctx) or cuda_path(ctx, node):
        return  # a use that only runs where the import worked, or only with CUDA
    shown = one_line(ctx.source(node))
    place = integration(ctx, path, library.modules, (*library.names, name))
    if not _first(ctx, ctx.functions[-1], f"{library.title}{place is not None}"):
        return
    if place is not None:
        ctx.report(CudaOnlyLibrary, node, f"`{shown}` uses {library.title} in {place}: it runs only when the user "
                   f"chooses {library.title}; on Neuron leave it unchosen ({library.advice(ctx.stack)})",
                   Severity.INFO)
        return
    ctx.report(CudaOnlyLibrary, node, (
        f"`{shown}` uses {library.title} ({library.kind}), whose import falls back to nothing where it is missing: "
        f"on Neuron `{name}` is None or unbound here and the call fails, with no test of it first; "
        f"{library.advice(ctx.stack)}"))


def _first(ctx: Context, function: cst.FunctionDef, key: str) -> bool:
    """The first unguarded use of a library in `function` (of those in an integration of it, and of the others):
    one finding per function and library."""
    seen: set[str] = ctx.memo("library-uses", function, set)
    if key in seen:
        return False
    seen.add(key)
    return True


__all__ = ["check_library_use", "unbound"]
