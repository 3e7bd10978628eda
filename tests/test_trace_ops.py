"""Op statuses at overload precision, and decompositions only where a stack itself decomposes (rules/ops.toml,
portcheck/dynamic/graph.py): the data's keys against the overloads torch registers, and real graphs."""

from __future__ import annotations

import importlib.util

import pytest

from portcheck.dynamic.results import op_status
from portcheck.knowledge import load_ops

if importlib.util.find_spec("torch") is None:
    pytest.skip("portcheck trace needs torch (pip install 'portcheck[trace]')", allow_module_level=True)

# One worker imports torch into its process (as tests/test_advise.py and tests/test_hf_models.py do).
in_process_torch = pytest.mark.xdist_group("in-process-torch")


@in_process_torch
def test_every_op_key_names_an_op_and_overload_torch_registers():
    import torch

    missing = []
    for key in load_ops():
        namespace, _, name = key.partition("::")
        base, _, overload = name.partition(".")
        packet = getattr(getattr(torch.ops, namespace), base, None)
        if packet is None or (overload and overload not in packet.overloads()):
            missing.append(key)
    assert missing == []


def test_each_overload_the_graph_calls_is_judged_by_its_own_key():
    ops = load_ops()
    # rsub.Scalar is computed by aten::sub on the neuron device; rsub.Tensor has no TorchNeuron kernel.
    assert op_status("aten::rsub", None, "native", ops, overloads=["Scalar"]) == "supported"
    assert op_status("aten::rsub", None, "native", ops, overloads=["Tensor"]) == "cpu-fallback"
    assert op_status("aten::rsub", None, "native", ops, overloads=["Scalar", "Tensor"]) == "cpu-fallback"
    assert op_status("aten::rsub", None, "xla", ops, overloads=["Scalar"]) == "supported"
    # max.dim has a TorchNeuron kernel (the research table lists it)
    assert op_status("aten::max", None, "native", ops, overloads=["dim"]) == "supported"
    # an overload key without the stack's status does not take the name's: mm.dtype is not in torch-xla's list
    assert op_status("aten::mm", None, "native", ops, overloads=["dtype"]) == "cpu-fallback"
    assert op_status("aten::mm", None, "xla", ops, overloads=["dtype"]) == "unknown"
    assert op_status("aten::mm", None, "xla", ops, overloads=["default"], operand_dtypes=["float32"]) == "supported"


def _graph(module, *inputs):
    import torch

    with torch.no_grad():
        return torch.export.export(module.eval(), inputs, strict=False).graph


@in_process_torch
def test_a_graph_records_the_overloads_it_calls():
    import torch

    from portcheck.dynamic.graph import analyse_graph

    class ReverseSub(torch.nn.Module):
        def forward(self, x, y):
            return 1 - x, torch.rsub(x, y), x.max(dim=-1).values

    report = analyse_graph(_graph(ReverseSub(), torch.randn(2, 3), torch.randn(2, 3)))
    assert report.ops["aten::rsub"].overloads == {"Scalar", "Tensor"}
    assert report.ops["aten::max"].overloads == {"dim"}


@in_process_torch
def test_an_op_with_its_own_kernels_is_not_judged_by_torchs_reference_decomposition():
    import torch
    import torch.nn.functional as F

    from portcheck.dynamic.graph import analyse_graph, decomposition

    class Sampler(torch.nn.Module):
        def forward(self, image, grid):
            return F.grid_sample(image, grid, align_corners=False), image.new_zeros(2)

    report = analyse_graph(_graph(Sampler(), torch.randn(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 2 - 1))
    ops = load_ops()
    # grid_sampler is CompositeImplicitAutograd: it becomes grid_sampler_2d, which has CPU/CUDA kernels and no
    # composite one, so torch._decomp's decomposition of it is not what either stack runs (pytorch/xla#6581)
    parts = decomposition(report.ops["aten::grid_sampler"])
    assert parts == ["aten::grid_sampler_2d"]
    assert op_status("aten::grid_sampler", parts, "xla", ops) == "cpu-fallback"
    assert op_status("aten::grid_sampler", parts, "native", ops) == "cpu-fallback"
    # a CompositeExplicitAutograd factory still is judged by what it calls
    assert decomposition(report.ops["aten::new_zeros"])
