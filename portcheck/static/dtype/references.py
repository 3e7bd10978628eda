"""Dtypes NeuronCores lack or narrow, where code makes data of them: complex, float64, the FP8 / FP4 variants
Neuron cannot take, int64 (PC302, PC303, PC312, PC315)."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import load_compiler, load_dtypes
from portcheck.rules import Pass, Rule, rule
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.dtype.hosted import (
    AT_IMPORT,
    ON_HOST,
    import_constant,
    moved_to_host,
    stays_on_host,
    wide_already,
)
from portcheck.static.dtype.kept import outlives
from portcheck.static.scope import cpu_device, host_code, host_value, under_test
from portcheck.static.syntax import call_name, keyword, positional
from portcheck.static.values import dtype_of

# Which dtypes each rule reports, with their error codes, is rules/dtypes.toml's to say; these are the substrings
# a file must hold for any of them (or for the calls below) to appear.
DTYPE_TOKENS = ("float64", "double", "Double", "complex", "cfloat", "cdouble", "chalf", "polar", "float8",
                "float4", "long", "int64", "from_numpy", "tensor")
# What torch.view_as_complex / polar / complex make from float32 data, the usual case: its entry words the finding.
_MADE_COMPLEX = "torch.complex64"


@rule
class ComplexDtype(Rule):
    """## What it does
    Finds code that makes complex tensors: `torch.view_as_complex`, `torch.polar`, `torch.complex`,
    `dtype=` / `.to()` with `torch.complex64`, `complex128`, `cfloat`, `cdouble` or `chalf`, and arithmetic of an
    imaginary literal with a value that may be a tensor (`mag * (x + 1j * y)`, `torch.exp(1j * phase)`). Rotary position
    embeddings written with complex numbers (`freqs_cis`) are the usual source. An error on the xla stack
    (Neuron <= 2.31 has no complex types), a warning on native (complex64 runs for a subset of ops).

    ## Example
    ```python
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    ```

    ## Use instead
    ```python
    q_embed = (q * cos) + (rotate_half(q) * sin)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC302"
    passes = (Pass.STATIC, Pass.TRACE)
    INVALID = (
        "import torch\nf = torch.polar(torch.ones_like(a), a)",
        "import torch\nz = torch.view_as_complex(x)",
        "import torch\nz = torch.zeros(4, dtype=torch.complex64)",
        "import torch as th\nz = x.to(th.cfloat)",
        "import torch\ndef head(mag, x, y):\n    return torch.istft(mag * (x + 1j * y), 16)",
        "import torch\ndef rotate(phase):\n    return torch.exp(-1j * phase)",
        "import torch\ndef twiddle(x, n):\n    return torch.exp(-1j * torch.pi * torch.arange(n, device=x.device) / n)",
    )
    VALID = ("import torch\nok = x.dtype == torch.complex64", "import torch\nr = torch.view_as_real(z)",
             "import math\nw = 2j * math.pi / 8", "import numpy as np\nk = np.exp(-2j * np.pi * np.arange(8))",
             "c = 2 + 3j", "import numpy as np\ndef z(beta):\n    return np.exp(1j * beta)",
             "import math\nTAU = math.tau\nw = -1j * TAU")


@rule
class Float64(Rule):
    """## What it does
    Finds code that makes float64 data: `.double()`, `.to(torch.float64)`, `.type(torch.float64)`,
    `dtype=torch.float64` / `torch.double`, `torch.DoubleTensor(...)`, `torch.set_default_dtype(torch.float64)`.
    Comparisons and mentions of the dtype stay quiet.

    ## Example
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).double() / dim))
    ```

    ## Use instead
    ```python
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    ```

    ## Fix safety
    Unsafe fix (`--unsafe-fixes`): `.double()` becomes `.float()` and `torch.float64` / `torch.double` become
    `torch.float32`; narrowing to float32 changes numerics. `torch.DoubleTensor(...)` and a dtype imported by
    name have no fix.
    """

    code = "PC303"
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`{shown}` makes float64 data, and no NeuronCore has an FP64 type: Neuron's own wrappers narrow it "
               "to float32 (NxD Inference) or require a cast before compiling; use float32 (or bfloat16)")
    fix_title = "Use float32"
    FIXABLE = True
    INVALID = (
        "x = x.double()",
        "import torch\nx = torch.zeros(3, dtype=torch.float64)",
        "import torch\nx = x.to(torch.double)",
        "import torch\ntorch.set_default_dtype(torch.float64)",
        "from torch import float64\nx = x.to(dtype=float64)",
    )
    VALID = (
        "import torch\nif x.dtype == torch.float64:\n    pass",
        "import numpy as np\na = np.zeros(3, dtype=np.float64)",
        "import torch\nx = x.to(torch.float32)",
    )


@rule
class UnsupportedFp8(Rule):
    """## What it does
    Finds the FP8/FP4 dtypes Neuron cannot take: `torch.float8_e4m3fnuz`, `torch.float8_e5m2fnuz` and
    `torch.float4_e2m1fn_x2`, and on Trn1, Trn2 and Inf2 `torch.float8_e4m3fn` (native from Trn3), in `dtype=`
    arguments and `.to()` casts.

    ## Example
    ```python
    w8 = w.to(torch.float8_e4m3fnuz)
    ```

    ## Use instead
    ```python
    w8 = w.to(torch.float8_e4m3fn)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC312"
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`{dtype}` is not a Neuron data type ({error}); NeuronCores take FP8 as e4m3, e5m2 or e3m4 "
               "(`torch.float8_e5m2`; `torch.float8_e4m3fn` natively from Trn3), or use bfloat16")
    INVALID = (
        "import torch\nw = w.to(torch.float8_e4m3fnuz)",
        "import torch\nz = torch.empty(4, dtype=torch.float8_e5m2fnuz)",
        "import torch\nw = w.to(torch.float8_e4m3fn)",  # on Trn1/Trn2 (NCC_EVRF051); native on Trn3
    )
    VALID = ("import torch\nw = w.to(torch.float8_e5m2)",)



@rule
class Int64Tensor(Rule):
    """## What it does
    Finds code that makes int64 tensors: `dtype=torch.long` / `torch.int64`, `.long()`, `.to(torch.int64)`.
    Off by default and reported as info: int64 ids and indices are everywhere and usually harmless. Enable it
    (`extend-select = ["PC315"]`) to audit values that may exceed 2^31 (hashes, large counters, cumulative
    sums). The message says what the chosen target does: NeuronCore-v2 (Inf2, Trn1) always narrows to int32;
    Trn2 narrows unless compiled with `--native-int64=enabled`.

    ## Example
    ```python
    hashes = (ids * 1_000_003).long()
    ```

    ## Use instead
    ```python
    hashes = (ids * 1_000_003) % (2**31 - 1)  # keep values in int32 range
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC315"
    INVALID = (
        "x = ids.long()",
        "import torch\np = torch.arange(8, dtype=torch.int64)",
        "import torch\nx = y.to(torch.long)",
    )
    VALID = ("import torch\np = torch.arange(8, dtype=torch.int32)", "import torch\nok = x.dtype == torch.long")


