"""GradScaler (PC602): gradient scalers built for CUDA, reported where they are built, and the fix that removes
them with the `scaler.scale(loss)` / `scaler.step(optimizer)` statements that use them."""

from __future__ import annotations

from typing import Literal

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.branches import version_fallback
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.codegen import indentation, parenthesized
from portcheck.static.cuda_api import cuda_device
from portcheck.static.syntax import dotted_name, keyword, positional
from portcheck.static.training.quoting import one_line
from portcheck.static.walk import visit


@rule
class GradScaler(Rule):
    """## What it does
    Finds gradient scalers built for CUDA: `torch.cuda.amp.GradScaler()`, `torch.amp.GradScaler("cuda")`,
    `torch.GradScaler()` and `torch.amp.GradScaler()` (whose device defaults to `"cuda"`), FSDP's
    `ShardedGradScaler`, through any import alias. It reports the construction once; the `scaler.scale(loss)`,
    `scaler.step(optimizer)` and `scaler.update()` calls go away with it. A scaler built with
    `enabled=False`, for the CPU, for a device known only at run time, or as the fallback for an older torch
    (`torch.amp.GradScaler(device=d) if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()`) stays quiet.

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    ```

    ## Use instead
    ```python
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        loss = model(batch)
    loss.backward()
    optimizer.step()
    ```

    ## Fix safety
    One unsafe fix removes the scaler: the `scaler = GradScaler(...)` line goes, `scaler.scale(loss).backward()`
    becomes `loss.backward()`, `scaler.step(optimizer)` becomes `optimizer.step()`, and `scaler.update()` /
    `scaler.unscale_(optimizer)` go (a block left empty keeps a `pass`). It is offered only where every use of
    the name in its scope (the function that builds it, or the file for a module-level scaler) is one of those
    statements: a scaler passed to a function, checkpointed (`scaler.state_dict()`), tested (`if scaler:`) or
    kept on `self` gets no fix. Unsafe because it deletes statements, and a region still in fp16 loses its loss
    scaling: apply it with the PC601 fix, which moves autocast to bf16.
    """

    code = "PC602"
    message = ("`{shown}` scales an fp16 loss for CUDA and disables itself without a CUDA device; BF16, Neuron's "
               "mixed-precision type, needs no loss scaling: remove the scaler (call `loss.backward()` and "
               "`optimizer.step()` directly) and train with {bf16}")
    FIXABLE = True
    INVALID = (
        "import torch\nscaler = torch.cuda.amp.GradScaler()",
        "import torch\nscaler = torch.amp.GradScaler('cuda')",
        "import torch\nscaler = torch.GradScaler()",
        "from torch.cuda.amp import GradScaler as GS\nscaler = GS(enabled=args.fp16)",
        "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\ns = ShardedGradScaler()",
    )
    VALID = (
        "import torch\nscaler = torch.amp.GradScaler('cpu')",
        "import torch\nscaler = torch.cuda.amp.GradScaler(enabled=False)",
        "import torch\nscaler = torch.amp.GradScaler(device=device.type)",
        "scaler.scale(loss).backward()\nscaler.step(optimizer)",
        "scaler = GradScaler()  # not torch's: nothing imported",
        "import torch\ns = torch.amp.GradScaler(device=d) if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()",
    )


SCALER_TOKENS = ("GradScaler",)

_CUDA_SCALERS = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
# These take the device first (`device="cuda"` by default).
_SCALERS = frozenset({
    "torch.amp.GradScaler", "torch.GradScaler", "torch.amp.grad_scaler.GradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
})

