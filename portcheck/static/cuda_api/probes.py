"""CUDA probes (PC104): `torch.cuda.is_available()` and its kin, and the code reached only where CUDA is present.

`if torch.cuda.is_available(): torch.cuda.synchronize()` cannot raise on Neuron: the probe is False there, so
the body never runs. The probe itself is reported (PC104 / PC106); what it guards is reported as info with a
note, since it raises as soon as the probe is ported to `torch.accelerator`.
"""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, FixPlan, Replace
from portcheck.static.cuda_api.apis import api_entry
from portcheck.static.cuda_api.devices import device_text, is_cuda_text, one_line, placements
from portcheck.static.syntax import block_body, small_statements, string_prefix
from portcheck.static.values import contains
from portcheck.static.walk import visit


@rule
class CudaAvailabilityProbe(Rule):
    """## What it does
    Finds `torch.cuda.is_available()`, `device_count()`, `is_bf16_supported()`, `is_initialized()` and
    `get_arch_list()`. Reported as info where the probe only decides whether a message is logged
    (`if torch.cuda.device_count() > 1: logger.warning(...)`).

    ## Example
    ```python
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ```

    ## Use instead
    ```python
    device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
    ```

    ## Fix safety
    `is_bf16_supported()` becomes `True` (every NeuronCore supports BF16): safe. On native, `is_available()` and
    `device_count()` become their `torch.accelerator` namesakes, on xla `device_count()` becomes
    `torch_xla.device_count()`: unsafe, since the probe then answers yes on Neuron and the other branch runs.
    Offered only where what the probe decides is in view: the test of an `if`, or `"cuda" if probe else "cpu"`
    (whose `"cuda"` becomes the stack's device in the same fix); not where that code holds a CUDA device string
    no fix rewrites, nor where the probe's value is stored (`use_gpu = torch.cuda.is_available()`).
    """

    code = "PC104"
    FIXABLE = True
    INVALID = (
        "import torch\nok = torch.cuda.is_available()",
        "from torch import cuda\nn = cuda.device_count()",
        "from torch.cuda import is_bf16_supported as bf16\nuse = bf16()",
    )
    VALID = (
        "import torch\ntorch.cuda.is_bf16_supported = lambda: True",
        "import torch\nok = torch.accelerator.is_available()",
        "ok = cuda.is_available()  # cuda is not imported from torch here",
    )


_POSITIVE = (cst.GreaterThan, cst.GreaterThanEqual, cst.NotEqual)


def _cuda_probe(ctx: Context, node: cst.BaseExpression) -> bool:
    """`torch.cuda.is_available()`, `torch.cuda.device_count() > 1`, `len(torch.cuda.default_generators) > 0`:
    true only where CUDA is present (an API that reads False or 0 without it, tested for truth)."""
    if isinstance(node, cst.Comparison):
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, _POSITIVE):
            return False
        node = node.left
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len" and node.args:
            node = node.args[0].value
    if isinstance(node, cst.Call):
        node = node.func
    qualname = ctx.qualname(node)
    if qualname is None or not qualname.startswith("torch.cuda."):
        return False
    api = api_entry(qualname[len("torch.cuda."):])
    return api is not None and api.behaviour in ("returns-false", "returns-zero")


