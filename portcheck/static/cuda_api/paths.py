"""CUDA-only paths: code that runs only where a CUDA device is present or in use, so it is not a porting blocker.

A file's name never makes its code CUDA-only: the code says so (a guard, a class that exists for CUDA, callers
that are all guarded: portcheck.static.semantic).

A path is CUDA-only under a test that holds only with CUDA (`torch.cuda.is_available()`, `device.type == "cuda"`,
`str(device).startswith("cuda")`, `x.is_cuda`, a `use_cuda` flag, a local bound to one of these, a `self` flag the
class sets only from one): in the body of
`if test:` or `x if test else y`, after `test and ...`, in the `else` of the negated test, after an early exit
(`if not torch.cuda.is_available(): return`, `if device.type != "cuda": raise`, `assert device.type == "cuda"`), in
`for i in range(torch.cuda.device_count())`, in the implementation of a `cuda()` method, and in a test that is
skipped without CUDA (`@pytest.mark.skipif(not torch.cuda.is_available())`, `@requires_cuda`,
`@_RunIf(min_cuda_gpus=1)`). Every rule may ask (`cuda_path`); what runs there cannot fail on Neuron.
"""

from __future__ import annotations

import functools
import re

import libcst as cst

from portcheck.knowledge.libraries import libraries
from portcheck.static.ancestry import holds
from portcheck.static.check import Context
from portcheck.static.cuda_api.apis import api_entry
from portcheck.static.cuda_api.attribute_tests import attribute_values, false_literal
from portcheck.static.cuda_api.gpu_settings import COUNT, compared_in_cst, setting
from portcheck.static.cuda_api.versions import has_torch_feature
from portcheck.static.cuda_library.integrations import has_words, words
from portcheck.static.syntax import blocks, call_name, dotted_name, last_name, positional, string_value
from portcheck.static.walk import walk

CUDA, NOT_CUDA = "cuda", "not-cuda"
_CUDA_WORDS: list[list[str]] = []  # filled below, from rules/libraries.toml
# `@requires_cuda`, `@onlyCUDA`, `@require_multi_gpu`; not `@withCUDA`, which runs the test on the CPU too.
_GATE_DECORATOR = re.compile(r"(?i)^(requires?|only|needs|skip_?if_?no|skip_?unless)_?\w*(cuda|gpu)")
_RUN_IF = ("RunIf", "_RunIf")
_FLAG_HEADS = frozenset({"use", "using", "with", "on", "is", "has", "run", "enable", "ephemeral", "cuda", "gpu"})
_SKIP_IF, _SKIP_UNLESS = frozenset({"skipif", "skipIf"}), frozenset({"skipUnless"})
SKIP_TESTS = _SKIP_IF | _SKIP_UNLESS


def _flip(polarity: str | None) -> str | None:
    return {CUDA: NOT_CUDA, NOT_CUDA: CUDA}.get(polarity or "")


def probe_call(ctx: Context, node: cst.BaseExpression) -> bool:
    """`torch.cuda.is_available()`, `device_count()`: a torch.cuda API that reads False or 0 without CUDA."""
    if isinstance(node, cst.Call):
        node = node.func
    qualname = ctx.qualname(node)
    if qualname is None or not qualname.startswith("torch.cuda."):
        return False
    api = api_entry(qualname[len("torch.cuda."):])
    return api is not None and api.behaviour in ("returns-false", "returns-zero")


def _count(node: cst.BaseExpression) -> int | None:
    return int(node.value) if isinstance(node, cst.Integer) else None


