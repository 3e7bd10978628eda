"""Whether a model built on the meta device accepts its inputs. There is no eager run there (no weights), and the
model's own input checks (`torch._check(n_image_tokens == n_features)`) become deferred runtime asserts of the
exported graph, which nothing evaluates. The inputs themselves are known (made on the CPU, then moved to meta):
this evaluates the part of the graph that depends only on them and on static sizes, and reads each assert."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from portcheck.dynamic.load import Loaded, shown_input

_UNKNOWN = object()
_ASSERTS = frozenset({"aten::_assert_scalar", "aten::_assert_async"})
# The most nodes evaluated: the input checks come early in a graph (masks, token counts), and the part that depends
# only on the inputs is small; a bound keeps a pathological graph cheap.
_MAX_NODES = 20_000


def _name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}::{target._opname}"
    return str(getattr(target, "__name__", target))


def _static(value: Any) -> Any:
    """A node's traced value where it is a plain number (a static size), else unknown."""
    return value if isinstance(value, (int, float, bool)) else _UNKNOWN


def rejected(program: torch.export.ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The message of the first of the graph's input checks that the real inputs `args`/`kwargs` fail; "" when
    every check holds or cannot be decided from the inputs alone."""
    user = program.graph_signature.user_inputs
    leaves, _ = tree_flatten((args, kwargs))
    if len(leaves) != len(user):
        return ""
    values: dict[torch.fx.Node, Any] = {}
    given = dict(zip(user, leaves, strict=True))  # same length: checked above
    for index, node in enumerate(program.graph.nodes):
        if index > _MAX_NODES:
            return ""
        if node.op == "placeholder":
            values[node] = given.get(node.name, _UNKNOWN)
            continue
        if node.op != "call_function":
            continue
        unknown = False

        def look(arg: Any) -> Any:
            nonlocal unknown
            if isinstance(arg, torch.fx.Node):
                value = values.get(arg, _UNKNOWN)
                unknown = unknown or value is _UNKNOWN
                return value
            return arg

        call_args, call_kwargs = tree_map(look, (node.args, node.kwargs))
        if unknown:
            values[node] = _static(node.meta.get("val"))
            continue
        if _name(node) in _ASSERTS:
            condition = call_args[0]
            holds = bool(condition.all()) if isinstance(condition, torch.Tensor) else bool(condition)
            if not holds:
                return str(call_args[1] if len(call_args) > 1 else "an input check of the model failed")
            continue
        if call_kwargs.get("device") == torch.device("meta"):  # a factory (arange, ones) of the meta graph
            call_kwargs = {**call_kwargs, "device": torch.device("cpu")}
        try:
            with torch.no_grad():
                value = node.target(*call_args, **call_kwargs)
        except Exception:  # an op that cannot run here: its result is unknown, not an error of the inputs
            value = _UNKNOWN
        meta = isinstance(value, torch.Tensor) and value.device.type == "meta"
        values[node] = _static(node.meta.get("val")) if value is _UNKNOWN or meta else value
    return ""


def rejected_inputs(loaded: Loaded, program: torch.export.ExportedProgram | None) -> str:
    """One line for a model on the meta device whose own input check fails on its inputs, naming them; "" when
    the model is not on meta, or every check holds or cannot be decided."""
    if loaded.device != "meta" or program is None or loaded.real_inputs is None:
        return ""
    why = rejected(program, *loaded.real_inputs)
    if not why:
        return ""
    shown = ", ".join(shown_input(i) for i in loaded.inputs) or "no inputs"
    whose = {"made": "the inputs portcheck made up", "--input": "the --input tensors"}.get(
        loaded.origin, "the build callable's example inputs")
    return (f"{whose} ({shown}) fail {type(loaded.model).__name__}'s own input check, which on the meta device "
            f"is deferred to run time: {' '.join(why.split())[:300]}; no findings are reported for inputs the "
            "model rejects: give its inputs with --input name=dtype[d0,...]")
