"""Where a host read costs: inside `forward` (and functions nested in it), or in the body of a loop that steps an
optimizer (`optimizer.step()`, `scaler.step(opt)`, `xm.optimizer_step(opt)`), before `xm.mark_step()`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from portcheck.static.ancestry import taken_ifs
from portcheck.static.branches import siblings_before, training_flag
from portcheck.static.check import Context
from portcheck.static.error_paths import error_path
from portcheck.static.scope import host_code
from portcheck.static.syntax import block_body, call_name, dotted_name, keyword, last_name, positional
from portcheck.static.values import and_operands, or_operands
from portcheck.static.walk import any_call, visit

_STEP = "torch_xla.core.xla_model.optimizer_step"
_SYNCS = frozenset({"torch_xla.core.xla_model.mark_step", "torch_xla.sync"})
_OPTIMIZER = re.compile(r"optim|^opt(\d+|_\w*|[a-z])?$|_opt\d*$")


@dataclass
class LoopFacts:
    """What one loop's body does, computed once per loop."""

    steps: bool = False  # steps an optimizer itself (not only in a nested loop)
    synced_at: int | None = None  # index of the first body statement that calls xm.mark_step()/torch_xla.sync()
    positions: dict[int, int] = field(default_factory=dict)  # id(body statement) -> its index
    nested: set[int] = field(default_factory=set)  # ids of functions, classes and lambdas defined inside
    tensors: set[str] = field(default_factory=set)  # names that receive `.backward()`: tensors for sure


def _is_step(ctx: Context, call: cst.Call) -> bool:
    qualname = ctx.qualname(call.func)
    if qualname == _STEP:
        return True
    if qualname is not None or not isinstance(call.func, cst.Attribute) or call.func.attr.value != "step":
        return False
    receiver = dotted_name(call.func.value)
    if receiver is None:
        return False
    last = receiver.rsplit(".", 1)[-1].lower()
    # `optimizer.step()`, `opt_g.step()`, `scaler.step(optimizer)`, DeepSpeed's `model_engine.step()`
    return bool(_OPTIMIZER.search(last)) or ("scaler" in last and bool(call.args)) or "engine" in last


def _backward_name(call: cst.Call) -> str | None:
    """`loss` for `loss.backward()`, `scaler.scale(loss).backward()` and `accelerator.backward(loss)`."""
    if call_name(call) != "backward" or not isinstance(call.func, cst.Attribute):
        return None
    receiver = call.func.value
    if isinstance(receiver, cst.Name) and not call.args:
        return receiver.value
    if isinstance(receiver, cst.Call) and call_name(receiver) == "scale" and receiver.args:
        receiver = receiver.args[0].value
        return receiver.value if isinstance(receiver, cst.Name) else None
    first = positional(call, 0)
    return first.value.value if first is not None and isinstance(first.value, cst.Name) else None


def _scan_loop(ctx: Context, loop: cst.For | cst.While) -> LoopFacts:
    facts = LoopFacts()

    class Scan(cst.CSTVisitor):
        def __init__(self) -> None:
            self.inner: list[cst.For | cst.While] = []
            self.definitions = 0
            self.synced = False

        def _define(self, node: cst.CSTNode) -> bool:
            facts.nested.add(id(node))
            self.definitions += 1
            return True

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return self._define(node)

        def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
            self.definitions -= 1

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return self._define(node)

        def leave_ClassDef(self, node: cst.ClassDef) -> None:
            self.definitions -= 1

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return self._define(node)

        def leave_Lambda(self, node: cst.Lambda) -> None:
            self.definitions -= 1

        def visit_For(self, node: cst.For) -> None:
            self.inner.append(node)

        def leave_For(self, node: cst.For) -> None:
            self.inner.pop()

        def visit_While(self, node: cst.While) -> None:
            self.inner.append(node)

        def leave_While(self, node: cst.While) -> None:
            self.inner.pop()

        def visit_Call(self, call: cst.Call) -> None:
            if self.definitions:
                return
            name = _backward_name(call)
            if name is not None:
                facts.tensors.add(name)
            if _is_step(ctx, call) and all(_over_what_it_steps(loop, call) for loop in self.inner):
                # `for opt in optimizers: opt.step()` inside it steps this loop; a loop over batches is its own
                facts.steps = True
                barrier = keyword(call, "barrier")
                if barrier is not None and dotted_name(barrier.value) == "True":
                    self.synced = True  # `xm.optimizer_step(opt, barrier=True)` marks the step
            elif not self.inner and ctx.qualname(call.func) in _SYNCS:
                self.synced = True

    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    scan = Scan()
    for index, statement in enumerate(body):
        facts.positions[id(statement)] = index
        visit(statement, scan)
        if scan.synced and facts.synced_at is None:
            facts.synced_at = index
    return facts