def _comparison(ctx: Context, test: cst.Comparison, depth: int, counts: bool = True) -> str | None:
    if len(test.comparisons) != 1:
        return None
    operator, right, left = test.comparisons[0].operator, test.comparisons[0].comparator, test.left
    same, differs = isinstance(operator, (cst.Equal, cst.Is)), isinstance(operator, (cst.NotEqual, cst.IsNot))
    if isinstance(operator, (cst.In, cst.NotIn)) and string_value(left) == "cuda":
        # `"cuda" in str(device)`, `"cuda" in self.device`, `"cuda" in devices`: a CUDA device named or listed
        return CUDA if isinstance(operator, cst.In) else NOT_CUDA
    for other in (right, left):
        # `backend == "nccl"`: NVIDIA's collectives, which only a CUDA process group uses; `x.type() ==
        # "torch.cuda.HalfTensor"`: the legacy type name only a tensor on a CUDA device has
        text = string_value(other)
        if text in ("cuda", "nccl") or (text or "").startswith("torch.cuda.") or _device_type_literal(ctx, other) \
                or _gpu_member(other):
            return CUDA if same else NOT_CUDA if differs else None
    if counts and (found := compared_in_cst(left, operator, right)) != "":  # `args.ngpu > 0`, `gpu_id >= 0`
        return {"cuda": CUDA, "!cuda": NOT_CUDA}.get(found or "")
    if isinstance(left, cst.Call) and call_name(left) == "len" and left.args:
        left = left.args[0].value
    if isinstance(left, cst.Name) and depth < 2 and (bound := ctx.constant(left)) is not None:
        left = bound[1]  # `n_gpu = torch.cuda.device_count()`, then `if n_gpu > 0:`
    if not probe_call(ctx, left):
        return None
    count = _count(right)
    if isinstance(operator, (cst.GreaterThan, cst.NotEqual)) and count == 0:
        return CUDA
    if isinstance(operator, (cst.GreaterThanEqual, cst.Equal)) and count is not None and count >= 1:
        return CUDA
    if isinstance(operator, cst.GreaterThan) and count is not None and count > 0:
        return CUDA
    if (isinstance(operator, cst.Equal) and count == 0) or (isinstance(operator, cst.LessThan) and count == 1):
        return NOT_CUDA
    return None


def _gpu_member(node: cst.BaseExpression) -> bool:
    """An enum member named for CUDA GPUs or NVIDIA's collectives: `DistributedType.MULTI_GPU`, `Backend.CUDA`,
    `dist.Backend.NCCL`."""
    if not isinstance(node, cst.Attribute) or not node.attr.value.isupper():
        return False
    return bool({"cuda", "gpu", "nccl"} & set(words(node.attr.value)))


def _device_type_literal(ctx: Context, node: cst.BaseExpression) -> bool:
    """`torch.device("cuda").type`: the string "cuda" spelled as a device."""
    if isinstance(node, cst.Attribute) and node.attr.value == "type" and isinstance(node.value, cst.Call):
        call = node.value
        arg = positional(call, 0)
        return ctx.qualname(call.func) == "torch.device" and arg is not None and string_value(arg.value) == "cuda"
    return False


# Another accelerator's availability test (Apple MPS, Intel XPU, Ascend NPU, Cambricon MLU, Moore Threads MUSA,
# Gaudi HPU, ROCm): False on a Neuron host, like CUDA's. Not XLA's or TPU's: a Neuron host runs PyTorch/XLA.
OTHER_ACCELERATOR = re.compile(r"(^|[.:])is_(torch_)?(mps|xpu|npu|mlu|musa|hpu|dipu|rocm)_available$"
                               r"|^torch\.(backends\.)?(mps|xpu|npu|mlu|musa|hpu)\.is_available$")


