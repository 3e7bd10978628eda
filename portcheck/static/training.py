"""training (PC601-PC603, PC607, PC608): mixed precision written for CUDA, and training loops Neuron runs differently.

CUDA autocast and GradScaler disable themselves on a host without CUDA (and whenever torch_xla is imported),
so a ported training step silently runs in fp32 with a no-op scaler; Neuron's mixed-precision type is BF16,
which needs no loss scaling. Training code aimed at Inf2 targets a chip Neuron documents for inference only,
and a PyTorch/XLA training loop without a step boundary grows one graph across iterations.

`torch.cuda.amp` is judged here, not in cuda_api.py. A GradScaler is reported once, where it is built; the
`scaler.scale(loss)` / `scaler.step(opt)` calls that use it go away with it.
"""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.codegen import (
    indentation,
    keyword_arg,
    literal_like,
    new_literal,
    parenthesized,
    rewritten,
    spelling,
    with_arg,
)
from portcheck.static.cuda_api import cuda_device
from portcheck.static.rule import (
    Context,
    FixPlan,
    Replace,
    Rule,
    call_name,
    check,
    keyword,
    positional,
    rule,
    string_value,
)
from portcheck.static.syntax import dotted_name
from portcheck.static.values import dtype_of
from portcheck.static.walk import visit

AUTOCAST_TOKENS = ("autocast", "custom_fwd", "custom_bwd")  # `partial(torch.autocast, ...)` too
SCALER_TOKENS = ("GradScaler",)
FP16_TOKENS = ("float16", "half", "fp16")
TRAINING_TOKENS = ("backward", "Trainer")
STEP_TOKENS = ("backward",)

_CUDA_AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
_CUDA_CUSTOM = frozenset({
    "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd",
    "torch.cuda.amp.autocast_mode.custom_fwd", "torch.cuda.amp.autocast_mode.custom_bwd",
})
_CUSTOM = frozenset({"torch.amp.custom_fwd", "torch.amp.custom_bwd",
                     "torch.amp.autocast_mode.custom_fwd", "torch.amp.autocast_mode.custom_bwd"})
_CUDA_SCALERS = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
# These take the device first (`device="cuda"` by default).
_SCALERS = frozenset({
    "torch.amp.GradScaler", "torch.GradScaler", "torch.amp.grad_scaler.GradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
})
_FP16 = frozenset({"torch.float16", "torch.half"})
_TRAINING_ARGUMENTS = frozenset({
    "transformers.TrainingArguments", "transformers.Seq2SeqTrainingArguments",
    "transformers.training_args.TrainingArguments", "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
})
_ACCELERATOR = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
_TRAINERS = ("transformers.", "trl.")
# Step boundaries of PyTorch/XLA (KNOWLEDGE.md §3.4): explicit, or implied by the optimizer step helper.
_BOUNDARIES = frozenset({
    "torch_xla.core.xla_model.mark_step", "torch_xla.core.xla_model.optimizer_step", "torch_xla.sync",
    "torch_xla.step", "torch_xla.torch_xla.sync", "torch_xla.torch_xla.step",
})
_BOUNDARY_METHODS = frozenset({"mark_step", "optimizer_step"})
# Libraries whose training loops place the step boundary themselves (MpDeviceLoader, optimizer wrappers).
_MANAGED = ("accelerate", "lightning", "pytorch_lightning", "optimum", "torch_xla.distributed.parallel_loader")


