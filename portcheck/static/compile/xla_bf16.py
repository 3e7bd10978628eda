"""`XLA_USE_BF16` and `XLA_DOWNCAST_BF16` set from code: deprecated since torch-neuronx 2.5 (PC717)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.compile.text import bound_string
from portcheck.static.syntax import positional, string_value


@rule
class XlaBf16EnvVar(Rule):
    """## What it does
    Finds code that sets `XLA_USE_BF16` or `XLA_DOWNCAST_BF16`: `os.environ[...] = "1"`,
    `os.environ.setdefault(...)`, `os.putenv(...)`, `os.environ.update(...)`. Reading them and setting them to
    `"0"` stay quiet.

    ## Example
    ```python
    os.environ["XLA_USE_BF16"] = "1"
    ```

    ## Use instead
    ```python
    os.environ["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1"
    model.to(torch.bfloat16)
    ```

    ## Fix safety
    No automatic fix: the replacement (`model.to(torch.bfloat16)` with `NEURON_RT_STOCHASTIC_ROUNDING_EN=1`, or
    autocast around the forward pass) goes where the model is built and run, not where the variable is set.
    """

    code = "PC717"
    TARGET = ("trn1", "xla")
    INVALID = (
        "import os\nos.environ['XLA_USE_BF16'] = '1'",
        "import os\nos.environ.setdefault('XLA_DOWNCAST_BF16', '1')",
        "from os import environ\nenviron.update({'XLA_USE_BF16': '1'})",
    )
    VALID = (
        "import os\nflag = os.environ.get('XLA_USE_BF16')",
        "import os\nos.environ['XLA_USE_BF16'] = '0'",
        "# set XLA_USE_BF16=1 in the shell\nx = 'XLA_USE_BF16'",
    )


ENV_VARS = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16")

_ENV_SETTERS = frozenset({"os.putenv", "os.environ.setdefault"})


def _bf16_message(ctx: Context, name: str) -> str:
    if ctx.stack == "xla":
        advice = ("cast with `model.to(torch.bfloat16)` (plus `NEURON_RT_STOCHASTIC_ROUNDING_EN=1` for full-BF16 "
                  "training) or use `torch.autocast(\"xla\", dtype=torch.bfloat16)`")
    else:
        advice = ("TorchNeuron native is not XLA-based: cast with `model.to(torch.bfloat16)` or use "
                  "`torch.autocast(device_type=\"neuron\", dtype=torch.bfloat16)`")
    return (f"`{name}` is deprecated since torch-neuronx 2.5 (a warning when set; to be removed) and overrides the "
            f"per-operator precision of autocast; {advice}")


def _disables(ctx: Context, value: cst.BaseExpression | None) -> bool:
    return value is not None and bound_string(ctx, value) in ("0", "")


@check(cst.Assign, rules=(XlaBf16EnvVar,), tokens=ENV_VARS)
def check_env_assignment(node: cst.Assign, ctx: Context) -> None:
    """`os.environ["XLA_USE_BF16"] = "1"`."""
    for target in node.targets:
        name = _environ_key(ctx, target.target)
        if name is not None and not _disables(ctx, node.value):
            ctx.report(XlaBf16EnvVar, target.target, _bf16_message(ctx, name))


def _environ_key(ctx: Context, target: cst.BaseExpression) -> str | None:
    if not isinstance(target, cst.Subscript) or ctx.qualname(target.value) != "os.environ" or len(target.slice) != 1:
        return None
    index = target.slice[0].slice
    key = string_value(index.value) if isinstance(index, cst.Index) else None
    return key if key in ENV_VARS else None


@check(cst.Call, rules=(XlaBf16EnvVar,), tokens=ENV_VARS)
def check_env_call(node: cst.Call, ctx: Context) -> None:
    """`os.environ.setdefault("XLA_USE_BF16", "1")`, `os.putenv(...)`, `os.environ.update({...})`."""
    qualname = ctx.qualname(node.func)
    if qualname in _ENV_SETTERS:
        key, value = positional(node, 0), positional(node, 1)
        name = string_value(key.value) if key is not None else None
        if name in ENV_VARS and not _disables(ctx, value.value if value is not None else None):
            ctx.report(XlaBf16EnvVar, node, _bf16_message(ctx, name))
    elif qualname == "os.environ.update":
        for variable, setting, where in _update_items(node):
            if variable in ENV_VARS and not _disables(ctx, setting):
                ctx.report(XlaBf16EnvVar, where, _bf16_message(ctx, variable))


def _update_items(node: cst.Call) -> Iterator[tuple[str | None, cst.BaseExpression, cst.CSTNode]]:
    for arg in node.args:
        if arg.keyword is not None:
            yield arg.keyword.value, arg.value, arg
        elif isinstance(arg.value, cst.Dict):
            for element in arg.value.elements:
                if isinstance(element, cst.DictElement):
                    yield string_value(element.key), element.value, element
