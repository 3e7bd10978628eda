"""Tests of the PyTorch version by what it has: `hasattr(torch, "accelerator")` holds on every Neuron stack (each
Neuron release ships a PyTorch that has it: rules/cuda_api.toml [torch_features]), so the way taken where it fails
(`torch.accelerator... if hasattr(torch, "accelerator") else torch.cuda...`) is an older PyTorch's, never Neuron's."""

from __future__ import annotations

import libcst as cst

from portcheck.knowledge.cuda_api import load_torch_features
from portcheck.static.check import Context
from portcheck.static.syntax import string_value


def has_torch_feature(ctx: Context, test: cst.Call) -> bool:
    """`hasattr(torch, "accelerator")`, for a part of PyTorch every Neuron release's PyTorch has."""
    if not (isinstance(test.func, cst.Name) and test.func.value == "hasattr" and len(test.args) == 2):
        return False
    return ctx.qualname(test.args[0].value) == "torch" and string_value(test.args[1].value) in load_torch_features()


__all__ = ["has_torch_feature"]