def probe_in(ctx: Context, test: cst.BaseExpression) -> bool:
    """The test holds only where CUDA is present: a probe, alone or in an `and` chain."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return probe_in(ctx, test.left) or probe_in(ctx, test.right)
    return _cuda_probe(ctx, test)


def probe_expressions(ctx: Context) -> list[cst.IfExp]:
    """Each `body if <cuda probe> else other` met so far in the current statement."""
    if not ctx.statements:
        return []
    return ctx.memo("cuda-probe-ifexp", ctx.statements[-1], list)


def _cuda_only(ctx: Context, node: cst.CSTNode) -> str | None:
    """The probe that keeps `node` from running on Neuron: it sits in the body of `if torch.cuda.is_available():`
    (or of `x if torch.cuda.is_available() else y`)."""
    for index, stmt in enumerate(ctx.statements):
        if isinstance(stmt, cst.If) and probe_in(ctx, stmt.test):
            inner = ctx.statements[index + 1] if index + 1 < len(ctx.statements) else node
            if contains(stmt.body, inner):
                return one_line(ctx.source(stmt.test))
    for ifexp in probe_expressions(ctx):
        if contains(ifexp.body, node):
            return one_line(ctx.source(ifexp.test))
    return None


def report_guarded(ctx: Context, reported: type[Rule], node: cst.CSTNode, message: str | None = None,
                   fix: FixPlan | None = None, *, raises: bool = True, **fields: object) -> None:
    """Report `reported` at `node` (worded by `message`, or by its template and `fields`), as info where a CUDA
    probe keeps `node` from running on Neuron; `raises`: it raises once that probe is ported (a call that does
    nothing without CUDA does not)."""
    message = reported.format(**fields) if message is None else message
    probe = _cuda_only(ctx, node)
    if probe is None:
        ctx.report(reported, node, message, fix=fix)
        return
    then = ": it raises once that probe is ported" if raises else ""
    ctx.report(reported, node, f"{message} (reached only where CUDA is present, under `{probe}`{then})", Severity.INFO,
               fix)


_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "warning_once", "info_once"})


def _logs(ctx: Context, small: cst.BaseSmallStatement) -> bool:
    """`logger.warning(...)`, `logging.info(...)`, `warnings.warn(...)`, `print(...)` as a statement."""
    if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
        return False
    func = small.value.func
    if isinstance(func, cst.Name):
        return func.value == "print" and "print" not in ctx.names.aliases
    if not isinstance(func, cst.Attribute) or func.attr.value not in _LOG_METHODS:
        return False
    if ctx.qualname(func) == "warnings.warn":
        return True
    receiver = func.value.attr.value if isinstance(func.value, cst.Attribute) else getattr(func.value, "value", "")
    return isinstance(receiver, str) and "log" in receiver.lower()


def only_logs(ctx: Context, node: cst.CSTNode) -> bool:
    """`node` is in the test of an `if` (without `else`) whose body only logs: the probe decides a message."""
    stmt = ctx.statements[-1] if ctx.statements else None
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or not contains(stmt.test, node):
        return False
    if isinstance(stmt.body, cst.SimpleStatementSuite):
        smalls = list(stmt.body.body)
    elif all(isinstance(line, cst.SimpleStatementLine) for line in stmt.body.body):
        smalls = list(small_statements(block_body(stmt.body)))
    else:
        return False
    return bool(smalls) and all(_logs(ctx, small) for small in smalls)


# ---- fixes ---------------------------------------------------------------------------------------------------------


class _StrayCuda(cst.CSTVisitor):
    """Finds a CUDA device string that no fix rewrites (`device = "cuda"`, `if dev == "cuda":`)."""

    def __init__(self, ctx: Context, allowed: set[int]) -> None:
        super().__init__()
        self.ctx, self.allowed = ctx, set(allowed)
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found or id(node) in self.allowed:
            return False
        if isinstance(node, cst.Call):
            self.allowed.update(id(a.value) for kind, a in placements(self.ctx, node) if kind != "device_map")
        elif isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            prefix = string_prefix(node)
            self.found = prefix is not None and is_cuda_text(prefix)
            return False
        return True


def _stray_cuda(ctx: Context, node: cst.CSTNode, allowed: set[int]) -> bool:
    finder = _StrayCuda(ctx, allowed)
    visit(node, finder)
    return finder.found


def probe_steps(ctx: Context, call: cst.Call) -> tuple[list[Replace], tuple[str, ...]] | None:
    """A probe is rewritten only where what it decides is in view: the test of an `if`, or of `a if probe else b`
    (whose `"cuda"` becomes the stack's device too), without other CUDA device strings that would then be
    reached; elsewhere (`use_gpu = torch.cuda.is_available()`) no fix."""
    for ifexp in probe_expressions(ctx):
        if contains(ifexp.test, call):
            prefix = string_prefix(ifexp.body)
            if prefix is None or not is_cuda_text(prefix):
                return None if _stray_cuda(ctx, ifexp, set()) else ([], ())
            code, imports = device_text(ctx, ifexp.body)
            return None if _stray_cuda(ctx, ifexp, {id(ifexp.body)}) else ([Replace(ifexp.body, code)], imports)
    stmt = ctx.statements[-1] if ctx.statements else None
    if isinstance(stmt, cst.If) and contains(stmt.test, call) and not _stray_cuda(ctx, stmt, set()):
        return [], ()
    return None
