"""distributed (PC604-PC606, PC609): process groups, DDP and collective settings written for NVIDIA's NCCL, and
collectives TorchNeuron's backend lacks.

A Neuron host has no NCCL in its torch build, so `init_process_group("nccl")` raises; the backend is
`"neuron"` on TorchNeuron native and `"xla"` on PyTorch/XLA. Neuron's PyTorch/XLA guide converts a DDP
script by removing the `DDP(model, device_ids=[rank])` wrapper (TorchNeuron native runs DDP unchanged).
`NCCL_*` tuning variables configure NVIDIA's library; Neuron's collectives are set up with
`NEURON_RT_ROOT_COMM_ID` and EFA's `FI_*` variables, and its docs use only `NCCL_DEBUG` / `NCCL_DEBUG_SUBSYS`.
"""
