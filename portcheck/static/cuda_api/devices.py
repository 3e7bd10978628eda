"""CUDA devices: the strings that name one, the arguments that take one, and the stack's device a fix writes
in their place.

A CUDA device becomes the stack's (KNOWLEDGE.md §3.5: `.to('cuda')` becomes `.to('neuron')`; §3.4:
`torch_xla.device()`, or the string 'xla' where a name or an option holds the device as text). "neuron" and
`torch_xla.device()` are the current device, so a fix that drops a device index is unsafe, unless the index is 0
in a file that never selects a device.
"""

from __future__ import annotations

import re

import libcst as cst

from portcheck.knowledge import load
from portcheck.static.check import Context, FixPlan, Replace
from portcheck.static.codegen import literal_like, spelling
from portcheck.static.cuda_api.paths import polarity
from portcheck.static.syntax import call_name, keyword, positional, string_prefix, string_value
from portcheck.static.walk import visit

TOKENS = ("cuda", "CUDA", "cudnn")  # a file without any of these holds no finding of the family
ENV_SETTERS = frozenset({"os.putenv", "os.environ.setdefault"})
_PLACEMENT_KEYWORDS = ("device", "map_location", "device_map")
# Where the stack's device string can stand in for "cuda" (torch.load cannot map storages onto "xla").
_TEXT_PLACES = {"native": frozenset({"to", "torch.device", "device", "map_location", "default"}),
                "xla": frozenset({"to", "torch.device", "device", "default"})}


def stack_device(ctx: Context) -> str:
    return load().stacks[ctx.stack].device


def stack_hint(ctx: Context) -> str:
    return " (import torch_xla)" if ctx.stack == "xla" else ""


def one_line(code: str) -> str:
    return " ".join(code.split())


def is_cuda_text(text: str) -> bool:
    return text == "cuda" or text.startswith("cuda:")


def cuda_device(ctx: Context, node: cst.BaseExpression) -> str | None:
    """How to describe `node` if it names a CUDA device: `"cuda:0"`, `f"cuda:{…}"`, or `DEVICE (= "cuda")`."""
    prefix = string_prefix(node)
    if prefix is not None:
        return ctx.source(node) if is_cuda_text(prefix) else None
    bound = ctx.constant(node)
    if bound is not None:
        name, value = bound
        prefix = string_prefix(value)
        if prefix is not None and is_cuda_text(prefix):
            return f"{name} (= {ctx.source(value)})"
    return None


def chosen_device(ctx: Context, node: cst.BaseExpression) -> str | None:
    """How to describe `node` if it picks between a CUDA device and the CPU by configuration, with no Neuron
    choice: `"cuda" if args.ngpu > 0 else "cpu"`, or a name bound once to that. On a Neuron host one side fails
    and the other runs on the CPU. Not where the test is a CUDA probe or a CUDA flag (`if use_cuda`): PC104 and
    the guarded path speak there."""
    bound = ctx.constant(node) if isinstance(node, cst.Name) else None
    value = bound[1] if bound is not None else node
    if not isinstance(value, cst.IfExp) or polarity(ctx, value.test, counts=False) is not None:
        return None
    sides = {string_prefix(value.body), string_prefix(value.orelse)}
    if "cpu" not in sides or not any(is_cuda_text(side or "") for side in sides):
        return None  # `"xpu" if is_xpu_available() else "cuda"`: another vendor's choice, not a CPU fallback
    shown = " ".join(ctx.source(value).split())
    return f"{bound[0]} (= {shown})" if bound is not None else shown


def placements(ctx: Context, node: cst.Call) -> list[tuple[str, cst.Arg]]:
    """The arguments of `node` that name a device, with what each is: "to" (`x.to(d)`), "torch.device", a
    keyword (`device=`, `map_location=`, `device_map=`), or "default" (of a command-line `--device` option)."""
    name = call_name(node)
    if name == "cuda" and isinstance(node.func, cst.Attribute):
        return []  # `.cuda(i)` takes an index: judged on its own
    if name == "to" and isinstance(node.func, cst.Attribute):
        arg = keyword(node, "device") or positional(node, 0)
        return [("to", arg)] if arg is not None else []
    qualname = ctx.qualname(node.func)
    if qualname == "torch.device":
        arg = keyword(node, "type") or positional(node, 0)
        return [("torch.device", arg)] if arg is not None else []
    if qualname in ENV_SETTERS:
        return []
    found = [(kw, arg) for kw in _PLACEMENT_KEYWORDS if (arg := keyword(node, kw)) is not None]
    default = keyword(node, "default") if name == "add_argument" else None
    if default is not None and any("device" in (string_value(a.value) or "") for a in node.args if a.keyword is None):
        found.append(("default", default))
    return found


