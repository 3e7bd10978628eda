"""cuda-library (PC5xx): libraries, kernels and extensions built for NVIDIA GPUs.

Neuron runs no CUDA code; its docs ask to strip CUDA dependencies out and let the compiler take the plain
PyTorch model (SDK:about-neuron/faq/training/neuron-training.rst). Which libraries are CUDA-only, and what
replaces each on a stack, is data: rules/libraries.toml. Findings sit on the import statement (PC501), the
Triton kernel definition (PC502), the CUDA extension build (PC503) and the kernel-hub load (PC504); calls of
flash-attention functions are custom-attention (PC4xx).

An import that has a fallback is milder than one that has none: inside `try/except ImportError`, under an
availability check (`if is_flash_attn_available():`), in a function that checks availability first, or
decorated `@requires_backends`, it is reported as info (the fallback is what runs on Neuron). Imports under
`if TYPE_CHECKING:` never run and stay quiet.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import KnowledgeError, rules_dir
from portcheck.static.rule import Context, Rule, call_name, check, keyword, positional, rule, string_value
from portcheck.static.syntax import dotted_name
from portcheck.static.values import availability_probe, catches_import_error, under_type_checking
from portcheck.static.walk import visit


@dataclass(frozen=True)
class Library:
    """One import family of rules/libraries.toml: what it is and what replaces it on each stack."""

    modules: tuple[str, ...]
    title: str
    kind: str
    native: str
    xla: str
    source: str

    def advice(self, stack: str) -> str:
        return self.native if stack == "native" else self.xla


@functools.cache
def libraries() -> dict[str, Library]:
    """Import path -> its library, read once from rules/libraries.toml."""
    path = rules_dir() / "libraries.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise KnowledgeError(f"{path}: {exc}") from exc
    table: dict[str, Library] = {}
    for entry in data["library"]:
        use = entry.get("use", "")
        library = Library(tuple(entry["modules"]), entry["title"], entry["kind"], entry.get("native", use),
                          entry.get("xla", use), entry.get("source", ""))
        if not (library.native and library.xla and library.source):
            raise KnowledgeError(f"{path}: {library.title} lacks `use` (or `native` and `xla`) or `source`")
        for module in library.modules:
            if module in table:
                raise KnowledgeError(f"{path}: {module} is listed twice")
            table[module] = library
    return table


def library_of(qualname: str) -> Library | None:
    """The library an imported name belongs to, by its longest listed prefix on whole dotted segments."""
    table = libraries()
    parts = qualname.split(".")
    for end in range(len(parts), 0, -1):
        found = table.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None


# How an import of a listed module can be written: `import m`, `from m`, `import os, m`, `import_module("m")`.
# (A bare module name would be too wide: transformers files say `_supports_flash_attn` everywhere.)
IMPORT_TOKENS = tuple(token for top in sorted({module.split(".")[0] for module in libraries()})
                      for token in (f"import {top}", f"from {top}", f", {top}", f'"{top}', f"'{top}"))
TRITON_TOKENS = ("import triton", "from triton", ", triton")
EXTENSION_TOKENS = ("cpp_extension",)
HUB_TOKENS = ("get_kernel",)


# ---- fallbacks --------------------------------------------------------------------------------------------

_REQUIRES = ("require_backends", "requires_backends", "requires")


def fallback(ctx: Context, node: cst.CSTNode | None = None) -> str | None:
    """Why the current statement (or `node`, a compound statement being visited) has a fallback on a host
    without the library, or None.

    Like `values.guard`, with two differences. A `try` guards only the statements of its body (an import in
    its `except` handler is the fallback and fails on its own), and only if some handler carries on rather
    than raising again. And a function that checks availability first (`if not is_bitsandbytes_available():
    raise ImportError(...)`) counts as guarded, as one decorated `@requires_backends` does.
    """
    chain = ctx.statements
    last = len(chain) - 2 if chain and chain[-1] is node else len(chain) - 1
    for index in range(last, -1, -1):
        stmt = chain[index]
        child = chain[index + 1] if index + 1 < len(chain) else None
        if isinstance(stmt, (cst.Try, cst.TryStar)) and _in_block(stmt.body, child) and _falls_back(stmt):
            return "inside `try`/`except`"
        if isinstance(stmt, cst.If) and (probe := availability_probe(stmt.test)):
            return f"under `if {probe}`"
        if isinstance(stmt, cst.FunctionDef) and (reason := _checked_first(stmt, child) or _required(stmt)):
            return reason
    return None


def _falls_back(stmt: cst.Try | cst.TryStar) -> bool:
    """The `try` catches ImportError and some handler carries on (`except ImportError: raise ImportError("pip
    install ...")` is a better message, not a fallback)."""
    return catches_import_error(stmt) and not all(_exits(handler.body, raises_only=True) for handler in stmt.handlers)


def _in_block(block: cst.BaseSuite, child: cst.CSTNode | None) -> bool:
    return isinstance(block, cst.IndentedBlock) and any(s is child for s in block.body)


def _checked_first(function: cst.FunctionDef, child: cst.CSTNode | None) -> str | None:
    """`if not is_x_available(): raise ...` among the statements of `function` that precede `child`."""
    if not isinstance(function.body, cst.IndentedBlock):
        return None
    for stmt in function.body.body:
        if stmt is child:
            return None
        if isinstance(stmt, cst.If) and _exits(stmt.body) and (probe := availability_probe(stmt.test)):
            return f"after the `{probe}` check"
    return None


def _exits(block: cst.BaseSuite, raises_only: bool = False) -> bool:
    """The block ends in `raise` (or `return`)."""
    body = block.body if isinstance(block, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    kinds = cst.Raise if raises_only else (cst.Raise, cst.Return)
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, kinds) for s in last.body)


def _required(function: cst.FunctionDef) -> str | None:
    for decorator in function.decorators:
        expr = decorator.decorator
        text = dotted_name(expr.func if isinstance(expr, cst.Call) else expr) or ""
        if text.endswith(_REQUIRES):
            return f"in a function decorated `@{text}`"
    return None


def _severity(reason: str | None) -> Severity | None:
    return Severity.INFO if reason else None


def _one_line(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


# ---- PC501: imports -----------------------------------------------------------------------------------------


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


@check(cst.Import, cst.ImportFrom, codes=("PC501",), tokens=IMPORT_TOKENS)
def check_import(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, (cst.Import, cst.ImportFrom))
    found: dict[int, tuple[Library, cst.CSTNode]] = {}
    for qualname, where in _imported(node):
        library = library_of(qualname)
        if library is not None and id(library) not in found:
            found[id(library)] = (library, where)
    if not found or under_type_checking(ctx):
        return
    reason = fallback(ctx)
    for library, where in found.values():
        shown = _one_line(_import_text(node, where))
        ctx.report("PC501", where, _library_message(ctx, shown, library, reason), _severity(reason))


@check(cst.Call, codes=("PC501",), tokens=IMPORT_TOKENS)
def check_import_module(node: cst.CSTNode, ctx: Context) -> None:
    """`importlib.import_module("apex")`: the same import, spelled as a call."""
    assert isinstance(node, cst.Call)
    if call_name(node) != "import_module" or ctx.qualname(node.func) != "importlib.import_module" or not node.args:
        return
    target = string_value(node.args[0].value)
    library = library_of(target) if target else None
    if library is None or under_type_checking(ctx):
        return
    reason = fallback(ctx)
    ctx.report("PC501", node, _library_message(ctx, _one_line(ctx.source(node)), library, reason), _severity(reason))


# ---- PC502: Triton kernels ----------------------------------------------------------------------------------

_TRITON_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})


def _kernel_advice(stack: str) -> str:
    if stack == "native":
        return ("replace it with the PyTorch ops it fuses (the Neuron compiler optimizes those), or rewrite it in "
                "NKI (`@nki.jit`, registered as a PyTorch op with `@nki_op`)")
    return ("replace it with the PyTorch ops it fuses (the Neuron compiler optimizes those), or rewrite it as an "
            "NKI kernel called directly (`@nki.jit`; `torch_neuronx.nki_jit` is unsupported since Neuron 2.24)")


@check(cst.FunctionDef, codes=("PC502",), tokens=TRITON_TOKENS)
def check_triton_kernel(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.FunctionDef)
    for decorator in node.decorators:
        expr = decorator.decorator
        name = ctx.qualname(expr.func if isinstance(expr, cst.Call) else expr)
        if name in _TRITON_DECORATORS:
            break
    else:
        return
    if under_type_checking(ctx):
        return
    reason = fallback(ctx, node)
    if reason:
        message = (f"Triton kernel `{node.name.value}` (`@{name}`, {reason}) is GPU code; on Neuron make sure "
                   f"the fallback is the pure-PyTorch path ({_kernel_advice(ctx.stack)})")
    else:
        message = (f"Triton kernel `{node.name.value}` (`@{name}`) is GPU code that NeuronCores cannot run; "
                   f"{_kernel_advice(ctx.stack)}")
    ctx.report("PC502", decorator, message, _severity(reason))


# ---- PC503: CUDA extensions ---------------------------------------------------------------------------------

_EXTENSION = "torch.utils.cpp_extension"
_CUDA_SOURCE = re.compile(r"\.(cu|cuh)$")


def _cuda_source_in(ctx: Context, node: cst.BaseExpression) -> str | None:
    """A `.cu`/`.cuh` path written anywhere in a `sources=` expression (a list, `os.path.join(...)`, or a
    local name bound to one), or None."""
    bound = ctx.constant(node)
    if bound is not None:
        node = bound[1]
    found: list[str] = []

    class Finder(cst.CSTVisitor):
        def visit_SimpleString(self, string: cst.SimpleString) -> bool:
            value = string.evaluated_value
            if isinstance(value, str) and _CUDA_SOURCE.search(value):
                found.append(value)
            return False

        def visit_FormattedStringText(self, text: cst.FormattedStringText) -> bool:
            if _CUDA_SOURCE.search(text.value):
                found.append(text.value)
            return False

    visit(node, Finder())
    return found[0] if found else None


def _is_true(node: cst.Arg | None) -> bool:
    return node is not None and isinstance(node.value, cst.Name) and node.value.value == "True"


def _cuda_build(ctx: Context, node: cst.Call, qualname: str) -> str | None:
    """What makes this cpp_extension call a CUDA build, or None."""
    if qualname == f"{_EXTENSION}.CUDAExtension":
        return "builds a CUDA extension"
    if _is_true(keyword(node, "with_cuda")):
        return "builds with `with_cuda=True`"
    if qualname == f"{_EXTENSION}.load":
        sources = keyword(node, "sources") or positional(node, 1)
        cuda = sources and _cuda_source_in(ctx, sources.value)
        if cuda:
            return f"compiles the CUDA source `{cuda.rsplit('/', 1)[-1]}`"
        if keyword(node, "extra_cuda_cflags"):
            return "compiles CUDA code (`extra_cuda_cflags`)"
    if qualname == f"{_EXTENSION}.load_inline":
        cuda_sources = keyword(node, "cuda_sources") or positional(node, 2)
        if cuda_sources is not None and not (isinstance(cuda_sources.value, cst.Name)
                                             and cuda_sources.value.value == "None"):
            return "compiles inline CUDA sources (`cuda_sources=`)"
    return None


@check(cst.Call, codes=("PC503",), tokens=EXTENSION_TOKENS)
def check_cuda_extension(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    qualname = ctx.qualname(node.func)
    if qualname is None or not qualname.startswith(f"{_EXTENSION}."):
        return
    what = _cuda_build(ctx, node, qualname)
    if what is None or under_type_checking(ctx):
        return
    shown = _one_line(ctx.source(node.func), 40)
    reason = fallback(ctx)
    advice = ("write the operator in NKI, Neuron's kernel language for custom operators, or in PyTorch ops; a "
              "CPU-only `CppExtension` still builds")
    if reason:
        message = (f"`{shown}(...)` {what} ({reason}): NVIDIA GPU kernels, which NeuronCores cannot run, so the "
                   f"fallback runs; make sure it is the PyTorch path ({advice})")
    else:
        message = f"`{shown}(...)` {what}: NVIDIA GPU kernels, which NeuronCores cannot run; {advice}"
    ctx.report("PC503", node, message, _severity(reason))


# ---- PC504: Hugging Face kernel hub -------------------------------------------------------------------------

_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def _hub_repo(ctx: Context, node: cst.Call) -> str | None:
    """The repository of `get_kernel("org/name")` from the `kernels` package (or a wrapper module named
    `hub_kernels`, as transformers has), or None."""
    if call_name(node) != "get_kernel":
        return None
    qualname = ctx.qualname(node.func)
    if qualname is None:
        # A bare name bound by a relative import (`from ...integrations.hub_kernels import get_kernel`),
        # not a function of this file.
        if not isinstance(node.func, cst.Name) or "get_kernel" in ctx.names.module_scope.bound:
            return None
    elif qualname != "kernels.get_kernel" and not qualname.endswith("hub_kernels.get_kernel"):
        return None
    arg = keyword(node, "repo_id") or positional(node, 0)
    if arg is None:
        return None
    bound = ctx.constant(arg.value)  # `get_kernel(KERNEL_REPO)` with `KERNEL_REPO = "org/name"`
    repo = string_value(bound[1] if bound else arg.value)
    return repo if repo is not None and _REPO_ID.match(repo) else None


@check(cst.Call, codes=("PC504",), tokens=HUB_TOKENS)
def check_hub_kernel(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    repo = _hub_repo(ctx, node)
    if repo is None or under_type_checking(ctx):
        return
    reason = fallback(ctx)
    why = ("the `kernels` library loads a repository's `neuron` build only under TorchNeuron (where `torch.neuron` "
           "exists) and only if the repository ships one, and raises \"Cannot find a build variant\" otherwise")
    if reason:
        message = (f"`get_kernel(\"{repo}\")` ({reason}) fetches a prebuilt hub kernel: {why}; make sure the "
                   "fallback is the pure-PyTorch path")
    else:
        message = (f"`get_kernel(\"{repo}\")` fetches a prebuilt hub kernel: {why}; check that the repository has "
                   "a `neuron` build, or keep a pure-PyTorch path")
    ctx.report("PC504", node, message, _severity(reason))


# ---- rules ------------------------------------------------------------------------------------------------


@rule
class CudaOnlyLibrary(Rule):
    """## What it does
    Finds imports of libraries that only run on NVIDIA (or other GPU) hardware: Apex, FlashAttention, xFormers,
    bitsandbytes, Triton, DeepSpeed's fused optimizers and CUDA ops, Transformer Engine, Liger Kernel,
    mamba-ssm, causal-conv1d, CuPy, pynvml and NATTEN, in every spelling (`import x.y as z`,
    `from x.y import a, b`, `importlib.import_module("x")`). One finding per library per import statement.

    An import with a fallback is info, not an error: inside `try/except ImportError`, under an availability
    check (`if is_flash_attn_2_available():`, `if torch.cuda.is_available():`), in a function that checks
    availability before importing, or decorated `@requires_backends`. On Neuron the fallback runs, so the
    finding asks you to make sure it is the pure-PyTorch path. Imports under `if TYPE_CHECKING:`, relative
    imports, look-alike names (`apex_utils`, `tritonclient`) and plain `import deepspeed` stay quiet.

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
    )


