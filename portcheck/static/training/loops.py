"""Training loops (PC607, PC608): code that trains, aimed at Inf2, an inference chip; and PyTorch/XLA training
loops without a step boundary, whose graph grows across iterations."""

from __future__ import annotations

from typing import Literal, TypedDict

import libcst as cst

from portcheck.knowledge import load
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.syntax import call_name, dotted_name
from portcheck.static.training.quoting import one_line
from portcheck.static.walk import visit


@rule
class TrainingOnInf2(Rule):
    """## What it does
    When the target is Inf2, finds the first place a file trains: `.backward()` (or
    `torch.autograd.backward`, or Lightning's `self.manual_backward(loss)`) called inside a loop, an
    optimizer-style `.step()` after a backward in the same function, `.train()` on a Hugging Face / TRL
    `Trainer`, or the `training_step` of a Lightning module or of a Hugging Face / TRL `Trainer` subclass (the
    framework runs backward and the optimizer around it). One finding per file; none in a file that names neither
    torch nor a library built on it (a turtle's `backward(distance)`). Building an
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
    ONCE_PER_FILE = True
    message = ("this file trains (`{shown}`), and {chip} is an inference target: Neuron documents training on "
               "Trn1/Trn2 only, and PyTorch/XLA, the only stack on Inf2, supports no training from Neuron 2.30; "
               "train on trn2 and deploy the trained model to inf2")
    TARGET = ("inf2", "xla")
    INVALID = (
        "import torch\nfor batch in loader:\n    loss = model(batch)\n    loss.backward()",
        "import torch\ndef train_step(model, batch, optimizer):\n    model(batch).backward()\n    optimizer.step()",
        "from transformers import Trainer\ndef main():\n    trainer = Trainer(model=model, args=args)\n"
        "    trainer.train()",
        "import torch\nfor x in xs:\n    torch.autograd.backward(model(x))",
        "import lightning as L\nclass Task(L.LightningModule):\n    def training_step(self, batch, i):\n"
        "        return self.loss(batch)",
        "from transformers import Trainer\nclass MyTrainer(Trainer):\n    def training_step(self, model, inputs):\n"
        "        return super().training_step(model, inputs)",
    )
    VALID = (
        "import torch\nwith torch.no_grad():\n    y = model(x)",
        "import torch\nopt = torch.optim.AdamW(model.parameters())",
        "class F:\n    @staticmethod\n    def backward(ctx, g):\n        for x in ctx.saved:\n"
        "            x.backward(g)",
        "loss.backward()  # a single backward outside a loop: a test or a demo",
        "def warmup(model):\n    model.train()\n    scheduler.step()",
        "class Runner:\n    def training_step(self, batch):\n        return batch",
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
    message = ("this training loop (`{shown}`) has no step boundary: on PyTorch/XLA its graph grows across "
               "iterations instead of compiling and running once per step; end each step with `torch_xla.sync()` "
               "(`xm.mark_step()` before torch-xla 2.9), use `xm.optimizer_step(optimizer)`, or iterate a "
               "`pl.MpDeviceLoader` (PyTorch/XLA training is unsupported from Neuron 2.30: {lifecycle})")
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


TRAINING_TOKENS = ("backward", "Trainer", "training_step")
STEP_TOKENS = ("backward",)

_TRAINERS = ("transformers.", "trl.")
# Step boundaries of PyTorch/XLA (KNOWLEDGE.md §3.4): explicit, or implied by the optimizer step helper.
_BOUNDARIES = frozenset({
    "torch_xla.core.xla_model.mark_step", "torch_xla.core.xla_model.optimizer_step", "torch_xla.sync",
    "torch_xla.step", "torch_xla.torch_xla.sync", "torch_xla.torch_xla.step",
})
_BOUNDARY_METHODS = frozenset({"mark_step", "optimizer_step"})
# Libraries whose training loops place the step boundary themselves (MpDeviceLoader, optimizer wrappers).
_MANAGED = ("accelerate", "lightning", "pytorch_lightning", "optimum", "torch_xla.distributed.parallel_loader")


# ---- PC607 training aimed at Inf2 --------------------------------------------------------------------------------


def _inside_backward_definition(ctx: Context) -> bool:
    """Inside `def backward(...)` (an autograd.Function) or `def backward_pass`: the model's own autograd code."""
    return any("backward" in f.name.value for f in ctx.functions)


def _is_backward(ctx: Context, node: cst.Call, qualname: str | None) -> bool:
    if qualname is not None:
        return qualname == "torch.autograd.backward"
    return isinstance(node.func, cst.Attribute) and call_name(node) in ("backward", "manual_backward")


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
        seen: set[int] = ctx.memo("backward-seen", ctx.module, set)
        seen.add(id(ctx.functions[-1]) if ctx.functions else 0)
        return False
    if _is_step(node, qualname):
        seen = ctx.memo("backward-seen", ctx.module, set)
        return (id(ctx.functions[-1]) if ctx.functions else 0) in seen
    return (call_name(node) == "train" and isinstance(node.func, cst.Attribute)
            and _is_trainer(ctx, node.func.value))


