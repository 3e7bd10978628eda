"""Imports of CUDA-only libraries (PC501): `import`, `from ... import` and `importlib.import_module`, matched
against the libraries of rules/libraries.toml."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge.libraries import Library, libraries, library_of
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.cuda_library.fallbacks import fallback, fallback_severity
from portcheck.static.cuda_library.integrations import integration
from portcheck.static.syntax import call_name, dotted_name, string_value
from portcheck.static.values import under_type_checking


@rule
class CudaOnlyLibrary(Rule):
    """## What it does
    Finds imports of libraries that only run on NVIDIA (or other GPU) hardware: Apex, FlashAttention, xFormers,
    bitsandbytes, Triton, DeepSpeed's fused optimizers and CUDA ops, Transformer Engine, Liger Kernel,
    mamba-ssm, causal-conv1d, CuPy, pynvml, NATTEN, and CUDA-only PyTorch extensions (tiny-cuda-nn, gsplat,
    nvdiffrast, PointNet++ ops, SageAttention, FlashInfer, GPTQ/AWQ/Marlin kernels, MegaBlocks, grouped_gemm,
    warp-rnnt, Numba's CUDA target, cuDF), in every spelling (`import x.y as z`,
    `from x.y import a, b`, `importlib.import_module("x")`). One finding per library per import statement.

    An import with a fallback is info, not an error: inside `try/except ImportError`, under an availability
    check (`if is_flash_attn_2_available():`, `if torch.cuda.is_available():`), in a function that checks
    availability before importing, or decorated `@requires_backends`. On Neuron the fallback runs, so the
    finding asks you to make sure it is the pure-PyTorch path. An import in an integration of the library is info
    too: a module, function or class named for it (`tuners/lora/bnb.py`, `dequantize_bnb_weight`), a test
    decorated for it (`@require_bnb`), a branch for it (`if method.startswith("xformers"):`), an opt-in profiler
    (`xformers.profiler`): nothing reaches it unless the user picks the library. Imports under
    `if TYPE_CHECKING:`, relative imports, look-alike names (`apex_utils`, `tritonclient`) and plain
    `import deepspeed` stay quiet. A library whose import works on a host without CUDA (Numba's CUDA target,
    pynvml: observed) is info at its import, which names what fails instead (a kernel launch, `nvmlInit()`).

    Where the `except` leaves the name unbound or `None` (`except ImportError: tcnn = None`), a fallback import
    is no fallback for the code that uses the name: the first use in each function with no test of the name or of
    a flag the `try` sets (`if tcnn is not None:`, `if HAS_APEX:`), no `try` around it and no CUDA-only branch
    (`if x.device.type == "cuda":`) is reported too, where a host without the library fails.

    ## Example
    ```python
    from apex.optimizers import FusedAdam
    from flash_attn import flash_attn_func
    import bitsandbytes as bnb
    ```

    ## Use instead
    ```python
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scores = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
    out = scores @ v
    ```
    What replaces each library on each stack is in the message (and in rules/libraries.toml).

    ## Fix safety
    No automatic fix: removing a library changes the code that uses it.
    """

    code = "PC501"
    INVALID = (
        "from apex.optimizers import FusedAdam",
        "import apex.normalization as apexnorm",
        "from flash_attn import flash_attn_func, flash_attn_varlen_func",
        "import xformers.ops as xops",
        "import bitsandbytes as bnb",
        "import triton\nimport triton.language as tl",
        "from deepspeed.ops.adam import FusedAdam",
        "import transformer_engine.pytorch as te",
        "from liger_kernel.transformers import apply_liger_kernel_to_llama",
        "from mamba_ssm.ops.selective_scan_interface import selective_scan_fn",
        "import cupy as cp",
        "import pynvml",
        "import tinycudann as tcnn",
        "from numba import cuda",
        "import importlib\napex = importlib.import_module('apex')",
        "try:\n    from flash_attn import flash_attn_func\nexcept ImportError:\n    flash_attn_func = None",
    )
    VALID = (
        "import apex_utils\nimport tritonclient.http as httpclient",
        "from .flash_attn import flash_attn_func",
        "import deepspeed\nfrom deepspeed.ops.adam import DeepSpeedCPUAdam",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import bitsandbytes as bnb",
        "import torch\nopt = torch.optim.AdamW(params)  # was apex FusedAdam",
        "from kernels import get_kernel",
        "from numba import jit\nimport cudf_utils\nimport gsplat_viewer",
    )


# ---- the libraries --------------------------------------------------------------------------------------------

# How an import of a listed module can be written: `import m`, `from m`, `import os, m`, `import_module("m")`.
# (A bare module name would be too wide: transformers files say `_supports_flash_attn` everywhere.)
IMPORT_TOKENS = tuple(token for top in sorted({module.split(".")[0] for module in libraries()})
                      for token in (f"import {top}", f"from {top}", f", {top}", f'"{top}', f"'{top}"))


# ---- the checks ---------------------------------------------------------------------------------------------


def one_line(text: str, limit: int = 70) -> str:
    """Source text as one line of at most `limit` characters, for a message to quote."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _imported(node: cst.Import | cst.ImportFrom) -> list[tuple[str, cst.CSTNode]]:
    """(qualified name, node to report) for each name an absolute import brings in."""
    if isinstance(node, cst.Import):
        return [(name, alias) for alias in node.names if (name := dotted_name(alias.name))]
    if node.relative or node.module is None:
        return []
    module = dotted_name(node.module)
    if module is None:
        return []
    if isinstance(node.names, cst.ImportStar):
        return [(module, node)]
    return [(f"{module}.{name}", node) for alias in node.names if (name := dotted_name(alias.name))]


