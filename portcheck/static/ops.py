"""unsupported-op and dtype (PC3xx): ops the Neuron compiler rejects or restricts, and dtypes NeuronCores lack.

Facts come from neuron_ops.tsv and the data-types page (KNOWLEDGE.md §1.2): no FP64 on any NeuronCore,
complex only partly (complex64 on ~30 HLO ops from compiler 2.32, which the xla stack's SDK <= 2.31 lacks),
no FFT, TopK only on floats with k <= 16384, no integer datapath for matmul and scatter-with-compute, int64
narrowed to int32 on NeuronCore-v2.
"""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.rule import Context, FixPlan, Replace, Rule, call_name, check, keyword, positional, rule
from portcheck.static.values import INT64_DTYPES, dtype_of, integer_dtype

FFT_TOKENS = ("fft", "stft", "Spectrogram", "spectrogram")
DTYPE_TOKENS = ("float64", "double", "Double", "complex", "cfloat", "cdouble", "chalf", "polar", "float8",
                "float4", "long", "int64", "from_numpy", "tensor")

_FLOAT64 = frozenset({"torch.float64", "torch.double"})
_COMPLEX = frozenset({"torch.complex64", "torch.complex128", "torch.complex32", "torch.cfloat", "torch.cdouble",
                      "torch.chalf"})
_FP8_UNSUPPORTED = {
    "torch.float8_e4m3fnuz": "NCC_EVRF005", "torch.float8_e5m2fnuz": "NCC_EVRF005",
    "torch.float4_e2m1fn_x2": "NCC_ESPP004",
}
_SPECTROGRAMS = frozenset({"torchaudio.transforms.Spectrogram", "torchaudio.transforms.MelSpectrogram",
                           "torchaudio.functional.spectrogram", "torchaudio.transforms.InverseSpectrogram"})


# ---- FFT -------------------------------------------------------------------------------------------------


