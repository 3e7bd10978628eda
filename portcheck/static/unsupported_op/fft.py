"""FFT: `torch.fft.*`, `stft` / `istft` and torchaudio's spectrograms, which neuronx-cc cannot compile (PC301), found
where they compute: a transform built in `__init__` where the class calls it."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import load_op
from portcheck.rules import Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.scope import host_code
from portcheck.static.syntax import call_name, self_attribute
from portcheck.static.walk import visit

FFT_TOKENS = ("fft", "stft", "Spectrogram", "spectrogram", "MFCC", "LFCC", "fbank", "mfcc")

# torchaudio's transforms and functions that compute an STFT (MFCC and LFCC through their spectrogram, Kaldi's
# fbank / mfcc / spectrogram through `torch.fft.rfft`), as torchaudio's own source shows.
_SPECTROGRAMS = frozenset({"torchaudio.transforms.Spectrogram", "torchaudio.transforms.MelSpectrogram",
                           "torchaudio.functional.spectrogram", "torchaudio.transforms.InverseSpectrogram",
                           "torchaudio.transforms.MFCC", "torchaudio.transforms.LFCC",
                           "torchaudio.compliance.kaldi.fbank", "torchaudio.compliance.kaldi.mfcc",
                           "torchaudio.compliance.kaldi.spectrogram"})


@rule
class Fft(Rule):
    """## What it does
    Finds `torch.fft.*` calls, `torch.stft` / `torch.istft` and their method forms, and torchaudio's
    spectrogram transforms (which compute an STFT). In host-side code (the data pipeline, metrics: see
    `portcheck/static/scope.py`) it is info: there the transform already runs on the CPU, where it belongs.

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
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("`{shown}` computes an FFT, which neuronx-cc cannot compile (FFT produces complex tensors, "
               "{error}; complex64 support added in compiler 2.32 does not cover FFT); run it on the CPU before "
               "or after the compiled model, or emulate it with real and imaginary parts")
    INVALID = (
        "import torch\ny = torch.fft.rfft(x)",
        "from torch import fft\ny = fft.fft2(x)",
        "import torch\ns = torch.stft(wave, 400, return_complex=True)",
        "s = wave.stft(400)",
        "import torchaudio\nmel = torchaudio.transforms.MelSpectrogram(16000)",
        "from torchaudio.transforms import MFCC\nmfcc = MFCC(16000)",
        "from torchaudio.compliance import kaldi\nfeats = kaldi.fbank(wave)",
    )
    VALID = ("import numpy as np\ny = np.fft.rfft(a)", "fft_size = 400  # torch.fft.rfft is avoided")


def _computes_fft(qualname: str) -> bool:
    return qualname.startswith("torch.fft.") or qualname in ("torch.stft", "torch.istft") or qualname in _SPECTROGRAMS


def _transforms(ctx: Context) -> tuple[dict[str, str], frozenset[str]]:
    """In the class being read: the attributes bound to a spectrogram transform (`self.mfcc = MFCC(...)`), and the
    attributes the class calls (`self.mfcc(waveform)`): the transform computes its FFT where it is called."""
    cls = ctx.enclosing_class
    if cls is None:
        return {}, frozenset()

    def compute() -> tuple[dict[str, str], frozenset[str]]:
        bound: dict[str, str] = {}
        called: set[str] = set()

        class Finder(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                qualname = _made_transform(ctx, node.value)
                if qualname is not None:
                    for target in node.targets:
                        if (name := self_attribute(target.target)) is not None:
                            bound[name] = qualname

            def visit_Call(self, node: cst.Call) -> None:
                # called (`self.mfcc(x)`), or passed to run (`torch.vmap(self.fbank)(x)`)
                for part in (node.func, *(a.value for a in node.args)):
                    if (name := self_attribute(part)) is not None:
                        called.add(name)

        visit(cls, Finder())
        return bound, frozenset(called)

    return ctx.memo("fft-transforms", cls, compute)


def _made_transform(ctx: Context, value: cst.BaseExpression) -> str | None:
    """What a transform made here computes: `MFCC(...)`, or a function bound to its arguments (`partial(kaldi.fbank,
    num_mel_bins=80)`, `partial(torch.stft, n_fft=400)`)."""
    if not isinstance(value, cst.Call):
        return None
    qualname = ctx.qualname(value.func) or ""
    if qualname in _SPECTROGRAMS:
        return qualname
    if qualname == "functools.partial" and value.args and _computes_fft(inner := ctx.qualname(value.args[0].value)
                                                                        or ""):
        return inner
    return None


def _bound_and_called(ctx: Context, node: cst.Call) -> bool:
    """`self.mfcc = MFCC(...)` of an attribute the class calls: the call is the finding's place."""
    statement = ctx.statements[-1] if ctx.statements else None
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or assign.value is not node or _made_transform(ctx, node) is None:
        return False
    called = _transforms(ctx)[1]
    return any(self_attribute(t.target) in called for t in assign.targets)


@check(cst.Call, rules=(Fft,), tokens=FFT_TOKENS)
def check_fft(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    where: cst.CSTNode = node
    note = ""
    if _bound_and_called(ctx, node):
        return  # reported where the class calls it
    if qualname is not None and _computes_fft(qualname):
        shown = qualname
    elif qualname is not None:  # `torch.vmap(kaldi.fbank)`: the function computes where it is passed to run
        bound = _transforms(ctx)[0]
        passed = next((a.value for a in node.args if _computes_fft(ctx.qualname(a.value) or "")
                       or self_attribute(a.value) in bound), None)
        if passed is None:
            return
        name = self_attribute(passed)
        where, shown = passed, ctx.qualname(passed) or f"self.{name}"
        note = f" (`self.{name}` is a `{bound[name]}`)" if name in bound else ""
    elif isinstance(node.func, cst.Attribute) and call_name(node) in ("stft", "istft") and not (
            isinstance(node.func.value, cst.Name) and node.func.value.value in ("self", "cls")):
        # a tensor's own `x.stft(400)`; `self.stft(x)` calls the object's own attribute (a project's STFT module,
        # whose FFT is found where it computes), unless it is a torchaudio transform (below)
        shown = f".{call_name(node)}()"
    elif (name := self_attribute(node.func)) is not None and name in (bound := _transforms(ctx)[0]):
        shown, note = f"self.{name}(...)", f" (`self.{name}` is a `{bound[name]}`)"
    else:
        return
    message = Fft.format(shown=shown, error=load_op("aten::fft_fft").error_code) + note
    if (place := host_code(ctx)) is not None:  # a metric's or the data pipeline's spectrogram: run on the CPU
        ctx.report(Fft, where, f"{message} (here in host-side code, {place}: keep it on the CPU)", Severity.INFO)
        return
    ctx.report(Fft, where, message)
