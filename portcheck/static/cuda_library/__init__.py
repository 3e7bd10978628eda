"""cuda-library (PC5xx): libraries, kernels and extensions built for NVIDIA GPUs.

Neuron runs no CUDA code; its docs ask to strip CUDA dependencies out and let the compiler take the plain
PyTorch model (SDK:about-neuron/faq/training/neuron-training.rst). Which libraries are CUDA-only, and what
replaces each on a stack, is data: rules/libraries.toml. Findings sit on the import statement (PC501), the
Triton kernel definition (PC502), the CUDA extension build (PC503) and the kernel-hub load (PC504); calls of
flash-attention functions are custom-attention (PC4xx).

An import that has a fallback is milder than one that has none: inside `try/except ImportError`, under an
availability check (`if is_flash_attn_available():`), in a function that checks availability first, or
decorated `@requires_backends`, it is reported as info (the fallback is what runs on Neuron). Where the fallback
leaves the name `None`, each unguarded use of it is reported as well (uses.py). Imports under
`if TYPE_CHECKING:` never run and stay quiet.
"""

from portcheck.static.cuda_library.fallbacks import fallback  # custom_attention's kernels use it

__all__ = ["fallback"]