def _selects_device(ctx: Context) -> bool:
    """The file picks a device by index somewhere (`set_device`, `torch.cuda.device(i)`): then device 0 need not
    be the current one. A text search, so a mention in a comment also counts (a fix is then only unsafe)."""
    return bool(ctx.memo("cuda-selects-device", ctx.module,
                         lambda: re.search(r"set_device|device_index|cuda\.device\(", ctx.text) is not None))


def first_device(ctx: Context, index: cst.BaseExpression) -> bool:
    """A device index that means the current device: None, or 0 where nothing selects another."""
    if isinstance(index, cst.Name):
        return index.value == "None"
    return isinstance(index, cst.Integer) and index.value == "0" and not _selects_device(ctx)


def current_device(ctx: Context, text: cst.BaseExpression) -> bool:
    """A CUDA device string naming the current device: "cuda", or "cuda:0" where nothing selects another."""
    value = string_value(text)
    return value == "cuda" or (value == "cuda:0" and not _selects_device(ctx))


def device_code(ctx: Context, literal: cst.BaseExpression | None) -> tuple[str, tuple[str, ...]]:
    """The stack's device as a call argument: `"neuron"` (in the quotes of `literal`), or `torch_xla.device()`."""
    if ctx.stack == "native":
        return (literal_like(literal, "neuron") if literal is not None else None) or '"neuron"', ()
    torch_xla, imports = spelling(ctx, "torch_xla")
    return f"{torch_xla}.device()", imports


def device_text(ctx: Context, literal: cst.BaseExpression) -> tuple[str, tuple[str, ...]]:
    """The stack's device as a string, for a value that may be used as text: "neuron", or "xla" (the device
    string of PyTorch/XLA, KNOWLEDGE.md §3.4), importing torch_xla where the file does not, for its backend."""
    if ctx.stack == "native":
        return literal_like(literal, "neuron") or '"neuron"', ()
    loaded = any(v == "torch_xla" or v.startswith("torch_xla.") for v in ctx.names.aliases.values())
    return literal_like(literal, "xla") or '"xla"', () if loaded else spelling(ctx, "torch_xla")[1]


# ---- a name bound to a CUDA device string --------------------------------------------------------------------------


class _NameUses(cst.CSTVisitor):
    """Whether every read of `name` is a device argument where the stack's device string can stand in."""

    def __init__(self, ctx: Context, name: str) -> None:
        super().__init__()
        self.ctx, self.name = ctx, name
        self.not_reads: set[int] = set()
        self.other = False

    def visit_Call(self, node: cst.Call) -> None:
        for kind, arg in placements(self.ctx, node):
            if kind in _TEXT_PLACES[self.ctx.stack] and isinstance(arg.value, cst.Name):
                self.not_reads.add(id(arg.value))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.not_reads.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.not_reads.add(id(node.keyword))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.not_reads.add(id(node.target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.not_reads.add(id(node.target))

    def visit_Param(self, node: cst.Param) -> None:
        self.not_reads.add(id(node.name))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.not_reads.add(id(node.name))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.not_reads.add(id(node.name))

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self.not_reads:
            self.other = True


def _only_placed(ctx: Context, scope: cst.CSTNode, name: str) -> bool:
    uses = _NameUses(ctx, name)
    visit(scope, uses)
    return not uses.other


def binding_fix(ctx: Context, name: cst.Name) -> FixPlan | None:
    """`DEVICE = "cuda"` used as `.to(DEVICE)`: the fix rewrites the binding, once for all its uses. Safe when
    every read of the name is a device argument (`if DEVICE == "cuda":` would change its branch) and the
    string names the current device."""
    bound = ctx.constant(name)
    if bound is None:
        return None
    label, value = bound
    scope: cst.CSTNode = ctx.module
    for index in range(len(ctx.scopes) - 1, -1, -1):
        if label in ctx.scopes[index].bound:
            scope = ctx.functions[index]
            break
    placed = ctx.memo(f"cuda-binding-{label}", scope, lambda: _only_placed(ctx, scope, label))
    code, imports = device_text(ctx, value)
    return FixPlan(f"Bind `{label}` to {code}", bool(placed) and current_device(ctx, value),
                   (Replace(value, code),), imports)
