"""Calls into compiled extension modules (PC505): a project's own C++/CUDA ops, called from Python.

A module is compiled when the code reaches it as one of these:
- a name bound by a `torch.utils.cpp_extension` build of CUDA sources (`_ext = load(name, sources=["op.cu"])`,
  PC503's test);
- a custom-op namespace under `torch.ops` that PyTorch itself does not register (`torch.ops.disco_kernels`,
  `from torch.ops import attention_kernels`): a library loaded from a shared object;
- an import of the project's own package that no Python source answers (`from . import _C`, `from sam2 import _C`
  in `sam2/utils/misc.py`, `from .ext import fused_op`). Whether the source is there is the project's to say, so
  such a call is kept only where the call graph finds no module, no function, no class and no re-export of that
  name in the scanned tree and no `.py` file for it on disk (`semantic.compiled`).

Each call of a function of such a module is reported where it is written, the place a port has to change.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.cuda_api.paths import cuda_path
from portcheck.static.cuda_library.extensions import cuda_build
from portcheck.static.cuda_library.fallbacks import fallback, fallback_severity
from portcheck.static.cuda_library.imports import one_line
from portcheck.static.semantic.compiled import custom_namespace
from portcheck.static.syntax import block_body, blocks, bound_names, dotted_name, parameters
from portcheck.static.values import under_type_checking
from portcheck.summaries import COMPILED_OF


@rule
class CompiledExtensionOp(Rule):
    """## What it does
    Finds calls of functions of a compiled extension module: one built from CUDA sources with
    `torch.utils.cpp_extension.load(...)`, a custom-op namespace under `torch.ops` that PyTorch does not register
    itself (`torch.ops.my_kernels.forward(...)`), or a module of the project's own package that has no Python source
    in the tree (`from . import _C`, then `_C.fused_op(x)`): the extension's shared object, built with CUDA. Each call
    is reported, in the function that makes it. Calls that no module's `forward` and no training step of the scan
    reaches are info (a compiled helper on host data, or run once, costs the step nothing; a public op matters where
    a model calls it), as are calls under a fallback (`try`, an availability test) or on a CUDA-only path
    (`if x.is_cuda:`), and, on a chip that only serves inference (Inf2), calls in a custom autograd Function's
    `backward`.

    ## Example
    ```python
    from . import _C

    class Render(torch.nn.Module):
        def forward(self, rays):
            return _C.march_rays(rays)
    ```

    ## Use instead
    The operator in PyTorch ops, which the Neuron compiler takes, or an NKI kernel registered as a custom operator.

    ## Fix safety
    No automatic fix: the replacement is new code.
    """

    code = "PC505"
    CONTEXTS = frozenset({"device"})
    INVALID = (
        "import torch\ndef f(x):\n    return torch.ops.my_kernels.fused_forward(x)",
        "from torch.ops import disco_kernels\ndef f(x):\n    return disco_kernels.forward.default(x)",
        "from torch.utils.cpp_extension import load\n_ext = load('op', sources=['op.cpp', 'op_kernel.cu'])\n"
        "def f(x):\n    return _ext.fused_op(x)",
    )
    VALID = (
        "import torch\ndef f(x):\n    return torch.ops.aten.add(x, x)",
        "from torch.utils.cpp_extension import load\n_ext = load('op', sources=['op.cpp'])\ndef f(x):\n"
        "    return _ext.fused_op(x)",
    )


TOKENS = ("import", "torch.ops")
# what a name may be bound to: ("certain", shown) or (a COMPILED_OF key, shown, where to look on disk: the import's
# dots, its path's parts and how many of them are imported names), looked at only where a call names it
Bound = tuple[str, str, tuple[int, tuple[str, ...], int] | None]
Bind = Callable[[str, Bound], None]


@functools.lru_cache(maxsize=64)
def _own_packages(path: str) -> frozenset[str]:
    """The folder names above the file: an absolute import whose first part is one of them may be the project's (not
    `torch`: a project's `torch/` subpackage, as in `pkg/torch/`, never stands for PyTorch's own imports)."""
    return frozenset(PurePosixPath(path.replace("\\", "/")).parts[:-1]) - {"torch"}


def _missing(location: str, level: int, parts: tuple[str, ...], names: int) -> bool:
    """The import's module, or the name it imports, has no Python on disk beside the file: no `.py` file, no folder
    of them, no name the package's `__init__.py` binds (or may, through `from .mod import *`), other than through
    `from torch.ops import NAME`. `level` dots up from the file's folder for a relative import; for an absolute one
    (level 0), from the nearest folder above the file named as its first part. A file not read from disk has
    nothing beside it to tell: False. The last `names` parts are names imported from the module the rest make."""
    folder = Path(location).parent if location else None
    if folder is None or not folder.is_dir():
        return False
    if level:
        for _ in range(level - 1):
            folder = folder.parent
    else:
        above = [f for f in (folder, *folder.parents) if f.name == parts[0]]
        if not above or (above[0].parent / "__init__.py").is_file():
            return False  # a package inside another is not what an absolute import's first part names
        folder, parts = above[0], parts[1:]
    for index, part in enumerate(parts):
        if (folder / f"{part}.py").is_file():
            return False
        if not (folder / part).is_dir():
            # an extension is one module: the last one of the import's path, or the name it imports; with more
            # modules below the missing one (`from .megatron.mpu import f`), a Python package was left out
            return index >= len(parts) - names - 1 and _unbound(folder / "__init__.py", part)
        folder = folder / part
    return False  # a folder: a package, or a namespace package of modules


def _unbound(init: Path, name: str) -> bool:
    try:
        text = init.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False  # no `__init__.py`: not a package, so not the project's own import
    for match in re.finditer(rf"\b{re.escape(name)}\b|import \*", text):
        line = text[text.rfind("\n", 0, match.start()) + 1:text.find("\n", match.end())]
        if not re.match(rf"\s*(from\s+torch\.ops\s+import\b|{re.escape(name)}\s*=\s*None\s*(#|$))", line):
            return False  # bound there (`NAME = None` is what a failed import leaves, no Python to call)
    return True


def _bindings(ctx: Context, scope: cst.Module | cst.FunctionDef) -> tuple[dict[str, Bound], frozenset[str]]:
    """For one scope (the module, or a function without the functions inside it): local name -> Bound, for the names
    it binds to a compiled module or to what may be one (a name bound two ways keeps the surer); and every other
    name it binds (an assignment, a loop variable, a parameter), which hides the module's binding of that name
    (`libnat, use_cuda = load_libnat()`)."""
    own = _own_packages(ctx.path)
    found: dict[str, Bound] = {}
    others: set[str] = set()
    builds = "cpp_extension" in ctx.text
    namespaces = "torch.ops" in ctx.text

    def bind(name: str, bound: Bound) -> None:
        if name not in found or found[name][0] != "certain":
            found[name] = bound

    if isinstance(scope, cst.FunctionDef):
        params = scope.params
        others.update(p.name.value for p in parameters(scope))
        others.update(p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param))
    pending: list[Sequence[cst.BaseStatement]] = [
        block_body(scope.body) if isinstance(scope, cst.FunctionDef) else scope.body]
    while pending:
        for child in pending.pop():
            if isinstance(child, cst.SimpleStatementLine):
                for small in child.body:
                    if isinstance(small, cst.ImportFrom):
                        _from_import(small, own, bind)
                    elif isinstance(small, cst.Import):
                        _import(small, own, bind)
                    elif isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [
                            small.target]
                        others.update(name for target in targets for name in bound_names(target))
                        if (builds or namespaces) and isinstance(small, cst.Assign) and len(targets) == 1 and \
                                isinstance(targets[0], cst.Name):
                            _assigned(ctx, small, bind)
            elif isinstance(child, (cst.FunctionDef, cst.ClassDef)):
                others.add(child.name.value)
            elif isinstance(child, cst.BaseCompoundStatement):
                if isinstance(child, cst.For):
                    others.update(bound_names(child.target))
                pending.extend(blocks(child))
    return found, frozenset(others)


def _candidates(ctx: Context) -> frozenset[str] | None:
    """The names the file imports from its own package or from `torch.ops`, from its summary's import table (every
    import, at any depth): only a call through one of them can be a compiled extension's. None (no screen) where
    the file builds an extension or names `torch.ops` (a binding by assignment), or has no summary."""
    summary = ctx.summary
    if summary is None or "cpp_extension" in ctx.text or "torch.ops" in ctx.text:
        return None
    own = _own_packages(ctx.path)
    return frozenset(name for name, target in summary.exports
                     if target.startswith(".") or target.split(".")[0] in own)


def _bound(ctx: Context, name: str) -> Bound | None:
    """What `name` is bound to where it is read: the innermost function that binds it, else the module; None where a
    function around the read binds it to something else."""
    candidates = ctx.memo("compiled-candidates", ctx.module, lambda: _candidates(ctx))
    if candidates is not None and name not in candidates:
        return None
    for function in reversed(ctx.functions):
        found, others = ctx.memo("compiled-bindings", function, lambda: _bindings(ctx, function))  # noqa: B023
        if name in found:
            return found[name]
        if name in others:
            return None
    found, _ = ctx.memo("compiled-bindings", ctx.module, lambda: _bindings(ctx, ctx.module))
    return found.get(name)


def _from_import(node: cst.ImportFrom, own: frozenset[str], bind: Bind) -> None:
    if isinstance(node.names, cst.ImportStar):
        return
    module = dotted_name(node.module) or "" if node.module is not None else ""
    base = "." * len(node.relative) + module
    for alias in node.names:
        name = dotted_name(alias.name)
        if name is None:
            continue
        local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) \
            else name
        if base == "torch.ops":
            if custom_namespace(f"torch.ops.{name}"):
                bind(local, ("certain", f"torch.ops.{name}", None))
        elif node.relative or base.split(".")[0] in own:
            bind(local, (f"{base}|{name}", f"{base}{'' if base.endswith('.') else '.'}{name}",
                         (len(node.relative), (*(module.split(".") if module else []), name), 1)))


def _import(node: cst.Import, own: frozenset[str], bind: Bind) -> None:
    for alias in node.names:
        name = dotted_name(alias.name)
        if name is None or alias.asname is None or not isinstance(alias.asname.name, cst.Name):
            continue  # `import pkg.ext` binds `pkg`, which is Python
        if name.split(".")[0] in own and "." in name:
            bind(alias.asname.name.value, (f"{name}|", name, (0, tuple(name.split(".")), 0)))


def _assigned(ctx: Context, node: cst.Assign, bind: Bind) -> None:
    target = node.targets[0].target
    assert isinstance(target, cst.Name)
    value = node.value
    if isinstance(value, cst.Call) and "cpp_extension" in ctx.text:
        qualname = ctx.qualname(value.func)
        if qualname is not None and qualname.startswith("torch.utils.cpp_extension.") and cuda_build(
                ctx, value, qualname):
            bind(target.value, ("certain", f"{one_line(ctx.source(value.func), 40)}(...)", None))
    elif isinstance(value, cst.Attribute) and custom_namespace(dotted_name(value)):
        bind(target.value, ("certain", dotted_name(value) or "", None))


@check(cst.Call, rules=(CompiledExtensionOp,), tokens=TOKENS)
def check_compiled_call(node: cst.Call, ctx: Context) -> None:
    func = node.func
    root: cst.BaseExpression = func
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name):
        return
    qualname = ctx.qualname(func) if root.value == "torch" and "torch.ops" in ctx.text else None
    namespace = custom_namespace(qualname) if qualname is not None and qualname.count(".") >= 3 else None
    if namespace is not None:  # `torch.ops.NS.op(...)`, not `torch.ops.load_library(...)`
        key, origin = "certain", f"torch.ops.{namespace}"
    else:
        bound = _bound(ctx, root.value)
        if bound is None:
            return
        key, origin, disk = bound
        if root is func and key == "certain":
            return  # a compiled module is called through its functions, not itself
        if disk is not None and not ctx.memo(f"compiled-missing:{disk}", ctx.module,
                                             lambda: _missing(ctx.location, *disk)):
            return  # Python beside the file, or no file on disk to look beside
    if under_type_checking(ctx):
        return
    shown = one_line(ctx.source(func), 50)
    fallen = fallback(ctx) or cuda_path(ctx, node)  # `if x.is_cuda:`: the other path is what runs on Neuron
    # a custom autograd Function's gradient, which an inference-only chip never computes
    backward = fallen is None and ctx.inference_only and any(f.name.value == "backward" for f in ctx.functions)
    where = f"the compiled extension `{origin}`" if key == "certain" else \
        f"`{origin}`, a compiled extension (the project has no Python source for it)"
    message = (f"`{shown}(...)` calls {where}: its kernels are built for CUDA or the CPU, not for NeuronCores. A "
               "CUDA-only op fails on Neuron tensors, and one with a CPU kernel runs on the host, its tensors copied "
               "each call; neither compiles into a Neuron graph. Write it in PyTorch ops or as an NKI kernel")
    if fallen:
        message += f" ({fallen}: make sure the fallback is what runs)"
    elif backward:
        message += " (in a `backward`, which inference never runs)"
    ctx.report(CompiledExtensionOp, node, message, Severity.INFO if backward else fallback_severity(fallen),
               requires="" if key == "certain" else COMPILED_OF + key)


__all__ = ["CompiledExtensionOp", "check_compiled_call"]
