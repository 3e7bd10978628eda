"""compile (PC711-PC725): `torch.compile` settings made for GPUs, TorchScript, XLA/Neuron APIs that were removed,
PyTorch/XLA inference aimed at Trn2 (unsupported from Neuron 2.34), neuronx-cc flags written in code, and dependency
files whose Neuron packages cannot work together or on the target.

TorchNeuron native compiles with `torch.compile(backend="neuron")`, a TorchDynamo backend without Inductor and
without CUDA graphs; PyTorch NeuronX (the XLA stack) does not support `torch.compile` at all. Env vars and
functions the Neuron/XLA releases deprecated or removed (`XLA_USE_BF16`, `torch_neuronx.nki_jit`,
`xm.xrt_world_size`) are reported where they are set, imported or called; strings and comments stay quiet.
"""
