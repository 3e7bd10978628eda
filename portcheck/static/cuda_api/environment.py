"""CUDA_VISIBLE_DEVICES (PC110): GPUs selected from code, which the Neuron runtime does not read.

Its fix selects as many NeuronCores with `NEURON_RT_VISIBLE_CORES`.
"""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.codegen import literal_like
from portcheck.static.cuda_api.devices import ENV_SETTERS, TOKENS
from portcheck.static.cuda_api.statements import assignment
from portcheck.static.syntax import positional, string_value


@rule
class CudaVisibleDevices(Rule):
    """## What it does
    Finds `CUDA_VISIBLE_DEVICES` set from code: `os.environ[...] = `, `os.environ.setdefault`, `os.putenv`.

    ## Example
    ```python
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
    ```

    ## Use instead
    ```python
    os.environ["NEURON_RT_VISIBLE_CORES"] = "0-1"
    ```

    ## Fix safety
    A literal GPU list becomes the same number of NeuronCores: `"0"` stays `"0"`, `"0,1,2,3"` becomes the range
    `"0-3"`, under `NEURON_RT_VISIBLE_CORES`. Unsafe: a NeuronCore is not a GPU (memory per core, cores per
    chip), and code that reads CUDA_VISIBLE_DEVICES back no longer finds it. Lists that are not a contiguous
    range, an empty value (hiding every GPU) and values computed at run time have no fix.
    """

    code = "PC110"
    message = ("`CUDA_VISIBLE_DEVICES` is not read by the Neuron runtime; select NeuronCores with "
               "`NEURON_RT_VISIBLE_CORES` (e.g. \"0-3\") or `NEURON_RT_NUM_CORES`")
    FIXABLE = True
    INVALID = (
        "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'",
        "from os import environ\nenviron['CUDA_VISIBLE_DEVICES'] = '0'",
        "import os\nos.environ.setdefault('CUDA_VISIBLE_DEVICES', '0')",
    )
    VALID = ("import os\nvisible = os.environ.get('CUDA_VISIBLE_DEVICES')",)


@check(cst.AssignTarget, rules=(CudaVisibleDevices,), tokens=TOKENS)
def check_environ_assignment(node: cst.AssignTarget, ctx: Context) -> None:
    target = node.target
    if isinstance(target, cst.Subscript) and ctx.qualname(target.value) == "os.environ":
        key = target.slice[0].slice if len(target.slice) == 1 else None
        if isinstance(key, cst.Index) and string_value(key.value) == "CUDA_VISIBLE_DEVICES":
            assign = assignment(ctx, node)
            fix = _visible_cores_fix(key.value, assign.value) if assign is not None else None
            _report(ctx, target, assign.value if assign is not None else None, fix)


@check(cst.Call, rules=(CudaVisibleDevices,), tokens=TOKENS)
def check_environ_call(node: cst.Call, ctx: Context) -> None:
    if ctx.qualname(node.func) in ENV_SETTERS:
        key, value = positional(node, 0), positional(node, 1)
        if key is not None and string_value(key.value) == "CUDA_VISIBLE_DEVICES":
            fix = _visible_cores_fix(key.value, value.value if value is not None else None)
            _report(ctx, node, value.value if value is not None else None, fix)


def _report(ctx: Context, node: cst.CSTNode, value: cst.BaseExpression | None, fix: FixPlan | None) -> None:
    """`CUDA_VISIBLE_DEVICES=""` or `"-1"` hides every GPU on purpose (to run on the CPU): info, no fix."""
    if value is not None and (string_value(value) or "").strip() in ("", "-1"):
        ctx.report(CudaVisibleDevices, node, "`CUDA_VISIBLE_DEVICES` set to hide every GPU (on purpose, to keep "
                   "CUDA out of this process); the Neuron runtime does not read it, so it neither helps nor hurts "
                   "there", Severity.INFO)
        return
    ctx.report(CudaVisibleDevices, node, fix=fix)


def _core_range(text: str | None) -> str | None:
    """The NeuronCores for the same number of devices, as NEURON_RT_VISIBLE_CORES takes them (an index or an
    inclusive range: KNOWLEDGE.md §2.3): "0" → "0", "0,1,2,3" → "0-3"; None for what has no such spelling."""
    parts = [part.strip() for part in (text or "").split(",")]
    if not all(part.isdigit() for part in parts):
        return None
    numbers = [int(part) for part in parts]
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return None
    return str(numbers[0]) if len(numbers) == 1 else f"{numbers[0]}-{numbers[-1]}"


def _visible_cores_fix(key: cst.BaseExpression, value: cst.BaseExpression | None) -> FixPlan | None:
    """`CUDA_VISIBLE_DEVICES="0,1"` → `NEURON_RT_VISIBLE_CORES="0-1"`: unsafe, a NeuronCore is not a GPU (memory,
    and cores per chip differ), and whatever reads CUDA_VISIBLE_DEVICES back no longer finds it."""
    cores = _core_range(string_value(value)) if value is not None else None
    new_key = literal_like(key, "NEURON_RT_VISIBLE_CORES")
    new_value = literal_like(value, cores) if value is not None and cores is not None else None
    if new_key is None or new_value is None or value is None:
        return None
    steps = [Replace(key, new_key)] + ([Replace(value, new_value)] if string_value(value) != cores else [])
    return FixPlan(f"Set `NEURON_RT_VISIBLE_CORES` to {new_value}", False, tuple(steps))
