"""What one file tells the rest of the project about itself, read from Python's own syntax tree (the engine
parses it anyway, as its syntax check): its functions with their line spans, what each one calls and under which
CUDA guard, what each is for (a model's `forward`, a training step, a data-pipeline entry, a CUDA probe), the
names it re-exports, what its classes' attributes are built by, and the regions only another vendor's code runs.

The project's call graph (`portcheck.static.semantic.graph`) is built from these summaries alone, so a summary is
a function of the file's bytes: cached with the file's findings, the graph rebuilt from them on every run. Names
are resolved through the file's imports (`torch.cuda.is_available`, `pkg.mod.helper`, `..mod.helper`); any other
is written `:helper` (the graph looks it up in the file's scopes), a method reached through `self` `self.helper`.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Sequence

from portcheck.static.cuda_api.gpu_settings import compared_in_ast, counted_in_ast
from portcheck.static.cuda_api.paths import OTHER_ACCELERATOR, named_for_cuda
from portcheck.static.semantic import kinds
from portcheck.static.semantic.attributes import attribute_bindings
from portcheck.static.semantic.dispatch import Generics
from portcheck.static.semantic.grows import REGROWS, regrow_calls
from portcheck.static.semantic.hosts import Bindings, host_arguments
from portcheck.static.semantic.imports import catches_import_error, import_aliases, optional_test
from portcheck.static.semantic.interval import Intervals
from portcheck.static.semantic.kinds import (
    CUDA_CLASS,
    CUDA_GUARD,
    CUDA_IMPL,
    FORWARD,
    HOST,
    INTERVAL_GUARD,
    MAIN_GUARD,
    ONCE,
    ONCE_GUARD,
    PROBE,
    READS,
    READS_OFF_XLA,
    STEP,
    UNNAMED,
    VENDOR,
    VENDOR_GUARD,
    VENDOR_RUNTIMES,
    innermost,
    negated,
)
from portcheck.static.semantic.masks import MASK, returns_mask
from portcheck.static.semantic.nodes import (
    OwnNames,
    calls_and_branches,
    end_line,
    exits,
    mentions,
    positional,
    registered_for_cuda,
    returns_read,
    runs_as_script,
    statements_in,
    within,
)
from portcheck.static.semantic.once import Setters, cached, dotted, initialised_after, initialises
from portcheck.summaries import Function, Summary


def summarise(tree: ast.Module, text: str = "") -> Summary:
    """`text`, the file's source, tells which module-level functions the file never names again (UNNAMED)."""
    (reader := _Reader(import_aliases(tree))).own_names = OwnNames(text)
    reader.intervals = Intervals(tree)
    reader.module_probes = reader.probes_bound(tree.body)
    reader.block(tree.body, (), "")
    return Summary(tuple(reader.generics.dispatched(reader.functions)), tuple(reader.classes),
                   tuple(sorted(reader.aliases.items())), tuple(reader.regions), tuple(reader.imports),
                   tuple(reader.module_passes), tuple(sorted(reader.module_probes)), tuple(reader.required),
                   mentions(text, reader.aliases), tuple(reader.attributes))


