"""Child side: build the model and its example inputs from the request (a build callable, or a transformers
config with random weights), on the CPU or on the meta device when the weights would not fit in memory, and run
it once eagerly on those inputs (`run_eagerly`) before it is traced."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from portcheck.dynamic.dtype import cast_inputs, chosen_dtype, quantization_note, shipped_dtype
from portcheck.dynamic.inputs import (
    decoder_inputs,
    forward_parameters,
    given_inputs,
    made_inputs,
    missing_image_token,
    processor_image_size,
)
from portcheck.dynamic.outcome import InputFact
from portcheck.dynamic.request import TraceRequest, split_model_spec
from portcheck.dynamic.sourcemap import exception_place, one_line
from portcheck.traced import Place, Step


class ModelError(Exception):
    """The model could not be built or called as the request describes: one line for the user (and the line of
    the model's code that failed, if known)."""

    def __init__(self, message: str, place: Place | None = None) -> None:
        super().__init__(message)
        self.place = place


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
    config_use_cache: bool | None = None  # the config's own use_cache; None: it sets none
    traced_use_cache: bool | None = None  # False when portcheck turned the cache off (config and call)
    origin: str = "build"  # where the inputs came from: "build" (returned with the model), "--input" or "made"
    # Decoder inputs held back until the eager run shows the model needs them (T5, whisper; BART derives its own)
    held_back: dict[str, Any] = field(default_factory=dict)
    dtype: str = ""  # the dtype traced in and why ("bfloat16: the config's torch_dtype"); see dynamic/dtype.py
    quantization: str = ""  # what the config's quantization_config means on Neuron, or ""
    real_inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None  # on meta: the inputs as made, with values


def load_model(request: TraceRequest) -> Loaded:
    config_use_cache: bool | None = None
    shipped = ""
    if request.hf_config:
        build, config_use_cache, shipped = _hf_builder(request)
    else:
        build = _callable(request.model)
    device = request.device
    if device == "auto":
        # A transformers config is sized on the meta device first (building it there runs only transformers'
        # code). A build callable is the user's code: it runs once, on the CPU, under the memory cap (past it,
        # the message says to use --device meta), never a second time just to be sized.
        device = "cpu" if not request.hf_config or _fits_in_memory(build, request) else "meta"
    with torch.device("meta") if device == "meta" else contextlib.nullcontext():
        built = build()
    model, args, kwargs, origin = _split(built, request)
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"the build callable returned {type(model).__name__}, not a torch.nn.Module "
                         "(return a model, or (model, example_inputs))")
    model.eval()
    config = getattr(model, "config", None)
    held_back: dict[str, Any] = {}
    if origin == "made":
        held_back = decoder_inputs(model, config, kwargs)
        if device == "meta":  # no eager run to show whether the model needs them: pass them
            kwargs, held_back = {**kwargs, **held_back}, {}
    traced_use_cache: bool | None = None
    if config is not None and origin != "build":  # inputs portcheck makes are called without a cache
        if not request.hf_config:  # (a --hf-config model was built with it off)
            config_use_cache = _use_cache(config)
        if _without_cache(config) or kwargs.get("use_cache") is False:
            traced_use_cache = False
    dtype, dtype_note = chosen_dtype(request.dtype, shipped, model, bool(request.hf_config))
    if dtype is not None:
        model.to(dtype)
        args = tuple(cast_inputs(a, dtype) for a in args)
        kwargs = {k: cast_inputs(v, dtype) for k, v in kwargs.items()}
    inputs = input_facts(model, args, kwargs)
    real = (args, kwargs) if device == "meta" else None
    if device == "meta":
        args = tuple(_to_meta(a) for a in args)
        kwargs = {k: _to_meta(v) for k, v in kwargs.items()}
    return Loaded(model, args, kwargs, device, _count(model), config, _source_file(request, model),
                  _build_place(request, build), inputs, config_use_cache, traced_use_cache, origin, held_back,
                  dtype_note, quantization_note(config), real)


def run_eagerly(loaded: Loaded) -> Step | None:
    """Call the model once on its example inputs, as the trace will: inputs it cannot take stop here with one
    line naming --input, not deep inside an export. Decoder inputs held back are added when the model fails
    without them. On the meta device there are no weights to run: the Step returned says it was skipped."""
    if loaded.device == "meta":
        return Step("eager run", False, 0.0, 0, "skipped: the model was built on the meta device (no weights to "
                                                "run); its inputs are checked only by the trace")
    started = time.perf_counter()
    try:
        _call(loaded)
    except Exception as exc:
        if not loaded.held_back:
            raise ModelError(_failed(loaded, exc), exception_place(exc)) from None
        loaded.kwargs.update(loaded.held_back)
        loaded.held_back = {}
        loaded.inputs = input_facts(loaded.model, loaded.args, loaded.kwargs)
        try:
            _call(loaded)
        except Exception as again:
            raise ModelError(_failed(loaded, again), exception_place(again)) from None
    loaded.held_back = {}
    return Step.timed("eager run", True, time.perf_counter() - started)


def _call(loaded: Loaded) -> None:
    with torch.no_grad():
        loaded.model(*loaded.args, **loaded.kwargs)