def _one_line(code: str, limit: int = 70) -> str:
    text = " ".join(code.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _autocast_advice(ctx: Context, enabled: str = "dtype=torch.bfloat16") -> str:
    if ctx.stack == "native":
        return f'`torch.autocast(device_type="neuron", {enabled})`'
    return f'`torch.autocast("xla", {enabled})`'


def _false(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _true(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


# ---- PC601 CUDA autocast ------------------------------------------------------------------------------------


def _judged(ctx: Context) -> set[int]:
    """Nodes an earlier check of this family already decided about (a call's callee, an attribute's name)."""
    return ctx.memo("training-judged", ctx.module, set)  # type: ignore[return-value]


def _autocast_call(ctx: Context, node: cst.Call, qualname: str) -> tuple[bool, cst.Arg | None, cst.Arg | None]:
    """For an autocast call: (is it CUDA autocast, its dtype argument, its enabled argument)."""
    if qualname in _CUDA_AUTOCAST:  # autocast(enabled=True, dtype=torch.float16, cache_enabled=True)
        return True, keyword(node, "dtype") or positional(node, 1), keyword(node, "enabled") or positional(node, 0)
    device = keyword(node, "device_type") or positional(node, 0)  # autocast(device_type, dtype, enabled, ...)
    is_cuda = device is not None and cuda_device(ctx, device.value) is not None
    return is_cuda, keyword(node, "dtype") or positional(node, 1), keyword(node, "enabled") or positional(node, 2)


def _cuda_autocast_message(ctx: Context, shown: str, dtype: cst.Arg | None) -> str:
    fp16 = dtype is None or dtype_of(ctx, dtype.value) in _FP16
    why = ("CUDA autocast, which disables itself without a CUDA device (and whenever torch_xla is imported), so "
           "the region silently runs in fp32")
    advice = f"use {_autocast_advice(ctx)}"
    if ctx.stack == "xla":
        advice += ' around the forward pass with `NEURON_CC_FLAGS="--auto-cast=none"`'
    if fp16:
        advice += " (bf16, not fp16: BF16 needs no loss scaling)"
    return f"`{shown}` is {why}; {advice}"


def _custom_message(ctx: Context, shown: str, qualname: str) -> str:
    target = '"neuron"' if ctx.stack == "native" else '"xla"'
    name = qualname.rsplit(".", 1)[-1]
    return (f"`{shown}` applies CUDA autocast rules, which are off on Neuron; use "
            f"`torch.amp.{name}(device_type={target})`")


def _device(ctx: Context) -> str:
    return "neuron" if ctx.stack == "native" else "xla"


def _autocast_title(ctx: Context, dtype: bool) -> str:
    return f'Autocast on "{_device(ctx)}"' + (" in bfloat16" if dtype else "")


# `torch.cuda.amp.autocast(enabled, dtype, cache_enabled)`: its positional parameters, named for torch.autocast
_CUDA_AUTOCAST_PARAMETERS = ("enabled", "dtype", "cache_enabled")


def _autocast_fix(ctx: Context, node: cst.Call, call: cst.Call, qualname: str, dtype: cst.Arg | None,
                  enabled: cst.Arg | None) -> FixPlan | None:
    """CUDA autocast → the stack's (KNOWLEDGE.md §3.4, §3.5), in bf16. Safe where no dtype or bf16 was asked for
    (BF16 is Neuron's mixed-precision type and the region ran in fp32 there, autocast being off); unsafe where
    fp16 becomes bf16 (fewer mantissa bits). `enabled=False` regions and dtypes chosen at run time keep theirs."""
    if any(arg.star for arg in call.args):
        return None
    off = enabled is not None and _false(enabled.value)
    fp16 = not off and dtype is not None and dtype_of(ctx, dtype.value) in _FP16
    add_dtype = not off and dtype is None
    torch, imports = spelling(ctx, "torch")
    if not (fp16 or add_dtype or qualname in _CUDA_AUTOCAST):
        imports = ()
    bf16 = f"{torch}.bfloat16"
    title = _autocast_title(ctx, fp16 or add_dtype)
    if qualname in _CUDA_AUTOCAST:  # a new callee and device: the call is written anew, its arguments kept
        if call is not node:
            return None  # `partial(torch.cuda.amp.autocast, ...)`
        if len(node.args) > len(_CUDA_AUTOCAST_PARAMETERS):
            return None
        args = []
        for index, arg in enumerate(node.args):
            if arg.keyword is None:
                arg = arg.with_changes(keyword=cst.Name(_CUDA_AUTOCAST_PARAMETERS[index]), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            if fp16 and arg.keyword is not None and arg.keyword.value == "dtype":
                arg = arg.with_changes(value=cst.parse_expression(bf16))
            args.append(arg)
        new = node.with_changes(func=cst.parse_expression(f"{torch}.autocast"), args=args)
        device = new_literal(_device(ctx), node)
        first = keyword_arg("device_type", device) if ctx.stack == "native" else cst.Arg(cst.parse_expression(device))
        new = with_arg(new, 0, first)
        if add_dtype:
            new = with_arg(new, 1, keyword_arg("dtype", bf16))
        code = rewritten(ctx, node, new)
        return None if code is None else FixPlan(title, not fp16, (Replace(node, code),), imports)
    device = keyword(call, "device_type") or positional(call, 0)
    literal = literal_like(device.value, _device(ctx)) if device is not None else None
    if literal is None:
        return None  # a device named by a variable: fixed where it is bound, if anywhere
    replacements = [Replace(device.value, f"{literal}, dtype={bf16}" if add_dtype else literal)]  # type: ignore[union-attr]
    if fp16:
        replacements.append(Replace(dtype.value, bf16))  # type: ignore[union-attr]
    return FixPlan(title, not fp16, tuple(replacements), imports)


def _custom_fix(ctx: Context, node: cst.CSTNode, qualname: str) -> FixPlan | None:
    """`torch.cuda.amp.custom_fwd` → `torch.amp.custom_fwd(device_type=<stack>)`: the same autocast rules, for
    the device the model runs on: safe."""
    name = qualname.rsplit(".", 1)[-1]
    device = new_literal(_device(ctx), node if isinstance(node, cst.Call) else None)
    title = f"Use `torch.amp.{name}(device_type={device})`"
    if not isinstance(node, cst.Call):  # a bare `@torch.cuda.amp.custom_fwd`
        if id(node) not in _decorators(ctx):
            return None
        torch, imports = spelling(ctx, "torch")
        return FixPlan(title, True, (Replace(node, f"{torch}.amp.{name}(device_type={device})"),), imports)
    if qualname in _CUSTOM:
        arg = keyword(node, "device_type")
        literal = literal_like(arg.value, _device(ctx)) if arg is not None else None
        return None if literal is None else FixPlan(title, True, (Replace(arg.value, literal),))  # type: ignore[union-attr]
    if any(arg.star for arg in node.args):
        return None
    torch, imports = spelling(ctx, "torch")
    index = next((i for i, arg in enumerate(node.args) if arg.keyword is not None), len(node.args))
    new = with_arg(node.with_changes(func=cst.parse_expression(f"{torch}.amp.{name}")), index,
                   keyword_arg("device_type", device))
    code = rewritten(ctx, node, new)
    return None if code is None else FixPlan(title, True, (Replace(node, code),), imports)


def _decorators(ctx: Context) -> set[int]:
    return ctx.memo("training-decorators", ctx.module, set)  # type: ignore[return-value]


@check(cst.Decorator, codes=("PC601",), tokens=AUTOCAST_TOKENS)
def note_decorator(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Decorator)
    _decorators(ctx).add(id(node.decorator))


@check(cst.Call, codes=("PC601", "PC603"), tokens=AUTOCAST_TOKENS)
def check_autocast_call(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    qualname = ctx.qualname(node.func)
    if qualname is None:
        return
    if qualname in _CUDA_CUSTOM or qualname in _CUSTOM:
        _judged(ctx).add(id(node.func))
        device = keyword(node, "device_type")
        if qualname in _CUSTOM and (device is None or cuda_device(ctx, device.value) is None):
            return
        ctx.report("PC601", node, _custom_message(ctx, _one_line(ctx.source(node)), qualname),
                   fix=_custom_fix(ctx, node, qualname))
        return
    call = node
    if qualname == "functools.partial" and node.args and node.args[0].keyword is None:
        # `partial(torch.autocast, device_type="cuda", dtype=...)`: judge the arguments it binds
        first = node.args[0].value
        qualname = ctx.qualname(first) or ""
        call = node.with_changes(func=first, args=node.args[1:])
        _judged(ctx).add(id(first))
    if qualname not in _CUDA_AUTOCAST and qualname not in _AUTOCAST:
        return
    _judged(ctx).add(id(node.func))
    is_cuda, dtype, enabled = _autocast_call(ctx, call, qualname)
    shown = _one_line(ctx.source(node))
    if is_cuda:
        fix = _autocast_fix(ctx, node, call, qualname, dtype, enabled)
        if enabled is not None and _false(enabled.value):
            ctx.report("PC601", node, f"`{shown}` keeps this region in fp32 only under CUDA autocast; once the "
                       "outer autocast targets Neuron it no longer does; write "
                       f"{_autocast_advice(ctx, 'enabled=False')}", Severity.INFO, fix)
        else:
            ctx.report("PC601", node, _cuda_autocast_message(ctx, shown, dtype), fix=fix)
        return
    device = keyword(call, "device_type") or positional(call, 0)
    if device is not None and string_value(device.value) == "cpu":
        return  # CPU autocast runs on the host, not on the NeuronCore
    if dtype is not None and dtype_of(ctx, dtype.value) in _FP16 and not (enabled and _false(enabled.value)):
        torch, imports = spelling(ctx, "torch")
        fix = FixPlan("Use `dtype=torch.bfloat16`", False, (Replace(dtype.value, f"{torch}.bfloat16"),), imports)
        ctx.report("PC603", node, f"`{shown}` autocasts to fp16; Neuron's documented mixed precision is BF16 "
                   "(FP32's range, no loss scaling needed); use `dtype=torch.bfloat16`", fix=fix)


@check(cst.Attribute, cst.Name, codes=("PC601",), tokens=AUTOCAST_TOKENS)
def check_autocast_reference(node: cst.CSTNode, ctx: Context) -> None:
    """`amp_autocast = torch.cuda.amp.autocast` or `partial(autocast, ...)`: CUDA autocast used as a value."""
    judged = _judged(ctx)
    if isinstance(node, cst.Attribute):
        judged.add(id(node.attr))
    if id(node) in judged:
        return
    if isinstance(node, cst.Name) and any(node.value in scope.bound for scope in ctx.scopes):
        return  # a local name (a parameter, say) that shadows the import
    qualname = ctx.qualname(node)  # type: ignore[arg-type]
    if qualname not in _CUDA_AUTOCAST and qualname not in _CUDA_CUSTOM:
        return
    statement = ctx.statements[-1] if ctx.statements else None
    if isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body):
        return  # importing it is not using it
    judged.add(id(node))
    if qualname in _CUDA_CUSTOM:
        ctx.report("PC601", node, _custom_message(ctx, qualname, qualname), fix=_custom_fix(ctx, node, qualname))
        return
    ctx.report("PC601", node, f"`{qualname}` is CUDA autocast, which disables itself without a CUDA device (and "
               f"whenever torch_xla is imported), so the region silently runs in fp32; use {_autocast_advice(ctx)}")


@check(cst.Param, cst.Arg, cst.FunctionDef, cst.ClassDef, cst.AsName, codes=("PC601",), tokens=AUTOCAST_TOKENS)
def skip_binding_names(node: cst.CSTNode, ctx: Context) -> None:
    """Parameter, keyword and definition names are not references to an imported `autocast`."""
    name = getattr(node, "keyword", None) if isinstance(node, cst.Arg) else getattr(node, "name", None)
    if isinstance(name, cst.Name):
        _judged(ctx).add(id(name))


# ---- PC602 GradScaler ---------------------------------------------------------------------------------------


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
            if use is not None:
                self.replacements.append(Replace(node.body[0], "pass") if use == "delete" else use)  # type: ignore[arg-type]

    def _use(self, line: cst.CSTNode, small: cst.BaseSmallStatement) -> str | Replace | None:
        if line is self.construction:
            self.accounted.add(id(small.targets[0].target))  # type: ignore[attr-defined]
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


@check(cst.Call, codes=("PC602",), tokens=SCALER_TOKENS)
def check_grad_scaler(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
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
    if enabled is not None and _false(enabled.value):
        return
    if ctx.stack == "native":
        bf16 = '`torch.autocast(device_type="neuron", dtype=torch.bfloat16)`'
    else:
        bf16 = ('`torch.autocast("xla", dtype=torch.bfloat16)` (with `NEURON_CC_FLAGS="--auto-cast=none"`) or '
                "`model.to(torch.bfloat16)` with `NEURON_RT_STOCHASTIC_ROUNDING_EN=1`")
    ctx.report("PC602", node, f"`{_one_line(ctx.source(node))}` scales an fp16 loss for CUDA and disables itself "
               "without a CUDA device; BF16, Neuron's mixed-precision type, needs no loss scaling: remove the "
               f"scaler (call `loss.backward()` and `optimizer.step()` directly) and train with {bf16}",
               fix=_scaler_fix(ctx, node))


# ---- PC603 fp16 mixed precision ------------------------------------------------------------------------------


@check(cst.Call, codes=("PC603",), tokens=FP16_TOKENS)
def check_fp16_training(node: cst.CSTNode, ctx: Context) -> None:
    """`TrainingArguments(fp16=True)`, `Accelerator(mixed_precision="fp16")` (fp16 autocast: see above)."""
    assert isinstance(node, cst.Call)
    qualname = ctx.qualname(node.func)
    if qualname in _TRAINING_ARGUMENTS:
        arg = keyword(node, "fp16")
        if arg is not None and _true(arg.value):
            # fp16 → bf16 changes numerics: unsafe; and no fix where `bf16=` is passed too.
            fix = None if keyword(node, "bf16") is not None else FixPlan(
                "Use `bf16=True`", False, (Replace(arg.keyword, "bf16"),))  # type: ignore[arg-type]
            ctx.report("PC603", arg, "`fp16=True` trains in fp16 with a CUDA loss scaler; Neuron's documented "
                       "mixed precision is BF16 (its HF Trainer tutorial passes `--bf16`); use `bf16=True`", fix=fix)
    elif qualname in _ACCELERATOR:
        arg = keyword(node, "mixed_precision")
        if arg is None:
            return
        value = string_value(arg.value)
        bound = ctx.constant(arg.value)
        if value is None and bound is not None:
            value = string_value(bound[1])
        if value == "fp16":
            literal = literal_like(arg.value, "bf16")
            fix = None if literal is None else FixPlan('Use `mixed_precision="bf16"`', False,
                                                       (Replace(arg.value, literal),))
            ctx.report("PC603", arg, '`mixed_precision="fp16"` trains in fp16 with a CUDA loss scaler; Neuron\'s '
                       'documented mixed precision is BF16 (no loss scaling); use `mixed_precision="bf16"`', fix=fix)


# ---- PC607 training aimed at Inf2 --------------------------------------------------------------------------------


def _inside_backward_definition(ctx: Context) -> bool:
    """Inside `def backward(...)` (an autograd.Function) or `def backward_pass`: the model's own autograd code."""
    return any("backward" in f.name.value for f in ctx.functions)


def _is_backward(ctx: Context, node: cst.Call, qualname: str | None) -> bool:
    if qualname is not None:
        return qualname == "torch.autograd.backward"
    return isinstance(node.func, cst.Attribute) and call_name(node) == "backward"


def _is_step(node: cst.Call, qualname: str | None) -> bool:
    """`optimizer.step()`, `scaler.step(optimizer)`: a `.step()` method that is not a scheduler's."""
    if qualname is not None or not isinstance(node.func, cst.Attribute) or call_name(node) != "step":
        return False
    receiver = (dotted_name(node.func.value) or "").rsplit(".", 1)[-1].lower()
    return "sched" not in receiver


def _is_trainer(ctx: Context, node: cst.BaseExpression) -> bool:
    """A local name bound to a Hugging Face / TRL trainer: `trainer = Trainer(model=..., args=...)`."""
    bound = ctx.constant(node)
    if bound is None or not isinstance(bound[1], cst.Call):
        return False
    qualname = ctx.qualname(bound[1].func) or ""
    return qualname.startswith(_TRAINERS) and qualname.endswith("Trainer")


def _training_signal(ctx: Context, node: cst.Call) -> bool:
    """A call that trains: `.backward()` in a loop, an optimizer `.step()` after `.backward()` in the same
    function, or `trainer.train()`. Building an optimizer is not training (model files often do it)."""
    qualname = ctx.qualname(node.func)
    if _is_backward(ctx, node, qualname):
        if _inside_backward_definition(ctx):
            return False
        if ctx.loops:
            return True
        seen: set[int] = ctx.memo("backward-seen", ctx.module, set)  # type: ignore[assignment]
        seen.add(id(ctx.functions[-1]) if ctx.functions else 0)
        return False
    if _is_step(node, qualname):
        seen = ctx.memo("backward-seen", ctx.module, set)  # type: ignore[assignment]
        return (id(ctx.functions[-1]) if ctx.functions else 0) in seen
    return (call_name(node) == "train" and isinstance(node.func, cst.Attribute)
            and _is_trainer(ctx, node.func.value))


@check(cst.Call, codes=("PC607",), tokens=TRAINING_TOKENS)
def check_inf2_training(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    reported = ctx.memo("inf2-training", ctx.module, list)
    if reported or not _training_signal(ctx, node):  # one finding per file: the first place it trains
        return
    reported.append(node)  # type: ignore[attr-defined]
    ctx.report("PC607", node, f"this file trains (`{_one_line(ctx.source(node), 50)}`), and {ctx.chip} is an "
               "inference target: Neuron documents training on Trn1/Trn2 only, and PyTorch/XLA, the only stack on "
               "Inf2, supports no training from Neuron 2.30; train on trn2 and deploy the trained model to inf2")


# ---- PC608 PyTorch/XLA training loop without a step boundary ------------------------------------------------------


class _LoopFacts(cst.CSTVisitor):
    """One pass over an outermost loop: for it and every loop nested in it, whether its body runs backward, an
    optimizer-style `.step()` and a step boundary. Nested functions and classes are other code and skipped."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.stack: list[dict] = []
        self.loops: list[dict] = []

    def _enter(self, node: cst.CSTNode) -> None:
        facts = {"node": node, "backward": False, "step": None, "boundary": False, "children": []}
        if self.stack:
            self.stack[-1]["children"].append(facts)
        self.stack.append(facts)
        self.loops.append(facts)

    def visit_For(self, node: cst.For) -> None:
        self._enter(node)

    def leave_For(self, original_node: cst.For) -> None:
        self.stack.pop()

    def visit_While(self, node: cst.While) -> None:
        self._enter(node)

    def leave_While(self, original_node: cst.While) -> None:
        self.stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        name = call_name(node)
        qualname = self.ctx.qualname(node.func)
        if qualname in _BOUNDARIES or (name in _BOUNDARY_METHODS and isinstance(node.func, cst.Attribute)):
            self._mark("boundary", True)
        elif _is_backward(self.ctx, node, qualname):
            self._mark("backward", True)
        elif _is_step(node, qualname):
            for facts in self.stack:
                facts["step"] = facts["step"] or node

    def _mark(self, fact: str, value: object) -> None:
        for facts in self.stack:
            facts[fact] = value


def _training(facts: dict) -> bool:
    return bool(facts["backward"] and facts["step"])


def _unbounded_steps(ctx: Context, loop: cst.For | cst.While, analysed: set[int]) -> set[int]:
    """The `.step()` calls of the innermost training loops under `loop` that have no step boundary."""
    finder = _LoopFacts(ctx)
    visit(loop, finder)
    analysed.update(id(facts["node"]) for facts in finder.loops)
    flagged = set()
    for facts in finder.loops:
        if not _training(facts) or facts["boundary"]:
            continue
        if any(_training(child) for child in _descendants(facts)):
            continue  # report the innermost training loop only
        flagged.add(id(facts["step"]))
    return flagged


def _descendants(facts: dict) -> list[dict]:
    out = []
    for child in facts["children"]:
        out.append(child)
        out.extend(_descendants(child))
    return out


def _managed(ctx: Context) -> bool:
    """The file uses a library that places the step boundary for its loops (accelerate, Lightning, optimum-neuron,
    or torch_xla's parallel loader built elsewhere and passed in)."""
    def compute() -> bool:
        return any(target == m or target.startswith(m + ".")
                   for target in ctx.names.aliases.values() for m in _MANAGED)
    return bool(ctx.memo("step-managed", ctx.module, compute))


@check(cst.For, cst.While, codes=("PC608",), tokens=STEP_TOKENS)
def find_unbounded_loops(node: cst.CSTNode, ctx: Context) -> None:
    analysed: set[int] = ctx.memo("analysed-loops", ctx.module, set)  # type: ignore[assignment]
    if id(node) in analysed or _managed(ctx):
        return  # a nested loop was judged with its outermost loop
    flagged: set[int] = ctx.memo("unbounded-steps", ctx.module, set)  # type: ignore[assignment]
    flagged |= _unbounded_steps(ctx, node, analysed)  # type: ignore[arg-type]


@check(cst.Call, codes=("PC608",), tokens=STEP_TOKENS)
def check_step_boundary(node: cst.CSTNode, ctx: Context) -> None:
    flagged = ctx.memo("unbounded-steps", ctx.module, set)
    if id(node) not in flagged:  # type: ignore[operator]
        return
    lifecycle = "move training to TorchNeuron native" if ctx.chip == "trn2" else "pin Neuron SDK <= 2.29"
    ctx.report("PC608", node, f"this training loop (`{_one_line(ctx.source(node), 40)}`) has no step boundary: on "
               "PyTorch/XLA its graph grows across iterations instead of compiling and running once per step; end "
               "each step with `torch_xla.sync()` (`xm.mark_step()` before torch-xla 2.9), use "
               "`xm.optimizer_step(optimizer)`, or "
               f"iterate a `pl.MpDeviceLoader` (PyTorch/XLA training is unsupported from Neuron 2.30: {lifecycle})")


# ---- rules ----------------------------------------------------------------------------------------------------------


@rule
class CudaAutocast(Rule):
    """## What it does
    Finds CUDA autocast in every spelling: `torch.cuda.amp.autocast()` (as a context manager, a decorator or
    a value such as `amp_autocast = torch.cuda.amp.autocast`), `torch.autocast("cuda")`,
    `torch.autocast(device_type="cuda")`, `torch.amp.autocast("cuda")`, `from torch.cuda.amp import autocast`,
    a device type bound to `"cuda"` in the same file, and `torch.cuda.amp.custom_fwd` / `custom_bwd`.
    `torch.autocast("cuda", enabled=False)`, which forces fp32 in a region, is reported as info: it does no
    harm on Neuron, but stops protecting the region once the outer autocast targets Neuron.
    Autocast on a device only known at run time (`device_type=x.device.type`) stays quiet.

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(batch)
    ```

    ## Use instead
    ```python
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):  # TorchNeuron native
        loss = model(batch)
    # PyTorch/XLA: NEURON_CC_FLAGS="--auto-cast=none" and torch.autocast("xla", dtype=torch.bfloat16)
    ```

    ## Fix safety
    The fix moves autocast to the target's device in bf16: `torch.cuda.amp.autocast(...)` becomes
    `torch.autocast(device_type="neuron", dtype=torch.bfloat16, ...)` (`torch.autocast("xla", ...)` on
    PyTorch/XLA), keeping `enabled=` and `cache_enabled=`; in `torch.autocast("cuda", ...)` only the device
    literal changes (its quotes kept), with `dtype=torch.bfloat16` added where no dtype was given.
    `torch.cuda.amp.custom_fwd` / `custom_bwd` become `torch.amp.custom_fwd(device_type="neuron")`. It is safe
    where no dtype or bf16 was asked for (BF16 is Neuron's mixed-precision type, and without CUDA the region ran
    in fp32 anyway), for `enabled=False` regions and for a dtype chosen at run time (kept as written); unsafe
    where fp16 becomes bf16 (fewer mantissa bits). A device named by a variable, `**kwargs`, and CUDA autocast
    used as a value get no fix. On PyTorch/XLA, set `NEURON_CC_FLAGS="--auto-cast=none"` yourself.
    """

    code = "PC601"
    FIXABLE = True
    INVALID = (
        "import torch\nwith torch.cuda.amp.autocast():\n    y = m(x)",
        "import torch\nwith torch.autocast('cuda', dtype=torch.float16):\n    y = m(x)",
        "import torch\nwith torch.autocast(device_type='cuda'):\n    y = m(x)",
        "import torch\nwith torch.amp.autocast('cuda'):\n    y = m(x)",
        "from torch.cuda.amp import autocast\n@autocast()\ndef forward(x):\n    return x",
        "from torch.cuda import amp\nwith amp.autocast(enabled=True):\n    pass",
        "import torch\ndef main():\n    amp_autocast = torch.cuda.amp.autocast\n    with amp_autocast():\n        pass",
        "import torch\nDEVICE = 'cuda'\nwith torch.autocast(DEVICE):\n    pass",
        "import torch\nwith torch.autocast('cuda', enabled=False):\n    pass",
        "from torch.cuda.amp import custom_fwd\n@custom_fwd(cast_inputs=torch.float32)\ndef f(ctx, x):\n    return x",
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    @torch.cuda.amp.custom_bwd\n"
        "    def backward(ctx, g):\n        return g",
    )
    VALID = (
        "import torch\nwith torch.autocast(device_type='neuron', dtype=torch.bfloat16):\n    pass",
        "import torch\nwith torch.autocast('xla', dtype=torch.bfloat16):\n    pass",
        "import torch\nwith torch.autocast(device_type=x.device.type, enabled=False):\n    pass",
        "import torch\nwith torch.cpu.amp.autocast():\n    pass",
        "from torch.cuda.amp import autocast  # imported, never used",
        "# with torch.cuda.amp.autocast():\nx = 'torch.autocast(\"cuda\")'",
        "def f(autocast=None):\n    return autocast",
    )


@rule
class GradScaler(Rule):
    """## What it does
    Finds gradient scalers built for CUDA: `torch.cuda.amp.GradScaler()`, `torch.amp.GradScaler("cuda")`,
    `torch.GradScaler()` and `torch.amp.GradScaler()` (whose device defaults to `"cuda"`), FSDP's
    `ShardedGradScaler`, through any import alias. It reports the construction once; the `scaler.scale(loss)`,
    `scaler.step(optimizer)` and `scaler.update()` calls go away with it. A scaler built with
    `enabled=False`, for the CPU, or for a device known only at run time stays quiet.

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
    )


@rule
class Fp16MixedPrecision(Rule):
    """## What it does
    Finds fp16 mixed precision where BF16 is Neuron's choice: autocast to `torch.float16` / `torch.half` on a
    non-CUDA device (`torch.autocast("xla", dtype=torch.float16)`, `device_type=x.device.type`), Hugging Face
    `TrainingArguments(fp16=True)` and accelerate's `Accelerator(mixed_precision="fp16")`. CUDA autocast to
    fp16 is PC601, whose message already asks for bf16. Tensors and models cast to fp16 outside autocast
    (`x.half()`, `dtype=torch.float16`) stay quiet: FP16 is a NeuronCore data type.

    ## Example
    ```python
    args = TrainingArguments(output_dir="out", fp16=True)
    ```

    ## Use instead
    ```python
    args = TrainingArguments(output_dir="out", bf16=True)
    ```

    ## Fix safety
    Unsafe fixes, since fp16 to bf16 changes numerics: `dtype=torch.float16` becomes `torch.bfloat16` in
    autocast, `fp16=True` becomes `bf16=True` (no fix when `bf16=` is passed too), and `mixed_precision="fp16"`
    becomes `"bf16"` (a literal only).
    """

    code = "PC603"
    FIXABLE = True
    INVALID = (
        "import torch\nwith torch.autocast('xla', dtype=torch.float16):\n    pass",
        "import torch\nwith torch.autocast(device_type=x.device.type, dtype=torch.half):\n    pass",
        "from transformers import TrainingArguments\nargs = TrainingArguments('out', fp16=True)",
        "from accelerate import Accelerator\nacc = Accelerator(mixed_precision='fp16')",
    )
    VALID = (
        "import torch\nwith torch.autocast('xla', dtype=torch.bfloat16):\n    pass",
        "import torch\nwith torch.autocast('cpu', dtype=torch.float16):\n    pass",
        "import torch\nx = torch.zeros(2, dtype=torch.float16)",
        "m = m.half()",
        "from transformers import TrainingArguments\nargs = TrainingArguments('out', bf16=True, fp16=False)",
    )


@rule
class TrainingOnInf2(Rule):
    """## What it does
    When the target is Inf2, finds the first place a file trains: `.backward()` (or
    `torch.autograd.backward`) called inside a loop, an optimizer-style `.step()` after a `.backward()` in the
    same function, or `.train()` on a Hugging Face / TRL `Trainer`. One finding per file. Building an
    optimizer is not enough (model files often define `configure_optimizers`), and neither is the
    `backward` method of an autograd Function.

    ## Example
    ```python
    for batch in loader:
        loss = model(batch)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    Train on trn2 (TorchNeuron native) or trn1, then compile the trained model for inf2 with
    `torch_neuronx.trace`.

    ## Fix safety
    No automatic fix.
    """

    code = "PC607"
    TARGET = ("inf2", "xla")
    INVALID = (
        "for batch in loader:\n    loss = model(batch)\n    loss.backward()",
        "def train_step(model, batch, optimizer):\n    model(batch).backward()\n    optimizer.step()",
        "from transformers import Trainer\ndef main():\n    trainer = Trainer(model=model, args=args)\n"
        "    trainer.train()",
        "import torch\nfor x in xs:\n    torch.autograd.backward(model(x))",
    )
    VALID = (
        "import torch\nwith torch.no_grad():\n    y = model(x)",
        "import torch\nopt = torch.optim.AdamW(model.parameters())",
        "class F:\n    @staticmethod\n    def backward(ctx, g):\n        for x in ctx.saved:\n"
        "            x.backward(g)",
        "loss.backward()  # a single backward outside a loop: a test or a demo",
        "def warmup(model):\n    model.train()\n    scheduler.step()",
    )


@rule
class MissingStepBoundary(Rule):
    """## What it does
    On the PyTorch/XLA stack, finds training loops (a loop whose body calls `.backward()` and an
    optimizer-style `.step()`) with no step boundary: no `xm.mark_step()`, `torch_xla.sync()`,
    `torch_xla.step()` or `xm.optimizer_step(...)` in the loop, and not iterating a `pl.MpDeviceLoader`.
    It reports the innermost such loop, at its `.step()` call. Files that use accelerate, Lightning,
    optimum-neuron or torch_xla's parallel loader (which place the boundary themselves) stay quiet, and so do
    loops that call a helper for the whole step.

    ## Example
    ```python
    for batch in loader:
        loss = model(batch.to(device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    for batch in pl.MpDeviceLoader(loader, device):
        loss = model(batch)
        loss.backward()
        xm.optimizer_step(optimizer)
        optimizer.zero_grad()
    ```

    ## Fix safety
    No automatic fix: where the step ends, and whether `xm.optimizer_step` (which also all-reduces gradients)
    fits, depends on the loop.
    """

    code = "PC608"
    TARGET = ("trn1", "xla")
    INVALID = (
        "for batch in loader:\n    loss = model(batch)\n    loss.backward()\n    optimizer.step()",
        "while True:\n    for b in loader:\n        model(b).backward()\n        opt.step()\n    break",
    )
    VALID = (
        "import torch_xla.core.xla_model as xm\nfor b in loader:\n    model(b).backward()\n    opt.step()\n"
        "    xm.mark_step()",
        "import torch_xla.core.xla_model as xm\nfor b in loader:\n    model(b).backward()\n"
        "    xm.optimizer_step(opt)",
        "import torch_xla\nfor b in loader:\n    model(b).backward()\n    opt.step()\n    torch_xla.sync()",
        "import torch_xla.distributed.parallel_loader as pl\nfor b in pl.MpDeviceLoader(loader, dev):\n"
        "    model(b).backward()\n    opt.step()",
        "for b in loader:\n    train_step(b)\n    scheduler.step()",
    )