@check(cst.Call, codes=("PC301",), tokens=FFT_TOKENS)
def check_fft(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    qualname = ctx.qualname(node.func)
    if qualname is not None:
        if qualname.startswith("torch.fft.") or qualname in ("torch.stft", "torch.istft") or qualname in _SPECTROGRAMS:
            shown = qualname
        else:
            return
    elif isinstance(node.func, cst.Attribute) and call_name(node) in ("stft", "istft"):
        shown = f".{call_name(node)}()"
    else:
        return
    ctx.report("PC301", node, f"`{shown}` computes an FFT, which neuronx-cc cannot compile (FFT produces complex "
               "tensors, NCC_EVRF004; complex64 support added in compiler 2.32 does not cover FFT); run it on the "
               "CPU before or after the compiled model, or emulate it with real and imaginary parts")


# ---- dtype references -------------------------------------------------------------------------------------


def _complex_severity(ctx: Context) -> Severity:
    # The native stack ships with Neuron 2.32, whose compiler runs complex64 for ~30 HLO ops; the xla stack
    # is pinned to Neuron <= 2.31 (KNOWLEDGE.md §0.1, §1.2).
    return Severity.WARNING if ctx.stack == "native" else Severity.ERROR


def _complex_message(ctx: Context, shown: str) -> str:
    if ctx.stack == "native":
        advice = ("Neuron 2.32's compiler runs complex64 only for about 30 element-wise and matmul HLO ops (not "
                  "FFT); write rotary embeddings with real cos/sin tensors (`x * cos + rotate_half(x) * sin`)")
    else:
        advice = ("the xla stack's compiler (Neuron <= 2.31) has no complex types at all (NCC_EVRF004); write "
                  "rotary embeddings with real cos/sin tensors (`x * cos + rotate_half(x) * sin`)")
    return f"`{shown}` makes complex tensors, which NeuronCores do not hold natively; {advice}"


def _float64_message(shown: str) -> str:
    return (f"`{shown}` makes float64 data, and no NeuronCore has an FP64 type: Neuron's own wrappers narrow it to "
            "float32 (NxD Inference) or require a cast before compiling; use float32 (or bfloat16)")


def _float32_fix(replace: Replace) -> FixPlan:
    # Unsafe: narrowing to float32 changes numerics.
    return FixPlan("Use float32", False, (replace,))


def _int64_message(ctx: Context, shown: str) -> str:
    if ctx.chip == "trn2":
        return (f"`{shown}` makes int64 data: on Trn2 the compiler narrows int64 to int32 unless "
                "`--native-int64=enabled` (about 20-30% slower; the default changes after Neuron 2.32); "
                "values beyond 2^31 need that flag, ids and indices are fine as int32")
    return (f"`{shown}` makes int64 data, which NeuronCore-v2 ({ctx.chip}) always converts to int32: values "
            "beyond 2^31 wrap; ids and indices are fine, large counters and hashes are not")


@check(cst.Call, codes=("PC302", "PC303", "PC312", "PC315"), tokens=DTYPE_TOKENS)
def check_dtype_call(node: cst.CSTNode, ctx: Context) -> None:
    """Calls that create data of a dtype: `.double()`, `.to(torch.float64)`, `dtype=torch.complex64`, ..."""
    assert isinstance(node, cst.Call)
    name = call_name(node)
    qualname = ctx.qualname(node.func)
    method = isinstance(node.func, cst.Attribute) and qualname is None
    if method and name == "double" and not node.args:
        assert isinstance(node.func, cst.Attribute)
        ctx.report("PC303", node, _float64_message(".double()"), fix=_float32_fix(Replace(node.func.attr, "float")))
        return
    if method and name == "long" and not node.args:
        ctx.report("PC315", node, _int64_message(ctx, ".long()"), Severity.INFO)
        return
    if qualname in ("torch.view_as_complex", "torch.polar", "torch.complex"):
        ctx.report("PC302", node, _complex_message(ctx, qualname), _complex_severity(ctx))
        return
    if qualname in ("torch.DoubleTensor", "torch.cuda.DoubleTensor"):
        ctx.report("PC303", node, _float64_message(qualname))
        return
    if method and name in ("to", "type"):
        arg = keyword(node, "dtype") or positional(node, 0)
    elif qualname in ("torch.set_default_dtype",):
        arg = positional(node, 0)
    else:
        arg = keyword(node, "dtype")
    if arg is not None:
        _judge_dtype(ctx, arg.value, node)


def _judge_dtype(ctx: Context, value: cst.BaseExpression, where: cst.CSTNode) -> None:
    dtype = dtype_of(ctx, value)
    if dtype is None:
        return
    shown = " ".join(ctx.source(where).split())
    if len(shown) > 60:
        shown = dtype
    if dtype in _FLOAT64:
        fix = None
        if isinstance(value, cst.Attribute):  # `torch.float64`, `th.double`: the same module's float32
            fix = _float32_fix(Replace(value.attr, "float32"))
        ctx.report("PC303", where, _float64_message(shown), fix=fix)
    elif dtype in _COMPLEX:
        ctx.report("PC302", where, _complex_message(ctx, shown), _complex_severity(ctx))
    elif dtype in _FP8_UNSUPPORTED:
        ctx.report("PC312", where, f"`{dtype}` is not a Neuron data type ({_FP8_UNSUPPORTED[dtype]}); NeuronCores "
                   "take FP8 as e4m3, e5m2 or e3m4 (`torch.float8_e4m3fn`, `torch.float8_e5m2`), or use bfloat16")
    elif dtype in INT64_DTYPES:
        ctx.report("PC315", where, _int64_message(ctx, shown), Severity.INFO)


# ---- numpy float64 entering torch ---------------------------------------------------------------------------

_NUMPY_FLOAT_FACTORIES = frozenset(f"numpy.{n}" for n in (
    "zeros", "ones", "empty", "linspace", "eye", "identity", "logspace", "geomspace", "random.rand",
    "random.randn", "random.random", "random.uniform", "random.normal", "random.standard_normal",
    "random.random_sample", "random.sample", "random.beta", "random.exponential",
))
_CASTS = frozenset({"float", "half", "bfloat16", "to", "type", "int", "long", "bool"})


def _numpy_float64(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> str | None:
    """How `node` is known to be a float64 numpy array: `np.random.rand(...)`, `a.astype(np.float64)`, or a local
    name bound once to such."""
    if isinstance(node, cst.Name) and depth < 2:
        bound = ctx.constant(node)
        return _numpy_float64(ctx, bound[1], depth + 1) if bound else None
    if not isinstance(node, cst.Call):
        return None
    qualname = ctx.qualname(node.func)
    if qualname in _NUMPY_FLOAT_FACTORIES or (qualname or "").startswith("numpy.random.default_rng"):
        dtype = keyword(node, "dtype")
        if dtype is None or ctx.qualname(dtype.value) in ("numpy.float64", "numpy.double", "float"):
            return " ".join(ctx.source(node).split())
        return None
    if isinstance(node.func, cst.Attribute) and call_name(node) == "astype" and node.args:
        target = node.args[0].value
        if ctx.qualname(target) in ("numpy.float64", "numpy.double") or (
                isinstance(target, cst.Name) and target.value == "float" and "float" not in ctx.names.aliases):
            return " ".join(ctx.source(node).split())
    return None


@check(cst.Call, codes=("PC304",), tokens=("from_numpy", "tensor"))
def check_numpy_input(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    if isinstance(node.func, cst.Attribute) and call_name(node) in _CASTS and isinstance(node.func.value, cst.Call):
        ctx.skip.add(id(node.func.value))  # `torch.from_numpy(a).float()`: cast right away
        return
    if id(node) in ctx.skip:
        return
    qualname = ctx.qualname(node.func)
    if qualname not in ("torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.asarray"):
        return
    if keyword(node, "dtype") is not None or not node.args:
        return
    origin = _numpy_float64(ctx, node.args[0].value)
    if origin:
        ctx.report("PC304", node, f"`{qualname}` of a float64 numpy array (`{origin}`) makes a float64 tensor, and "
                   "no NeuronCore has an FP64 type; create the array as float32 or add `.float()` / "
                   "`dtype=torch.float32`")


# ---- sort / topk -------------------------------------------------------------------------------------------

TOPK_LIMIT = 16384  # NCC_EVRF014, aws-neuron/aws-neuron-sdk#1339


def _op_input(ctx: Context, node: cst.Call, names: tuple[str, ...]) -> tuple[str, cst.BaseExpression, bool] | None:
    """For `torch.topk(x, k)` or `x.topk(k)`: (op name, x, is_method)."""
    qualname = ctx.qualname(node.func)
    if qualname is not None:
        for name in names:
            if qualname == f"torch.{name}" and node.args:
                return name, node.args[0].value, False
        return None
    if isinstance(node.func, cst.Attribute) and call_name(node) in names:
        return call_name(node), node.func.value, True  # type: ignore[return-value]
    return None


def _int_value(ctx: Context, node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Name):
        bound = ctx.constant(node)
        node = bound[1] if bound else node
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    return None


@check(cst.Call, codes=("PC305", "PC306"), tokens=("topk", "sort"))
def check_sort(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    found = _op_input(ctx, node, ("topk", "sort", "argsort", "msort"))
    if found is None:
        return
    name, data, method = found
    dtype = integer_dtype(ctx, data)
    if dtype is not None:
        if name == "topk":
            ctx.report("PC305", node, f"`topk` on an integer tensor ({dtype}) is rejected by neuronx-cc "
                       "(NCC_EVRF013); cast to float first (`x.float().topk(k)`)")
        else:
            ctx.report("PC305", node, f"`{name}` on an integer tensor ({dtype}) failed to compile on trn1 with "
                       "neuronx-cc 2.13 and was reported working with 2.18 (aws-neuron-sdk#868); cast to float or "
                       "check your compiler version", Severity.WARNING)
    if name != "topk":
        return
    k = keyword(node, "k") or positional(node, 0 if method else 1)
    if k is None:
        return
    value = _int_value(ctx, k.value)
    if value is not None and value > TOPK_LIMIT:
        ctx.report("PC306", node, f"`topk` with k={value}: neuronx-cc's TopK takes k <= {TOPK_LIMIT} (NCC_EVRF014); "
                   "take the top k in two stages or on the CPU")
    elif value is None and _whole_dimension(k.value):
        ctx.report("PC306", node, f"`topk` with k = a whole dimension (`{ctx.source(k.value)}`): neuronx-cc's TopK "
                   f"takes k <= {TOPK_LIMIT} (NCC_EVRF014), which a vocabulary-sized k exceeds; use `sort` or a "
                   "smaller k", Severity.WARNING)


def _whole_dimension(node: cst.BaseExpression) -> bool:
    """`x.size(-1)`, `x.shape[-1]`, `x.numel()`: k as large as the tensor."""
    if isinstance(node, cst.Call) and call_name(node) in ("size", "numel") and isinstance(node.func, cst.Attribute):
        return True
    return (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute)
            and node.value.attr.value == "shape")


# ---- layer and op restrictions -------------------------------------------------------------------------------


def _literal(node: cst.BaseExpression) -> object:
    """An int, bool, str or tuple literal's value, or None."""
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        return node.evaluated_value
    if isinstance(node, (cst.Tuple, cst.List)):
        values = [_literal(e.value) for e in node.elements]
        return None if any(v is None for v in values) else tuple(values)
    return None


def _argument(node: cst.Call, name: str, index: int) -> object:
    arg = keyword(node, name) or positional(node, index)
    return None if arg is None else _literal(arg.value)


def _above_one(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > 1
    return isinstance(value, tuple) and any(isinstance(v, int) and not isinstance(v, bool) and v > 1 for v in value)


# (qualname -> index of `mode`, index of `align_corners` among positional arguments)
_RESIZE = {
    "torch.nn.Upsample": (2, 3), "torch.nn.functional.interpolate": (3, 4), "torch.nn.functional.upsample": (3, 4),
}
_ALWAYS_ALIGNED = frozenset({"torch.nn.UpsamplingBilinear2d", "torch.nn.functional.upsample_bilinear"})
_MAX_POOL = {f"torch.nn.MaxPool{d}d": 3 for d in (1, 2, 3)} | {
    f"torch.nn.functional.max_pool{d}d": 4 for d in (1, 2, 3)} | {
    f"torch.nn.functional.max_pool{d}d_with_indices": 4 for d in (1, 2, 3)}
# ConvTranspose{d}d(in, out, kernel, stride, padding, output_padding, groups, bias, dilation);
# conv_transpose{d}d(input, weight, bias, stride, padding, output_padding, groups, dilation)
_CONV_TRANSPOSE = {f"torch.nn.ConvTranspose{d}d": (3, 8) for d in (1, 2, 3)} | {
    f"torch.nn.functional.conv_transpose{d}d": (3, 7) for d in (1, 2, 3)}
LAYER_TOKENS = ("one_hot", "Upsampl", "interpolate", "upsample", "MaxPool", "max_pool", "ConvTranspose",
                "conv_transpose", "triangular_solve")


@check(cst.Call, codes=("PC307", "PC308", "PC309", "PC310", "PC311"), tokens=LAYER_TOKENS)
def check_layers(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    qualname = ctx.qualname(node.func)
    if qualname is None:
        if isinstance(node.func, cst.Attribute) and call_name(node) == "triangular_solve":
            qualname = "torch.triangular_solve"
        else:
            return
    if qualname == "torch.nn.functional.one_hot":
        ctx.report("PC307", node, "`one_hot` compiled to an unsupported dynamic-slice HLO on torch-neuronx 1.13 "
                   "(aws-neuron-sdk#679); compiler 2.32 turns `one_hot(ids) @ table` into a gather; on older SDKs "
                   "use an embedding lookup or `torch.zeros(...).scatter_(...)`")
    elif qualname in _RESIZE or qualname in _ALWAYS_ALIGNED:
        if qualname in _ALWAYS_ALIGNED:
            mode, aligned = "bilinear", True
        else:
            mode_at, aligned_at = _RESIZE[qualname]
            mode, aligned = _argument(node, "mode", mode_at), _argument(node, "align_corners", aligned_at)
        if mode == "bilinear" and aligned is True:
            severity = Severity.WARNING if ctx.stack == "native" else None
            ctx.report("PC308", node, "bilinear resize with `align_corners=True` lowers to the custom call "
                       "`ResizeBilinear`, which torch-neuronx 2.1 rejected (\"Unsupported CustomCall target\", "
                       "aws-neuron-sdk#889); use `align_corners=False` or a fixed interpolation matrix", severity)
    elif qualname in _MAX_POOL:
        if _above_one(_argument(node, "dilation", _MAX_POOL[qualname])):
            ctx.report("PC309", node, "max pooling with dilation > 1 is a reduce-window with window dilation, which "
                       "neuronx-cc does not support (NCC_EVRF017 / NCC_EVRF018); use dilation=1")
    elif qualname in _CONV_TRANSPOSE:
        stride_at, dilation_at = _CONV_TRANSPOSE[qualname]
        if _above_one(_argument(node, "stride", stride_at)) and _above_one(_argument(node, "dilation", dilation_at)):
            ctx.report("PC310", node, "a strided transposed convolution dilates its input, and with kernel dilation "
                       "as well it needs both dilations at once, which neuronx-cc rejects (NCC_EVRF010); keep "
                       "dilation=1 or upsample and convolve as separate steps (NCC_EVRF011)")
    elif qualname == "torch.triangular_solve":
        ctx.report("PC311", node, "`triangular_solve` has no Neuron lowering (NCC_EUOC002); the docs suggest "
                   "`torch.inverse(A) @ b` (equivalent, slower), or run it on the CPU")


# ---- integer matmul and scatter ------------------------------------------------------------------------------

_MATMULS = ("matmul", "mm", "bmm")
_SCATTERS = {"scatter_add": 2, "scatter_add_": 2, "index_add": 2, "index_add_": 2, "scatter_reduce": 2,
             "scatter_reduce_": 2}
_SOURCE_KEYWORDS = ("src", "source")


@check(cst.BinaryOperation, cst.Call, codes=("PC313", "PC314"), tokens=("@", "matmul", "mm", "scatter", "index_add"))
def check_integer_math(node: cst.CSTNode, ctx: Context) -> None:
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.MatrixMultiply):
            _integer_matmul(ctx, node, (node.left, node.right), "@")
        return
    assert isinstance(node, cst.Call)
    qualname = ctx.qualname(node.func)
    name = call_name(node)
    if qualname is not None:
        if qualname in {f"torch.{m}" for m in _MATMULS}:
            _integer_matmul(ctx, node, tuple(a.value for a in node.args[:2]), qualname)
        elif qualname.startswith("torch.") and qualname[len("torch."):] in _SCATTERS:
            source = keyword(node, "src") or keyword(node, "source") or positional(node, 3)
            operands = [a.value for a in (positional(node, 0), source) if a is not None]
            _integer_scatter(ctx, node, operands, qualname)
        return
    if not isinstance(node.func, cst.Attribute):
        return
    if name in _MATMULS:
        operands = (node.func.value, *(a.value for a in node.args[:1]))
        _integer_matmul(ctx, node, operands, f".{name}()")
    elif name in _SCATTERS:
        source = next((keyword(node, k) for k in _SOURCE_KEYWORDS if keyword(node, k)), None)
        source = source or positional(node, _SCATTERS[name])
        operands = [node.func.value] + ([source.value] if source is not None else [])
        _integer_scatter(ctx, node, operands, f".{name}()")


def _integer_matmul(ctx: Context, node: cst.CSTNode, operands, shown: str) -> None:
    dtype = next((d for d in (integer_dtype(ctx, o) for o in operands) if d), None)
    if dtype:
        ctx.report("PC313", node, f"`{shown}` on {dtype} operands: NeuronCores have no integer matmul datapath, so "
                   "it is computed in float32 (exact only below 2^24) or refused (NCC_EVRF035); cast to float "
                   "explicitly, or keep the values small")


def _integer_scatter(ctx: Context, node: cst.CSTNode, operands, shown: str) -> None:
    dtype = next((d for d in (integer_dtype(ctx, o) for o in operands) if d), None)
    if dtype:
        ctx.report("PC314", node, f"`{shown}` on {dtype} data: scatter-with-compute has no integer datapath on "
                   "Neuron, so it is computed in float32 (exact only below 2^24) or refused (NCC_EVRF016 / "
                   "NCC_EVRF060); use float32 or bfloat16 data")


# ---- rules ------------------------------------------------------------------------------------------------


@rule
class Fft(Rule):
    """## What it does
    Finds `torch.fft.*` calls, `torch.stft` / `torch.istft` and their method forms, and torchaudio's
    spectrogram transforms (which compute an STFT).

    ## Example
    ```python
    spectrum = torch.fft.rfft(frames, dim=-1)
    ```

    ## Use instead
    Compute the spectrum on the CPU in the data pipeline and feed the model real tensors, or express the
    transform as a matmul with precomputed real cos/sin bases.

    ## Fix safety
    No automatic fix.
    """

    code = "PC301"
    INVALID = (
        "import torch\ny = torch.fft.rfft(x)",
        "from torch import fft\ny = fft.fft2(x)",
        "import torch\ns = torch.stft(wave, 400, return_complex=True)",
        "s = wave.stft(400)",
        "import torchaudio\nmel = torchaudio.transforms.MelSpectrogram(16000)",
    )
    VALID = ("import numpy as np\ny = np.fft.rfft(a)", "fft_size = 400  # torch.fft.rfft is avoided")


@rule
class ComplexDtype(Rule):
    """## What it does
    Finds code that makes complex tensors: `torch.view_as_complex`, `torch.polar`, `torch.complex`, and
    `dtype=` / `.to()` with `torch.complex64`, `complex128`, `cfloat`, `cdouble` or `chalf`. Rotary position
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
    INVALID = (
        "import torch\nf = torch.polar(torch.ones_like(a), a)",
        "import torch\nz = torch.view_as_complex(x)",
        "import torch\nz = torch.zeros(4, dtype=torch.complex64)",
        "import torch as th\nz = x.to(th.cfloat)",
    )
    VALID = ("import torch\nok = x.dtype == torch.complex64", "import torch\nr = torch.view_as_real(z)")


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
class NumpyFloat64Input(Rule):
    """## What it does
    Finds float64 numpy arrays turned into tensors: `torch.from_numpy`, `torch.tensor`, `torch.as_tensor` of
    `np.zeros(...)`, `np.random.rand(...)`, `np.linspace(...)`, `a.astype(np.float64)` (numpy's default float
    is float64), directly or through a local name, unless a dtype or a `.float()` cast follows.

    ## Example
    ```python
    noise = torch.from_numpy(np.random.randn(batch, dim))
    ```

    ## Use instead
    ```python
    noise = torch.from_numpy(np.random.randn(batch, dim).astype(np.float32))
    ```

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC304"
    INVALID = (
        "import numpy as np, torch\nt = torch.from_numpy(np.random.randn(3, 4))",
        "import numpy as np\nimport torch\na = np.zeros((2, 2))\nt = torch.tensor(a)",
        "import numpy as np, torch\nt = torch.as_tensor(x.astype(np.float64))",
    )
    VALID = (
        "import numpy as np, torch\nt = torch.from_numpy(np.random.randn(3, 4)).float()",
        "import numpy as np, torch\nt = torch.tensor(np.zeros(3), dtype=torch.float32)",
        "import numpy as np, torch\nt = torch.from_numpy(np.zeros(3, dtype=np.float32))",
        "import torch\nt = torch.from_numpy(array)",
    )


@rule
class IntegerSortInput(Rule):
    """## What it does
    Finds `topk`, `sort`, `argsort` and `msort` on a tensor that is explicitly integer (`ids.long().topk(k)`,
    `torch.sort(torch.arange(n))` with an integer dtype, or a local name bound to one). `topk` is an error
    (NCC_EVRF013); sorting is a warning (fixed in later compilers).

    ## Example
    ```python
    top = counts.long().topk(8)
    ```

    ## Use instead
    ```python
    top = counts.float().topk(8)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC305"
    INVALID = (
        "top = ids.long().topk(4)",
        "import torch\nv, i = torch.topk(x.to(torch.int32), 2)",
        "import torch\nc = torch.zeros(8, dtype=torch.long)\no = torch.argsort(c)",
    )
    VALID = ("top = logits.topk(4)", "top = ids.float().topk(4)", "import torch\nv = torch.sort(scores)")


@rule
class TopkLimit(Rule):
    """## What it does
    Finds `topk` with a literal (or constant) k above 16384, the compiler's documented limit, and, as a warning,
    `topk` whose k is a whole dimension (`x.size(-1)`, `x.shape[-1]`), which on a vocabulary exceeds it.

    ## Example
    ```python
    values, idx = logits.topk(50000)
    ```

    ## Use instead
    ```python
    values, idx = logits.topk(50)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC306"
    INVALID = (
        "v, i = logits.topk(32000)",
        "import torch\nK = 20000\nv, i = torch.topk(x, K)",
        "v, i = logits.topk(logits.size(-1))",
    )
    VALID = ("v, i = logits.topk(50)", "import torch\nv, i = torch.topk(x, k=16384)", "v, i = logits.topk(k)")


@rule
class OneHot(Rule):
    """## What it does
    Finds `torch.nn.functional.one_hot`. Off by default: it failed on older SDKs, and compiler 2.32 rewrites the
    common `one_hot(ids) @ table` into a gather. Enable it when pinned to an older Neuron SDK.

    ## Example
    ```python
    expert_mask = F.one_hot(selected, num_classes=n_experts)
    ```

    ## Use instead
    ```python
    expert_mask = torch.zeros(*selected.shape, n_experts, device=selected.device).scatter_(-1, selected[..., None], 1)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC307"
    INVALID = ("import torch.nn.functional as F\nm = F.one_hot(ids, 8)", "from torch.nn import functional\n"
               "m = functional.one_hot(ids)")
    VALID = ("def one_hot(x):\n    return x\nm = one_hot(ids)",)


@rule
class BilinearAlignCorners(Rule):
    """## What it does
    Finds bilinear resizing with `align_corners=True`: `nn.Upsample(mode="bilinear", align_corners=True)`,
    `F.interpolate(..., mode="bilinear", align_corners=True)`, `nn.UpsamplingBilinear2d` and
    `F.upsample_bilinear` (both always align corners). An error on the xla stack, where it was reported; a
    warning on native.

    ## Example
    ```python
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    ```

    ## Use instead
    ```python
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    ```

    ## Fix safety
    No automatic fix: `align_corners=False` shifts the sampling grid, which changes the output slightly.
    """

    code = "PC308"
    INVALID = (
        "import torch.nn as nn\nup = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)",
        "import torch.nn.functional as F\ny = F.interpolate(x, size=(8, 8), mode='bilinear', align_corners=True)",
        "from torch import nn\nup = nn.UpsamplingBilinear2d(scale_factor=2)",
    )
    VALID = (
        "import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2, mode='bilinear')",
        "import torch.nn as nn\nup = nn.Upsample(scale_factor=2, mode='nearest')",
    )


@rule
class DilatedPooling(Rule):
    """## What it does
    Finds max pooling with a literal dilation above 1: `nn.MaxPool2d(3, dilation=2)`, `F.max_pool1d(x, 3, 1, 0, 2)`.

    ## Example
    ```python
    pool = nn.MaxPool2d(kernel_size=3, stride=1, dilation=2)
    ```

    ## Use instead
    ```python
    pool = nn.MaxPool2d(kernel_size=5, stride=1)  # or dilate the input explicitly
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC309"
    INVALID = (
        "import torch.nn as nn\np = nn.MaxPool2d(3, dilation=2)",
        "import torch.nn.functional as F\ny = F.max_pool1d(x, 3, 1, 0, (2,))",
    )
    VALID = ("import torch.nn as nn\np = nn.MaxPool2d(3, dilation=1)", "import torch.nn as nn\np = nn.MaxPool2d(2)")


@rule
class DilatedTransposedConv(Rule):
    """## What it does
    Finds transposed convolutions with both a stride and a dilation above 1 (literals), e.g.
    `nn.ConvTranspose1d(c, c, 3, stride=2, dilation=2)`: the stride dilates the input and the dilation the kernel.

    ## Example
    ```python
    up = nn.ConvTranspose1d(64, 64, kernel_size=3, stride=2, dilation=2)
    ```

    ## Use instead
    ```python
    up = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv1d(64, 64, 3, dilation=2, padding=2))
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC310"
    INVALID = ("import torch.nn as nn\nc = nn.ConvTranspose1d(8, 8, 3, stride=2, dilation=2)",)
    VALID = (
        "import torch.nn as nn\nc = nn.ConvTranspose1d(8, 8, 3, stride=2)",
        "import torch.nn as nn\nc = nn.Conv1d(8, 8, 3, stride=2, dilation=2)",
    )


@rule
class TriangularSolve(Rule):
    """## What it does
    Finds `torch.triangular_solve` and `A.triangular_solve(b)`.

    ## Example
    ```python
    x, _ = torch.triangular_solve(b, A)
    ```

    ## Use instead
    ```python
    x = torch.inverse(A) @ b
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC311"
    INVALID = ("import torch\nx, _ = torch.triangular_solve(b, A)", "x = b.triangular_solve(A)")
    VALID = ("import torch\nx = torch.inverse(A) @ b",)


@rule
class UnsupportedFp8(Rule):
    """## What it does
    Finds the FP8/FP4 dtypes Neuron cannot take: `torch.float8_e4m3fnuz`, `torch.float8_e5m2fnuz` and
    `torch.float4_e2m1fn_x2`, in `dtype=` arguments and `.to()` casts.

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
    INVALID = (
        "import torch\nw = w.to(torch.float8_e4m3fnuz)",
        "import torch\nz = torch.empty(4, dtype=torch.float8_e5m2fnuz)",
    )
    VALID = ("import torch\nw = w.to(torch.float8_e4m3fn)", "import torch\nw = w.to(torch.float8_e5m2)")


@rule
class IntegerMatmul(Rule):
    """## What it does
    Finds `@`, `torch.matmul`, `mm` and `bmm` where an operand is explicitly integer (`.long()`, `.int()`,
    `.to(torch.int32)`, a factory with an integer dtype, or a local name bound to one).

    ## Example
    ```python
    counts = onehot.long() @ weights.long()
    ```

    ## Use instead
    ```python
    counts = onehot.float() @ weights.float()
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC313"
    INVALID = ("c = a.long() @ b", "import torch\nc = torch.matmul(a.to(torch.int32), b)", "c = a.int().bmm(b)")
    VALID = ("c = a @ b", "c = a.float() @ b.float()", "import torch\nc = torch.matmul(a, b)")


@rule
class IntegerScatterReduce(Rule):
    """## What it does
    Finds `scatter_add`, `index_add` and `scatter_reduce` (and their in-place forms) whose destination or source
    is explicitly integer.

    ## Example
    ```python
    counts = torch.zeros(n, dtype=torch.long).scatter_add_(0, ids, ones)
    ```

    ## Use instead
    ```python
    counts = torch.zeros(n, dtype=torch.float32).scatter_add_(0, ids, ones.float())
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC314"
    INVALID = (
        "import torch\nc = torch.zeros(8, dtype=torch.long).scatter_add_(0, ids, ones)",
        "c = acc.index_add_(0, ids, src.int())",
    )
    VALID = ("import torch\nc = torch.zeros(8).scatter_add_(0, ids, ones)", "c = x.scatter_(0, ids, 1)")


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
