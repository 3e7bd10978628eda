"""torch-xla and Neuron APIs that were removed or deprecated: `torch_neuronx.nki_jit`, `xm.xrt_world_size`,
`torch_xla.experimental.pjrt` and the like, imported or used (PC718, PC719)."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.branches import tpu_only, version_fallback
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.codegen import imports_module, spelling
from portcheck.static.compile.text import one_line
from portcheck.static.syntax import bound_name, dotted_name
from portcheck.static.values import catches_import_error


@rule
class NkiJitRemoved(Rule):
    """## What it does
    Finds `torch_neuronx.nki_jit` (an error: unsupported since Neuron 2.24) and its implementation path
    `torch_neuronx.xla_impl.ops.nki_jit` (a warning: deprecated), imported or called. A use inside
    `try:` with an `except ImportError` / `AttributeError` fallback stays quiet.

    ## Example
    ```python
    from torch_neuronx import nki_jit
    attention = nki_jit()(flash_fwd)
    ```

    ## Use instead
    ```python
    from neuronxcc import nki
    attention = nki.jit(flash_fwd)   # call the @nki.jit kernel directly
    ```

    ## Fix safety
    No automatic fix: the replacement is the kernel itself, decorated with `@nki.jit` and called directly, which
    depends on how the kernel is written and on the NKI namespace of the SDK in use (`neuronxcc.nki` or `nki`).
    """

    code = "PC718"
    message = ("`{shown}`: `{api}` {what}; call the `@nki.jit` kernel directly (with `@nki_op` registration on "
               "TorchNeuron native)")
    INVALID = (
        "from torch_neuronx import nki_jit",
        "import torch_neuronx\nk = torch_neuronx.nki_jit()(kernel)",
        "from torch_neuronx.xla_impl.ops import nki_jit",
    )
    VALID = (
        "from neuronxcc import nki\nk = nki.jit(kernel)",
        "try:\n    from torch_neuronx import nki_jit\nexcept ImportError:\n    nki_jit = None",
        "x = 'torch_neuronx.nki_jit'",
    )


@rule
class RemovedXlaApi(Rule):
    """## What it does
    On the PyTorch/XLA stack, finds torch-xla APIs that were removed (`xm.xrt_world_size` in 2.7,
    `torch_xla.experimental.pjrt` and `torch_xla.runtime.using_pjrt` in 2.5: errors) or deprecated
    (`xm.get_ordinal`, `xm.get_local_ordinal`: info), imported or used. Uses inside `try:` with an
    `except AttributeError` / `ImportError` fallback stay quiet, and so do fallbacks for old releases: the `else` of
    `if _XLA_GREATER_EQUAL_2_1:`, or the code after `if _XLA_GREATER_EQUAL_2_5: return ...`, and TPU-only
    branches (`if is_torch_xla_available(check_is_tpu=True):`).

    ## Example
    ```python
    world = xm.xrt_world_size()
    ```

    ## Use instead
    ```python
    import torch_xla.runtime as xr
    world = xr.world_size()
    ```

    ## Fix safety
    Safe fixes: `xm.xrt_world_size()` becomes `torch_xla.runtime.world_size()`, `xm.get_ordinal()`
    `global_ordinal()` and `xm.get_local_ordinal()` `local_ordinal()` (written with the file's alias of
    `torch_xla.runtime`, or adding `import torch_xla.runtime`); `xr.using_pjrt()` becomes `True`, PJRT being
    the only runtime. Calls passing the old `defval` argument get no fix. Unsafe: `torch_xla.experimental.pjrt`
    becomes `torch_xla.runtime` in imports and attribute chains, since the docs name the module that replaces it,
    not a function-for-function mapping.
    """

    code = "PC719"
    message = "`{shown}`: `{api}` {what}; use {replacement}"
    FIXABLE = True
    TARGET = ("trn1", "xla")
    INVALID = (
        "import torch_xla.core.xla_model as xm\nn = xm.xrt_world_size()",
        "from torch_xla.experimental import pjrt",
        "import torch_xla.runtime as xr\nif xr.using_pjrt():\n    pass",
        "import torch_xla.core.xla_model as xm\nr = xm.get_ordinal()",
    )
    VALID = (
        "import torch_xla.runtime as xr\nn = xr.world_size()",
        "import torch_xla.core.xla_model as xm\ntry:\n    n = xm.xrt_world_size()\nexcept AttributeError:\n"
        "    n = 1",
        "x = 'xm.xrt_world_size()'",
        "import torch_xla.runtime as xr\nimport torch_xla.core.xla_model as xm\ndef world():\n"
        "    if _XLA_GREATER_EQUAL_2_1:\n        return xr.world_size()\n    return xm.xrt_world_size()",
    )


API_TOKENS = ("nki_jit", "xrt_world_size", "pjrt", "get_ordinal", "get_local_ordinal")

# Removed or deprecated XLA / Neuron APIs: qualified name -> (severity or None for the rule's, replacement,
# what happened). Sources: SDK:archive/appnotes/torch-neuronx/introducing-pytorch-2-x.rst and -2-9.rst;
# SDK:about-neuron/announcements/neuron2.x/announce-no-support-nki-jit-torch.rst; aws-neuron/neuronx-distributed#53.
_NKI = {
    "torch_neuronx.nki_jit": (None, "is no longer supported since Neuron 2.24"),
    "torch_neuronx.xla_impl.ops.nki_jit": (
        Severity.WARNING,
        "is the deprecated path behind `torch_neuronx.nki_jit`, which Neuron 2.24 stopped supporting (it prints a "
        "deprecation warning)"),
}
_XLA = {
    "torch_xla.core.xla_model.xrt_world_size": (None, "`torch_xla.runtime.world_size()`",
                                                "was removed in torch-xla 2.7"),
    "torch_xla.experimental.pjrt": (None, "`torch_xla.runtime`", "was removed in torch-xla 2.5"),
    "torch_xla.runtime.using_pjrt": (None, "nothing (PJRT is the only runtime)", "was removed in torch-xla 2.5"),
    "torch_xla.core.xla_model.get_ordinal": (Severity.INFO, "`torch_xla.runtime.global_ordinal()`",
                                             "is deprecated (a warning when used)"),
    "torch_xla.core.xla_model.get_local_ordinal": (Severity.INFO, "`torch_xla.runtime.local_ordinal()`",
                                                   "is deprecated (a warning when used)"),
}
_API_LAST = frozenset(api.rsplit(".", 1)[1] for api in (*_NKI, *_XLA))


def _match(qualname: str) -> tuple[type[Rule], str] | None:
    """(rule, api) when `qualname` is, or is inside, a removed or deprecated API."""
    for table, found in ((_NKI, NkiJitRemoved), (_XLA, RemovedXlaApi)):
        for api in table:
            if qualname == api or qualname.startswith(api + "."):
                return found, api
    return None


def _has_fallback(ctx: Context) -> bool:
    """Inside `try:` with an `except AttributeError` / `ImportError` fallback (a version shim)."""
    for stmt in reversed(ctx.statements):
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            if catches_import_error(stmt):
                return True
            for handler in stmt.handlers:
                kinds = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
                for kind in kinds:
                    expr = kind.value if isinstance(kind, cst.Element) else kind
                    # A `*starred` element (an expression too) names no exception: dotted_name answers None for it.
                    if isinstance(expr, cst.BaseExpression) and dotted_name(expr) == "AttributeError":
                        return True
    return False


def _judged(ctx: Context) -> set[int]:
    return ctx.memo("compile-api-judged", ctx.module, set)


def _report_api(ctx: Context, node: cst.CSTNode, qualname: str, fix: FixPlan | None = None) -> None:
    found = _match(qualname)
    if found is None or _has_fallback(ctx) or version_fallback(ctx, node) or tpu_only(ctx, node):
        return  # a version shim (the old API only where the new one is missing), or a TPU-only branch
    rule_class, api = found
    shown = one_line(ctx, node)
    if rule_class is NkiJitRemoved:
        severity, what = _NKI[api]
        ctx.report(NkiJitRemoved, node, severity=severity, fix=fix, shown=shown, api=api, what=what)
    else:
        severity, replacement, what = _XLA[api]
        ctx.report(RemovedXlaApi, node, severity=severity, fix=fix, shown=shown, api=api, what=what,
                   replacement=replacement)


# The documented successors in torch_xla.runtime (KNOWLEDGE.md §3.4), each called without arguments like the
# removed function (whose optional `defval` the successors lack: a call passing one gets no fix).
_RUNTIME_SUCCESSORS = {
    "torch_xla.core.xla_model.xrt_world_size": "world_size",
    "torch_xla.core.xla_model.get_ordinal": "global_ordinal",
    "torch_xla.core.xla_model.get_local_ordinal": "local_ordinal",
}
_PJRT = "torch_xla.experimental.pjrt"
_RUNTIME = "torch_xla.runtime"


def _argless_calls(ctx: Context) -> dict[int, cst.Call]:
    """The calls without arguments seen so far, by the id of what they call."""
    return ctx.memo("argless-calls", ctx.module, dict)


@check(cst.Call, rules=(NkiJitRemoved, RemovedXlaApi), tokens=API_TOKENS)
def note_argless_call(node: cst.Call, ctx: Context) -> None:
    if not node.args:
        _argless_calls(ctx)[id(node.func)] = node


def _api_fix(ctx: Context, node: cst.Attribute, qualname: str) -> FixPlan | None:
    """The fix of a removed or deprecated torch-xla API named by the attribute chain `node`."""
    call = _argless_calls(ctx).get(id(node))
    if qualname in _RUNTIME_SUCCESSORS and call is not None:
        # Same value under PJRT, the only runtime since torch-xla 2.5: safe.
        runtime, imports = spelling(ctx, _RUNTIME)
        successor = f"{runtime}.{_RUNTIME_SUCCESSORS[qualname]}"
        return FixPlan(f"Use `{successor}()`", True, (Replace(node, successor),), imports)
    if qualname == "torch_xla.runtime.using_pjrt" and call is not None:
        # PJRT is the only runtime, so the removed probe would answer True: safe.
        return FixPlan("Replace with `True` (PJRT is the only runtime)", True, (Replace(call, "True"),))
    if qualname.startswith(_PJRT + "."):
        inner: cst.BaseExpression = node
        while isinstance(inner, cst.Attribute) and ctx.qualname(inner) != _PJRT:
            inner = inner.value
        if not (isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Attribute)
                and ctx.qualname(inner.value.value) == "torch_xla"):
            return None
        imports = () if imports_module(ctx, _RUNTIME) or imports_module(ctx, _PJRT) else (f"import {_RUNTIME}",)
        return FixPlan(f"Use `{_RUNTIME}`", False, (Replace(inner, f"{ctx.source(inner.value.value)}.runtime"),),
                       imports)
    return None


def _pjrt_import_fix(node: cst.Import | cst.ImportFrom, alias: cst.ImportAlias | None) -> FixPlan | None:
    """`torch_xla.experimental.pjrt` imported → `torch_xla.runtime`, its documented replacement. Unsafe: some of
    its functions (`run_multiprocess`, `rendezvous`, ...) did not move there."""
    title = f"Import `{_RUNTIME}` instead"
    if isinstance(node, cst.Import):
        return None if alias is None else FixPlan(title, False, (Replace(alias.name, _RUNTIME),))
    module = dotted_name(node.module) if node.module is not None else None
    if module == _PJRT and node.module is not None:  # from torch_xla.experimental.pjrt import world_size
        return FixPlan(title, False, (Replace(node.module, _RUNTIME),))
    if (module == "torch_xla.experimental" and alias is not None and not isinstance(node.names, cst.ImportStar)
            and len(node.names) == 1):
        # the alias is `pjrt`: bound under its own name unless renamed
        return FixPlan(title, False, (Replace(node, f"from torch_xla import runtime as {bound_name(alias)}"),))
    return None


@check(cst.Attribute, rules=(NkiJitRemoved, RemovedXlaApi), tokens=API_TOKENS)
def check_api_reference(node: cst.Attribute, ctx: Context) -> None:
    """`xm.xrt_world_size()`, `torch_neuronx.nki_jit(...)`: judged once per attribute chain, where the chain
    itself names the API (a name imported from the API was reported at its import)."""
    judged = _judged(ctx)
    if id(node) in judged:
        return
    inner: cst.BaseExpression = node.value
    segments = {node.attr.value}
    while isinstance(inner, cst.Attribute):
        judged.add(id(inner))
        segments.add(inner.attr.value)
        inner = inner.value
    if not segments & _API_LAST:
        return  # the API's own name is not in this chain (a name imported from it was judged at the import)
    qualname = ctx.qualname(node)
    head = ctx.qualname(inner) if isinstance(inner, cst.Name) else None
    if qualname is None or (head is not None and _match(head) is not None):
        return
    _report_api(ctx, node, qualname, _api_fix(ctx, node, qualname))


@check(cst.Import, cst.ImportFrom, rules=(NkiJitRemoved, RemovedXlaApi), tokens=API_TOKENS)
def check_api_import(node: cst.Import | cst.ImportFrom, ctx: Context) -> bool:
    """`from torch_neuronx import nki_jit`, `import torch_xla.experimental.pjrt as pjrt`: the import fails."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is not None:
                _report_api(ctx, node, name, _pjrt_import_fix(node, alias) if name == _PJRT else None)
    elif not node.relative and node.module is not None and not isinstance(node.names, cst.ImportStar):
        module = dotted_name(node.module)
        if module is not None:
            if _match(module) is not None:
                _report_api(ctx, node, module, _pjrt_import_fix(node, None) if module == _PJRT else None)
            else:
                for alias in node.names:
                    name = dotted_name(alias.name)
                    if name is not None:
                        fix = _pjrt_import_fix(node, alias) if f"{module}.{name}" == _PJRT else None
                        _report_api(ctx, node, f"{module}.{name}", fix)
    return False
