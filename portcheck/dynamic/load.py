"""Child side: build the model and its example inputs from the request (a build callable, or a transformers
config with random weights), on the CPU or on the meta device when the weights would not fit in memory."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from portcheck.dynamic.outcome import InputFact
from portcheck.dynamic.request import InputSpec, TraceRequest, split_model_spec
from portcheck.traced import Place


class ModelError(Exception):
    """The model could not be built or called as the request describes: one line for the user."""


@dataclass
class Loaded:
    model: torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    device: str  # "cpu" or "meta"
    parameters: int
    config: Any = None  # a transformers config, when the model has one
    source_file: str = ""  # the file holding the build callable or the model class
    build_place: Place | None = None  # the build callable, or the --hf-config file
    inputs: tuple[InputFact, ...] = ()  # each example input's name, dtype, shape and value range (see input_facts)


def load_model(request: TraceRequest) -> Loaded:
    build = _hf_builder(request) if request.hf_config else _callable(request.model)
    device = request.device
    if device == "auto":
        device = "cpu" if _fits_in_memory(build, request) else "meta"
    with torch.device("meta") if device == "meta" else contextlib.nullcontext():
        built = build()
    model, args, kwargs = _split(built, request)
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"the build callable returned {type(model).__name__}, not a torch.nn.Module "
                         "(return a model, or (model, example_inputs))")
    model.eval()
    inputs = input_facts(model, args, kwargs)
    if device == "meta":
        args = tuple(_to_meta(a) for a in args)
        kwargs = {k: _to_meta(v) for k, v in kwargs.items()}
    config = getattr(model, "config", None)
    return Loaded(model, args, kwargs, device, _count(model), config, _source_file(request, model),
                  _build_place(request, build), inputs)


def input_facts(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[InputFact, ...]:
    """Each example input in call order — a tensor's name, dtype, shape and value range, or a plain value — so a
    bring-up script can call the model the same way (`portcheck advise --emit-script`); positional inputs are
    named after forward's parameters."""
    try:
        names = [n for n in inspect.signature(model.forward).parameters if n not in ("self",)]
    except (TypeError, ValueError):
        names = []
    named = [(names[i] if i < len(names) else f"args[{i}]", a) for i, a in enumerate(args)]
    out: list[InputFact] = []
    for position, (name, value) in enumerate([*named, *kwargs.items()]):
        positional = position < len(args)
        if isinstance(value, torch.Tensor):
            low = high = None
            if value.device.type != "meta" and value.numel() and not value.dtype.is_complex:
                low, high = value.min().item(), value.max().item()
            out.append(InputFact(name, positional, "tensor", str(value.dtype).removeprefix("torch."),
                                 tuple(value.shape), low, high))
        elif value is None or isinstance(value, (bool, int, float, str)):
            out.append(InputFact(name, positional, "constant", constant=value))
        else:
            out.append(InputFact(name, positional, "unsupported", unsupported=type(value).__name__))
    return tuple(out)


def _build_place(request: TraceRequest, build: Callable[[], Any]) -> Place | None:
    if request.hf_config:
        path = Path(request.hf_config)
        return Place(str((path / "config.json" if path.is_dir() else path).resolve()), 1)
    try:
        return Place(str(Path(inspect.getsourcefile(build) or "").resolve()), inspect.getsourcelines(build)[1])
    except (OSError, TypeError):
        return None


def _callable(spec: str) -> Callable[[], Any]:
    location, attribute = split_model_spec(spec)
    if location.endswith(".py") or os.sep in location or "/" in location:
        path = Path(location).resolve()
        if not path.is_file():
            raise ModelError(f"{location}: no such file")
        sys.path.insert(0, str(path.parent))
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise ModelError(f"{location}: not a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(location)
        except ModuleNotFoundError as exc:
            if exc.name and location.startswith(exc.name):
                raise ModelError(f"{location}: no such module (give a file path, or run from the package's "
                                 "directory)") from None
            raise
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ModelError(f"{spec}: {location} has no attribute {attribute!r}")
        target = getattr(target, part)
    if isinstance(target, type) and issubclass(target, torch.nn.Module):
        return target
    if not callable(target):
        raise ModelError(f"{spec}: {attribute} is not callable")
    build: Callable[[], Any] = target  # what it returns is checked once it is called
    return build


def _hf_builder(request: TraceRequest) -> Callable[[], Any]:
    try:
        import transformers
    except ImportError:
        raise ModelError("--hf-config needs transformers: pip install transformers") from None
    path = Path(request.hf_config)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ModelError(f"{request.hf_config}: no config.json there")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: not a JSON config ({exc})") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise ModelError(f"{path}: a transformers config.json needs a \"model_type\"")
    data.pop("transformers_version", None)
    data.setdefault("use_cache", False)
    try:
        config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    except (ValueError, KeyError) as exc:
        raise ModelError(f"{path}: {exc}") from None
    options = dict(request.hf_options)

    def build() -> Any:
        architectures = getattr(config, "architectures", None) or []
        cls = next((getattr(transformers, a) for a in architectures if hasattr(transformers, a)), None)
        if cls is not None:
            return cls._from_config(config, **options)
        return transformers.AutoModel.from_config(config, **options)

    return build


