"""`XLA_USE_BF16` and `XLA_DOWNCAST_BF16` set from code: deprecated since torch-neuronx 2.5 (PC717)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.branches import tpu_only, version_fallback
from portcheck.static.check import Context, check
from portcheck.static.compile.text import bound_string
from portcheck.static.syntax import positional, string_value


@rule
class XlaBf16EnvVar(Rule):
    """## What it does
    Finds code that sets `XLA_USE_BF16` or `XLA_DOWNCAST_BF16`: `os.environ[...] = "1"`,
    `os.environ.setdefault(...)`, `os.putenv(...)`, `os.environ.update(...)`. Reading them and setting them to
    `"0"` stay quiet, and so do TPU-only branches (`if is_torch_xla_available(check_is_tpu=True):`) and fallbacks
    for old releases (the `else` of `if _XLA_GREATER_EQUAL_2_1:`). On TorchNeuron native, which is not XLA-based
    and ignores both variables, the finding is info: the code setting them is an XLA path.

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
        "import os\nif is_torch_xla_available(check_is_tpu=True):\n    os.environ['XLA_USE_BF16'] = '1'",
    )


ENV_VARS = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16")

_ENV_SETTERS = frozenset({"os.putenv", "os.environ.setdefault"})


def _bf16_message(name: str) -> str:
    return (f"`{name}` is deprecated since torch-neuronx 2.5 (a warning when set; to be removed) and overrides the "
            "per-operator precision of autocast; cast with `model.to(torch.bfloat16)` (plus "
            "`NEURON_RT_STOCHASTIC_ROUNDING_EN=1` for full-BF16 training) or use "
            "`torch.autocast(\"xla\", dtype=torch.bfloat16)`")


def _report(ctx: Context, node: cst.CSTNode, name: str) -> None:
    """A TPU-only branch (accelerate's `is_torch_xla_available(check_is_tpu=True)`) or an old-version fallback
    never runs on Neuron: quiet. On TorchNeuron native, which is not XLA-based, the variable is ignored: the code
    setting it is an XLA path (a TPU or torch-neuronx plugin), so the finding is advice (info)."""
    if tpu_only(ctx, node) or version_fallback(ctx, node):
        return
    if ctx.stack == "xla":
        ctx.report(XlaBf16EnvVar, node, _bf16_message(name))
        return
    ctx.report(XlaBf16EnvVar, node, f"`{name}` is read only by PyTorch/XLA; TorchNeuron native is not XLA-based and "
               "ignores it, so this is an XLA code path (if it is what runs here, the model stays in fp32: cast "
               "with `model.to(torch.bfloat16)` or use `torch.autocast(device_type=\"neuron\", "
               "dtype=torch.bfloat16)`)", severity=Severity.INFO)


def _disables(ctx: Context, value: cst.BaseExpression | None) -> bool:
    return value is not None and bound_string(ctx, value) in ("0", "")


@check(cst.Assign, rules=(XlaBf16EnvVar,), tokens=ENV_VARS)
def check_env_assignment(node: cst.Assign, ctx: Context) -> None:
    """`os.environ["XLA_USE_BF16"] = "1"`."""
    for target in node.targets:
        name = _environ_key(ctx, target.target)
        if name is not None and not _disables(ctx, node.value):
            _report(ctx, target.target, name)


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
            _report(ctx, node, name)
    elif qualname == "os.environ.update":
        for variable, setting, where in _update_items(node):
            if variable in ENV_VARS and not _disables(ctx, setting):
                _report(ctx, where, variable)


def _update_items(node: cst.Call) -> Iterator[tuple[str | None, cst.BaseExpression, cst.CSTNode]]:
    for arg in node.args:
        if arg.keyword is not None:
            yield arg.keyword.value, arg.value, arg
        elif isinstance(arg.value, cst.Dict):
            for element in arg.value.elements:
                if isinstance(element, cst.DictElement):
                    yield string_value(element.key), element.value, element