def _complex_severity(ctx: Context) -> Severity:
    # The native stack ships with Neuron 2.32, whose compiler runs complex64 for ~30 HLO ops; the xla stack
    # is pinned to Neuron <= 2.31 (KNOWLEDGE.md §0.1, §1.2).
    return Severity.WARNING if ctx.stack == "native" else Severity.ERROR


def _complex_message(ctx: Context, shown: str, error: str) -> str:
    if ctx.stack == "native":
        advice = ("Neuron 2.32's compiler runs complex64 only for about 30 element-wise and matmul HLO ops (not "
                  "FFT); write rotary embeddings with real cos/sin tensors (`x * cos + rotate_half(x) * sin`)")
    else:
        advice = (f"the xla stack's compiler (Neuron <= 2.31) has no complex types at all ({error}); write "
                  "rotary embeddings with real cos/sin tensors (`x * cos + rotate_half(x) * sin`)")
    return f"`{shown}` makes complex tensors, which NeuronCores do not hold natively; {advice}"


def report_complex(ctx: Context, node: cst.CSTNode, shown: str, error: str | None = None) -> None:
    """PC302 at `node`, which makes complex data (`shown`); `error`: the dtype's error code (complex64's by default).
    Its severity follows the stack; set-up code that keeps no complex value (a real view, a real part) makes it info
    there (Finding.kept)."""
    error = error if error is not None else load_dtypes().named(_MADE_COMPLEX).error_code
    ctx.report(ComplexDtype, node, _complex_message(ctx, shown, error), severity=_complex_severity(ctx),
               kept=outlives(ctx, node, complex_=True))  # a helper's returned complex table stays so


def _float32_fix(replace: Replace) -> FixPlan:
    # Unsafe: narrowing to float32 changes numerics.
    return FixPlan(Float64.fix_title, False, (replace,))