class _Reader:
    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self.functions: list[Function] = []
        self.classes: list[tuple[str, tuple[str, ...]]] = []
        self.attributes: list[tuple[str, str, str]] = []  # Summary.attributes
        self._data_classes: set[str] = set()  # classes that subclass a Dataset or a Sampler
        self._vendor_classes: set[str] = set()  # classes built on another vendor's or framework's classes
        self._setters = Setters()  # once.setters_of the class being read
        self.regions: list[tuple[int, int, str]] = []
        self.vendor_file = any(v.split(".")[0] in kinds.VENDOR_MODULES for v in aliases.values())
        self._calls: list[tuple[str, str]] | None = None
        self._returns: list[str] = []
        self._host_refs: list[str] = []
        self._probe = self._step = self._vendor = False
        self._probe_names: frozenset[str] = frozenset()
        self._regrows: frozenset[int] = frozenset()  # grows.regrow_calls of the function being read
        self.module_probes: frozenset[str] = frozenset()
        self.imports: list[tuple[str, bool, str, str]] = []
        self.required: list[str] = []  # Summary.required
        self._passes: list[tuple[str, int, tuple[str, ...], tuple[str, ...]]] = []
        self.intervals = Intervals(None)  # the file's interval tests (summarise gives it the tree)
        self._bindings = Bindings(self.resolve, local=False)
        self.module_passes = self._passes  # module-level code's calls; a function's own replace it while it is read
        self._optional = 0  # how many optional-dependency tests or `except ImportError`s hold the walk
        self.generics = Generics()  # `@singledispatch` functions and what `@f.register` adds to them
        self.own_names = OwnNames("")

    def resolve(self, node: ast.expr) -> str | None:
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if (target := self.aliases.get(head)) is not None and not self._bindings.binds(head):
            return f"{target}.{rest}" if rest else target
        if head == "self":
            return name
        return f":{name}"

    # ---- guards ----------------------------------------------------------------------------------------------

    def polarity(self, test: ast.expr) -> str | None:
        """"cuda" when `test` holds only with CUDA, "!cuda" when it fails only then, "vendor" for another vendor's
        export or trace, "?f" / "!f" for a call of a function that may be a probe; else None."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.polarity(test.operand)
            if inner is None or inner == VENDOR_GUARD:
                return None
            return inner[1:] if inner[0] == "!" else "!" + (inner[1:] if inner[0] == "?" else inner)
        if isinstance(test, ast.BoolOp):
            # `a and b` holds only where a positive side holds; `a or b` fails only where a negative side fails, and
            # holds only off Neuron where its other sides test other accelerators (`cuda() or musa()`)
            values = test.values
            if isinstance(test.op, ast.Or):
                values = [v for v in values if not (isinstance(v, ast.Call) and OTHER_ACCELERATOR.search(
                    self.resolve(v.func) or ""))] or values
                if len(values) == 1:
                    return self.polarity(values[0])
            sides = [s for s in map(self.polarity, values) if s is not None]
            negative = isinstance(test.op, ast.Or)
            return next((s for s in sides if s.startswith("!") == negative), None)
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return self._comparison(test)
        if isinstance(test, ast.Call):
            target = self.resolve(test.func)
            if target in kinds.PROBES:
                return CUDA_GUARD
            if target in kinds.VENDOR_TESTS:
                return VENDOR_GUARD
            return f"?{target}" if target is not None and not target.startswith(("torch.", "os.", "isinstance")) \
                else None
        if isinstance(test, ast.Name) and (test.id in self._probe_names or test.id in self.module_probes):
            return CUDA_GUARD  # `cuda = torch.cuda.is_available()`, in the function or at module level
        if counted_in_ast(test):
            return CUDA_GUARD  # `if args.ngpu:`: a configured number of GPUs
        if isinstance(test, ast.Name) and test.id in self.aliases and (target := self.resolve(test)) is not None:
            return f"?{target}"  # `from .flags import HAS_CUDA`: a probe if the project binds it to one
        if isinstance(test, ast.Attribute):
            if test.attr == "is_cuda":
                return CUDA_GUARD
            if test.attr in ("onnx_trace", "onnx_export", "exporting_onnx", "tracing_onnx"):
                return VENDOR_GUARD
        return None

    def probes_bound(self, statements: Sequence[ast.AST]) -> frozenset[str]:
        """The names these statements (a function's whole walk, or a module's top level) bind once, to a test that
        holds only with CUDA."""
        bound = [(t.id, a.value) for a in statements if isinstance(a, ast.Assign) for t in a.targets
                 if isinstance(t, ast.Name)]
        counts = Counter(name for name, _ in bound)
        return frozenset(n for n, v in bound if counts[n] == 1 and self.polarity(v) == CUDA_GUARD)

    def _comparison(self, test: ast.Compare) -> str | None:
        op, left, right = test.ops[0], test.left, test.comparators[0]
        same, differs = isinstance(op, (ast.Eq, ast.Is)), isinstance(op, (ast.NotEq, ast.IsNot))
        for side in (left, right):
            if isinstance(side, ast.Constant) and side.value == "cuda":
                return CUDA_GUARD if same else "!cuda" if differs else None
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, ast.Constant) and left.value == "cuda":
            return CUDA_GUARD if isinstance(op, ast.In) else "!cuda"
        if (found := compared_in_ast(left, op, right)) != "":  # `args.ngpu > 0`, `gpu_id >= 0`
            return found
        if isinstance(left, ast.Call) and self.resolve(left.func) in kinds.PROBES and isinstance(right, ast.Constant):
            count = right.value
            if isinstance(count, int) and ((isinstance(op, ast.Gt) and count >= 0) or (isinstance(op, ast.GtE)
                                           and count >= 1) or (isinstance(op, ast.NotEq) and count == 0)):
                return CUDA_GUARD
        return None

    # ---- the walk --------------------------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], guards: tuple[str, ...], scope: str) -> None:
        for index, stmt in enumerate(body):
            self.statement(stmt, guards, scope)
            # `if not torch.cuda.is_available(): return` guards the rest of the block; after `if self.initted:
            # return`, a rest that sets `self.initted` runs once
            if isinstance(stmt, ast.If) and not stmt.orelse and exits(stmt.body):
                side, rest = self.polarity(stmt.test), body[index + 1:]
                guard = negated(side) if side and side.startswith("!") else \
                    ONCE_GUARD if side is None and initialised_after(stmt, rest, self._setters) else \
                    INTERVAL_GUARD if side is None and self._calls is not None and self.intervals.rest(stmt, rest) \
                    else None
                if guard is not None:
                    if rest:
                        self._region(rest[0].lineno, end_line(rest[-1]), guard)
                    self.block(rest, (*guards, guard), scope)
                    return

    def _region(self, line: int, end: int, guard: str) -> None:
        if guard == CUDA_GUARD:
            return  # the rules see local CUDA guards themselves
        self.regions.append((line, end, guard))

    def statement(self, stmt: ast.stmt, guards: tuple[str, ...], scope: str) -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            before = len(self.imports)
            self._import(stmt, guards, scope if self._calls is not None else "")
            if not scope and not self._optional and not guards:  # needed to load the module
                self.required.extend(target for target, *_ in self.imports[before:])
            return
        if (isinstance(stmt, ast.If) and optional_test(stmt.test)) or (
                isinstance(stmt, ast.Try) and any(catches_import_error(h) for h in stmt.handlers)):
            self._optional += 1
            try:
                self._statement(stmt, guards, scope)
            finally:
                self._optional -= 1
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            self._bindings.bind(stmt)  # what the loop or `with` binds is unknown inside it already
        self._statement(stmt, guards, scope)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self._bindings.bind(stmt)  # after its value: `x = f(x)` passes the old `x`

    def _import(self, stmt: ast.Import | ast.ImportFrom, guards: tuple[str, ...], function: str) -> None:
        optional = self._optional > 0
        guard = innermost(guards)
        if isinstance(stmt, ast.Import):
            self.imports.extend((alias.name, optional, guard, function) for alias in stmt.names)
            return
        base = "." * stmt.level + (stmt.module or "")
        if stmt.module:
            self.imports.append((base, optional, guard, function))
        for alias in stmt.names:  # `from pkg import mod`: the name may be a module
            if alias.name != "*":
                self.imports.append((f"{base}.{alias.name}" if stmt.module else base + alias.name, optional, guard,
                                     function))

    def _statement(self, stmt: ast.stmt, guards: tuple[str, ...], scope: str) -> None:
        if isinstance(stmt, ast.ClassDef):
            name = f"{scope}.{stmt.name}" if scope else stmt.name
            bases = tuple(b for b in (self.resolve(base) for base in stmt.bases) if b is not None)
            self.classes.append((name, bases))
            if any(b in kinds.DATA_BASES for b in bases):
                self._data_classes.add(name)
            if any(b.split(".")[0] in kinds.VENDOR_MODULES for b in bases):
                self._vendor_classes.add(name)  # a Keras model: every method is TensorFlow's
            for decorator in stmt.decorator_list:
                self.expression(decorator, guards)
            outer, self._setters = self._setters, Setters(stmt)  # a nested class's methods are its own
            self.block(stmt.body, guards, name)
            self._setters = outer
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(stmt, guards, scope)
            return
        if isinstance(stmt, ast.If):
            side = self.polarity(stmt.test)
            self.expression(stmt.test, guards)
            body_guard = side if side is not None and not side.startswith("!") else None
            if side is None and not stmt.orelse and initialises(stmt, self._setters):
                body_guard = ONCE_GUARD
            elif side is None and self._calls is not None and self.intervals.body(stmt):
                body_guard = INTERVAL_GUARD
            elif side is None and not scope and self._calls is None and runs_as_script(stmt.test):
                body_guard = MAIN_GUARD
            else_guard = negated(side) if side and side.startswith("!") else None
            for part, guard in ((stmt.body, body_guard), (stmt.orelse, else_guard)):
                if part and guard is not None:
                    self._region(part[0].lineno, end_line(part[-1]), guard)
                self.block(part, (*guards, guard) if guard else guards, scope)
            return
        for field in ast.iter_fields(stmt):
            value = field[1]
            items = value if isinstance(value, list) else [value]
            if items and isinstance(items[0], ast.stmt):
                self.block(items, guards, scope)
            else:
                for item in items:
                    if isinstance(item, ast.AST):
                        self.expression(item, guards)
        if isinstance(stmt, ast.Return) and stmt.value is not None and self._calls is not None:
            self._returned(stmt.value)

    def _returned(self, value: ast.expr) -> None:
        side = self.polarity(value)
        if side == CUDA_GUARD:
            self._probe = True
        elif side is not None and side.startswith("?"):
            self._returns.append(side[1:])
        elif isinstance(value, ast.IfExp) and isinstance(value.body, ast.Constant) and value.body.value == "cuda":
            self._probe = self._probe or self.polarity(value.test) == CUDA_GUARD

    def expression(self, node: ast.AST, guards: tuple[str, ...]) -> None:
        cuda: list[ast.expr] = []  # `f() if torch.cuda.is_available() else None`, `use_cuda and f()`: CUDA's part
        for child in calls_and_branches(node):
            if isinstance(child, ast.IfExp):
                side = self.polarity(child.test)
                if side is not None and not side.startswith("!") and side != CUDA_GUARD:
                    self._region(child.body.lineno, end_line(child.body), side)
                cuda.extend([child.body] if side == CUDA_GUARD else [child.orelse] if side == "!cuda" else [])
            elif isinstance(child, ast.BoolOp) and isinstance(child.op, ast.And):
                first = next((i for i, v in enumerate(child.values) if self.polarity(v) == CUDA_GUARD), None)
                cuda.extend(child.values[first + 1:] if first is not None else [])
            if not isinstance(child, ast.Call):
                continue
            here = (*guards, CUDA_GUARD) if any(within(child, part) for part in cuda) else guards
            for keyword in child.keywords:
                if keyword.arg not in kinds.HOST_KEYWORDS:
                    continue
                value = keyword.value
                made = isinstance(value, ast.Call)
                if (ref := self.resolve(value.func if isinstance(value, ast.Call) else value)) is not None:
                    self._host_refs.append(f"{ref}()" if made else ref)
            self._passed(child)
            if self._calls is None:
                continue  # module-level code: no function to record the call in
            # `kernel[grid](...)` launches `kernel` (Triton's launch syntax; an item of a table of functions alike)
            func = child.func.value if isinstance(child.func, ast.Subscript) else child.func
            target = self.resolve(func)
            guard = innermost(here)
            if target is not None:
                self._calls.append((target, guard))
                last = target.rsplit(".", 1)[-1]
                if last == "backward" or (last == "step" and "optim" in target.lower()):
                    self._step = True
                if target.split(".")[0] in kinds.VENDOR_MODULES or target in kinds.VENDOR_EXPORTS:
                    self._vendor = True
            # a function passed on (`pool.map(self.work, xs)`, `register_hook(fn)`) may be called from there
            for arg in (*child.args, *(k.value for k in child.keywords)):
                if isinstance(arg, (ast.Name, ast.Attribute)) and (ref := self.resolve(arg)) is not None:
                    self._calls.append((ref, guard))

    def _passed(self, call: ast.Call) -> None:
        """What `call` passes, for Function.passes; and any function it hands on, as a call of unknown arguments."""
        target = self.resolve(call.func)
        if target is not None:
            hidden = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
            self._passes.append((target, -1 if hidden else len(call.args),
                                 tuple(k.arg for k in call.keywords if k.arg is not None),
                                 host_arguments(self._bindings, call) + ((REGROWS,) * (id(call) in self._regrows))))
        for arg in (*call.args, *(k.value for k in call.keywords)):
            if isinstance(arg, (ast.Name, ast.Attribute)) and (ref := self.resolve(arg)) is not None:
                self._passes.append((ref, -1, (), ()))

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, guards: tuple[str, ...], scope: str) -> None:
        name = f"{scope}.{node.name}" if scope else node.name
        self.generics.note(node, name, scope)
        saved = (self._calls, self._returns, self._host_refs, self._probe, self._step, self._vendor)
        saved_passes, self._passes, saved_regrows, self._regrows = self._passes, [], self._regrows, regrow_calls(node)
        arguments = node.args
        params = frozenset(a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs))
        saved_bindings, self._bindings = self._bindings, Bindings(self.resolve, params)
        self._calls, self._returns, self._host_refs = [], [], []
        self._probe = self._step = False
        self._vendor = scope in self._vendor_classes or (self.vendor_file and any(
            isinstance(n, (ast.Name, ast.Attribute)) and (self.resolve(n) or "").split(".")[0] in kinds.VENDOR_MODULES
            for n in ast.walk(node)))
        for decorator in node.decorator_list:
            self.expression(decorator, guards)
        saved_probes, self._probe_names = self._probe_names, self.probes_bound(statements_in(node))
        self.block(node.body, (), name)
        self._probe_names = saved_probes
        roles = [role for role, holds in (
            (FORWARD, node.name == "forward" and bool(scope)), (STEP, self._step or node.name in kinds.STEP_METHODS),
            (HOST, node.name in ("__getitem__", "__iter__") or scope in self._data_classes),
            (PROBE, self._probe), (VENDOR, self._vendor and not self._step),  # a training step is the port's
            (CUDA_CLASS, bool(scope) and any(named_for_cuda(part) for part in scope.split("."))),
            (CUDA_IMPL, registered_for_cuda(node, self.resolve)), (ONCE, cached(node))) if holds]
        reads = returns_read(node)
        roles += [READS if reads == "all" else READS_OFF_XLA] if reads else []
        roles += [MASK] if returns_mask(node) else []
        if not scope and not node.decorator_list and self.own_names.only_within(node):
            roles.append(UNNAMED)
        method = any(scope == c for c, _ in self.classes)
        self.attributes.extend(attribute_bindings(node, scope, self.resolve) if method else ())
        # a function's span starts at its first decorator: `@triton.jit` is reported where it is written
        first = min((d.lineno for d in node.decorator_list), default=node.lineno)
        self.functions.append(Function(name, min(first, node.lineno), end_line(node), tuple(roles), tuple(self._calls),
                                       tuple(self._returns), tuple(self._host_refs), positional(node, method),
                                       tuple(self._passes)))
        self._passes, self._bindings, self._regrows = saved_passes, saved_bindings, saved_regrows
        host_refs = self._host_refs
        self._calls, self._returns, self._host_refs, self._probe, self._step, self._vendor = saved
        self._host_refs.extend(host_refs)
        if self._calls is not None:
            self._calls.append((f":{name}", guards[-1] if guards else ""))  # a nested function runs with its parent


__all__ = ["CUDA_CLASS", "CUDA_GUARD", "CUDA_IMPL", "FORWARD", "HOST", "INTERVAL_GUARD", "MAIN_GUARD", "ONCE",
           "ONCE_GUARD", "PROBE", "READS", "READS_OFF_XLA", "STEP", "UNNAMED", "VENDOR", "VENDOR_GUARD",
           "VENDOR_RUNTIMES", "Function", "Summary", "summarise"]