def _failed(loaded: Loaded, exc: Exception) -> str:
    shown = ", ".join(shown_input(i) for i in loaded.inputs) or "no inputs"
    if loaded.origin == "made" and (why := missing_image_token(loaded.config)):
        return f"{type(loaded.model).__name__} cannot run on any inputs: {why} (it raised {one_line(exc)})"
    if loaded.origin == "made":
        return (f"the inputs portcheck made up for {type(loaded.model).__name__} ({shown}) fail when it runs "
                f"eagerly: {one_line(exc)}; give its inputs with --input name=dtype[d0,...]")
    if loaded.origin == "--input":
        return (f"the --input tensors ({shown}) fail when the model runs eagerly: {one_line(exc)}; give the "
                "inputs forward takes with --input name=dtype[d0,...]")
    return (f"the model fails when run eagerly on the example inputs the build callable returned ({shown}): "
            f"{one_line(exc)}; check them, or return only the model and give --input name=dtype[d0,...]")


def shown_input(fact: InputFact) -> str:
    name = fact.name + "".join(f"[{part!r}]" for part in fact.key)
    if fact.kind == "tensor":
        return f"{name}={fact.dtype}[{','.join(str(d) for d in fact.shape)}]"
    if fact.kind == "constant":
        return f"{name}={fact.constant!r}"
    return f"{name}={fact.unsupported}"


def _use_cache(config: Any) -> bool | None:
    """The config's use_cache, or its first sub-config's (a multimodal config's text part) when it has none."""
    value = getattr(config, "use_cache", None)
    if isinstance(value, bool):
        return value
    return next((v for v in map(_use_cache, _sub_configs(config)) if v is not None), None)


def _without_cache(config: Any) -> bool:
    """Set use_cache=False on the config and each sub-config that carries it (text_config, decoder, ...): a
    cache object built at construction or returned by forward is no graph to export. True if any had it."""
    found = False
    if isinstance(getattr(config, "use_cache", None), bool):
        config.use_cache = False
        found = True
    for sub in _sub_configs(config):
        found = _without_cache(sub) or found
    return found


def _sub_configs(config: Any) -> list[Any]:
    try:
        from transformers import PretrainedConfig
    except ImportError:
        return []
    if not isinstance(config, PretrainedConfig):
        return []
    return [value for value in vars(config).values() if isinstance(value, PretrainedConfig)]


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
        out += _facts(name, position < len(args), value, ())
    return tuple(out)


# How deep and how wide a dict or list input is described (diffusers' added_cond_kwargs is one dict of tensors).
NESTED_DEPTH = 4
NESTED_LEAVES = 64


def _facts(name: str, positional: bool, value: Any, key: tuple[str | int, ...]) -> list[InputFact]:
    if isinstance(value, torch.Tensor):
        low = high = None
        if value.device.type != "meta" and value.numel() and not value.dtype.is_complex:
            low, high = value.min().item(), value.max().item()  # portcheck: ignore[PC701] an example input, read once
        return [InputFact(name, positional, "tensor", str(value.dtype).removeprefix("torch."), tuple(value.shape),
                          low, high, key=key)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return [InputFact(name, positional, "constant", constant=value, key=key)]
    items: list[tuple[str | int, Any]] = []
    if type(value) is dict and all(isinstance(k, str) for k in value):
        items = list(value.items())
    elif type(value) in (list, tuple):
        items = list(enumerate(value))
    if items and len(key) < NESTED_DEPTH:
        out = [fact for part, inner in items for fact in _facts(name, positional, inner, (*key, part))]
        if len(out) <= NESTED_LEAVES and not any(f.kind == "unsupported" for f in out):
            return out
    return [InputFact(name, positional, "unsupported", unsupported=type(value).__name__, key=key)]


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


def _hf_builder(request: TraceRequest) -> tuple[Callable[[], Any], bool | None, str]:
    """The build for a transformers config, with the cache turned off; the config's own use_cache and dtype."""
    try:
        import transformers
        from transformers.models.auto import AutoConfig, AutoModel
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
    dtype = shipped_dtype(data)
    try:
        config = AutoConfig.for_model(data.pop("model_type"), **data)
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"{path}: {exc}") from None
    shipped = _use_cache(config)
    _without_cache(config)
    options = dict(request.hf_options)

    def build() -> Any:
        architectures = getattr(config, "architectures", None) or []
        cls = next((getattr(transformers, a) for a in architectures if hasattr(transformers, a)), None)
        if cls is not None:
            return cls._from_config(config, **options)
        return AutoModel.from_config(config, **options)

    return build, shipped, dtype


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


def _split(built: Any, request: TraceRequest) -> tuple[Any, tuple[Any, ...], dict[str, Any], str]:
    """The model, its positional and keyword inputs, and where they came from ("build", "--input", "made")."""
    if isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], torch.nn.Module):
        model, inputs = built
        if isinstance(inputs, dict):
            return model, (), dict(inputs), "build"
        if isinstance(inputs, torch.Tensor):
            return model, (inputs,), {}, "build"
        if isinstance(inputs, (tuple, list)):
            return model, tuple(inputs), {}, "build"
        raise ModelError(f"example inputs must be a tuple of positional inputs or a dict of keyword inputs, "
                         f"not {type(inputs).__name__}")
    model = built
    if not isinstance(model, torch.nn.Module):
        return model, (), {}, "build"  # load_model says what it is
    if request.inputs:
        args, kwargs = given_inputs(model, request.inputs)
        return model, args, kwargs, "--input"
    config = getattr(model, "config", None)
    made = made_inputs(model, config, processor_image_size(request.hf_config)) if config is not None else None
    if made is not None:
        return model, (), made, "made"
    takes = ", ".join(n for n in forward_parameters(model) if n not in ("args", "kwargs")) or "nothing"
    reason = "has no config to make them from" if config is None else f"takes none portcheck can make ({takes})"
    raise ModelError(f"the build callable returned only a model, and {type(model).__name__} {reason}: give its "
                     "inputs with --input name=dtype[d0,...], or return (model, example_inputs)")


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
