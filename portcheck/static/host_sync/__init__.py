"""host-sync (PC70x): tensor values read on the host inside `forward` or inside a training step.

On PyTorch/XLA a host read (`loss.item()`, `print(tensor)`, `.cpu()`) is an implicit graph cut: the pending graph
is compiled and run to produce the value (SDK:archive/nxd-training/pytorch-neuron-programming-guide.rst), and under
`torch_neuronx.trace` the example's value is baked into the graph. On TorchNeuron native the read waits for the
device and ends eager op fusion at that point; under `torch.compile` it is a graph break.

Only two places are judged, the ones that run every step: `forward` (and functions nested in it), and the body of
a loop that steps an optimizer (`optimizer.step()`, `scaler.step(opt)`, `xm.optimizer_step(opt)`). Data
preparation, `__init__`, helpers, logging after the loop, code after `xm.mark_step()` in the same iteration, and
callbacks given to `xm.add_step_closure` (the documented fix) stay quiet.
"""