@check(cst.Call, rules=(TrainingOnInf2,), tokens=TRAINING_TOKENS)
def check_inf2_training(node: cst.Call, ctx: Context) -> None:
    if ctx.uses_torch and _training_signal(ctx, node):
        _report_once(ctx, node, one_line(ctx.source(node), 50))


def _report_once(ctx: Context, node: cst.CSTNode, shown: str) -> None:
    """One finding a file: the first place it trains."""
    reported: list[cst.CSTNode] = ctx.memo("inf2-training", ctx.module, list)
    if not reported:
        reported.append(node)
        ctx.report(TrainingOnInf2, node, shown=shown, chip=ctx.chip)


# Classes whose `training_step` the framework wraps in backward and an optimizer step.
_STEPPED_BASES = ("lightning.LightningModule", "lightning.pytorch.LightningModule", "pytorch_lightning.LightningModule",
                  "lightning.pytorch.core.LightningModule", "pytorch_lightning.core.LightningModule",
                  "pytorch_lightning.core.module.LightningModule", "lightning.pytorch.core.module.LightningModule")


@check(cst.FunctionDef, rules=(TrainingOnInf2,), tokens=("training_step",))
def check_training_step(node: cst.FunctionDef, ctx: Context) -> None:
    """`def training_step(...)` of a Lightning module or a Hugging Face / TRL Trainer subclass trains."""
    if node.name.value != "training_step" or len(ctx.functions) > 1:
        return
    cls = ctx.enclosing_class
    if cls is None:
        return
    bases = [ctx.qualname(b.value) or "" for b in cls.bases]
    if not any(b in _STEPPED_BASES or (b.startswith(_TRAINERS) and b.endswith("Trainer")) for b in bases):
        return
    _report_once(ctx, node.name, f"def training_step, in `{cls.name.value}`")


# ---- PC608 PyTorch/XLA training loop without a step boundary ------------------------------------------------------


class _Facts(TypedDict):
    """What one loop's body does (nested loops included), and the loops nested in it."""

    node: cst.CSTNode
    backward: bool
    step: cst.Call | None  # the first optimizer-style `.step()`
    boundary: bool
    children: list[_Facts]


class _LoopFacts(cst.CSTVisitor):
    """One pass over an outermost loop: for it and every loop nested in it, whether its body runs backward, an
    optimizer-style `.step()` and a step boundary. Nested functions and classes are other code and skipped."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.stack: list[_Facts] = []
        self.loops: list[_Facts] = []

    def _enter(self, node: cst.CSTNode) -> None:
        facts: _Facts = {"node": node, "backward": False, "step": None, "boundary": False, "children": []}
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

    def _mark(self, fact: Literal["backward", "boundary"], value: bool) -> None:
        for facts in self.stack:
            facts[fact] = value


def _training(facts: _Facts) -> bool:
    return bool(facts["backward"] and facts["step"])


def _unbounded_steps(ctx: Context, loop: cst.For | cst.While, analysed: set[int]) -> set[int]:
    """The `.step()` calls of the innermost training loops under `loop` that have no step boundary."""
    finder = _LoopFacts(ctx)
    visit(loop, finder)
    analysed.update(id(facts["node"]) for facts in finder.loops)
    flagged: set[int] = set()
    for facts in finder.loops:
        if not _training(facts) or facts["boundary"]:
            continue
        if any(_training(child) for child in _descendants(facts)):
            continue  # report the innermost training loop only
        flagged.add(id(facts["step"]))
    return flagged


def _descendants(facts: _Facts) -> list[_Facts]:
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


@check(cst.For, cst.While, rules=(MissingStepBoundary,), tokens=STEP_TOKENS)
def find_unbounded_loops(node: cst.For | cst.While, ctx: Context) -> None:
    analysed: set[int] = ctx.memo("analysed-loops", ctx.module, set)
    if id(node) in analysed or _managed(ctx):
        return  # a nested loop was judged with its outermost loop
    flagged: set[int] = ctx.memo("unbounded-steps", ctx.module, set)
    flagged |= _unbounded_steps(ctx, node, analysed)


@check(cst.Call, rules=(MissingStepBoundary,), tokens=STEP_TOKENS)
def check_step_boundary(node: cst.Call, ctx: Context) -> None:
    flagged: set[int] = ctx.memo("unbounded-steps", ctx.module, set)
    if id(node) not in flagged:
        return
    native = "native" in load().chips[ctx.chip].stacks
    lifecycle = "move training to TorchNeuron native" if native else "pin Neuron SDK <= 2.29"
    ctx.report(MissingStepBoundary, node, shown=one_line(ctx.source(node), 40), lifecycle=lifecycle)

