"""The project the call graph is built over: its functions, classes and re-exports from the files' summaries,
names resolved to functions (imports inside the tree, methods through `self` and the class's bases), the modules
only optional dependencies load, and what each call passes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from portcheck.findings import FileResult
from portcheck.knowledge.libraries import library_of
from portcheck.static.semantic.attributes import held_methods
from portcheck.static.semantic.modules import module_of, suffixes
from portcheck.static.semantic.summary import READS, READS_OFF_XLA, VENDOR_RUNTIMES
from portcheck.summaries import Function

DEPTH = 8  # re-exports and base classes followed at most this deep
_AUTOGRAD = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})


@dataclass
class Node:
    full: str  # module.function
    path: str
    module: str
    function: Function


class Project:
    def __init__(self, results: list[FileResult]) -> None:
        self.nodes: dict[str, Node] = {}
        self._class_of: dict[str, str | None] = {}
        self.by_suffix: dict[str, list[str]] = defaultdict(list)
        self.exports: dict[str, str] = {}
        self.export_suffix: dict[str, list[str]] = defaultdict(list)
        self.classes: dict[str, tuple[str, ...]] = {}
        self.class_suffix: dict[str, list[str]] = defaultdict(list)
        self.files: dict[str, tuple[str, bool, list[Node]]] = {}
        # module-level names bound once to a CUDA test (Summary.probes), by their full name and by each dotted suffix
        # an absolute import may name them by (a tree scanned from above its packages' root)
        self.probe_constants: set[str] = set()
        # (absolute module, optional, guard, importing function or the importing module's "") of every import
        imported: list[tuple[str, bool, str, str]] = []
        # module -> the CUDA-only library it imports at its top level, whatever is installed (`import bitsandbytes`)
        self.cuda_libraries: dict[str, str] = {}
        # module -> the other vendor's runtime it imports at its top level (`import tensorrt as trt`): it is that
        # runtime's backend and loads nowhere else
        self.runtimes: dict[str, str] = {}
        # the last part of every name a call, a passed value, a data-pipeline hand-off or an import mentions: a
        # function whose name is none of these (and that its own file names only once) is dead code
        self.named: set[str] = set()
        self.looked_up: set[str] = set()  # modules the code looks names up in (`getattr(losses, name)`)
        # "module.Class.attribute" -> (what builds it, the module and package flag its file records it in)
        self.attributes: dict[str, list[tuple[str, str, bool]]] = defaultdict(list)
        for result in results:
            if result.summary is None:
                continue
            module, package = module_of(result.path)
            nodes = []
            self.named.update(_last(t) for t, *_ in result.summary.passes)
            self.named.update(m for m in result.summary.mentions if not m.startswith("*"))
            self.looked_up.update(self.absolute(m[1:], module, package) for m in result.summary.mentions
                                  if m.startswith("*"))
            self.named.update(_last(t) for pair in result.summary.exports for t in pair)
            for function in result.summary.functions:
                self.named.update(_last(t) for t, _ in function.calls)
                self.named.update(_last(t) for t, *_ in function.passes)
                self.named.update(_last(t) for t in function.host_refs)
                full = f"{module}.{function.name}" if module else function.name
                node = Node(full, result.path, module, function)
                self.nodes[full] = node
                nodes.append(node)
                for key in suffixes(full, module):
                    self.by_suffix[key].append(full)
            for name, bases in result.summary.classes:
                full = f"{module}.{name}" if module else name
                self.classes[full] = tuple(self.absolute(b, module, package) for b in bases)
                for key in suffixes(full, module):
                    self.class_suffix[key].append(full)
            for cls, attribute, ref in result.summary.attributes:
                self.attributes[f"{module}.{cls}.{attribute}" if module else f"{cls}.{attribute}"].append(
                    (ref, module, package))
            for name, target in result.summary.exports:
                full = f"{module}.{name}" if module else name
                self.exports[full] = self.absolute(target, module, package)
                for key in suffixes(full, module):
                    self.export_suffix[key].append(full)
            for name in result.summary.probes:
                full = f"{module}.{name}" if module else name
                self.probe_constants.update((full, *suffixes(full, module)))
            self.files[result.path] = (module, package, sorted(nodes, key=lambda n: n.function.line))
            imported.extend((self.absolute(target, module, package), optional, guard,
                             f"{module}.{function}" if module and function else function)
                            for target, optional, guard, function in result.summary.imports)
            library = next((found for target in result.summary.required
                            if not target.startswith(".") and (found := library_of(target))), None)
            if library is not None:
                self.cuda_libraries[module] = library.title
            runtime = next((t for t in result.summary.required if t.split(".")[0] in VENDOR_RUNTIMES), None)
            if runtime is not None:
                self.runtimes[module] = runtime.split(".")[0]
        # module -> (guard, importing function) of each import of it in the tree (semantic.graph: CUDA-only modules)
        self.import_sites: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.optional, self.imported = self._optional_modules(imported)

    def _optional_modules(self, imported: list[tuple[str, bool, str, str]]) -> tuple[frozenset[str], frozenset[str]]:
        """The tree's modules that something imports and that every import of runs only where an optional
        dependency is installed (`if is_bnb_available(): from .bnb import ...`); and every module something in the
        tree imports (a library's module, whose `if __name__ == "__main__":` block is a demo). Fills
        `import_sites`."""
        by_suffix: dict[str, list[str]] = defaultdict(list)
        for module, _, _ in self.files.values():
            parts = module.split(".")
            for start in range(len(parts)):
                if start == 0 or len(parts) - start >= 2:  # a lone last part (`utils`) names too many modules
                    by_suffix[".".join(parts[start:])].append(module)
        flags: dict[str, list[bool]] = defaultdict(list)
        for target, optional, guard, function in imported:
            for module in by_suffix.get(target, ()):
                flags[module].append(optional)
                self.import_sites[module].append((guard, function))
        return frozenset(m for m, seen in flags.items() if seen and all(seen)), frozenset(flags)

    @staticmethod
    def absolute(target: str, module: str, package: bool) -> str:
        """A relative import (`..mod.f`) made absolute against the importing module."""
        if not target.startswith("."):
            return target
        dots = len(target) - len(target.lstrip("."))
        base = module.split(".") if module else []
        keep = len(base) - dots + (1 if package else 0)
        return ".".join([*base[:max(keep, 0)], target[dots:]]).strip(".")

    # ---- resolving a name to functions -----------------------------------------------------------------------

    def find(self, dotted_name: str, depth: int = 0) -> list[str]:
        """The functions an absolute dotted name may be (a class stands for its `__init__`, a custom autograd
        Function's `apply` for its `forward` and `backward`)."""
        if dotted_name in self.nodes:
            return [dotted_name]
        if dotted_name.endswith(".apply") and (applied := self._applied(dotted_name[:-len(".apply")])):
            return applied
        found = list(self.by_suffix.get(dotted_name, ()))
        if found:
            return found
        classes = [dotted_name] if dotted_name in self.classes else self.class_suffix.get(dotted_name, [])
        if classes:
            return [f"{c}.__init__" for c in classes if f"{c}.__init__" in self.nodes]
        if depth < DEPTH:
            exported = [dotted_name] if dotted_name in self.exports else self.export_suffix.get(dotted_name, [])
            return [f for e in exported for f in self.find(self.exports[e], depth + 1)]
        return []

    def _applied(self, name: str) -> list[str]:
        """`Fused.apply(...)` of a project class built on `torch.autograd.Function` runs its `forward` (and its
        `backward` in the backward pass)."""
        classes = [name] if name in self.classes else self.class_suffix.get(name, [])
        return [f"{c}.{m}" for c in classes if self._autograd(c) for m in ("forward", "backward")
                if f"{c}.{m}" in self.nodes]

    def _autograd(self, cls: str, depth: int = 0) -> bool:
        return depth < DEPTH and any(base in _AUTOGRAD or any(self._autograd(k, depth + 1) for k in
                                                              self.base_classes(cls, base))
                                     for base in self.classes.get(cls, ()))

    def method_of(self, cls: str, name: str, depth: int = 0) -> list[str]:
        if f"{cls}.{name}" in self.nodes:
            return [f"{cls}.{name}"]
        if depth >= DEPTH:
            return []
        found: list[str] = []
        for base in self.classes.get(cls, ()):
            for known in self.base_classes(cls, base):
                found.extend(self.method_of(known, name, depth + 1))
        return found

    def base_classes(self, cls: str, base: str) -> list[str]:
        """The tree's classes a base of `cls` may be: a name defined in the class's own module (`:Base`, recorded
        unresolved) looked up from the class's scope outwards, else what `known_classes` finds."""
        if not base.startswith(":"):
            return self.known_classes(base)
        scope = cls
        while "." in scope:
            scope = scope.rsplit(".", 1)[0]
            if f"{scope}.{base[1:]}" in self.classes:
                return [f"{scope}.{base[1:]}"]
        return []

    def known_classes(self, name: str, depth: int = 0) -> list[str]:
        """The tree's classes a resolved base name may be: the class itself, those its dotted suffix names, or what
        a re-export of it names (`torch_geometric.transforms.BaseTransform`)."""
        if name in self.classes:
            return [name]
        found = self.class_suffix.get(name, [])
        if found or depth >= DEPTH:
            return list(found)
        exported = [name] if name in self.exports else self.export_suffix.get(name, [])
        return [c for e in exported for c in self.known_classes(self.exports[e], depth + 1)]

    def resolve(self, target: str, caller: Node) -> list[str]:
        module, package = self.files[caller.path][:2]
        if target.startswith("self."):
            rest = target[len("self."):]
            cls = self.class_of(caller)
            if cls and rest.count(".") == 1:  # `self.dist.sample(x)`: what the attribute is bound to build
                attribute, method = rest.split(".")
                return held_methods(self, cls, attribute, method)
            return self.method_of(cls, rest) if cls and "." not in rest else []
        if target.startswith(":"):
            name = target[1:]
            scopes = caller.function.name.split(".")
            for end in range(len(scopes), -1, -1):  # nested functions first, then the module
                prefix = ".".join(filter(None, [module, *scopes[:end]]))
                full = f"{prefix}.{name}" if prefix else name
                if full in self.nodes:
                    return [full]
                if full in self.classes:
                    return [f"{full}.__init__"] if f"{full}.__init__" in self.nodes else []
                if full.endswith(".apply") and full[:-len(".apply")] in self.classes:
                    return self._applied(full[:-len(".apply")])
            full = f"{module}.{name}" if module else name
            return self.find(self.exports[full]) if full in self.exports else []
        return self.find(self.absolute(target, module, package))

    def reads_data(self, name: str, path: str, caller: Node | None, off_xla: bool = False,
                   roles: tuple[str, ...] = ()) -> bool:
        """`name` as the file at `path` writes it (`sizes`, `utils.sizes`, `self.lengths`) in `caller` (None: at
        module level) is a function of the tree whose `return`s read tensor data into Python (summary.READS;
        with `off_xla`, on a stack without PyTorch/XLA, summary.READS_OFF_XLA too), whichever it turns out to be."""
        module = self.files[path][0]
        if caller is None:  # module-level code: names resolve in the module's own scope
            caller = Node(module, path, module, Function("", 0, 0, (), (), ()))
        if name.startswith("self."):
            target = name
        else:
            head, _, rest = name.partition(".")
            imported = self.exports.get(f"{module}.{head}" if module else head)
            target = (f"{imported}.{rest}" if rest else imported) if imported else f":{name}"
        found = self.resolve(target, caller)
        roles = roles or ((READS, READS_OFF_XLA) if off_xla else (READS,))
        return bool(found) and all(any(r in self.nodes[f].function.roles for r in roles) for f in found)

    def probe_constant(self, target: str, caller: Node) -> bool:
        """`target`, a name `caller`'s file imports, is a module-level name the project binds to a CUDA test, found
        through re-exports (`from .flags import HAS_CUDA`)."""
        module, package = self.files[caller.path][:2]
        return self._probe_named(self.absolute(target, module, package), 0)

    def _probe_named(self, name: str, depth: int) -> bool:
        """`name`, or a module-level name it is a dotted suffix of (a tree scanned from above its packages' root,
        `src/pkg/flags.py` imported as `pkg.flags`), is bound to a CUDA test, itself or through re-exports."""
        if name in self.probe_constants:
            return True
        if depth >= DEPTH:
            return False
        exported = [name] if name in self.exports else self.export_suffix.get(name, [])
        return any(self._probe_named(self.exports[e], depth + 1) for e in exported)

    def classes_named(self, target: str, caller: Node) -> list[str]:
        """The tree's classes `target` may name where `caller` uses it (`:Name` through the file's scopes and
        re-exports, or a dotted import)."""
        module, package = self.files[caller.path][:2]
        if target.startswith(":"):
            name = target[1:]
            scopes = caller.function.name.split(".")
            for end in range(len(scopes), -1, -1):
                full = ".".join(filter(None, [module, *scopes[:end], name]))
                if full in self.classes:
                    return [full]
            full = f"{module}.{name}" if module else name
            target = self.exports.get(full, "")
            if not target:
                return []
        dotted_name = self.absolute(target, module, package)
        return [dotted_name] if dotted_name in self.classes else list(self.class_suffix.get(dotted_name, []))

    def methods(self, cls: str) -> list[str]:
        """The functions defined in class `cls` (not its bases')."""
        prefix = cls + "."
        return [f for f in self.nodes if f.startswith(prefix) and "." not in f[len(prefix):]]

    def class_of(self, node: Node) -> str | None:
        """The class defining `node` (a method's, or a function nested in one), read once a node: the graph's
        walks ask it of every node several times."""
        if node.full not in self._class_of:
            parts = node.function.name.split(".")
            self._class_of[node.full] = next((cls for end in range(len(parts) - 1, 0, -1)
                                              if (cls := ".".join(filter(None, [node.module, *parts[:end]])))
                                              in self.classes), None)
        return self._class_of[node.full]


# What one call passes: (positional count or -1 where unknown, the keywords, the host values: `#i` / a keyword,
# or `#i@p` / `keyword@p` for one of the caller's parameters passed on as it came; the caller, "" for module code).
Passed = tuple[int, tuple[str, ...], tuple[str, ...], str]


def _last(name: str) -> str:
    """`helper` of `pkg.mod.helper`, `:ops.helper`, `self.helper`, `Collator()`."""
    return name.rstrip("()").rsplit(".", 1)[-1].lstrip(":")


def arguments(project: Project, results: list[FileResult], needed: set[str]) -> dict[str, list[Passed]]:
    """Per function of `needed`: what each call of it passes, from every function's calls and every module's own
    code; and, where a call passes on one of its caller's parameters, the caller's calls too (a chain at most
    DEPTH long). Only calls whose name can be one of them are resolved (a constructor is called by its class's
    name)."""
    callers = [(node, node.function.passes) for node in project.nodes.values()]
    for result in results:
        if result.summary is not None and result.summary.passes and result.path in project.files:
            module = project.files[result.path][0]
            callers.append((Node("", result.path, module, Function("", 0, 0, (), (), ())), result.summary.passes))
    # every call made in the tree, by the last part of the name it calls: a round reads only the names it asks for
    by_name: dict[str, list[tuple[Node, str, Passed]]] = defaultdict(list)
    for node, passes in callers:
        for target, count, keywords, host in passes:
            by_name[target.rsplit(".", 1)[-1].lstrip(":")].append((node, target, (count, keywords, host, node.full)))
    found: dict[str, list[Passed]] = defaultdict(list)
    pending = set(needed)
    for _ in range(DEPTH):
        names = {full.rsplit(".", 1)[-1] for full in pending}
        names |= {full.rsplit(".", 2)[-2] for full in pending if full.endswith(".__init__") and full.count(".") >= 1}
        forwarding: set[str] = set()
        for name in names:
            for node, target, call in by_name.get(name, ()):
                for callee in project.resolve(target, node):
                    if callee in pending:
                        found[callee].append(call)
                        if node.full and any("@" in h for h in call[2]):
                            forwarding.add(node.full)
        pending = forwarding - found.keys()
        if not pending:
            break
    return found


__all__ = ["DEPTH", "Node", "Passed", "Project", "arguments"]
