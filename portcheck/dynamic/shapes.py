"""Child side: export once more with the batch and sequence axes dynamic (`Dim.AUTO`) and read back what
export learned: which axes stayed dynamic, their ranges (guards), and which the model's code fixed."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch

from portcheck.dynamic.inputs import forward_parameters
from portcheck.dynamic.load import Loaded
from portcheck.dynamic.request import DynamicAxis
from portcheck.dynamic.sourcemap import exception_place, one_line
from portcheck.traced import Place, ShapeAxis, ShapeProbe

_TOKEN_INPUTS = (torch.int64, torch.int32, torch.bool)


@dataclass(frozen=True)
class Axis:
    input: str  # a keyword name, or "args[0]"
    axis: int
    label: str
    size: int


def find_axes(loaded: Loaded, given: tuple[DynamicAxis, ...]) -> list[Axis]:
    """`--dynamic` axes if given; else axis 0 of every input (batch), axis 1 of 2-D token inputs (ids,
    masks: the sequence), decoder inputs apart from encoder ones, and the float inputs' free axes: audio samples
    (`input_values`), image height and width (`pixel_values`, a diffusion `sample`) unless the model's position
    embeddings fix the image size."""
    tensors = _named_inputs(loaded)
    if given:
        axes = []
        for d in given:
            tensor = tensors.get(d.name)
            if tensor is None or not -tensor.dim() <= d.axis < tensor.dim():
                raise ValueError(f"--dynamic {d.name}:{d.axis}: no such input or axis")
            axis = d.axis % tensor.dim()
            label = d.label or ("batch" if axis == 0 else "seq")
            axes.append(Axis(d.name, axis, label, int(tensor.shape[axis])))
        return axes
    axes = []
    batch_sizes = {int(t.shape[0]) for t in tensors.values() if t.dim() >= 1}
    if len(batch_sizes) == 1:
        axes += [Axis(name, 0, "batch", int(t.shape[0])) for name, t in tensors.items() if t.dim() >= 1]
    for name, t in tensors.items():
        if t.dim() == 2 and t.dtype in _TOKEN_INPUTS:
            label = "decoder_seq" if name.startswith("decoder_") else "seq"
            axes.append(Axis(name, 1, label, int(t.shape[1])))
    for name, t in tensors.items():
        if not t.dtype.is_floating_point:
            continue
        if name == "input_values" and t.dim() == 2:
            axes.append(Axis(name, 1, "samples", int(t.shape[1])))
        elif name in ("pixel_values", "sample") and t.dim() == 4 and not fixed_image_size(loaded):
            axes += [Axis(name, 2, "height", int(t.shape[2])), Axis(name, 3, "width", int(t.shape[3]))]
    return axes


def fixed_image_size(loaded: Loaded) -> bool:
    """Whether the model's absolute position embeddings fix its image size (ViT, CLIP): their forward takes
    `interpolate_pos_encoding`, which the trace does not pass, and their config does not turn the embeddings off
    (Swin's `use_absolute_embeddings=False`, where windows take any size)."""
    if "interpolate_pos_encoding" not in forward_parameters(loaded.model):
        return False
    if loaded.kwargs.get("interpolate_pos_encoding") is True:
        return False
    config = loaded.config
    vision = getattr(config, "vision_config", None) or config
    return getattr(vision, "use_absolute_embeddings", True) is not False


# Axes the probe may drop to keep the others when export cannot make them all dynamic (or not within its budget).
OPTIONAL_LABELS = frozenset({"samples", "height", "width"})
# The try with those axes may ask export's shape solver this many questions it answers from what it knows
# (ShapeEnv._maybe_evaluate_static): a count of work, so the same command gives the same report on a busy machine
# and on a quiet one. Measured with torch 2.13 on the tiny configs of fixtures/models/hf: bert 43, detr's image
# axes 174, wav2vec2's samples 329 (the same with 1 or 6 layers: the answers are cached per expression); Swin's
# window padding 3123, in 158 s (1000 of them took 28 s).
SOLVER_BUDGET = 800


class _OutOfWork(Exception):
    pass


class _Budget:
    """Counts the solver's questions in a block; past `limit` each one raises _OutOfWork (export may wrap it, so
    `spent` says what stopped the block)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.asked, self.spent = limit, 0, False

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        original = ShapeEnv._maybe_evaluate_static

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.asked += 1
            if self.asked > self.limit:
                self.spent = True
                raise _OutOfWork
            return original(*args, **kwargs)

        for name in ("cache_clear", "cache_info"):  # an lru_cache: ShapeEnv clears it through the attribute
            if hasattr(original, name):
                setattr(counted, name, getattr(original, name))
        ShapeEnv._maybe_evaluate_static = counted  # type: ignore[method-assign,assignment]  # counted, restored below
        try:
            yield
        finally:
            ShapeEnv._maybe_evaluate_static = original  # type: ignore[method-assign]  # the lru_cache put back


def _named_inputs(loaded: Loaded) -> dict[str, torch.Tensor]:
    named = {f"args[{i}]": a for i, a in enumerate(loaded.args) if isinstance(a, torch.Tensor)}
    named.update({k: v for k, v in loaded.kwargs.items() if isinstance(v, torch.Tensor)})
    return named


def probe_shapes(loaded: Loaded, axes: list[Axis], budget: int = SOLVER_BUDGET) -> ShapeProbe:
    """Export with those axes as `Dim.AUTO`. An axis whose example size is 0 or 1 is widened to 2 first:
    export fixes sizes 0 and 1, which would hide whether the model itself does. When that export fails and some
    axes are float ones (samples, height, width), it is tried again without them: the batch and sequence axes
    are what `advise` buckets, and the detail says why the others were left out. Symbolic image sizes can send
    export's solver into minutes (Swin's window padding): the try with them stops after `budget` questions to the
    solver (SOLVER_BUDGET), never after a time, so the outcome does not depend on how busy the machine is."""
    started = time.perf_counter()
    kept = [a for a in axes if a.label not in OPTIONAL_LABELS]
    optional = bool(kept) and len(kept) < len(axes)
    work = _Budget(budget)
    try:
        with work.applied() if optional else contextlib.nullcontext():
            return _checked(loaded, axes, _probe(loaded, axes, started))
    except Exception as exc:
        first = f"export's shape solver needed more than {budget} steps" if work.spent else one_line(exc)
    if not optional:
        return ShapeProbe(False, round(time.perf_counter() - started, 3), first, tuple(_probed(a, None) for a in axes))
    dropped = [a for a in axes if a not in kept]
    try:
        probe = _checked(loaded, axes, _probe(loaded, kept, started))
    except Exception as exc:
        return ShapeProbe(False, round(time.perf_counter() - started, 3), one_line(exc),
                          tuple(_probed(a, None) for a in axes))
    labels = ", ".join(dict.fromkeys(a.label for a in dropped))
    return ShapeProbe(True, probe.seconds, f"{labels} not probed: export with them dynamic failed ({first})",
                      probe.axes + tuple(_probed(a, None) for a in dropped), probe.nodes)


def _probe(loaded: Loaded, axes: list[Axis], started: float) -> ShapeProbe:
    args, kwargs = list(loaded.args), dict(loaded.kwargs)
    widened = {(a.input, a.axis) for a in axes if a.size < 2}
    for axis in axes:
        if axis.size < 2:
            _set(args, kwargs, axis.input, partial(_doubled, dim=axis.axis))
    # Per input, by the names find_axes uses: {axis: Dim.AUTO}; a positional tensor without one gets {}.
    wanted: dict[str, dict[int, Any]] = {}
    for axis in axes:
        wanted.setdefault(axis.input, {})[axis.axis] = torch.export.Dim.AUTO
    specs_args = [wanted.get(f"args[{i}]", {} if isinstance(a, torch.Tensor) else None) for i, a in enumerate(args)]
    specs_kwargs = {k: wanted[k] for k in kwargs if k in wanted}
    dynamic_shapes: dict[str, Any] | tuple[Any, ...]
    if kwargs and not args:
        dynamic_shapes = {k: specs_kwargs.get(k) for k in kwargs}
    elif not kwargs:
        dynamic_shapes = tuple(specs_args)
    else:
        dynamic_shapes = {"args": tuple(specs_args), "kwargs": {k: specs_kwargs.get(k) for k in kwargs}}
    with torch.no_grad():
        program = torch.export.export(loaded.model, tuple(args), kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    found = _placeholder_shapes(program, args, kwargs)
    out = []
    for axis in axes:
        dim = found.get(axis.input)
        size = dim[axis.axis] if dim is not None and axis.axis < len(dim) else None
        probed = _probed(axis, _range(program, size))
        out.append(replace(probed, probed=2 * axis.size) if (axis.input, axis.axis) in widened else probed)
    return ShapeProbe(True, round(time.perf_counter() - started, 3), "", tuple(out), len(program.graph.nodes))


def _checked(loaded: Loaded, axes: list[Axis], probe: ShapeProbe) -> ShapeProbe:
    """Each axis export fixed, tried eagerly at another size: export also fixes sizes the model would take (a
    broadcast it met at one size), and only a model that cannot run at another size is pinned. The run changes
    every axis of that label (input_ids and attention_mask together); where it raises is the pinning line."""
    checked = []
    for found in probe.axes:
        if found.dynamic is False:
            other = max(found.size, found.probed or 0, 2) + 1
            runs, place, error = _runs_at(loaded, [a for a in axes if a.label == found.label], other)
            found = replace(found, other=other, runs_at_other=runs, pinned_at=place, pinned_by=error)
        checked.append(found)
    return replace(probe, axes=tuple(checked))


def _runs_at(loaded: Loaded, axes: list[Axis], size: int) -> tuple[bool | None, Place | None, str]:
    """Whether the model runs with those axes at `size`: (True, None, ""), or (False, the raising line, what it
    raised), or (None, ...) where it fails at the example's own size too (on the meta device a value read fails
    whatever the size): no evidence either way."""
    args, kwargs = list(loaded.args), dict(loaded.kwargs)
    for axis in axes:
        _set(args, kwargs, axis.input, partial(_resized, dim=axis.axis, size=size))
    try:
        with torch.no_grad():
            loaded.model(*args, **kwargs)
        return True, None, ""
    except Exception as exc:
        place, error = exception_place(exc), one_line(exc)
    try:
        with torch.no_grad():
            loaded.model(*loaded.args, **loaded.kwargs)
    except Exception:
        return None, place, error
    return False, place, error


def _resized(tensor: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """The tensor with `dim` made `size` long, its entries repeated (token ids stay valid ids)."""
    index = torch.arange(size, device=tensor.device) % max(int(tensor.shape[dim]), 1)
    if tensor.device.type == "meta":
        return torch.empty([size if i == dim else s for i, s in enumerate(tensor.shape)], dtype=tensor.dtype,
                           device="meta")
    return tensor.index_select(dim, index)


def _set(args: list[Any], kwargs: dict[str, Any], name: str,
         change: Callable[[torch.Tensor], torch.Tensor]) -> None:
    if name.startswith("args["):
        i = int(name[5:-1])
        args[i] = change(args[i])
    else:
        kwargs[name] = change(kwargs[name])


def _doubled(tensor: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.cat([tensor, tensor], dim=dim)


def _placeholder_shapes(program: torch.export.ExportedProgram, args: list[Any],
                        kwargs: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """The shapes export gave each user input, by the same names `find_axes` uses."""
    names = [f"args[{i}]" for i in range(len(args))] + list(kwargs)
    user_inputs = [spec for spec in program.graph_signature.input_specs  # tensors only: not use_cache=False
                   if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT and
                   isinstance(spec.arg, torch.export.graph_signature.TensorArgument)]
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    shapes: dict[str, tuple[Any, ...]] = {}
    flat = [n for n in names if (n in kwargs and isinstance(kwargs[n], torch.Tensor)) or
            (n.startswith("args[") and isinstance(args[int(n[5:-1])], torch.Tensor))]
    for name, spec in zip(flat, user_inputs, strict=False):
        node = placeholders.get(spec.arg.name)
        value = node.meta.get("val") if node is not None else None
        if isinstance(value, torch.Tensor):
            shapes[name] = tuple(value.shape)
    return shapes


# What export made of an axis: dynamic or not, and its bounds (None where unbounded).
Range = tuple[bool, int | None, int | None]


def _range(program: torch.export.ExportedProgram, size: int | torch.SymInt | None) -> Range | None:
    if size is None:
        return None
    if isinstance(size, int):
        return False, size, size
    expr = size.node.expr
    shape_env = getattr(size.node, "shape_env", None)
    if shape_env is not None:
        expr = shape_env.replace(expr)  # a symbol export specialised resolves to its number here
    if expr.is_number:
        return False, int(expr), int(expr)
    bounds = program.range_constraints.get(expr)
    if bounds is None:
        return True, None, None
    return True, _finite(bounds.lower), _finite(bounds.upper)


def _finite(bound: Any) -> int | None:
    """A range bound as an int; None for export's unbounded (int_oo)."""
    try:
        return int(bound) if bool(bound.is_finite) and bool(bound.is_integer) else None
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None


def _probed(axis: Axis, found: Range | None) -> ShapeAxis:
    dynamic, low, high = found or (None, None, None)
    return ShapeAxis(axis.input, axis.axis, axis.label, axis.size, dynamic, low, high)
