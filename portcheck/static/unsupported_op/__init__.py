"""unsupported-op (PC301, PC305-PC311, PC319): ops the Neuron compiler rejects or restricts, and the
channels-last memory format TorchNeuron native refuses.

Facts come from neuron_ops.tsv (KNOWLEDGE.md §1.2): no FFT (it makes complex tensors, and the complex64 of
compiler 2.32 does not cover it), TopK only on floats with k <= 16384, no dilated pooling, no transposed
convolution with both dilations, no `triangular_solve`, bilinear resizing with `align_corners=True` rejected
on torch-neuronx 2.1, and `one_hot` on old SDKs. The error codes and TopK's limit are read from rules/ops.toml,
as the trace reads them. The trace reports unsupported ATen ops themselves (PC316-PC318, portcheck/dynamic/rules.py).
"""
