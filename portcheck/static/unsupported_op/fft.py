"""FFT: `torch.fft.*`, `stft` / `istft` and torchaudio's spectrograms, which neuronx-cc cannot compile (PC301)."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import load_op
from portcheck.rules import Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.scope import host_code
from portcheck.static.syntax import call_name

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


@check(cst.Call, rules=(Fft,), tokens=FFT_TOKENS)
def check_fft(node: cst.Call, ctx: Context) -> None:
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
    message = Fft.format(shown=shown, error=load_op("aten::fft_fft").error_code)
    if (where := host_code(ctx)) is not None:  # a metric's or the data pipeline's spectrogram: run on the CPU
        ctx.report(Fft, node, f"{message} (here in host-side code, {where}: keep it on the CPU)", Severity.INFO)
        return
    ctx.report(Fft, node, message)
