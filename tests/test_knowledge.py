"""The shipped data is consistent, and what it records about torch still holds for the torch installed."""

import importlib.util
import re
import warnings

import pytest

from portcheck.knowledge import load

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install -e '.[dev]')")


def test_data_loads_and_versions():
    k = load()
    assert len(k.rules) >= 12 and len(k.cuda_api) >= 40
    assert re.fullmatch(r"[0-9a-f]{12}", k.data_version)
    for chip in k.chips.values():
        assert chip.default_stack in chip.stacks
    assert k.chips["trn2"].default_stack == "native" and k.chips["inf2"].default_stack == "xla"


@needs_torch
def test_native_replacements_exist_in_torch():
    import torch

    for api in load().cuda_api.values():
        name = api.native.split("(")[0]
        if not name.startswith("torch."):
            continue
        obj = torch
        for part in name.split(".")[1:]:
            assert hasattr(obj, part), f"{api.name}: {name} does not exist in torch {torch.__version__}"
            obj = getattr(obj, part)


def _call(torch, name):
    target = getattr(torch.cuda, name)
    arguments = {
        "set_device": (0,), "device": (0,), "manual_seed": (0,), "manual_seed_all": (0,),
        "set_rng_state": (torch.ByteTensor(8),), "set_per_process_memory_fraction": (0.5,),
        "stream": (object(),), "set_stream": (object(),), "graph": (object(),),
        "make_graphed_callables": (torch.nn.Linear(2, 2), (torch.zeros(1, 2),)),
    }.get(name, ())
    if name == "default_generators":
        return target
    result = target(*arguments)
    if name in ("device", "stream", "graph"):
        result.__enter__()
    return result


@needs_torch
@pytest.mark.parametrize("name", sorted(load().cuda_api))
def test_recorded_behaviour_without_cuda(name):
    """cuda_api.toml's `behaviour` is what this torch does on this CUDA-less machine."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present; the recorded behaviour is for hosts without one")
    api = load().cuda_api[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = _call(torch, name)
        except Exception:
            assert api.behaviour == "raises", f"torch.cuda.{name} raised, recorded as {api.behaviour}"
            return
    assert api.behaviour != "raises", f"torch.cuda.{name} returned {result!r}, recorded as raises"
    if api.behaviour == "returns-false":
        assert result is False
    elif api.behaviour == "returns-zero":
        assert not result
    # "ignored": returning at all without CUDA is the recorded behaviour, checked above.


@needs_torch
def test_every_torch_fix_callee_exists_in_torch():
    """A `native_fix` / `xla_fix` with a `torch:` callee names a function of the installed torch."""
    import torch

    checked = 0
    for api in load().cuda_api.values():
        for fix in api.fixes.values():
            module, _, attribute = fix.call.partition(":")
            if module != "torch":
                continue
            obj = torch
            for part in attribute.split("."):
                assert hasattr(obj, part), f"{api.name}: torch.{attribute} does not exist in torch {torch.__version__}"
                obj = getattr(obj, part)
            assert callable(obj)
            checked += 1
    assert checked >= 5