@rule
class TritonKernel(Rule):
    """## What it does
    Finds Triton kernels: functions decorated `@triton.jit`, `@triton.autotune(...)` or
    `@triton.heuristics(...)`, through any import alias. One finding per kernel, at its first Triton
    decorator. A kernel defined where its file has a fallback (under `if is_triton_available():`, inside
    `try/except ImportError`) is info.

    ## Example
    ```python
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        ...
    ```

    ## Use instead
    ```python
    out = x + y  # the PyTorch op the kernel fused; the Neuron compiler optimizes it
    ```
    or an NKI kernel (`@nki.jit`) for the hot spots the compiler does not handle well.

    ## Fix safety
    No automatic fix: a kernel has to be rewritten by hand.
    """

    code = "PC502"
    INVALID = (
        "import triton\n@triton.jit\ndef k(x_ptr, n):\n    pass",
        "import triton as tr\n@tr.autotune(configs=[], key=['n'])\n@tr.jit\ndef k(x_ptr, n):\n    pass",
        "from triton import jit\n@jit\ndef k(x_ptr, n):\n    pass",
    )
    VALID = (
        "import torch\n@torch.jit.script\ndef f(x):\n    return x",
        "from numba import jit\n@jit\ndef f(x):\n    return x",
        "def triton_jit_fallback(x):\n    return x",
    )