def _loop(ctx: Context, loop: cst.For | cst.While) -> LoopFacts:
    return ctx.memo("host-sync-loop", loop, lambda: _scan_loop(ctx, loop))


def enclosing_loops(ctx: Context) -> list[tuple[cst.For | cst.While, LoopFacts]]:
    """The loops around the current node that run it directly (innermost first): a function defined inside a
    loop runs when called, not once per iteration."""
    function = ctx.functions[-1] if ctx.functions else None
    out = []
    for loop in reversed(ctx.loops):
        facts = _loop(ctx, loop)
        if function is not None and id(function) in facts.nested:
            break
        out.append((loop, facts))
    return out


def _after_sync(ctx: Context, loop: cst.CSTNode, facts: LoopFacts) -> bool:
    """The current statement comes after `xm.mark_step()` in the same iteration: the value is already computed."""
    if facts.synced_at is None:
        return False
    for index in range(len(ctx.statements) - 1, 0, -1):
        if ctx.statements[index - 1] is loop:
            position = facts.positions.get(id(ctx.statements[index]))
            return position is not None and position > facts.synced_at
    return False


def _interval(ctx: Context) -> bool:
    """Under `if step % N == 0:` (a logging interval) or a verbosity switch (`if self.verbose > 0:`), or after `if
    epoch % N or batch_idx > 0: return` in the same block: the read happens once every N steps, or only when the user
    asks for diagnostics, not every step."""
    for index, statement in enumerate(ctx.statements):
        if isinstance(statement, cst.If):
            test = statement.test
            for operand in and_operands(test):
                if (_modulo(operand) or _verbosity(operand)) and not _steps_inside(ctx, statement):
                    return True
        holder = ctx.statements[index - 1] if index else None
        if any(_skips_off_interval(earlier) for earlier in siblings_before(holder, ctx, statement)):
            return True
    return False


def _modulo(operand: cst.BaseExpression) -> bool:
    """`step % N == 0`, `math.log2(epoch) % 1 > 0`: a comparison of a remainder."""
    return (isinstance(operand, cst.Comparison) and isinstance(operand.left, cst.BinaryOperation)
            and isinstance(operand.left.operator, cst.Modulo))


# A verbosity switch: `if self.verbose > 0:`, `if args.debug:`, `if verbosity >= 2:`. What it guards is diagnostic
# output the user turns on, like a logging interval's.
_VERBOSE = re.compile(r"(?i)^(verbose|verbosity|debug|debugging)$|_(verbose|verbosity|debug)$|^(verbose|debug)_")


def _verbosity(operand: cst.BaseExpression) -> bool:
    """`verbose`, `self.verbose > 0`, `args.verbosity >= 2`, `self.debug`: a test of a verbosity switch."""
    if isinstance(operand, cst.Comparison) and len(operand.comparisons) == 1 and isinstance(
            operand.comparisons[0].operator, (cst.GreaterThan, cst.GreaterThanEqual)):
        operand = operand.left
    return bool(_VERBOSE.search(last_name(operand)))


def _skips_off_interval(statement: cst.CSTNode) -> bool:
    """`if epoch % N or batch_idx > 0: return`: the rest of the block runs only at the interval."""
    if not isinstance(statement, cst.If) or statement.orelse is not None:
        return False
    lines = block_body(statement.body) if isinstance(statement.body, cst.IndentedBlock) else ()
    last = lines[-1] if lines else statement.body
    smalls = last.body if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
    if not smalls or not isinstance(smalls[-1], (cst.Return, cst.Continue)):
        return False
    return any(_modulo(operand) for operand in or_operands(statement.test))



def _steps_inside(ctx: Context, statement: cst.If) -> bool:
    """`if n % policy_delay == 0: ...; actor_optimizer.step()`: the interval holds a training step of its own."""
    return any_call(statement.body, lambda call: _is_step(ctx, call))


