"""The torch.cuda APIs rules/cuda_api.toml describes: the rule each falls under, what it does without CUDA, and
its drop-in on each stack."""

from __future__ import annotations

from portcheck.knowledge import CudaApi, load

_SUBMODULES = ("memory.", "random.", "graphs.", "streams.")


def api_entry(rest: str) -> CudaApi | None:
    """The entry of `torch.cuda.<rest>`, also where it is reached through its submodule (`torch.cuda.memory.`)."""
    apis = load().cuda_api
    if rest in apis:
        return apis[rest]
    for sub in _SUBMODULES:
        if rest.startswith(sub) and rest[len(sub):] in apis:
            return apis[rest[len(sub):]]
    return None
