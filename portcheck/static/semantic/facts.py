"""What the project's call graph settles about its functions (portcheck.static.semantic.graph applies it to the
findings): the CUDA probes across functions; what runs only where CUDA is present, or only for another vendor; the
device step a model's `forward` or a training step
reaches, the host code only the data pipeline reaches, set-up that runs once, and dead code."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from portcheck.static.host_paths import host_path_of
from portcheck.static.scope import MODULE_CLASSES
from portcheck.static.semantic.classes import metric_classes
from portcheck.static.semantic.kinds import VENDOR_EXPORTS, VENDOR_MODULES
from portcheck.static.semantic.project import DEPTH, Node, Project
from portcheck.static.semantic.summary import (
    CUDA_CLASS,
    CUDA_GUARD,
    CUDA_IMPL,
    FORWARD,
    HOST,
    INTERVAL_GUARD,
    ONCE,
    ONCE_GUARD,
    PROBE,
    STEP,
    UNNAMED,
    VENDOR,
    VENDOR_GUARD,
)


@dataclass(frozen=True)
class Facts:
    probes: frozenset[str]
    cuda_only: frozenset[str]
    vendor_only: frozenset[str]
    device: frozenset[str]  # what a forward or a training step reaches
    host: frozenset[str]
    forward: frozenset[str] = frozenset()  # what a forward reaches: the model itself
    once: frozenset[str] = frozenset()  # set-up: constructors, cached functions and what only they call
    dead: frozenset[str] = frozenset()  # module-level functions nothing in the tree calls or names (UNNAMED)
    cuda_modules: frozenset[str] = frozenset()  # modules the tree imports only where CUDA is present
    interval: frozenset[str] = frozenset()  # called only at an interval (`if step % N == 0:`), not by a forward


def facts(project: Project) -> Facts:
    probes = {f for f, n in project.nodes.items() if PROBE in n.function.roles}
    returning = [(full, node) for full, node in project.nodes.items() if node.function.returns]
    for _ in range(DEPTH):  # a function returning a probe's value is one (chains deeper than this are not code)
        added = {full for full, node in returning if full not in probes and any(
            (found := project.resolve(t, node)) and all(c in probes for c in found) for t in node.function.returns)}
        if not added:
            break
        probes |= added

    def guard_kind(guard: str, caller: Node) -> str:
        if guard.startswith("?"):
            callees = project.resolve(guard[1:], caller)
            found = (callees and all(c in probes for c in callees)) or project.probe_constant(guard[1:], caller)
            return CUDA_GUARD if found else ""
        return guard if guard in (CUDA_GUARD, VENDOR_GUARD, ONCE_GUARD, INTERVAL_GUARD) else ""

    # Every call resolved, and its guard judged, once: the worklists and the walks below read these.
    sites: dict[str, list[tuple[str, str]]] = defaultdict(list)  # callee -> (caller, guard kind)
    outgoing: dict[str, list[tuple[str, str]]] = defaultdict(list)  # caller -> (callee, guard kind)
    for caller, node in project.nodes.items():
        for target, guard in node.function.calls:
            kind = guard_kind(guard, node)
            for callee in project.resolve(target, node):
                if callee != caller:
                    sites[callee].append((caller, kind))
                    outgoing[caller].append((callee, kind))

    def only(kind: str, roots: set[str]) -> set[str]:
        """The roots, and every function all of whose call sites are `kind`-guarded or in such a function: a
        worklist, each call site counted down once."""
        pending = {callee: sum(1 for caller, g in calls if g != kind and caller not in roots)
                   for callee, calls in sites.items()}
        found = set(roots)
        queue = deque(c for c, n in pending.items() if n == 0 and c not in found)
        while queue:
            function = queue.popleft()
            if function in found:
                continue
            found.add(function)
            for callee, guard in outgoing.get(function, ()):
                if guard != kind and callee in pending and callee not in found:
                    pending[callee] -= 1
                    if pending[callee] == 0:
                        queue.append(callee)
        return found

    roots = {f for f, n in project.nodes.items() if {CUDA_CLASS, CUDA_IMPL} & set(n.function.roles)}
    cuda_only = only(CUDA_GUARD, roots)
    # A module every import of which runs under a CUDA guard or in a CUDA-only function (whisper's Triton kernels,
    # imported inside `if x.is_cuda:`) loads only where CUDA is present: its functions are CUDA-only, and so what
    # only they import, and so on.
    # per module, the functions importing it without a CUDA guard ("" for module-level code, never CUDA-only)
    unguarded = {module: {function if function in project.nodes else "" for guard, function in imports
                          if (guard_kind(guard, project.nodes[function]) if function in project.nodes else guard)
                          != CUDA_GUARD} for module, imports in project.import_sites.items()}
    cuda_modules: set[str] = set()
    for _ in range(DEPTH):
        added = {module for module, functions in unguarded.items() if module not in cuda_modules
                 and functions <= cuda_only}
        if not added:
            break
        cuda_modules |= added
        roots |= {f for f, n in project.nodes.items() if n.module in added}
        cuda_only = only(CUDA_GUARD, roots)
    vendor_only = only(VENDOR_GUARD, _vendor_roots(project))
    skipped = cuda_only | vendor_only

    def reach(roots: Iterable[str], avoid: set[str]) -> set[str]:
        seen = set(roots) - avoid
        queue = deque(seen)
        while queue:
            for callee, kind in outgoing.get(queue.popleft(), ()):
                if callee not in seen and callee not in avoid and kind in ("", INTERVAL_GUARD):
                    seen.add(callee)
                    queue.append(callee)
        return seen

    metrics = metric_classes(project)
    # a forward or a step in a file its path puts in the data pipeline (a transform's `forward`) is no root: such a
    # file's code counts as the device step's only where a model or a step elsewhere reaches it (host_paths)
    piped = {path for path in project.files if host_path_of(path) is not None}
    forward = reach((f for f, n in project.nodes.items() if project.class_of(n) not in metrics and n.path not in piped
                     and ((FORWARD in n.function.roles and not _plain(project, project.class_of(n))) or (
                         # a module's `__iter__`: the layer loop of the forward that holds it (LayerDrop's list)
                         n.function.name.endswith((".__call__", ".__iter__"))
                         and _is_module(project, project.class_of(n))))),
                    skipped)
    device = forward | reach((f for f, n in project.nodes.items() if STEP in n.function.roles and n.path not in piped),
                             skipped)
    host_roots = {f for f, n in project.nodes.items() if HOST in n.function.roles or project.class_of(n) in metrics}
    for node in project.nodes.values():
        for ref in node.function.host_refs:
            if ref.endswith("()"):  # an object made there: its class's methods do the work
                host_roots.update(m for cls in project.classes_named(ref[:-2], node) for m in project.methods(cls))
            else:
                host_roots.update(project.resolve(ref, node))
    host = reach(host_roots, skipped | device)
    # Set-up: cached functions, constructors nothing on the device step calls (a class made in `forward` builds
    # every step), and what only they or lazy initialisations call.
    set_up = {f for f, n in project.nodes.items() if ONCE in n.function.roles
              or (n.function.name.endswith(".__init__") and f not in device)}
    once = only(ONCE_GUARD, set_up) - skipped
    # What only runs at an interval (a demo or an evaluation every N steps), and what only it calls; the model's own
    # code stays the model's wherever else a forward reaches it.
    interval = only(INTERVAL_GUARD, set()) - skipped - forward
    dead = {f for f, n in project.nodes.items() if UNNAMED in n.function.roles and f not in sites
            and n.function.name not in project.named
            and not any(n.module == m or n.module.endswith(f".{m}") for m in project.looked_up)}
    return Facts(frozenset(probes), frozenset(cuda_only), frozenset(vendor_only), frozenset(device),
                 frozenset(host), frozenset(forward), frozenset(once), frozenset(dead), frozenset(cuda_modules),
                 frozenset(interval))


# Bases that make no torch Module: a class built only on them (and on the project's own such classes) has a
# `forward` that is no model's (torch_geometric's `BaseTransform(ABC)`, a data transform).
_PLAIN_BASES = frozenset({"object", "abc.ABC", "typing.Generic", "typing.Protocol", "enum.Enum", "typing.NamedTuple"})


def _vendor_roots(project: Project) -> set[str]:
    """The functions that use another vendor's runtime, and every method of a class one of whose methods does and
    that is certainly no torch Module (`class CoreMLBackend(BaseBackend)` loading `coremltools` in `load_model`
    and predicting with it in `forward`): the class wraps that runtime."""
    roots = {f for f, n in project.nodes.items() if VENDOR in n.function.roles}
    # a method that only exports the model to ONNX (`save_model(kind="onnx")`) makes its class no runtime's wrapper
    wrappers = {cls for f in roots if (cls := project.class_of(project.nodes[f])) is not None
                and not _exports_only(project.nodes[f]) and not _is_module(project, cls)
                and (_plain(project, cls) or not project.classes.get(cls))}
    return roots | {f for f, n in project.nodes.items() if project.class_of(n) in wrappers}


def _exports_only(node: Node) -> bool:
    """The function is another vendor's for an export it makes (`torch.onnx.export`), not for a runtime it uses."""
    calls = [target for target, _ in node.function.calls]
    return any(t in VENDOR_EXPORTS for t in calls) and not any(t.split(".")[0] in VENDOR_MODULES for t in calls)


def _plain(project: Project, cls: str | None, depth: int = 0) -> bool:
    """`cls` is certainly no torch Module: each base is a known plain base or a plain class of the project. A
    base the project does not hold (a library's class) may be a Module: not plain."""
    if cls is None or depth >= DEPTH or not project.classes.get(cls):
        return False  # a class written with no bases at all says nothing (examples write `class M:` for a model)
    for base in project.classes[cls]:
        if base in _PLAIN_BASES:
            continue
        known = project.base_classes(cls, base)
        if not known or not all(_plain(project, k, depth + 1) for k in known):
            return False
    return True


def _is_module(project: Project, cls: str | None, depth: int = 0) -> bool:
    """`cls` subclasses `torch.nn.Module`, through the project's own classes: its `__call__`, where it has one,
    is what runs the model (gpytorch's modules call `forward` from there)."""
    if cls is None or depth >= DEPTH:
        return False
    for base in project.classes.get(cls, ()):
        if base in MODULE_CLASSES:
            return True
        known = project.base_classes(cls, base)
        if any(_is_module(project, k, depth + 1) for k in known):
            return True
    return False


__all__ = ["Facts", "facts"]
