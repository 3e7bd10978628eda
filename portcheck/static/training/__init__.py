"""training (PC601-PC603, PC607, PC608): mixed precision written for CUDA, and training loops Neuron runs differently.

CUDA autocast and GradScaler disable themselves on a host without CUDA (and whenever torch_xla is imported),
so a ported training step silently runs in fp32 with a no-op scaler; Neuron's mixed-precision type is BF16,
which needs no loss scaling. Training code aimed at Inf2 targets a chip Neuron documents for inference only,
and a PyTorch/XLA training loop without a step boundary grows one graph across iterations.

`torch.cuda.amp` is judged here, not in cuda_api. A GradScaler is reported once, where it is built; the
`scaler.scale(loss)` / `scaler.step(opt)` calls that use it go away with it.
"""