class _ScalerUses(cst.CSTVisitor):
    """One pass over the file for the scaler bound by `construction` (`scaler = GradScaler()`): how each of its
    uses goes away with it. `known` is False after any use other than `scaler.scale(loss).backward()`,
    `scaler.step(optimizer)`, `scaler.update()` and `scaler.unscale_(optimizer)` as statements of their own."""

    def __init__(self, ctx: Context, name: str, construction: cst.SimpleStatementLine, indents: list[str]) -> None:
        self.ctx = ctx
        self.name = name
        self.construction = construction
        self.known = True
        self.accounted: set[int] = set()  # Name nodes of recognised uses
        self.not_references: set[int] = set()  # attribute and keyword names
        self.indents = indents  # of the blocks the visit is in
        self.blocks: list[cst.Module | cst.IndentedBlock] = []
        self.replacements: list[Replace] = []
        # block -> (statements a block must keep: 0 in the module, 1 in an indented block; its size; deletions)
        self.deleted: dict[int, tuple[int, int, list[cst.SimpleStatementLine]]] = {}

    def visit_Module(self, node: cst.Module) -> None:
        self.blocks.append(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.append(node)
        self.indents.append(self.ctx.module.default_indent if node.indent is None else node.indent)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self.blocks.pop()
        self.indents.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1:
            return
        use = self._use(node, node.body[0])
        if use == "delete":
            block = self.blocks[-1]
            least = 0 if isinstance(block, cst.Module) else 1
            self.deleted.setdefault(id(block), (least, len(block.body), []))[2].append(node)
        elif isinstance(use, Replace):
            self.replacements.append(use)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        """`else: scaler.update()`: a body on the line of its header keeps a `pass`."""
        if len(node.body) == 1:
            use = self._use(node, node.body[0])
            if use == "delete":
                self.replacements.append(Replace(node.body[0], "pass"))
            elif isinstance(use, Replace):
                self.replacements.append(use)

    def _use(self, line: cst.CSTNode, small: cst.BaseSmallStatement) -> Literal["delete"] | Replace | None:
        if line is self.construction:
            assert isinstance(small, cst.Assign)  # `name = GradScaler(...)`, as _scaler_fix chose it
            self.accounted.add(id(small.targets[0].target))
            return "delete"
        call = small.value if isinstance(small, cst.Expr) else None
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return None
        receiver, method = call.func.value, call.func.attr.value
        if self._is_scaler(receiver) and method in ("update", "unscale_"):  # no-ops once the scaler is gone
            self.accounted.add(id(receiver))
            return "delete"
        if self._is_scaler(receiver) and method == "step" and self._one_positional(call):
            self.accounted.add(id(receiver))  # `scaler.step(opt)` steps `opt` unless it skips the step
            return Replace(call, f"{parenthesized(self.ctx, call.args[0].value, self.indents)}.step()")
        scale = receiver
        if (method == "backward" and isinstance(scale, cst.Call) and isinstance(scale.func, cst.Attribute)
                and scale.func.attr.value == "scale" and self._is_scaler(scale.func.value)
                and self._one_positional(scale)):
            self.accounted.add(id(scale.func.value))
            return Replace(scale, parenthesized(self.ctx, scale.args[0].value, self.indents))
        return None

    def _is_scaler(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Name) and node.value == self.name

    @staticmethod
    def _one_positional(call: cst.Call) -> bool:
        return len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.not_references.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.not_references.add(id(node.keyword))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self.accounted and id(node) not in self.not_references:
            self.known = False

    def plan(self) -> tuple[Replace, ...]:
        """The replacements, with `pass` for the first statement of a block that would be left empty."""
        steps = list(self.replacements)
        for least, size, lines in self.deleted.values():
            first = 0
            if size - len(lines) < least:
                steps.append(Replace(lines[0].body[0], "pass"))
                first = 1
            steps.extend(Replace(line, "", whole_lines=True) for line in lines[first:])
        return tuple(steps)


def _scaler_fix(ctx: Context, node: cst.Call) -> FixPlan | None:
    """Remove the scaler and rewrite its uses (KNOWLEDGE.md §3.4: BF16 needs no loss scaling). Unsafe: it
    removes statements, and the loss is no longer scaled. Only for `name = GradScaler(...)` on a line of its own
    whose every use in its scope is a recognised statement."""
    line = ctx.statements[-1] if ctx.statements else None
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    assign = line.body[0]
    if not (isinstance(assign, cst.Assign) and assign.value is node and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)):
        return None
    # The scope whose code can see the name: the function binding it (its nested functions included), or the
    # whole file for a module-level scaler. In a class body it is an attribute, used as `self.scaler`: no fix.
    scope = next((i for i in range(len(ctx.statements) - 2, -1, -1)
                  if isinstance(ctx.statements[i], (cst.FunctionDef, cst.ClassDef))), None)
    if scope is None:
        node_to_visit: cst.CSTNode = ctx.module
        indents: list[str] | None = []
    elif isinstance(ctx.statements[scope], cst.ClassDef):
        return None
    else:
        node_to_visit = ctx.statements[scope]
        indents = indentation(ctx, scope)
    if indents is None:
        return None
    uses = _ScalerUses(ctx, assign.targets[0].target.value, line, indents)
    visit(node_to_visit, uses)
    if not uses.known:
        return None
    return FixPlan("Remove the GradScaler: `loss.backward()`, `optimizer.step()`", False, uses.plan())


@check(cst.Call, rules=(GradScaler,), tokens=SCALER_TOKENS)
def check_grad_scaler(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname in _SCALERS:
        device = keyword(node, "device") or positional(node, 0)
        if device is not None and cuda_device(ctx, device.value) is None:
            return  # a CPU scaler, or a device only known at run time
        enabled = keyword(node, "enabled")
    elif qualname in _CUDA_SCALERS:
        enabled = keyword(node, "enabled") or positional(node, 4)
    else:
        return
    if enabled is not None and dotted_name(enabled.value) == "False":
        return
    if version_fallback(ctx, node):
        return  # the fallback for an older torch (`... if _TORCH_GE_2_4 else torch.cuda.amp.GradScaler()`)
    if ctx.stack == "native":
        bf16 = '`torch.autocast(device_type="neuron", dtype=torch.bfloat16)`'
    else:
        bf16 = ('`torch.autocast("xla", dtype=torch.bfloat16)` (with `NEURON_CC_FLAGS="--auto-cast=none"`) or '
                "`model.to(torch.bfloat16)` with `NEURON_RT_STOCHASTIC_ROUNDING_EN=1`")
    # Without CUDA the scaler turns itself off: harmless where the code's autocast is CUDA's too (it is off as
    # well, PC601, so nothing runs in fp16); where an autocast follows the device, fp16 now runs unscaled.
    severity = None if _device_following_autocast(ctx) else Severity.INFO
    ctx.report(GradScaler, node, fix=_scaler_fix(ctx, node), severity=severity, shown=one_line(ctx.source(node)),
               bf16=bf16)


def _device_following_autocast(ctx: Context) -> bool:
    """The function that builds the scaler enters an autocast whose device is not CUDA's
    (`torch.autocast(device_type=device.type)`); a scaler built at module level may serve any such autocast."""
    if not ctx.functions:
        return True
    scope = ctx.functions[0]
    def compute() -> bool:
        found = False

        class Finder(cst.CSTVisitor):
            def visit_Call(self, call: cst.Call) -> bool:
                nonlocal found
                qualname = ctx.qualname(call.func) or ""
                if qualname in ("torch.autocast", "torch.amp.autocast"):
                    device = keyword(call, "device_type") or positional(call, 0)
                    found = found or (device is not None and cuda_device(ctx, device.value) is None)
                return not found

        visit(scope, Finder())
        return found

    return ctx.memo("device-following-autocast", scope, compute)