def _fits_in_memory(build: Callable[[], Any], request: TraceRequest) -> bool:
    """Build once on the meta device (no memory) to count the weights; real weights twice over must fit."""
    try:
        with torch.device("meta"):
            built = build()
    except Exception:  # the model cannot be built on meta: build it for real
        return True
    model = built[0] if isinstance(built, tuple) else built
    if not isinstance(model, torch.nn.Module):
        return True
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    size += sum(b.numel() * b.element_size() for b in model.buffers())
    return 2 * size < _available_memory(request)


def _available_memory(request: TraceRequest) -> int:
    available = 0
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    if not available:
        available = 8 * 2**30
    return min(available, request.memory_limit) if request.memory_limit else available


def _split(built: Any, request: TraceRequest) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    if isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], torch.nn.Module):
        model, inputs = built
        if isinstance(inputs, dict):
            return model, (), dict(inputs)
        if isinstance(inputs, torch.Tensor):
            return model, (inputs,), {}
        if isinstance(inputs, (tuple, list)):
            return model, tuple(inputs), {}
        raise ModelError(f"example inputs must be a tuple of positional inputs or a dict of keyword inputs, "
                         f"not {type(inputs).__name__}")
    model = built
    if request.inputs:
        made = {spec.name: make_input(spec) for spec in request.inputs}
        parameters: Mapping[str, inspect.Parameter]
        try:
            parameters = inspect.signature(model.forward).parameters
        except (TypeError, ValueError, AttributeError):
            parameters = {}
        if all(name in parameters for name in made):
            return model, (), made
        # Names the forward does not have (`x` for Sequential's `input`): positional, in the order given.
        return model, tuple(made.values()), {}
    config = getattr(model, "config", None)
    if config is not None:
        return model, (), _hf_inputs(model, config)
    raise ModelError("the build callable returned only a model: give its inputs with --input "
                     "name=dtype[d0,...], or return (model, example_inputs)")


def make_input(spec: InputSpec) -> torch.Tensor:
    dtype = getattr(torch, spec.dtype)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(spec.shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.ones(spec.shape, dtype=dtype)
    return torch.randint(0, 2, spec.shape, dtype=dtype)


def _hf_inputs(model: torch.nn.Module, config: Any) -> dict[str, torch.Tensor]:
    """Inputs for a transformers model when none were given: batch 1, a sequence of 128 (or the model's
    limit, if smaller), images at the configured size."""
    name = getattr(model, "main_input_name", "input_ids")
    limit = max_positions(config) or 128
    seq = min(128, limit)
    vocab = getattr(config, "vocab_size", None) or 2
    if name == "pixel_values":
        size = getattr(config, "image_size", 224)
        size = size[0] if isinstance(size, (list, tuple)) else size
        inputs = {name: torch.randn(1, getattr(config, "num_channels", 3), size, size)}
    elif name == "input_features":
        frames = 2 * (getattr(config, "max_source_positions", 1500) or 1500)
        inputs = {name: torch.randn(1, getattr(config, "num_mel_bins", 80), frames)}
    else:
        inputs = {"input_ids": torch.randint(0, vocab, (1, seq))}
    if getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = torch.randint(0, vocab, (1, min(seq, 64)))
    return inputs


def max_positions(config: Any) -> int:
    """The longest sequence a transformers config allows; 0 when it names none (or there is no config)."""
    for key in ("max_position_embeddings", "n_positions", "max_target_positions"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def _to_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.device.type != "meta":
        return value.to("meta")
    if isinstance(value, (tuple, list)):
        return type(value)(_to_meta(v) for v in value)
    return value


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _source_file(request: TraceRequest, model: torch.nn.Module) -> str:
    if request.model:
        location, _ = split_model_spec(request.model)
        if location.endswith(".py") or "/" in location:
            return str(Path(location).resolve())
    module = sys.modules.get(type(model).__module__)
    return getattr(module, "__file__", "") or ""
