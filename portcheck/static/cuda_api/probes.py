"""CUDA probes (PC104): `torch.cuda.is_available()` and its kin, and the code reached only where CUDA is present.

`if torch.cuda.is_available(): torch.cuda.synchronize()` cannot raise on Neuron: the probe is False there, so
the body never runs. The probe itself is reported (PC104 / PC106); what it guards is reported as info with a
note, since it raises as soon as the probe is ported to `torch.accelerator`.
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.ancestry import ancestors, holds
from portcheck.static.check import Context, FixPlan, Replace
from portcheck.static.cuda_api.apis import api_entry
from portcheck.static.cuda_api.checkpoints import COPY_OPTIONS, only_maps_a_checkpoint, only_passed_as
from portcheck.static.cuda_api.choice import after_exit, exits, housekeeping, picks_nothing
from portcheck.static.cuda_api.devices import device_text, is_cuda_text, one_line, placements
from portcheck.static.cuda_api.paths import CUDA, NOT_CUDA, SKIP_TESTS, cuda_path, polarity, probe_call
from portcheck.static.cuda_api.refusals import refused_library
from portcheck.static.cuda_api.shown import only_returned, only_shown
from portcheck.static.syntax import block_body, call_name, small_statements, string_prefix
from portcheck.static.values import and_operands, catching_everything, contains
from portcheck.static.walk import any_call, visit


@rule
class CudaAvailabilityProbe(Rule):
    """## What it does
    Finds `torch.cuda.is_available()`, `device_count()`, `is_bf16_supported()`, `is_initialized()` and
    `get_arch_list()`. Reported as info where skipping what it guards is right on Neuron: it only decides whether a
    message is logged (`if torch.cuda.device_count() > 1: logger.warning(...)`), guards only CUDA housekeeping
    (`empty_cache()`, memory counters, GPU queries, NVML, nvidia-smi), decides whether a CUDA test runs
    (`unittest.skipUnless(torch.cuda.device_count() > 1, ...)`), asks `is_initialized()`, sits on a CUDA-only
    path itself, or picks no device: every branch it decides, directly or through a local name bound to it once,
    places nothing on a device (a profiler's activities, a diagnostic). A probe that picks the device (a device
    string, `.cuda()`, `.to()`, `torch.device`, a `device=` / `accelerator=` keyword), refuses to run without CUDA
    (`assert`), or whose value goes where this cannot follow (returned with other values, stored on an object,
    passed on) stays a warning.

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
    or a `torch.cuda` call no fix rewrites, nor where the probe's value is stored (`use_gpu =
    torch.cuda.is_available()`), nor an early exit (`if not torch.cuda.is_available(): return`), whose guarded code
    follows out of view. Fixes inside the branch are offered only with a probe the stack can rewrite.
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
    return probe_call(ctx, node)


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


def _cuda_only(ctx: Context, node: cst.CSTNode) -> cst.BaseExpression | None:
    """The probe that keeps `node` from running on Neuron: it sits in the body of `if torch.cuda.is_available():`
    (or of `x if torch.cuda.is_available() else y`)."""
    for index, stmt in enumerate(ctx.statements):
        if isinstance(stmt, cst.If) and ctx.memo("cuda-probe-in", stmt, lambda: probe_in(ctx, stmt.test)):  # noqa: B023
            inner = ctx.statements[index + 1] if index + 1 < len(ctx.statements) else node
            if holds(ctx, stmt.body, inner):
                return stmt.test
    ifexp = _probe_around(ctx, node, "body")
    return ifexp.test if ifexp is not None else None


def _probe_around(ctx: Context, node: cst.CSTNode, part: str) -> cst.IfExp | None:
    """The outermost `body if <cuda probe> else other` met in the statement whose `part` holds `node`: read up the
    node's ancestors, not by searching each probe expression."""
    probes = probe_expressions(ctx)
    if not probes:
        return None
    met = {id(e) for e in probes}
    path = [*ancestors(ctx, node), node]
    for index, holder in enumerate(path[:-1]):
        if id(holder) in met and path[index + 1] is getattr(holder, part):
            return cast(cst.IfExp, holder)
    return None


def _portable(ctx: Context, test: cst.BaseExpression) -> bool:
    """Every torch.cuda call of the probe's test has a fix on this stack: the port reaches what it guards."""
    finder = _StrayCuda(ctx, set())
    visit(test, finder)
    return not finder.found


# What places tensors or a model on a device (and `torch.cuda.set_device`, which picks the process's device): under a
# configured number of GPUs (`if args.ngpu > 0: model.cuda()`) it is where the configuration picks CUDA or the CPU,
# which a Neuron host must change (paths.cuda_path's `counts`).
_PLACEMENTS = frozenset({"PC101", "PC102", "PC103"})


def report_guarded(ctx: Context, reported: type[Rule], node: cst.CSTNode, message: str | None = None,
                   fix: FixPlan | None = None, *, raises: bool = True, severity: Severity | None = None,
                   **fields: object) -> None:
    """Report `reported` at `node` (worded by `message`, or by its template and `fields`), as info where a CUDA
    probe keeps `node` from running on Neuron; `raises`: it raises once that probe is ported (a call that does
    nothing without CUDA does not). On another CUDA-only path (`if x.device.type == "cuda":`, after
    `if not torch.cuda.is_available(): return`) it is info too, without a fix: no port reaches it."""
    message = reported.format(**fields) if message is None else message
    probe = _cuda_only(ctx, node)
    handler = catching_everything(ctx, node) if raises and probe is None else None
    if handler is not None:  # what it raises without CUDA is caught: on Neuron the code takes the handler's path
        ctx.report(reported, node, f"{message} (inside `try` with `{handler}`, which carries on: on Neuron it "
                   "takes that path)", Severity.INFO)
        return
    if probe is None:
        named = node.func if isinstance(node, cst.Call) else node
        path = cuda_path(ctx, node, counts=reported.code not in _PLACEMENTS and not (
            isinstance(named, cst.BaseExpression) and ctx.qualname(named) == "torch.cuda.set_device"))
        if path is None:
            ctx.report(reported, node, message, severity, fix)
        else:
            ctx.report(reported, node, f"{message} (a CUDA-only path, {path}: it does not run on Neuron)",
                       Severity.INFO)
        return
    then = ": it raises once that probe is ported" if raises else ""
    # A fix inside the branch only counts where the probe is ported too; otherwise its result never runs.
    ctx.report(reported, node, f"{message} (reached only where CUDA is present, under `{one_line(ctx.source(probe))}`"
               f"{then})", Severity.INFO, fix if _portable(ctx, probe) else None)


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
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or not holds(ctx, stmt.test, node):
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
        if isinstance(node, cst.Attribute):
            qualname = self.ctx.qualname(node) or ""
            if qualname.startswith("torch.cuda."):  # a CUDA call the port would reach and no fix rewrites
                api = api_entry(qualname[len("torch.cuda."):])
                self.found = api is None or api.fix(self.ctx.stack, self.ctx.sdk) is None
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
    if (ifexp := _probe_around(ctx, call, "test")) is not None:
        prefix = string_prefix(ifexp.body)
        if prefix is None or not is_cuda_text(prefix):
            return None if _stray_cuda(ctx, ifexp, set()) else ([], ())
        code, imports = device_text(ctx, ifexp.body)
        return None if _stray_cuda(ctx, ifexp, {id(ifexp.body)}) else ([Replace(ifexp.body, code)], imports)
    stmt = ctx.statements[-1] if ctx.statements else None
    if not isinstance(stmt, cst.If) or not holds(ctx, stmt.test, call) or _stray_cuda(ctx, stmt, set()):
        return None
    if polarity(ctx, stmt.test) == NOT_CUDA and exits(stmt.body):
        return None  # `if not torch.cuda.is_available(): return`: what it guards follows, out of view
    return [], ()


# ---- what a probe decides -----------------------------------------------------------------------------------------

def probe_note(ctx: Context, node: cst.CSTNode) -> str | None:
    """Why the probe at `node` is no porting problem, or None: it decides whether a CUDA test runs, or it guards
    only CUDA housekeeping, which is right to skip on Neuron."""
    if test_gate_argument(ctx, node):
        return "here it decides whether a CUDA test runs: skipping it without CUDA is intended"
    if isinstance(node, cst.BaseExpression) and (ctx.qualname(node) or "").endswith(".is_initialized"):
        return ("it asks whether this process has set CUDA up (fork safety, RNG state), which False answers right "
                "on Neuron")
    if path := cuda_path(ctx, node, expressions=False):  # `device.type == "cuda" and not probe`: a fallback
        return f"here on a CUDA-only path, {path}"
    if (probe := _cuda_only(ctx, node)) is not None:
        return f"here reached only where CUDA is present, under `{one_line(ctx.source(probe))}`"
    if (library := refused_library(ctx, node)) is not None:
        return (f"here it only refuses {library}'s path off CUDA, the code's own check for a CUDA-only library: a "
                f"port to Neuron takes the path without {library}")
    if data_preparation(ctx):
        return ("here in data preparation, which runs on the host: without CUDA it runs on the CPU, as host-side "
                "preprocessing should")
    stmt = ctx.statements[-1] if ctx.statements else None
    if only_maps_a_checkpoint(ctx, node, stmt):
        return ("here it only picks where a checkpoint's tensors are loaded (`map_location`): on Neuron they load "
                "on the CPU and move with the model")
    if only_passed_as(ctx, node, stmt, *COPY_OPTIONS):
        return ("here it only picks asynchronous copies or pinned memory (`non_blocking=`, `pin_memory=`), which "
                "have a working fallback without CUDA")
    if only_shown(ctx, node, stmt):
        return "here its value is only shown (printed, logged or put in a report): it decides nothing"
    if only_returned(ctx, node, stmt):
        return ("here it is all a function returns: the function answers whether CUDA is there, rightly False on "
                "Neuron; a device is chosen where it is called")
    chain = next((a for a in ancestors(ctx, node) if isinstance(a, cst.BooleanOperation)
                  and isinstance(a.operator, cst.And)), None)  # the outermost `and` (ancestors: outermost first)
    if chain is not None and (before := _cuda_operand_before(ctx, chain, node)) is not None:
        return f"here asked only where `{one_line(ctx.source(before))}` holds, which only a CUDA process has"
    if not isinstance(stmt, cst.If) or not holds(ctx, stmt.test, node):
        return picks_nothing(ctx, node, stmt)
    if "PYTEST_CURRENT_TEST" in ctx.source(stmt.test):
        return "here it decides a workaround for the project's own test runs"
    side = polarity(ctx, stmt.test)
    if side == CUDA:
        region: list[cst.CSTNode] = [stmt.body]
    elif side == NOT_CUDA and stmt.orelse is None and exits(stmt.body) and len(ctx.statements) > 1:
        region = after_exit(ctx, stmt)
    else:
        return picks_nothing(ctx, node, stmt)
    if region and housekeeping(ctx, region):
        return ("here it only guards CUDA housekeeping (cache, counters, GPU queries, synchronisation, cuDNN flags, "
                "CUDA's environment variables, NVML), which is right to skip on Neuron")
    return picks_nothing(ctx, node, stmt)


def _cuda_operand_before(ctx: Context, test: cst.BaseExpression, node: cst.CSTNode) -> cst.BaseExpression | None:
    """`backend == "nccl" and torch.cuda.is_available()`: an `and` operand before the probe's that holds only with
    CUDA, so that the probe is never asked on Neuron. Not for `device.type == "cuda" and not probe`, whose body is
    the CPU fallback a Neuron host asked for CUDA takes."""
    before: cst.BaseExpression | None = None
    for operand in and_operands(test):
        if holds(ctx, operand, node):
            return before if polarity(ctx, operand) == CUDA else None
        if before is None and polarity(ctx, operand) == CUDA:
            before = operand
    return None


def data_preparation(ctx: Context) -> bool:
    """The file is a dataset module (`datasets/…`, `…_dataset.py`): host-side data preparation."""
    parts = ctx.path.replace("\\", "/").split("/")
    return "datasets" in parts[:-1] or parts[-1].removesuffix(".py").endswith(("_dataset", "_datasets"))


def seeded_already(ctx: Context) -> bool:
    """`torch.manual_seed(...)` is called in the same function (or module): it seeds every device already."""
    scope: cst.CSTNode = ctx.functions[-1] if ctx.functions else ctx.module
    return any_call(scope, lambda call: ctx.qualname(call.func) == "torch.manual_seed")


def test_gate_argument(ctx: Context, node: cst.CSTNode) -> bool:
    """`node` is in the condition of `unittest.skipUnless(...)` / `pytest.mark.skipif(...)`: it decides whether a
    test runs."""
    path = [*ancestors(ctx, node), node]  # the calls holding `node`, read from the statement's parents
    found = any(isinstance(call, cst.Call) and call_name(call) in SKIP_TESTS and call.args
                and index + 2 < len(path) and path[index + 2] is call.args[0].value for index, call in enumerate(path))
    if not found:
        for function in ctx.functions[-1:]:
            found = any(contains(d.decorator, node) for d in function.decorators)
    return found
