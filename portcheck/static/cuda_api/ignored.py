"""What Neuron ignores (PC106, PC109): `torch.cuda` calls that do nothing without CUDA, and cuDNN / CUDA-backend
settings; their fixes remove the statement.

Both are reported where `torch.cuda` and `torch.backends` are referenced (torch_cuda.py).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, FixPlan, Replace
from portcheck.static.cuda_api.apis import api_entry
from portcheck.static.cuda_api.statements import assignment
from portcheck.static.syntax import blocks, one_line_suites

BACKENDS = ("torch.backends.cudnn", "torch.backends.cuda")


@rule
class CudaSilentCall(Rule):
    """## What it does
    Finds `torch.cuda` calls that silently do nothing without CUDA: `manual_seed`, `manual_seed_all`, `seed`,
    `empty_cache`, and memory counters that read 0 (`memory_allocated`, `max_memory_reserved`, ...).

    ## Example
    ```python
    torch.cuda.manual_seed_all(seed)
    ```

    ## Use instead
    ```python
    torch.manual_seed(seed)  # seeds every device
    ```

    ## Fix safety
    Native: `empty_cache()` and the memory counters become their `torch.accelerator` counterparts (safe);
    `manual_seed`, `manual_seed_all`, `seed` become `torch.manual_seed` / `torch.seed`, unsafe since those seed
    the CPU generator too. xla: `manual_seed` / `manual_seed_all` become `torch_xla.manual_seed` (safe), and
    `empty_cache()`, which PyTorch/XLA has no counterpart for, is removed (unsafe: it does nothing there, but a
    GPU run of the same code no longer releases its cached memory; a block it would leave empty keeps a `pass`).
    """

    code = "PC106"
    FIXABLE = True
    INVALID = (
        "import torch\ntorch.cuda.manual_seed_all(0)",
        "import torch\ntorch.cuda.empty_cache()",
        "import torch\nused = torch.cuda.memory.memory_allocated()",
    )
    VALID = ("import torch\ntorch.manual_seed(0)",)


@rule
class CudnnSetting(Rule):
    """## What it does
    Finds `torch.backends.cudnn.*` and `torch.backends.cuda.*` settings and queries
    (`cudnn.benchmark = True`, `cudnn.deterministic`, `cuda.matmul.allow_tf32`, `cudnn.flags(...)`). Neuron ignores
    them, so nothing breaks: advice (info), to remove what no longer means anything.

    ## Example
    ```python
    torch.backends.cudnn.benchmark = True
    ```

    ## Use instead
    Remove the setting. Precision on Neuron is chosen with neuronx-cc's `--auto-cast`.

    ## Fix safety
    An assignment to a setting that stands alone on its line is removed. Unsafe: the setting has no effect on
    Neuron, but the same code run on a GPU loses it (`cudnn.deterministic = True` changes its results). A block
    it would leave empty keeps a `pass` (as does `if x: cudnn.benchmark = True`). Queries,
    `with torch.backends.cudnn.flags(...)` and settings on a CUDA-only path (`if use_cuda:`) have no fix.
    """

    code = "PC109"
    FIXABLE = True
    INVALID = (
        "import torch\ntorch.backends.cudnn.benchmark = True",
        "from torch.backends import cudnn\ncudnn.deterministic = True",
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True",
    )
    VALID = ("import torch\ntorch.backends.mkldnn.enabled = True", "cudnn_benchmark = True")


def setting_fix(ctx: Context, target: cst.AssignTarget) -> FixPlan | None:
    """A setting's fix (`torch.backends.cudnn.benchmark = True`): its statement goes, where the setting stands
    alone on its line."""
    assign = assignment(ctx, target)
    step = removal(ctx, lambda small: small is assign) if assign is not None else None
    # Unsafe: Neuron ignores the setting, but a GPU run of the same code loses it.
    return None if step is None else FixPlan("Remove the setting (ignored on Neuron; a GPU run loses it)", False,
                                             (step,))


def _removable(ctx: Context, stmt: cst.CSTNode) -> bool:
    """A line this family's fixes delete: a cuDNN / CUDA-backend setting, or a call that does nothing here."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and CudnnSetting.code in ctx.enabled:
        qualname = ctx.qualname(small.targets[0].target)
        return qualname is not None and any(qualname.startswith(b + ".") for b in BACKENDS)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and CudaSilentCall.code in ctx.enabled:
        qualname = ctx.qualname(small.value.func) or ""
        api = api_entry(qualname[len("torch.cuda."):]) if qualname.startswith("torch.cuda.") else None
        spec = api.fix(ctx.stack, ctx.sdk) if api is not None else None
        return spec is not None and spec.remove
    return False


def removal(ctx: Context, is_target: Callable[[cst.BaseSmallStatement], bool]) -> Replace | None:
    """Delete the statement being visited, a line that holds only the target statement; a block it would leave
    empty keeps a `pass` (as does `if x: target` on one line). None where the target shares its line."""
    stmt = ctx.statements[-1] if ctx.statements else None
    if stmt is None:
        return None
    if isinstance(stmt, cst.SimpleStatementLine):
        if len(stmt.body) != 1 or not is_target(stmt.body[0]) or not _removable(ctx, stmt):
            return None
        if len(ctx.statements) == 1:
            return Replace(stmt, "", whole_lines=True)
        block = next((b for b in blocks(ctx.statements[-2]) if any(s is stmt for s in b)), None)
        if block is None:
            return None
        removable = [s for s in block if _removable(ctx, s)]
        if len(removable) == len(block) and removable[0] is stmt:  # the block's other lines go too: keep one
            return Replace(stmt.body[0], "pass")
        return Replace(stmt, "", whole_lines=True)
    for suite in one_line_suites(stmt):
        if len(suite.body) == 1 and is_target(suite.body[0]):
            return Replace(suite.body[0], "pass")
    return None