def _int64_message(ctx: Context, shown: str) -> str:
    if ctx.chip in load_compiler().flags["--native-int64"].targets:  # NeuronCore-v3 and later
        return (f"`{shown}` makes int64 data: on {ctx.chip.capitalize()} the compiler narrows int64 to int32 unless "
                "`--native-int64=enabled` (about 20-30% slower; the default changes after Neuron 2.32); "
                "values beyond 2^31 need that flag, ids and indices are fine as int32")
    return (f"`{shown}` makes int64 data, which NeuronCore-v2 ({ctx.chip}) always converts to int32: values "
            "beyond 2^31 wrap; ids and indices are fine, large counters and hashes are not")


@check(cst.Call, rules=(ComplexDtype, Float64, UnsupportedFp8, Int64Tensor), tokens=DTYPE_TOKENS)
def check_dtype_call(node: cst.Call, ctx: Context) -> None:
    """Calls that create data of a dtype: `.double()`, `.to(torch.float64)`, `dtype=torch.complex64`, ..."""
    name = call_name(node)
    qualname = ctx.qualname(node.func)
    if name not in _DTYPE_METHODS and keyword(node, "dtype") is None and qualname not in _DTYPE_FUNCTIONS:
        return  # nothing here makes data of a dtype (most calls): no need to ask what the value is
    method = node.func if isinstance(node.func, cst.Attribute) and qualname is None else None  # `x.double()`
    if method is not None and (host_value(ctx, method.value, factories=False) or _forwards_override(method)):
        return  # `x.cpu().double()`, a numpy array's `.astype`: host data, never on the device
    if host_code(ctx) is not None:
        return  # the data pipeline (datasets, transforms, metrics...) runs on the host
    if (device := keyword(node, "device")) is not None and cpu_device(ctx, device.value):
        return  # `make_kernel(..., device=torch.device("cpu"), dtype=torch.float64)`: made on the CPU on purpose
    host = ON_HOST if stays_on_host(ctx, node, method) else AT_IMPORT if import_constant(ctx, node) else (
        moved_to_host(ctx, node))
    if method is not None and name == "double" and not node.args:
        if wide_already(ctx):
            return  # under `if x.dtype == torch.float64:`: the data is float64 already, the cast changes nothing
        if host:
            ctx.report(Float64, node, Float64.format(shown=".double()") + host, Severity.INFO)
        else:
            ctx.report(Float64, node, fix=_float32_fix(Replace(method.attr, "float")), shown=".double()",
                       kept=outlives(ctx, node, returned=False))
        return
    if method is not None and name == "long" and not node.args:
        ctx.report(Int64Tensor, node, _int64_message(ctx, ".long()"), severity=Severity.INFO)
        return
    if qualname in ("torch.view_as_complex", "torch.polar", "torch.complex"):
        if under_test(ctx, "is_complex", node) or _complex_input(ctx):
            return  # the input is complex already: real inputs never take this branch
        report_complex(ctx, node, qualname)
        return
    if qualname in ("torch.DoubleTensor", "torch.cuda.DoubleTensor"):
        ctx.report(Float64, node, shown=qualname, kept=outlives(ctx, node, returned=False))
        return
    if method is not None and name in ("to", "type"):
        arg = keyword(node, "dtype") or positional(node, 0)
    elif qualname in ("torch.set_default_dtype",):
        arg = positional(node, 0)
    else:
        arg = keyword(node, "dtype")
    if arg is not None:
        if qualname is not None and host_value(ctx, node, factories=False):
            return  # made on the CPU on purpose: `device="cpu"`, or in a function that works on the host
        if qualname is not None and _schedule_cast_to_float32(ctx, node):
            return
        _judge_dtype(ctx, arg.value, node, host)


# What makes data of a dtype without `dtype=`: these methods, and these functions.
_DTYPE_METHODS = frozenset({"double", "long", "to", "type"})
_DTYPE_FUNCTIONS = frozenset({"torch.view_as_complex", "torch.polar", "torch.complex", "torch.DoubleTensor",
                              "torch.cuda.DoubleTensor", "torch.set_default_dtype"})


def _forwards_override(method: cst.Attribute) -> bool:
    """`super().double()` in a class's own `double()`: the override of `nn.Module.double`, not a use of it."""
    return isinstance(method.value, cst.Call) and call_name(method.value) == "super"


