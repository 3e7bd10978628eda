"""Whether a name imported from the project's own package is a compiled extension (summaries.COMPILED_OF).

`from . import _C`, `from sam2 import _C`, `from .ext import fused_op`: the file's own check
(`static.cuda_library.compiled`) has looked beside the file on disk and found no `.py` file, no package folder
and no binding in the package's `__init__.py` for it. The call graph then reads the scanned tree, the innermost
package the import names and the first missing part below it:
- a module of the tree by that name, or an import elsewhere that goes through it as a package
  (`from .megatron.mpu import f`: a Python package the scan left out, such as a git submodule), is Python;
- a re-export of a custom-op namespace PyTorch does not register itself (`from torch.ops import disco_kernels`
  in the package) is an extension; any other re-export, function or class of that name is Python;
- anything else is the extension's shared object (`_C.so`, built from `csrc/*.cu`).

Where the tree holds no package the import names (files named one by one), the look on disk stands. Nothing is
imported or run: the tree's summaries are all this reads.
"""

from __future__ import annotations

import re

from portcheck.static.semantic.project import Project

# The namespaces PyTorch registers under `torch.ops` itself (its own ops, collectives, higher-order ops).
TORCH_NAMESPACES = frozenset({
    "aten", "prims", "prim", "quantized", "_quantized", "quantized_decomposed", "c10d", "_c10d_functional",
    "_c10d_functional_autograd", "c10d_functional", "_dtensor", "profiler", "higher_order", "rngprims", "inductor",
    "_inductor", "mkldnn", "onednn", "sparse", "debugprims", "_export", "aoti", "streams", "_test", "_quant",
    "_inductor_test", "_TorchScriptTesting", "torch_c10d_functional", "_nested", "mkl", "xpu", "mps", "symm_mem",
    "fsdp"})


def custom_namespace(name: str | None) -> str | None:
    """`torch.ops.NS...` -> NS, where PyTorch does not register NS itself: a library loaded from a shared object."""
    if name is None or not name.startswith("torch.ops.") or name.count(".") < 2:
        return None
    namespace = name.split(".")[2]
    return None if namespace in TORCH_NAMESPACES else namespace


def compiled(project: Project, key: str, path: str) -> bool:
    """`key` ("MODULE|NAME", as the finding's file wrote it) names a compiled extension, seen from `path`."""
    module, package, _ = project.files[path]
    target, _, name = key.partition("|")
    cache: dict[tuple[str, str, str], bool] = project.__dict__.setdefault("_compiled", {})
    slot = (module if target.startswith(".") else "", target, name)
    if slot not in cache:
        cache[slot] = _compiled(project, module, package, target, name)
    return cache[slot]


def _compiled(project: Project, module: str, package: bool, target: str, name: str) -> bool:
    relative = target.startswith(".")
    base = project.absolute(target, module, package) if relative else target
    packages = _packages(project)
    found = [(full, rest) for full, rest in _within(packages, base, relative)
             if relative or (module + ".").startswith(_root(packages, full) + ".")]  # the package's own import
    if not found:
        return True  # the package is not among the files scanned: the file's own look on disk stands
    # An extension is one module: `from .ext import op`, `from . import _C`. Where two or more parts of the module
    # path are missing (`from .megatron.mpu import f`), a Python package was left out (a git submodule).
    return all(len(rest) <= 1 and _compiled_in(project, full, [*rest, name] if name else rest)
               for full, rest in found)


def _root(packages: frozenset[str], full: str) -> str:
    """The outermost package holding package `full`."""
    parts = full.split(".")
    while len(parts) > 1 and ".".join(parts[:-1]) in packages:
        parts.pop()
    return ".".join(parts)


def _packages(project: Project) -> frozenset[str]:
    """The package modules of the scanned tree (its `__init__.py` files)."""
    cached: frozenset[str] | None = project.__dict__.get("_compiled_packages")
    if cached is None:
        cached = project.__dict__["_compiled_packages"] = frozenset(
            module for module, package, _ in project.files.values() if package)
    return cached


def _within(packages: frozenset[str], wanted: str, relative: bool) -> list[tuple[str, list[str]]]:
    """(the innermost scanned package holding module `wanted`, the parts of `wanted` below it), for each package it
    may be: the very module for a relative import; for an absolute one, any whose dotted name ends with the import's
    head and whose first part there is a root package (no package above it: a tree scanned from above its root)."""
    parts = wanted.split(".") if wanted else []
    found = []
    for full in packages:
        full_parts = full.split(".")
        for cut in range(len(parts), 0, -1):
            head = parts[:cut]
            if relative:
                if full_parts == head:
                    found.append((full, parts[cut:]))
                    break
            elif full_parts[-len(head):] == head and ".".join(full_parts[:len(full_parts) - len(head)]) not in \
                    packages:
                found.append((full, parts[cut:]))
                break
    # the innermost package only: `pkg` and `pkg.sub` both hold `pkg.sub._C`
    return [(full, rest) for full, rest in found
            if not any(other != full and other.startswith(full + ".") and len(r) < len(rest) for other, r in found)]


def _compiled_in(project: Project, package: str, rest: list[str]) -> bool:
    """The scanned tree holds no Python for `rest[0]` in `package` (the file's own check looked on disk)."""
    first = rest[0]
    below = f"{package}.{first}"
    if any(m == below or m.startswith(below + ".") for m, _, _ in project.files.values()):
        return False
    # a path imported through it (`from .megatron.mpu import f` elsewhere): a Python package the scan left out
    through = re.compile(rf"(^|\.){re.escape(package.rsplit('.', 1)[-1])}\.{re.escape(first)}\.\w+\.\w+")
    if any(through.search(target) for target in project.exports.values()):
        return False
    exported = project.exports.get(below)
    if exported is not None:
        return custom_namespace(exported) is not None
    return below not in project.nodes and below not in project.classes


__all__ = ["TORCH_NAMESPACES", "compiled", "custom_namespace"]
