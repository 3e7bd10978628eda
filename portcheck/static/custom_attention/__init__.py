"""custom-attention (PC4xx): attention written by hand, and attention kernels that only exist for NVIDIA GPUs.

Neuron's guidance for CUDA attention kernels (flash-attn, xformers, Triton) is to strip them: plain PyTorch
attention is what the compiler takes, and NKI flash-attention kernels are the fused path (KNOWLEDGE.md §3.7, §4).
So a call of a CUDA attention kernel is an error, and attention written out by hand (softmax of q @ kᵀ, then @ v)
is advice: it compiles, but materialises the whole (query × key) score matrix, which the NKI kernels avoid.

The hand-written matcher follows values through one function in source order, tagging each local name with
what it holds — a transposed operand, attention scores, attention probabilities — so the usual reassignment
chain (`w = q @ k.T; w = w * s; w = w + mask; w = softmax(w); w = dropout(w); out = w @ v`) is recognised
whether it is written with `@`, `matmul`, `bmm`, `baddbmm` or `einsum`.
"""