def polarity(ctx: Context, test: cst.BaseExpression, depth: int = 0, counts: bool = True) -> str | None:
    """CUDA when `test` holds only with CUDA present or in use, NOT_CUDA when it fails only then, else None. An
    `or` with another accelerator's test (`is_cuda_available() or is_musa_available()`) still holds only off Neuron.
    Without `counts`, a configured number of GPUs or a GPU's index (`args.ngpu > 0`: gpu_settings) is no test."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _flip(polarity(ctx, test.expression, depth, counts))
    if isinstance(test, cst.BooleanOperation):
        sides = (polarity(ctx, test.left, depth, counts), polarity(ctx, test.right, depth, counts))
        if isinstance(test.operator, cst.And):
            return CUDA if CUDA in sides else None
        if CUDA in sides and all(s == CUDA or other_accelerator(ctx, t) for s, t in zip(
                sides, (test.left, test.right), strict=True)):
            return CUDA
        return NOT_CUDA if NOT_CUDA in sides else None
    if isinstance(test, cst.Comparison):
        return _comparison(ctx, test, depth, counts)
    if isinstance(test, cst.Call):
        if probe_call(ctx, test):
            return CUDA
        if has_torch_feature(ctx, test):
            return NOT_CUDA  # it holds on every Neuron stack: only an older PyTorch takes the other way
        if call_name(test) == "startswith" and isinstance(test.func, cst.Attribute) and test.args:
            prefix = string_value(test.args[0].value)
            return CUDA if prefix is not None and prefix.startswith("cuda") else None
        return None
    if isinstance(test, cst.Attribute) and test.attr.value == "is_cuda":
        return CUDA
    name = last_name(test)
    if name and (_flag(name) or (counts and setting(name) == COUNT)):
        return CUDA  # `if use_cuda:`, `if args.ngpu:`
    if isinstance(test, cst.Name) and depth < 2:
        bound = ctx.constant(test)
        return polarity(ctx, bound[1], depth + 1, counts) if bound is not None else None
    if depth < 2 and (values := attribute_values(ctx, test)):  # `self.use_flash = torch.cuda.is_available() and ...`
        given = {"false" if false_literal(v) else polarity(ctx, v, depth + 1, counts) for v in values}
        return CUDA if CUDA in given and given <= {CUDA, "false"} else None
    return None


def other_accelerator(ctx: Context, test: cst.BaseExpression) -> bool:
    """`torch.backends.mps.is_available()`, `is_torch_npu_available()`: another accelerator's probe, False on a Neuron
    host."""
    return isinstance(test, cst.Call) and bool(OTHER_ACCELERATOR.search(
        ctx.qualname(test.func) or dotted_name(test.func) or ""))


def _flag(name: str) -> bool:
    """A flag that says CUDA is used: `using_cuda`, `self.on_gpu`, `ephemeral_gpu_offload` (not `include_cuda`)."""
    found = words(name)
    return bool({"cuda", "gpu"} & set(found)) and found[0] in _FLAG_HEADS


def _text(ctx: Context, node: cst.CSTNode) -> str:
    return " ".join(ctx.source(node).split())


def _exits(block: cst.BaseSuite) -> bool:
    body = block.body
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        last_small = last.body[-1] if last.body else None
    else:
        last_small = last if isinstance(last, cst.BaseSmallStatement) else None
    return isinstance(last_small, (cst.Return, cst.Raise, cst.Continue, cst.Break))


def _early_exit(ctx: Context, holder: cst.CSTNode, inner: cst.CSTNode, counts: bool = True) -> str | None:
    """`if not <cuda>: return` or `assert <cuda>` before `inner` in the block of `holder` that holds it."""
    where, guards = ctx.memo("cuda-early-exits" if counts else "cuda-early-exits-set", holder,
                             lambda: _early_exits(ctx, holder, counts))
    found = where.get(id(inner))
    if found is None:
        return None
    guard = guards[found[0]]
    return guard[1] if guard is not None and guard[0] < found[1] else None


def _early_exits(ctx: Context, holder: cst.CSTNode,
                 counts: bool) -> tuple[dict[int, tuple[int, int]], list[tuple[int, str] | None]]:
    """For the blocks of `holder`, read once: where each statement is (block, index; the first block holding it),
    and each block's first early exit (index, why)."""
    where: dict[int, tuple[int, int]] = {}
    guards: list[tuple[int, str] | None] = []
    for number, block in enumerate(blocks(holder) if not isinstance(holder, cst.Module) else [tuple(holder.body)]):
        for index, stmt in enumerate(block):
            where.setdefault(id(stmt), (number, index))
        guards.append(next(((index, why) for index, stmt in enumerate(block)
                            if (why := _exit_reason(ctx, stmt, counts))), None))
    return where, guards


def _exit_reason(ctx: Context, stmt: cst.CSTNode, counts: bool = True) -> str | None:
    if (isinstance(stmt, cst.If) and stmt.orelse is None and _exits(stmt.body)
            and polarity(ctx, stmt.test, counts=counts) == NOT_CUDA):
        return f"after `if {_text(ctx, stmt.test)}:` exits"
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if isinstance(small, cst.Assert) and polarity(ctx, small.test, counts=counts) == CUDA:
                return f"after `assert {_text(ctx, small.test)}`"
    return None


def gate(ctx: Context, decorator: cst.BaseExpression) -> bool:
    """A decorator that skips a test without CUDA: `pytest.mark.skipif(not torch.cuda.is_available(), ...)`,
    `unittest.skipUnless(torch.cuda.device_count() > 1, ...)`, `@requires_cuda`, `@_RunIf(min_cuda_gpus=1)`."""
    func = decorator.func if isinstance(decorator, cst.Call) else decorator
    last = (dotted_name(func) or "").rsplit(".", 1)[-1]
    if isinstance(decorator, cst.Call) and decorator.args and last in _SKIP_IF | _SKIP_UNLESS:
        wanted = NOT_CUDA if last in _SKIP_IF else CUDA
        return polarity(ctx, decorator.args[0].value) == wanted
    if last in _RUN_IF and isinstance(decorator, cst.Call):
        return any(a.keyword is not None and "cuda" in a.keyword.value for a in decorator.args)
    return bool(_GATE_DECORATOR.match(last))