@rule
class CudaExtension(Rule):
    """## What it does
    Finds CUDA extensions built with `torch.utils.cpp_extension`: `CUDAExtension(...)`, `load(...)` whose
    `sources` name a `.cu`/`.cuh` file or that passes `with_cuda=True` / `extra_cuda_cflags`, and
    `load_inline(..., cuda_sources=...)`. A CPU-only `CppExtension` or `load` of `.cpp` files stays quiet.

    ## Example
    ```python
    from torch.utils.cpp_extension import load
    ext = load("fused_op", sources=["fused_op.cpp", "fused_op_kernel.cu"])
    ```

    ## Use instead
    Write the operator in PyTorch ops, or as an NKI kernel (Neuron's language for custom operators).

    ## Fix safety
    No automatic fix.
    """

    code = "PC503"
    INVALID = (
        "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('op', ['op.cpp', 'op_kernel.cu'])",
        "from torch.utils.cpp_extension import load\nop = load(name='op', sources=['op.cpp', 'op.cu'])",
        "import torch.utils.cpp_extension as ce\nop = ce.load_inline('op', cpp_sources=[], cuda_sources=[SRC])",
    )
    VALID = (
        "from torch.utils.cpp_extension import CppExtension\next = CppExtension('op', ['op.cpp'])",
        "from torch.utils.cpp_extension import load\nop = load(name='op', sources=['op.cpp'])",
        "from torch.utils.cpp_extension import load_inline\nop = load_inline('op', cpp_sources=[SRC])",
    )


@rule
class KernelsHubKernel(Rule):
    """## What it does
    Finds `get_kernel("org/name")` from the Hugging Face `kernels` package (or transformers' `hub_kernels`
    wrapper): a prebuilt kernel downloaded for the host's backend. It loads on Neuron only if the repository
    ships a `neuron` build. Inside `try/except` or under an availability check it is info.

    ## Example
    ```python
    from kernels import get_kernel
    activation = get_kernel("kernels-community/activation")
    ```

    ## Use instead
    Check that the kernel repository has a `neuron` build, or keep the pure-PyTorch path:
    ```python
    y = torch.nn.functional.gelu(x, approximate="tanh")
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC504"
    INVALID = (
        "from kernels import get_kernel\nact = get_kernel('kernels-community/activation')",
        "import kernels\nk = kernels.get_kernel('kernels-community/rwkv', version=1)",
    )
    VALID = (
        "from kernels import get_kernel\nk = get_kernel(repo_name)",
        "k = registry.get_kernel('org/conv')",
        "def get_kernel(name):\n    return name\nk = get_kernel('org/conv')",
    )