def _alias_text(alias: cst.ImportAlias) -> str:
    name = dotted_name(alias.name) or ""
    asname = alias.asname.name if alias.asname is not None else None
    return f"{name} as {asname.value}" if isinstance(asname, cst.Name) else name


def _import_text(node: cst.Import | cst.ImportFrom, where: cst.CSTNode) -> str:
    """The import as one line, without the comments and line breaks of its source."""
    if isinstance(node, cst.Import):
        return f"import {_alias_text(where)}" if isinstance(where, cst.ImportAlias) else "import"
    names = "*" if isinstance(node.names, cst.ImportStar) else ", ".join(_alias_text(a) for a in node.names)
    return f"from {dotted_name(node.module) if node.module else ''} import {names}"


def _library_message(ctx: Context, shown: str, library: Library, reason: str | None) -> str:
    advice = library.advice(ctx.stack)
    if reason:
        return (f"`{shown}` ({reason}) imports {library.title} ({library.kind}): on Neuron the fallback runs; "
                f"make sure it is the pure-PyTorch path: {advice}")
    return f"`{shown}` imports {library.title} ({library.kind}), which Neuron cannot run; {advice}"


@check(cst.Import, cst.ImportFrom, rules=(CudaOnlyLibrary,), tokens=IMPORT_TOKENS)
def check_import(node: cst.Import | cst.ImportFrom, ctx: Context) -> None:
    found: dict[int, tuple[Library, cst.CSTNode, str]] = {}
    for qualname, where in _imported(node):
        library = library_of(qualname)
        if library is not None and id(library) not in found:
            found[id(library)] = (library, where, qualname)
    if not found or under_type_checking(ctx):
        return
    reason = fallback(ctx)
    for library, where, qualname in found.values():
        shown = one_line(_import_text(node, where))
        _report(ctx, where, shown, qualname, library, reason, _alias_names(node, where))


def _alias_names(node: cst.Import | cst.ImportFrom, where: cst.CSTNode) -> tuple[str, ...]:
    """The names an import binds (`bnb` for `import bitsandbytes as bnb`), which an integration may be named by."""
    aliases = [where] if isinstance(where, cst.ImportAlias) else (
        list(node.names) if not isinstance(node.names, cst.ImportStar) else [])
    return tuple(bound for a in aliases if a.asname is not None and isinstance(a.asname.name, cst.Name)
                 for bound in (a.asname.name.value,))


def _report(ctx: Context, where: cst.CSTNode, shown: str, qualname: str, library: Library, reason: str | None,
            aliases: tuple[str, ...] = ()) -> None:
    """The finding: info where there is a fallback, or where the import is an integration of the library."""
    place = None if reason else integration(ctx, qualname, library.modules, library.names + aliases)
    if place is None and not reason and library.loads:
        ctx.report(CudaOnlyLibrary, where, f"`{shown}` imports {library.title} ({library.kind}); the import itself "
                   f"works on a host without CUDA, where {library.loads}: what to port is the code that uses it "
                   f"({library.advice(ctx.stack)})", Severity.INFO)
        return
    if place is None:
        ctx.report(CudaOnlyLibrary, where, _library_message(ctx, shown, library, reason), fallback_severity(reason))
        return
    ctx.report(CudaOnlyLibrary, where, f"`{shown}` imports {library.title} ({library.kind}) in {place}: it runs only "
               f"when the user chooses {library.title}, so on Neuron leave it unchosen ({library.advice(ctx.stack)})",
               Severity.INFO)


@check(cst.Call, rules=(CudaOnlyLibrary,), tokens=IMPORT_TOKENS)
def check_import_module(node: cst.Call, ctx: Context) -> None:
    """`importlib.import_module("apex")`: the same import, spelled as a call."""
    if call_name(node) != "import_module" or ctx.qualname(node.func) != "importlib.import_module" or not node.args:
        return
    target = string_value(node.args[0].value)
    library = library_of(target) if target else None
    if library is None or under_type_checking(ctx):
        return
    _report(ctx, node, one_line(ctx.source(node)), target or "", library, fallback(ctx))