def _complex_input(ctx: Context) -> bool:
    """Under `if z.dtype == torch.complex32:` (any complex dtype): the data is complex already."""
    for statement in ctx.statements[:-1]:
        if isinstance(statement, cst.If) and isinstance(statement.test, cst.Comparison):
            test = statement.test
            sides = (test.left, *(c.comparator for c in test.comparisons))
            if any((ctx.qualname(side) or "").startswith(("torch.complex", "torch.chalf", "torch.cfloat",
                                                          "torch.cdouble")) for side in sides):
                return True
    return False


_CASTING_REGISTER = re.compile(r"register_buffer\(\s*\w+\s*,\s*\w+\.(to\(torch\.float32\)|float\(\))\s*\)")


def _schedule_cast_to_float32(ctx: Context, node: cst.Call) -> bool:
    """A float64 factory without `device=` in a module-level helper (a noise schedule) of a file whose modules
    register every buffer through a float32 cast (`register_buffer(name, val.to(torch.float32))`): the float64
    values live on the host in `__init__` and reach the device as float32."""
    if keyword(node, "device") is not None or len(ctx.functions) != 1 or any(
            isinstance(s, cst.ClassDef) for s in ctx.statements):
        return False
    return ctx.memo("casting-register", ctx.module, lambda: bool(_CASTING_REGISTER.search(ctx.text)))


# Python values float32 cannot hold: a clock reading (seconds since 1970 need more than float32's 24 bits).
_CLOCKS = frozenset({"time.time", "time.time_ns", "time.monotonic", "time.perf_counter", "time.process_time"})


def _wide_host_scalar(ctx: Context, where: cst.CSTNode) -> bool:
    """`torch.tensor(time.time(), dtype=torch.float64)`: the data is a clock reading or a number past 2**24, which
    float32 would round; narrowing it is no fix."""
    if not isinstance(where, cst.Call) or (first := positional(where, 0)) is None:
        return False
    data = first.value
    if isinstance(data, cst.Name) and (bound := ctx.constant(data)) is not None:
        data = bound[1]
    if isinstance(data, cst.Call):
        name = ctx.qualname(data.func) or ""
        return name in _CLOCKS or name.endswith(".timestamp") or call_name(data) == "timestamp"
    if isinstance(data, (cst.Integer, cst.Float)):
        try:
            return abs(float(data.value.replace("_", ""))) >= 2**24
        except ValueError:
            return False
    return False


def _judge_dtype(ctx: Context, value: cst.BaseExpression, where: cst.CSTNode, host: str = "") -> None:
    """Report the dtype `value` names at `where`; `host`: why that data is the host's (info), or ""."""
    dtype = dtype_of(ctx, value)
    entry = load_dtypes().get(dtype) if dtype is not None else None
    if dtype is None or entry is None or not entry.on(ctx.chip):
        return
    shown = " ".join(ctx.source(where).split())
    if len(shown) > 60:
        shown = dtype
    if host and entry.rule == Float64.code:
        ctx.report(Float64, where, Float64.format(shown=shown) + host, Severity.INFO)
    elif entry.rule == Float64.code:
        fix = None
        if isinstance(value, cst.Attribute) and not _wide_host_scalar(ctx, where):
            fix = _float32_fix(Replace(value.attr, "float32"))  # `torch.float64`, `th.double`: the module's float32
        ctx.report(Float64, where, fix=fix, shown=shown, kept=outlives(ctx, where, returned=False))
    elif entry.rule == ComplexDtype.code:
        if under_test(ctx, "is_complex", where) or _complex_input(ctx):
            return  # the data is complex already: this converts between complex types
        report_complex(ctx, where, shown, entry.error_code)
    elif entry.rule == UnsupportedFp8.code and entry.chips:  # refused on some chips only: say which way out
        ctx.report(UnsupportedFp8, where, f"`{dtype}` ({entry.kind}) does not compile for {ctx.chip} "
                   f"({entry.error_code}): Trn3 and later take it natively; on older chips neuronx-cc converts it "
                   "to F8E4M3 (largest value 240, not 448) only with `--experimental-unsafe-fp8e4m3fn-as-fp8e4m3`, "
                   "never for MX quantization; or use `torch.float8_e5m2` or bfloat16")
    elif entry.rule == UnsupportedFp8.code:
        ctx.report(UnsupportedFp8, where, dtype=dtype, error=entry.error_code)
    elif entry.rule == Int64Tensor.code:
        ctx.report(Int64Tensor, where, _int64_message(ctx, shown), severity=Severity.INFO)
