"""cuda-api (PC101-PC111): code that assumes an NVIDIA GPU — device placement, `torch.cuda`, cuDNN flags.

The checks here resolve names through the file's imports, so `import torch as th; th.cuda.synchronize()`,
`from torch import cuda` and `from torch.cuda import synchronize as sync` are all the same call, while
strings, comments, `args.cuda` and `torch.cuda.is_bf16_supported = lambda: True` (the stub Neuron's own
docs recommend) stay quiet. Code that only runs where CUDA is present (`if torch.cuda.is_available(): ...`,
`x.cuda() if torch.cuda.is_available() else x`) cannot raise on Neuron: it is reported as info, next to the
probe that guards it.

Fixes put the stack's device where a CUDA one was, swap `torch.cuda` calls for the drop-ins rules/cuda_api.toml
names, and remove settings and calls that do nothing on Neuron; each rule's "Fix safety" says when one is safe.
"""

from portcheck.static.cuda_api.devices import cuda_device  # training's autocast and grad_scaler use it

__all__ = ["cuda_device"]