def read_place(ctx: Context, node: cst.CSTNode | None = None) -> str | None:
    """"forward", "step" (a loop body that steps an optimizer), "helper" (another function: a read there counts
    only where the project's call graph puts it in the device step), or None where a host read is harmless:
    host-side code (scope.host_code), an error path, a logging interval, module level, a model's construction."""
    if host_code(ctx) is not None or error_path(ctx, node) or _interval(ctx):
        return None
    if ctx.in_forward:
        return "forward"
    for loop, facts in enclosing_loops(ctx):
        if facts.steps:
            return None if _after_sync(ctx, loop, facts) else "step"
    if ctx.functions and not any(f.name.value in _SET_UP or _drives_steps(ctx, f) for f in ctx.functions):
        return "helper"
    return None


def evaluating(ctx: Context) -> bool:
    """Under `if not self.training:` (an operand of `and` too) or in the `else` of `if model.training:` (an operand
    of `or` too): what the
    model computes only when evaluated, its validation metrics (`cer = self.error_calculator(ys_hat.cpu(), ...)`),
    read on the host after the step as a metric callback's would be."""
    if any(training_flag(o.expression) for statement, _ in taken_ifs(ctx) for o in and_operands(statement.test)
           if isinstance(o, cst.UnaryOperation) and isinstance(o.operator, cst.Not)):
        return True
    chain = ctx.statements
    return any(isinstance(s, cst.If) and isinstance(s.orelse, cst.Else) and chain[i + 1] in s.orelse.body.body
               and any(training_flag(o) for o in or_operands(s.test))  # `if self.training or ...: ... else:`
               for i, s in enumerate(chain[:-1]))


def _drives_steps(ctx: Context, function: cst.FunctionDef) -> bool:
    """The function runs the training loop itself: it steps an optimizer (or calls `backward()`) inside a loop
    over something other than the optimizers it steps (`for batch in loader:`), and what it reads outside the
    loop's steps is read once. A function that steps with no such loop is the step's own body, called once a step
    (Lightning's manual optimisation, a `train_step(batch)`): what it reads, it reads every step."""
    def compute() -> bool:
        found = False
        loops: list[cst.For | cst.While] = []

        class Finder(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is function  # a nested function is judged on its own

            def visit_For(self, node: cst.For) -> None:
                loops.append(node)

            def leave_For(self, original_node: cst.For) -> None:
                loops.pop()

            def visit_While(self, node: cst.While) -> None:
                loops.append(node)

            def leave_While(self, original_node: cst.While) -> None:
                loops.pop()

            def visit_Call(self, call: cst.Call) -> bool:
                nonlocal found
                if not found and (_is_step(ctx, call) or _backward_name(call) is not None):
                    found = any(not _over_what_it_steps(loop, call) for loop in loops)
                return not found

        visit(function, Finder())
        return found

    return ctx.memo("drives-steps", function, compute)


def _over_what_it_steps(loop: cst.For | cst.While, call: cst.Call) -> bool:
    """`for optimizer in optimizers: optimizer.step()` (or `scaler.step(optimizer)`, or over
    `enumerate(zip(optimizers, schedulers))`): the loop goes over the optimizers, not over the data."""
    if not isinstance(loop, cst.For) or not isinstance(call.func, cst.Attribute):
        return False
    stepped = {(dotted_name(call.func.value) or "").split(".")[0]}
    if call.args:
        stepped.add((dotted_name(call.args[0].value) or "").split(".")[0])
    names: set[str] = set()
    todo: list[cst.BaseExpression] = [loop.target]
    while todo:
        target = todo.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            todo.extend(e.value for e in target.elements)
        elif isinstance(target, cst.Name):
            names.add(target.value)
    return bool(names & stepped)


# Functions that run once, to build or load a model: a host read there is no per-step cost.
_SET_UP = frozenset({"__init__", "reset_parameters", "_init_weights", "init_weights", "__repr__", "extra_repr",
                     "__str__", "load_state_dict", "state_dict", "__setstate__", "__getstate__"})


def quiet_calls(ctx: Context) -> set[int]:
    """Calls inside lambdas (`xm.add_step_closure(lambda: ...)`, hooks): they run later, outside the step."""
    return ctx.memo("host-sync-quiet", ctx.module, set)