def _gated(ctx: Context, stmt: cst.FunctionDef | cst.ClassDef) -> str | None:
    for decorator in stmt.decorators:
        if gate(ctx, decorator.decorator):
            return f"in a test gated by `@{_text(ctx, decorator.decorator)}`"
    return None


def _guarded_expressions(ctx: Context, statement: cst.CSTNode, counts: bool) -> dict[int, cst.CSTNode]:
    """Every node of one statement's lines (not its indented blocks) that runs only with CUDA by an expression
    (`x if <cuda> else y`, `<cuda> and x`, `not <cuda> or x`): id -> that guard (an IfExp or a BooleanOperation),
    the outermost. One walk per statement, however many findings it holds; a chain's sides are judged once each
    (polarity would read the whole left side again at every link)."""
    guarded: dict[int, cst.CSTNode] = {}
    roots: dict[int, cst.CSTNode] = {}  # the guarded operand of each guard seen -> the guard
    active: list[cst.CSTNode] = []  # the guarded operand being walked, if any
    sides: dict[int, str | None] = {}

    def side(node: cst.BaseExpression) -> str | None:
        if not isinstance(node, cst.BooleanOperation):
            return polarity(ctx, node, counts=counts)
        if id(node) not in sides:
            both = (side(node.left), side(node.right))
            sides[id(node)] = (CUDA if CUDA in both else None) if isinstance(node.operator, cst.And) else (
                NOT_CUDA if NOT_CUDA in both else None)
        return sides[id(node)]

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.IndentedBlock):
            return False
        if not active and id(node) in roots:
            active.append(node)
        if active:
            guarded[id(node)] = roots[id(active[0])]
            return True  # an inner guard says nothing more: the outermost is the reason
        if isinstance(node, _COMPREHENSIONS):  # `[torch.device(f"cuda:{i}") for i in range(device_count())]`
            loop: cst.CompFor | None = node.for_in
            while loop is not None and not _over_cuda_devices(ctx, loop.iter):
                loop = loop.inner_for_in
            if loop is not None:
                parts = [*loop.ifs, loop.inner_for_in, *(getattr(node, f, None) for f in ("elt", "key", "value"))]
                roots.update((id(part), loop) for part in parts if part is not None)
        elif isinstance(node, cst.IfExp):
            test = polarity(ctx, node.test, counts=counts)
            if test in (CUDA, NOT_CUDA):
                roots[id(node.body if test == CUDA else node.orelse)] = node
        elif isinstance(node, cst.BooleanOperation) and side(node.left) == (
                CUDA if isinstance(node.operator, cst.And) else NOT_CUDA):
            roots[id(node.right)] = node
        return True

    def leave(node: cst.CSTNode) -> None:
        if active and active[0] is node:
            active.clear()

    walk(statement, enter, leave)
    return guarded


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def _guard_reason(ctx: Context, guard: cst.CSTNode) -> str:
    if isinstance(guard, cst.CompFor):
        return f"in `for {_text(ctx, guard.target)} in {_text(ctx, guard.iter)}` (no iteration without CUDA)"
    if isinstance(guard, cst.IfExp):
        return f"under `… if {_text(ctx, guard.test)} else …`"
    assert isinstance(guard, cst.BooleanOperation)
    return f"after `{_text(ctx, guard.left)}`"


# CUDA-only packages named for the layer they implement: a project's own `CausalConv1d`, `GroupedGemm` or
# `DropoutLayerNorm` module is plain PyTorch as often as not, so such a class name says nothing about CUDA.
_LAYER_NAMED = frozenset({"causal_conv1d", "dropout_layer_norm", "grouped_gemm"})


def _cuda_words() -> list[list[str]]:
    names = {"cuda"} | {m.split(".")[0] for m in libraries()} | {n for lib in libraries().values() for n in lib.names}
    return [words(n) for n in names - _LAYER_NAMED]


@functools.lru_cache(maxsize=8192)  # the summary asks it of every class name a function sits in
def named_for_cuda(name: str) -> bool:
    """A class named for CUDA or a CUDA-only library (`CUDAAccelerator`, `Bnb8bitLinear`): code that exists for it.
    A file's name decides nothing (`train_cuda.py` is a training script like any other)."""
    found = words(name)
    if any(has_words(found, w) for w in _CUDA_WORDS):
        return True
    # a library's name written in capitals of its own: `DeepSpeedStrategy`, `BitsAndBytesConfig`, `BnB4BitQuantizer`
    joined = _joined_cuda_words()
    return any("".join(found[i:j]) in joined for i in range(len(found)) for j in range(i + 2, len(found) + 1))


