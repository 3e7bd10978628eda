"""Host-side code by where it lives (issue 17): metrics and printing helpers run on the CPU, so what cannot run
on Neuron is info there, and the same code in a model file keeps its severity."""

from __future__ import annotations

import pytest

from portcheck.static.engine import analyse_text

SPECTROGRAM = "import torchaudio\nmel = torchaudio.transforms.MelSpectrogram(16000)\n"
# Made on the data's device in a function: a module-level table is a CPU constant, info wherever it lives.
FLOAT64_TABLE = ("import torch\ndef colours(x):\n"
                 "    return torch.tensor([[0.0, 0.5]], dtype=torch.float64, device=x.device)\n")


def _severity(text: str, path: str, code: str) -> str | None:
    result = analyse_text(text, path, "trn2", "native", frozenset({code}))
    found = [f.severity.name.lower() for f in result.findings if f.code == code]
    return min(found) if found else None


@pytest.mark.parametrize(("path", "severity"), [("audio/metrics/rvm.py", "info"), ("audio/model.py", "error")])
def test_an_fft_in_a_metric_is_info(path: str, severity: str) -> None:
    assert _severity(SPECTROGRAM, path, "PC301") == severity


@pytest.mark.parametrize(("path", "severity"), [("image/image_print.py", None), ("image/printing.py", None),
                                                ("audio/metrics.py", None), ("eval/cont_metrics.py", None),
                                                ("image/blueprint.py", "warning"), ("image/colour.py", "warning"),
                                                ("audio/metricsearch.py", "warning")])
def test_printing_helpers_and_metrics_files_are_host_side(path: str, severity: str | None) -> None:
    assert _severity(FLOAT64_TABLE, path, "PC303") == severity


NMS = ("import torchvision\nclass Head:\n    def {name}(self, boxes, scores):\n"
       "        return torchvision.ops.nms(boxes, scores, 0.5)\n")


@pytest.mark.parametrize(("name", "severity"), [("postprocess_detections", "info"), ("forward", "error"),
                                                ("filter_proposals", "error")])
def test_nms_in_a_detection_models_post_processing_is_info(name: str, severity: str) -> None:
    assert _severity(NMS.format(name=name), "detection/head.py", "PC210") == severity