@functools.cache
def _joined_cuda_words() -> frozenset[str]:
    return frozenset("".join(w) for w in _CUDA_WORDS)


def cuda_path(ctx: Context, node: cst.CSTNode, *, expressions: bool = True, counts: bool = True) -> str | None:
    """Where `node` runs only with CUDA, why (a phrase: "under `if device.type == "cuda"`"); else None. Without
    `expressions`, only statements count (not `x if <cuda> else y` or `<cuda> and x`); without `counts`, a configured
    number of GPUs is no guard (`if args.ngpu > 0: model.cuda()` is where the configuration picks the device)."""
    suffix = "" if counts else "-set"
    chain = ctx.statements
    for index, stmt in enumerate(chain):
        inner = chain[index + 1] if index + 1 < len(chain) else node
        if index == 0 and (exit_ := _early_exit(ctx, ctx.module, stmt, counts)):
            return exit_
        if isinstance(stmt, cst.If):  # once a statement, not once a finding in it (5,000 in one test: 300 s)
            side = ctx.memo("cuda-polarity" + suffix, stmt,
                            lambda: polarity(ctx, stmt.test, counts=counts))  # noqa: B023 -- called here
            if (side == CUDA and holds(ctx, stmt.body, inner)) or (
                    side == NOT_CUDA and stmt.orelse is not None and holds(ctx, stmt.orelse, inner)):
                return f"under `if {_text(ctx, stmt.test)}`"
        elif isinstance(stmt, cst.For) and holds(ctx, stmt.body, inner) and _over_cuda_devices(ctx, stmt.iter):
            return f"in `for {_text(ctx, stmt.target)} in {_text(ctx, stmt.iter)}` (no iteration without CUDA)"
        elif isinstance(stmt, cst.With) and holds(ctx, stmt.body, inner) and (
                entered := next((i.item for i in stmt.items if _cuda_context(ctx, i.item)), None)) is not None:
            return f"in `with {_text(ctx, entered)}:`, which fails without CUDA before its body runs"
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            if (isinstance(stmt, cst.FunctionDef) and stmt.name.value == "cuda" and index > 0
                    and isinstance(chain[index - 1], cst.ClassDef)):
                return "in the implementation of a `cuda()` method, run only when the caller asks for CUDA"
            if gated := _gated(ctx, stmt):
                return gated
            if isinstance(stmt, cst.ClassDef) and named_for_cuda(stmt.name.value):
                return f"in `{stmt.name.value}`, a CUDA integration class"
        if inner is not node and (exit_ := _early_exit(ctx, stmt, inner, counts)):
            return exit_
    if chain and expressions:
        guard = ctx.memo("cuda-expressions" + suffix, chain[-1],
                         lambda: _guarded_expressions(ctx, chain[-1], counts)).get(id(node))
        return _guard_reason(ctx, guard) if guard is not None else None
    return None


# Context managers that select or need a CUDA device on entry (`torch.cuda.device(i)`, a stream, a graph capture):
# without CUDA the `with` raises, and its body never runs.
_CUDA_CONTEXTS = frozenset({"torch.cuda.device", "torch.cuda.device_of", "torch.cuda.stream", "torch.cuda.graph",
                            "torch.cuda.StreamContext"})


def _cuda_context(ctx: Context, item: cst.BaseExpression) -> bool:
    """`torch.cuda.device(i)`, `torch.cuda.stream(s)`, or a CUDA-only library's device (`cp.cuda.Device(0)`)."""
    if not isinstance(item, cst.Call):
        return False
    qualname = ctx.qualname(item.func) or ""
    return qualname in _CUDA_CONTEXTS or (".cuda." in qualname and qualname.split(".")[0] in libraries())


def _over_cuda_devices(ctx: Context, iterated: cst.BaseExpression) -> bool:
    """`range(torch.cuda.device_count())`, also through a name bound to the count once: empty without CUDA."""
    return isinstance(iterated, cst.Call) and call_name(iterated) == "range" and any(
        probe_call(ctx, a.value) or (isinstance(a.value, cst.Name) and (bound := ctx.constant(a.value)) is not None
                                     and probe_call(ctx, bound[1])) for a in iterated.args)


_CUDA_WORDS.extend(_cuda_words())

__all__ = ["CUDA", "NOT_CUDA", "SKIP_TESTS", "cuda_path", "gate", "named_for_cuda", "other_accelerator", "polarity",
           "probe_call"]
