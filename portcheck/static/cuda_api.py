"""cuda-api (PC1xx): code that assumes an NVIDIA GPU — device placement, `torch.cuda`, cuDNN flags.

The checks here resolve names through the file's imports, so `import torch as th; th.cuda.synchronize()`,
`from torch import cuda` and `from torch.cuda import synchronize as sync` are all the same call, while
strings, comments, `args.cuda` and `torch.cuda.is_bf16_supported = lambda: True` (the stub Neuron's own
docs recommend) stay quiet. Code that only runs where CUDA is present (`if torch.cuda.is_available(): ...`,
`x.cuda() if torch.cuda.is_available() else x`) cannot raise on Neuron: it is reported as info, next to the
probe that guards it.

Fixes put the stack's device where a CUDA one was, swap `torch.cuda` calls for the drop-ins rules/cuda_api.toml
names, and remove settings and calls that do nothing on Neuron; each rule's "Fix safety" says when one is safe.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import CudaApi, load
from portcheck.static.codegen import literal_like, rewritten, spelling
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
    string_prefix,
    string_value,
)
from portcheck.static.syntax import blocks as sub_blocks
from portcheck.static.syntax import dotted_name
from portcheck.static.values import contains
from portcheck.static.walk import visit

TOKENS = ("cuda", "CUDA", "cudnn")
REFERENCE_CODES = ("PC104", "PC105", "PC106", "PC107", "PC108", "PC109", "PC111")
_SUBMODULES = ("memory.", "random.", "graphs.", "streams.")
_BACKENDS = ("torch.backends.cudnn", "torch.backends.cuda")
_ENV_SETTERS = {"os.putenv", "os.environ.setdefault"}


def _device(ctx: Context) -> str:
    return load().stacks[ctx.stack].device


def _stack_hint(ctx: Context) -> str:
    return " (import torch_xla)" if ctx.stack == "xla" else ""


def _one_line(code: str) -> str:
    return " ".join(code.split())


def _is_cuda_text(text: str) -> bool:
    return text == "cuda" or text.startswith("cuda:")


def cuda_device(ctx: Context, node: cst.BaseExpression) -> str | None:
    """How to describe `node` if it names a CUDA device: `"cuda:0"`, `f"cuda:{…}"`, or `DEVICE (= "cuda")`."""
    prefix = string_prefix(node)
    if prefix is not None:
        return ctx.source(node) if _is_cuda_text(prefix) else None
    bound = ctx.constant(node)
    if bound is not None:
        name, value = bound
        prefix = string_prefix(value)
        if prefix is not None and _is_cuda_text(prefix):
            return f"{name} (= {ctx.source(value)})"
    return None


def _api_entry(rest: str) -> CudaApi | None:
    apis = load().cuda_api
    if rest in apis:
        return apis[rest]
    for sub in _SUBMODULES:
        if rest.startswith(sub) and rest[len(sub):] in apis:
            return apis[rest[len(sub):]]
    return None


_BEHAVIOUR = {
    "raises": "raises on a host without CUDA, which every Neuron instance is",
    "returns-false": "is False on a Neuron instance, so the code takes its non-GPU path",
    "returns-zero": "reads 0 / empty on a Neuron instance",
    "ignored": "silently does nothing without a CUDA device",
}

_NO_EQUIVALENT = {
    "PC107": "Neuron documents no stream or event API; remove explicit stream handling",
    "PC108": "Neuron has no CUDA-graph equivalent; drop the capture and compile the model instead",
}


def _api_message(qualname: str, api: CudaApi | None, stack: str) -> tuple[str, str]:
    if api is None:
        return "PC111", (
            f"`{qualname}` is NVIDIA-only; port it to the {stack} stack's device API "
            "(nothing under torch.cuda has a Neuron meaning)"
        )
    replacement = api.replacement(stack)
    if replacement:
        advice = f"use `{replacement}`"
    elif stack == "xla" and api.xla_note:
        advice = api.xla_note
    else:
        advice = _NO_EQUIVALENT.get(api.code, f"the {stack} stack documents no equivalent; remove it or guard it")
    return api.code, f"`{qualname}` {_BEHAVIOUR[api.behaviour]}; {advice}"


# ---- code reached only where CUDA is present ---------------------------------------------------------------
#
# `if torch.cuda.is_available(): torch.cuda.synchronize()` cannot raise on Neuron: the probe is False there, so
# the body never runs. The probe itself is reported (PC104 / PC106); what it guards is reported as info with a
# note, since it raises as soon as the probe is ported to `torch.accelerator`.

_RAISING = frozenset({"PC101", "PC102", "PC103", "PC105", "PC107", "PC108", "PC111"})
_GUARDED = _RAISING | {"PC106"}  # PC106 does nothing without CUDA: under a probe it is not even reached
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
    api = _api_entry(qualname[len("torch.cuda."):])
    return api is not None and api.behaviour in ("returns-false", "returns-zero")


def _probe_in(ctx: Context, test: cst.BaseExpression) -> bool:
    """The test holds only where CUDA is present: a probe, alone or in an `and` chain."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _probe_in(ctx, test.left) or _probe_in(ctx, test.right)
    return _cuda_probe(ctx, test)


def _cuda_only(ctx: Context, node: cst.CSTNode) -> str | None:
    """The probe that keeps `node` from running on Neuron: it sits in the body of `if torch.cuda.is_available():`
    (or of `x if torch.cuda.is_available() else y`)."""
    for index, stmt in enumerate(ctx.statements):
        if isinstance(stmt, cst.If) and _probe_in(ctx, stmt.test):
            inner = ctx.statements[index + 1] if index + 1 < len(ctx.statements) else node
            if contains(stmt.body, inner):
                return _one_line(ctx.source(stmt.test))
    for ifexp in _probe_expressions(ctx):
        if contains(ifexp.body, node):
            return _one_line(ctx.source(ifexp.test))
    return None


def _probe_expressions(ctx: Context) -> list[cst.IfExp]:
    """Each `body if <cuda probe> else other` met so far in the current statement."""
    if not ctx.statements:
        return []
    return ctx.memo("cuda-probe-ifexp", ctx.statements[-1], list)  # type: ignore[return-value]


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


def _only_logs(ctx: Context, node: cst.CSTNode) -> bool:
    """`node` is in the test of an `if` (without `else`) whose body only logs: the probe decides a message."""
    stmt = ctx.statements[-1] if ctx.statements else None
    if not isinstance(stmt, cst.If) or stmt.orelse is not None or not contains(stmt.test, node):
        return False
    if isinstance(stmt.body, cst.SimpleStatementSuite):
        smalls = list(stmt.body.body)
    elif all(isinstance(line, cst.SimpleStatementLine) for line in stmt.body.body):
        smalls = [small for line in stmt.body.body for small in line.body]  # type: ignore[union-attr]
    else:
        return False
    return bool(smalls) and all(_logs(ctx, small) for small in smalls)


@check(cst.IfExp, codes=(*_GUARDED, "PC104"), tokens=TOKENS)
def note_probe_expression(node: cst.CSTNode, ctx: Context) -> None:
    """Remember `x if torch.cuda.is_available() else y` so that `x` is judged as reached only with CUDA (and the
    probe's fix sees what it decides)."""
    assert isinstance(node, cst.IfExp)
    if _probe_in(ctx, node.test):
        _probe_expressions(ctx).append(node)


def _report(ctx: Context, code: str, node: cst.CSTNode, message: str, fix: FixPlan | None = None) -> None:
    probe = _cuda_only(ctx, node) if code in _GUARDED else None
    if probe is None:
        ctx.report(code, node, message, fix=fix)
        return
    then = ": it raises once that probe is ported" if code in _RAISING else ""
    ctx.report(code, node, f"{message} (reached only where CUDA is present, under `{probe}`{then})", Severity.INFO,
               fix)


# ---- fixes ---------------------------------------------------------------------------------------------------------
#
# A CUDA device becomes the stack's (KNOWLEDGE.md §3.5: `.to('cuda')` becomes `.to('neuron')`; §3.4:
# `torch_xla.device()`, or the string 'xla' where a name or an option holds the device as text), and
# rules/cuda_api.toml says which torch.cuda calls have a drop-in replacement. "neuron" and `torch_xla.device()`
# are the current device, so a fix that drops a device index is unsafe, unless the index is 0 in a file that
# never selects a device.

_XLA_ALIASES = {"torch_xla.core.xla_model": "xm", "torch_xla.runtime": "xr"}  # the names torch_xla's docs use
_PLACEMENT_KEYWORDS = ("device", "map_location", "device_map")
# Where the stack's device string can stand in for "cuda" (torch.load cannot map storages onto "xla").
_TEXT_PLACES = {"native": frozenset({"to", "torch.device", "device", "map_location", "default"}),
                "xla": frozenset({"to", "torch.device", "device", "default"})}


def _placements(ctx: Context, node: cst.Call) -> list[tuple[str, cst.Arg]]:
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
    if qualname in _ENV_SETTERS:
        return []
    found = [(kw, arg) for kw in _PLACEMENT_KEYWORDS if (arg := keyword(node, kw)) is not None]
    default = keyword(node, "default") if name == "add_argument" else None
    if default is not None and any("device" in (string_value(a.value) or "") for a in node.args if a.keyword is None):
        found.append(("default", default))
    return found


def _selects_device(ctx: Context) -> bool:
    """The file picks a device by index somewhere (`set_device`, `torch.cuda.device(i)`): then device 0 need not
    be the current one. A text search, so a mention in a comment also counts (a fix is then only unsafe)."""
    return ctx.memo("cuda-selects-device", ctx.module,  # type: ignore[return-value]
                    lambda: re.search(r"set_device|device_index|cuda\.device\(", ctx.text) is not None)


def _first_device(ctx: Context, index: cst.BaseExpression) -> bool:
    """A device index that means the current device: None, or 0 where nothing selects another."""
    if isinstance(index, cst.Name):
        return index.value == "None"
    return isinstance(index, cst.Integer) and index.value == "0" and not _selects_device(ctx)


def _current_device(ctx: Context, text: cst.BaseExpression) -> bool:
    """A CUDA device string naming the current device: "cuda", or "cuda:0" where nothing selects another."""
    value = string_value(text)
    return value == "cuda" or (value == "cuda:0" and not _selects_device(ctx))


def _mentions(ctx: Context, word: str) -> bool:
    return ctx.memo(f"cuda-mentions-{word}", ctx.module,  # type: ignore[return-value]
                    lambda: re.search(rf"\b{word}\b", ctx.text) is not None)


def _module_spelling(ctx: Context, module: str) -> tuple[str, tuple[str, ...]]:
    """`module` as this file can write it, and the import that takes; `xm` / `xr` for torch_xla's modules where
    the file imports them under no name and does not use that name."""
    local, imports = spelling(ctx, module)
    alias = _XLA_ALIASES.get(module)
    if imports and alias is not None and not _mentions(ctx, alias):
        return alias, (f"import {module} as {alias}",)
    return local, imports


def _device_code(ctx: Context, literal: cst.BaseExpression | None) -> tuple[str, tuple[str, ...]]:
    """The stack's device as a call argument: `"neuron"` (in the quotes of `literal`), or `torch_xla.device()`."""
    if ctx.stack == "native":
        return (literal_like(literal, "neuron") if literal is not None else None) or '"neuron"', ()
    torch_xla, imports = spelling(ctx, "torch_xla")
    return f"{torch_xla}.device()", imports


def _device_text(ctx: Context, literal: cst.BaseExpression) -> tuple[str, tuple[str, ...]]:
    """The stack's device as a string, for a value that may be used as text: "neuron", or "xla" (the device
    string of PyTorch/XLA, KNOWLEDGE.md §3.4), importing torch_xla where the file does not, for its backend."""
    if ctx.stack == "native":
        return literal_like(literal, "neuron") or '"neuron"', ()
    loaded = any(v == "torch_xla" or v.startswith("torch_xla.") for v in ctx.names.aliases.values())
    return literal_like(literal, "xla") or '"xla"', () if loaded else spelling(ctx, "torch_xla")[1]


class _NameUses(cst.CSTVisitor):
    """Whether every read of `name` is a device argument where the stack's device string can stand in."""

    def __init__(self, ctx: Context, name: str) -> None:
        super().__init__()
        self.ctx, self.name = ctx, name
        self.not_reads: set[int] = set()
        self.other = False

    def visit_Call(self, node: cst.Call) -> None:
        for kind, arg in _placements(self.ctx, node):
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


def _binding_fix(ctx: Context, name: cst.Name) -> FixPlan | None:
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
    code, imports = _device_text(ctx, value)
    return FixPlan(f"Bind `{label}` to {code}", bool(placed) and _current_device(ctx, value),
                   (Replace(value, code),), imports)


def _argument_fix(ctx: Context, value: cst.BaseExpression) -> FixPlan | None:
    """`.to("cuda")`, `device="cuda:0"`, `.to(f"cuda:{rank}")`: the stack's device in place of the argument."""
    if isinstance(value, cst.Name):
        return _binding_fix(ctx, value)
    code, imports = _device_code(ctx, value)
    return FixPlan(f"Use `{code}`", _current_device(ctx, value), (Replace(value, code),), imports)


def _map_location_fix(ctx: Context, call: cst.Call, value: cst.BaseExpression) -> FixPlan | None:
    """xla: `map_location="cpu"` in place of a CUDA string or of a name bound to one (native passes `"neuron"`, as
    for any device argument). Safe only where the result goes straight into `.load_state_dict(...)`, which
    copies it onto the model's device."""
    code = literal_like(value, "cpu") or '"cpu"'
    safe = _loads_state_dict(ctx, call)
    return FixPlan(f"Load onto the host: `map_location={code}`", safe, (Replace(value, code),))


def _default_fix(ctx: Context, value: cst.BaseExpression) -> FixPlan | None:
    """A `--device` option's default: the stack's device string; unsafe, since the option's uses are not seen."""
    if isinstance(value, cst.Name):
        return _binding_fix(ctx, value)
    code, imports = _device_text(ctx, value)
    return FixPlan(f"Default to {code}", False, (Replace(value, code),), imports)


def _device_object_fix(ctx: Context, node: cst.Call, arg: cst.Arg) -> FixPlan | None:
    """`torch.device("cuda")` → `torch.device("neuron")` (native) or `torch_xla.device()` (xla); an index given
    beside the type is dropped."""
    if isinstance(arg.value, cst.Name):
        return _binding_fix(ctx, arg.value)
    others = [a for a in node.args if a is not arg]
    if any(a.star for a in node.args) or len(others) > 1:
        return None
    index = others[0] if others else None
    if index is not None and index.keyword is not None and index.keyword.value != "index":
        return None
    if index is None:
        safe = _current_device(ctx, arg.value)
    else:
        safe = string_value(arg.value) == "cuda" and _first_device(ctx, index.value)
    if ctx.stack == "xla":
        code, imports = _device_code(ctx, None)
        return FixPlan(f"Use `{code}`", safe, (Replace(node, code),), imports)
    literal, _ = _device_code(ctx, arg.value)
    if index is None:
        return FixPlan(f"Use `torch.device({literal})`", safe, (Replace(arg.value, literal),))
    alone = arg.with_changes(value=cst.parse_expression(literal), comma=cst.MaybeSentinel.DEFAULT)
    code = rewritten(ctx, node, node.with_changes(args=[alone], lpar=(), rpar=()))
    return None if code is None else FixPlan(f"Use `torch.device({literal})`", safe, (Replace(node, code),))


_CUDA_KEYWORDS = frozenset({"device", "non_blocking", "memory_format"})  # what `.to(...)` takes as well


def _cuda_method_fix(ctx: Context, node: cst.Call) -> FixPlan | None:
    """`.cuda()` → `.to("neuron")` / `.to(torch_xla.device())`, other arguments kept; a device index is replaced
    by the stack's device."""
    assert isinstance(node.func, cst.Attribute)
    positionals = [a for a in node.args if a.keyword is None]
    if any(a.star for a in node.args) or len(positionals) > 1:
        return None
    if any(a.keyword is not None and a.keyword.value not in _CUDA_KEYWORDS for a in node.args):
        return None
    index = positionals[0] if positionals else keyword(node, "device")
    device, imports = _device_code(ctx, None)
    value = cst.parse_expression(device)
    if index is not None:
        args = [a.with_changes(value=value) if a is index else a for a in node.args]
    elif node.args:  # the device goes first, on a line of its own where the arguments stand one per line
        space = node.whitespace_before_args
        after = (space.with_changes(first_line=cst.TrailingWhitespace())
                 if isinstance(space, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(" "))
        args = [cst.Arg(value, comma=cst.Comma(whitespace_after=after)), *node.args]
    else:
        args = [cst.Arg(value)]
    new = node.with_changes(func=node.func.with_changes(attr=cst.Name("to")), args=args)
    code = rewritten(ctx, node, new.with_changes(lpar=(), rpar=()))  # a node's span leaves out its parentheses
    if code is None:
        return None
    safe = index is None or _first_device(ctx, index.value)
    return FixPlan(f"Use `.to({device})`", safe, (Replace(node, code),), imports)


class _CallFinder(cst.CSTVisitor):
    """The first call `match` accepts on the lines of one statement (not in the blocks it holds)."""

    def __init__(self, match: Callable[[cst.Call], bool]) -> None:
        super().__init__()
        self.match = match
        self.found: cst.Call | None = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is not None or isinstance(node, cst.IndentedBlock):
            return False
        if isinstance(node, cst.Call) and self.match(node):
            self.found = node
            return False
        return True


def _find_call(ctx: Context, match: Callable[[cst.Call], bool]) -> cst.Call | None:
    """Searched when a fix is built (rare), so that no check runs on every call of every file."""
    if not ctx.statements:
        return None
    finder = _CallFinder(match)
    visit(ctx.statements[-1], finder)
    return finder.found


def _loads_state_dict(ctx: Context, call: cst.Call) -> bool:
    """`call` is what `.load_state_dict(...)` is given."""
    return _find_call(ctx, lambda c: call_name(c) == "load_state_dict" and any(a.value is call for a in c.args)) \
        is not None


def _callee(ctx: Context, node: cst.BaseExpression, target: str) -> tuple[str, tuple[str, ...]]:
    """`target` ("torch:accelerator.synchronize") as this file writes it: `th.accelerator.synchronize` where
    the reference was `th.cuda.synchronize`."""
    module, _, attribute = target.partition(":")
    if module == "torch":
        head = (dotted_name(node) or "").split(".")[0]
        for local in (head, "torch"):
            if ctx.names.aliases.get(local) == "torch":
                return f"{local}.{attribute}", ()
        local, imports = spelling(ctx, "torch")
    else:
        local, imports = _module_spelling(ctx, module)
    return f"{local}.{attribute}", imports


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
            self.allowed.update(id(a.value) for kind, a in _placements(self.ctx, node) if kind != "device_map")
        elif isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            prefix = string_prefix(node)
            self.found = prefix is not None and _is_cuda_text(prefix)
            return False
        return True


def _stray_cuda(ctx: Context, node: cst.CSTNode, allowed: set[int]) -> bool:
    finder = _StrayCuda(ctx, allowed)
    visit(node, finder)
    return finder.found


def _probe_steps(ctx: Context, call: cst.Call) -> tuple[list[Replace], tuple[str, ...]] | None:
    """A probe is rewritten only where what it decides is in view: the test of an `if`, or of `a if probe else b`
    (whose `"cuda"` becomes the stack's device too), without other CUDA device strings that would then be
    reached; elsewhere (`use_gpu = torch.cuda.is_available()`) no fix."""
    for ifexp in _probe_expressions(ctx):
        if contains(ifexp.test, call):
            prefix = string_prefix(ifexp.body)
            if prefix is None or not _is_cuda_text(prefix):
                return None if _stray_cuda(ctx, ifexp, set()) else ([], ())
            code, imports = _device_text(ctx, ifexp.body)
            return None if _stray_cuda(ctx, ifexp, {id(ifexp.body)}) else ([Replace(ifexp.body, code)], imports)
    stmt = ctx.statements[-1] if ctx.statements else None
    if isinstance(stmt, cst.If) and contains(stmt.test, call) and not _stray_cuda(ctx, stmt, set()):
        return [], ()
    return None


def _api_fix(ctx: Context, node: cst.BaseExpression, api: CudaApi) -> FixPlan | None:
    """A call of a torch.cuda API, rewritten as cuda_api.toml says for the stack; an uncalled reference is not."""
    spec = api.fixes.get(ctx.stack)
    call = _find_call(ctx, lambda c: c.func is node) if spec is not None else None
    if call is None or spec is None:
        return None
    if spec.value:
        return FixPlan(f"Replace with `{spec.value}`", spec.safe, (Replace(call, spec.value),))
    if spec.remove:
        step = _removal(ctx, lambda small: isinstance(small, cst.Expr) and small.value is call)
        return None if step is None else FixPlan("Remove the call (it does nothing here)", spec.safe, (step,))
    if any(a.keyword is not None or a.star == "**" for a in call.args) or (spec.arguments == "none" and call.args):
        return None
    if any(cuda_device(ctx, a.value) for a in call.args):
        return None
    callee, imports = _callee(ctx, node, spec.call)
    steps = [Replace(node, callee)]
    if api.code == "PC104":
        more = _probe_steps(ctx, call)
        if more is None:
            return None
        steps += more[0]
        imports = tuple(dict.fromkeys(imports + more[1]))
    return FixPlan(f"Use `{callee}`", spec.safe, tuple(steps), imports)


def _removable(ctx: Context, stmt: cst.CSTNode) -> bool:
    """A line this module's fixes delete: a cuDNN / CUDA-backend setting, or a call that does nothing here."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and "PC109" in ctx.enabled:
        qualname = ctx.qualname(small.targets[0].target)
        return qualname is not None and any(qualname.startswith(b + ".") for b in _BACKENDS)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and "PC106" in ctx.enabled:
        qualname = ctx.qualname(small.value.func) or ""
        api = _api_entry(qualname[len("torch.cuda."):]) if qualname.startswith("torch.cuda.") else None
        spec = api.fixes.get(ctx.stack) if api is not None else None
        return spec is not None and spec.remove
    return False


def _suites(stmt: cst.CSTNode) -> list[cst.SimpleStatementSuite]:
    """The bodies of a compound statement written on the line of their header (`if x: y`, `else: y`)."""
    parts = [getattr(stmt, "body", None), *(h.body for h in getattr(stmt, "handlers", ()))]
    parts += [getattr(part, "body", None) for part in (getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None))
              if isinstance(part, (cst.Else, cst.Finally))]
    return [part for part in parts if isinstance(part, cst.SimpleStatementSuite)]


def _removal(ctx: Context, is_target: Callable[[cst.BaseSmallStatement], bool]) -> Replace | None:
    """Delete the statement being visited, a line that holds only the target statement; a block it would leave
    empty keeps a `pass` (as does `if x: target` on one line). None where the target shares its line."""
    stmt = ctx.statements[-1] if ctx.statements else None
    if isinstance(stmt, cst.SimpleStatementLine):
        if len(stmt.body) != 1 or not is_target(stmt.body[0]) or not _removable(ctx, stmt):
            return None
        if len(ctx.statements) == 1:
            return Replace(stmt, "", whole_lines=True)
        block = next((b for b in sub_blocks(ctx.statements[-2]) if any(s is stmt for s in b)), None)
        if block is None:
            return None
        removable = [s for s in block if _removable(ctx, s)]
        if len(removable) == len(block) and removable[0] is stmt:  # the block's other lines go too: keep one
            return Replace(stmt.body[0], "pass")
        return Replace(stmt, "", whole_lines=True)
    for suite in _suites(stmt):
        if len(suite.body) == 1 and is_target(suite.body[0]):
            return Replace(suite.body[0], "pass")
    return None


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


def _judge_reference(ctx: Context, node: cst.CSTNode, qualname: str) -> None:
    if qualname == "torch.cuda.amp" or qualname.startswith("torch.cuda.amp."):
        return  # autocast and GradScaler are training rules (PC601, PC602): see training.py
    if qualname == "torch.cuda" or qualname.startswith("torch.cuda."):
        api = _api_entry(qualname[len("torch.cuda."):])
        code, message = _api_message(qualname, api, ctx.stack)
        assert isinstance(node, (cst.Attribute, cst.Name))
        fix = _api_fix(ctx, node, api) if api is not None and code in ctx.enabled else None
        if code == "PC104" and _only_logs(ctx, node):
            ctx.report(code, node, f"{message} (here it only decides whether a message is logged)", Severity.INFO,
                       fix)
            return
        _report(ctx, code, node, message, fix)
    elif any(qualname == b or qualname.startswith(b + ".") for b in _BACKENDS):
        ctx.report("PC109", node,
                   f"`{qualname}` configures NVIDIA kernels only; on Neuron it is ignored; remove it")


def _skip_chain(ctx: Context, node: cst.BaseExpression) -> None:
    if isinstance(node, (cst.Attribute, cst.Name)):
        ctx.skip.add(id(node))


@check(cst.Attribute, cst.Name, codes=REFERENCE_CODES, tokens=TOKENS)
def check_reference(node: cst.CSTNode, ctx: Context) -> None:
    """A `torch.cuda.*` / `torch.backends.cudnn.*` reference in load position, judged once per chain."""
    if isinstance(node, cst.Attribute):
        ctx.skip.add(id(node.attr))
        inner = id(node) in ctx.skip
        _skip_chain(ctx, node.value)
        if inner:
            return
        qualname = ctx.qualname(node)
    else:
        assert isinstance(node, cst.Name)
        if id(node) in ctx.skip:
            return
        qualname = ctx.names.aliases.get(node.value)
    if qualname is not None:
        _judge_reference(ctx, node, qualname)


@check(cst.Arg, cst.Param, cst.FunctionDef, cst.ClassDef, cst.AsName, codes=REFERENCE_CODES, tokens=TOKENS)
def skip_binding_names(node: cst.CSTNode, ctx: Context) -> None:
    """Keywords, parameters and definition names are not references to what an import bound."""
    name = getattr(node, "keyword", None) if isinstance(node, cst.Arg) else getattr(node, "name", None)
    if isinstance(name, cst.Name):
        ctx.skip.add(id(name))


@check(cst.Import, cst.ImportFrom, cst.Annotation, codes=REFERENCE_CODES, tokens=TOKENS)
def skip_imports_and_annotations(node: cst.CSTNode, ctx: Context) -> bool:
    """Importing torch.cuda is harmless until it is used; annotations never run on the device."""
    return False


@check(cst.AssignTarget, codes=(*REFERENCE_CODES, "PC110"), tokens=TOKENS)
def check_assignment(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.AssignTarget)
    target = node.target
    if isinstance(target, cst.Subscript) and ctx.qualname(target.value) == "os.environ":
        key = target.slice[0].slice if len(target.slice) == 1 else None
        if isinstance(key, cst.Index) and string_value(key.value) == "CUDA_VISIBLE_DEVICES":
            assign = _assignment(ctx, node)
            fix = _visible_cores_fix(key.value, assign.value) if assign is not None else None
            ctx.report("PC110", target, _visible_devices_message(), fix=fix)
        return
    qualname = ctx.qualname(target)
    if qualname is None:
        return
    if qualname.startswith("torch.cuda."):
        # Assigning to torch.cuda (e.g. `torch.cuda.is_bf16_supported = lambda: True`) is the stub
        # Neuron's docs recommend for libraries that probe CUDA: not a use of CUDA.
        _skip_chain(ctx, target)
    elif any(qualname.startswith(b + ".") for b in _BACKENDS):
        assign = _assignment(ctx, node)
        step = _removal(ctx, lambda small: small is assign) if assign is not None else None
        # Removing the line removes its right-hand side too: safe where that has no effect of its own.
        safe = assign is not None and _plain(assign.value)
        fix = None if step is None else FixPlan("Remove the setting (ignored on Neuron)", safe, (step,))
        ctx.report("PC109", target,
                   f"setting `{qualname}` has no effect on Neuron (cuDNN/CUDA kernels only); remove it", fix=fix)
        _skip_chain(ctx, target)


def _plain(value: cst.BaseExpression) -> bool:
    """A literal, a name or an attribute: evaluating it does nothing else."""
    if isinstance(value, cst.UnaryOperation):
        value = value.expression
    return isinstance(value, (cst.Name, cst.Attribute, cst.BaseNumber, cst.BaseString))


def _only_target(assign: cst.Assign, target: cst.AssignTarget) -> bool:
    return len(assign.targets) == 1 and assign.targets[0] is target


def _assignment(ctx: Context, target: cst.AssignTarget) -> cst.Assign | None:
    """The single-target assignment `target` belongs to, in the statement being visited."""
    stmt = ctx.statements[-1] if ctx.statements else None
    lines = [stmt] if isinstance(stmt, cst.SimpleStatementLine) else _suites(stmt)
    for line in lines:
        for small in line.body:
            if isinstance(small, cst.Assign) and _only_target(small, target):
                return small
    return None


def _visible_devices_message() -> str:
    return ("`CUDA_VISIBLE_DEVICES` is not read by the Neuron runtime; select NeuronCores with "
            "`NEURON_RT_VISIBLE_CORES` (e.g. \"0-3\") or `NEURON_RT_NUM_CORES`")


@check(cst.Call, codes=("PC101", "PC102", "PC103", "PC110"), tokens=TOKENS)
def check_call(node: cst.CSTNode, ctx: Context) -> None:
    assert isinstance(node, cst.Call)
    device = _device(ctx)
    if call_name(node) == "cuda" and isinstance(node.func, cst.Attribute):
        if ctx.qualname(node.func) != "torch.cuda":
            _report(ctx, "PC101", node, f"`{ctx.source(node)}` moves to a CUDA device, which a Neuron instance "
                       f"does not have; use `.to({device})`{_stack_hint(ctx)}", _cuda_method_fix(ctx, node))
        return
    if ctx.qualname(node.func) in _ENV_SETTERS:
        key, value = positional(node, 0), positional(node, 1)
        if key is not None and string_value(key.value) == "CUDA_VISIBLE_DEVICES":
            fix = _visible_cores_fix(key.value, value.value if value is not None else None)
            ctx.report("PC110", node, _visible_devices_message(), fix=fix)
        return
    for kind, arg in _placements(ctx, node):
        where = cuda_device(ctx, arg.value)
        if not where:
            continue
        if kind == "to":
            _report(ctx, "PC101", node, f"`.to({where})` moves to a CUDA device, which a Neuron instance does not "
                       f"have; use `.to({device})`{_stack_hint(ctx)}", _argument_fix(ctx, arg.value))
        elif kind == "torch.device":
            replacement = f"torch.device({device})" if ctx.stack == "native" else device
            _report(ctx, "PC102", node, f"`{_one_line(ctx.source(node))}` names a CUDA device; tensors placed on it "
                       f"raise on Neuron; use `{replacement}`{_stack_hint(ctx)}", _device_object_fix(ctx, node, arg))
        elif kind == "default":
            text = device if ctx.stack == "native" else '"xla"'
            _report(ctx, "PC103", arg, f"the device option defaults to {where}, which a Neuron instance does "
                       f"not have; default to {text}{_stack_hint(ctx)}", _default_fix(ctx, arg.value))
        elif kind == "map_location" and ctx.stack == "xla":
            _report(ctx, "PC103", arg, f"`map_location={where}` loads onto a CUDA device, which a Neuron instance "
                       "does not have; load onto the host with `map_location=\"cpu\"` (`load_state_dict` copies "
                       "onto the model's device)", _map_location_fix(ctx, node, arg.value))
        else:
            fix = None if kind == "device_map" else _argument_fix(ctx, arg.value)
            _report(ctx, "PC103", arg, f"`{kind}={where}` places on a CUDA device, which a Neuron instance does not "
                       f"have; pass `{kind}={device}`{_stack_hint(ctx)}", fix)


@rule
class CudaTensorPlacement(Rule):
    """## What it does
    Finds `.cuda()`, `.cuda(n)`, `.to("cuda")`, `.to("cuda:0")`, `.to(device="cuda")` and `.to(DEVICE)` where
    `DEVICE` is bound to a CUDA device string in the same file.

    ## Example
    ```python
    model = Net().cuda()
    batch = batch.to("cuda:0", non_blocking=True)
    ```

    ## Use instead
    ```python
    model = Net().to("neuron")          # TorchNeuron native (trn2)
    batch = batch.to(torch_xla.device())  # PyTorch/XLA (inf2, trn1)
    ```

    ## Fix safety
    `.cuda()` becomes `.to("neuron")` (native) or `.to(torch_xla.device())` (xla, adding `import torch_xla`),
    its other arguments kept; a CUDA device string becomes the stack's device. Both are the current device, so
    the fix is safe for `.cuda()`, `"cuda"`, and index 0 in a file that never selects a device
    (`set_device`); it is unsafe where it drops another index (`.cuda(rank)`, `"cuda:1"`, `f"cuda:{rank}"`).
    A name bound to a CUDA string (`DEVICE = "cuda"`) is fixed once at its binding, to `"neuron"` / `"xla"`
    (still a string); unsafe when the name is also read as something other than a device argument
    (`if DEVICE == "cuda":`, `print(DEVICE)`), since that then changes too.
    """

    code = "PC101"
    FIXABLE = True
    INVALID = (
        "model = model.cuda()",
        "x = x.cuda(0)",
        "x = x.to('cuda')",
        "x = x.to(device='cuda:1')",
        'DEVICE = "cuda"\ndef f(m):\n    return m.to(DEVICE)',
        "def f(m):\n    device = 'cuda'\n    return m.to(device)",
        "x = x.to(f'cuda:{rank}')",
    )
    VALID = (
        "x = x.to('cpu')",
        "if args.cuda:\n    pass",
        "x = x.to(device)",
        "def f(m, device='cuda'):\n    return m.to(device)",
        "print('move to cuda')",
    )


@rule
class CudaDeviceObject(Rule):
    """## What it does
    Finds `torch.device("cuda")`, `torch.device("cuda", 0)` and `torch.device(f"cuda:{rank}")`.

    ## Example
    ```python
    device = torch.device("cuda", local_rank)
    ```

    ## Use instead
    ```python
    device = torch.device("neuron")  # TorchNeuron native
    device = torch_xla.device()      # PyTorch/XLA
    ```

    ## Fix safety
    Native: the type becomes `"neuron"`; xla: the call becomes `torch_xla.device()` (adding `import torch_xla`).
    Safe for `"cuda"`; an index given beside it is dropped, which is unsafe unless it is 0 in a file that never
    selects a device. A name bound to a CUDA string is fixed at its binding, as for PC101.
    """

    code = "PC102"
    FIXABLE = True
    INVALID = (
        "import torch\nd = torch.device('cuda')",
        "import torch as th\nd = th.device('cuda', 0)",
        "from torch import device\nd = device(f'cuda:{rank}')",
    )
    VALID = (
        "import torch\nd = torch.device('cpu')",
        "d = device('cuda')",  # not torch's device: nothing imported
        "import torch\nd = torch.device('cuda' if ok else 'cpu')",
    )


@rule
class CudaDeviceArgument(Rule):
    """## What it does
    Finds `device="cuda"` passed to tensor factories and module constructors, `map_location="cuda"`,
    `device_map="cuda"`, and command-line `--device` options whose default is `"cuda"`.

    ## Example
    ```python
    mask = torch.ones(n, n, device="cuda")
    state = torch.load(path, map_location="cuda:0")
    ```

    ## Use instead
    ```python
    mask = torch.ones(n, n, device="neuron")            # TorchNeuron native
    state = torch.load(path, map_location="neuron")
    mask = torch.ones(n, n, device=torch_xla.device())  # PyTorch/XLA
    state = torch.load(path, map_location="cpu")
    ```

    ## Fix safety
    `device="cuda"` becomes the stack's device, as for PC101 (safe for `"cuda"`, unsafe where an index is
    dropped). `map_location` becomes `"neuron"` on native; on xla `"cpu"` (loading onto the host, as torch.load's
    documentation advises for checkpoints), safe only where the result goes straight into `.load_state_dict(...)`,
    which copies it onto the model's device. A `--device` option defaults to `"neuron"` / `"xla"`: unsafe, since
    how the option is used is not seen. `device_map="cuda"` has no documented replacement: no fix.
    """

    code = "PC103"
    FIXABLE = True
    INVALID = (
        "import torch\nx = torch.zeros(2, device='cuda')",
        "import torch\nlayer = torch.nn.Linear(2, 2, device='cuda:0')",
        "import torch\ns = torch.load(p, map_location='cuda')",
        "parser.add_argument('--device', default='cuda')",
    )
    VALID = (
        "import torch\nx = torch.zeros(2, device=device)",
        "parser.add_argument('--backend', default='cuda')",
        "import torch\nx = torch.zeros(2, device='cpu')",
    )


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


@rule
class CudaDeviceCall(Rule):
    """## What it does
    Finds `torch.cuda` calls that need a CUDA device and raise without one: `synchronize`, `set_device`,
    `current_device`, `torch.cuda.device(...)`, `get_device_name` / `_properties` / `_capability`, RNG state,
    `mem_get_info`, `reset_peak_memory_stats`, `memory_summary` and the like. Under a CUDA probe
    (`if torch.cuda.is_available():`) the call is not reached on Neuron until the probe is ported: info.

    ## Example
    ```python
    torch.cuda.set_device(local_rank)
    torch.cuda.synchronize()
    ```

    ## Use instead
    ```python
    torch.accelerator.set_device_index(local_rank)
    torch.accelerator.synchronize()
    ```

    ## Fix safety
    A call with a drop-in replacement (rules/cuda_api.toml: the same positional arguments, the same meaning)
    gets it, with the file's alias of torch: on native `synchronize`, `set_device`, `current_device`,
    `mem_get_info` and the memory-statistics resets become their `torch.accelerator` counterparts; on xla
    `synchronize()` becomes `xm.wait_device_ops()` (adding `import torch_xla.core.xla_model as xm` unless the
    file imports it). Safe, except `torch.cuda.device(i)` → `torch.accelerator.device_index(i)` (an index
    only) and `initial_seed()` → `torch.initial_seed()` (the CPU generator's): unsafe. Calls with keyword
    arguments or a CUDA device argument, and the rest of the API, have no fix.
    """

    code = "PC105"
    FIXABLE = True
    INVALID = (
        "import torch\ntorch.cuda.synchronize()",
        "import torch as th\nth.cuda.set_device(rank)",
        "from torch.cuda import synchronize as sync\nsync()",
        "import torch\nwith torch.cuda.device(1):\n    pass",
    )
    VALID = (
        "import torch\ntorch.accelerator.synchronize()",
        "stream.synchronize()",
        "from torch.cuda import synchronize\nclass A:\n    def synchronize(self):\n        pass",
    )


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
    `empty_cache()`, which PyTorch/XLA has no counterpart for, is removed (safe: it does nothing there; a block
    it would leave empty keeps a `pass`).
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
class CudaStreamEvent(Rule):
    """## What it does
    Finds CUDA streams and events: `torch.cuda.Stream`, `Event`, `stream(...)` contexts, `current_stream`,
    `default_stream`, `set_stream`.

    ## Example
    ```python
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = f(x)
    ```

    ## Use instead
    Drop the stream: the Neuron compiler schedules the whole graph.

    ## Fix safety
    No automatic fix: Neuron documents no stream or event API to rewrite to.
    """

    code = "PC107"
    INVALID = (
        "import torch\ns = torch.cuda.Stream()",
        "import torch\nwith torch.cuda.stream(s):\n    pass",
        "import torch\nstart = torch.cuda.Event(enable_timing=True)",
    )
    VALID = ("s = make_stream()\ns.synchronize()",)


@rule
class CudaGraph(Rule):
    """## What it does
    Finds CUDA-graph capture: `torch.cuda.CUDAGraph`, `torch.cuda.graph`, `make_graphed_callables`.

    ## Example
    ```python
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(static_in)
    ```

    ## Use instead
    ```python
    model = torch.compile(model, backend="neuron")
    ```

    ## Fix safety
    No automatic fix: removing a capture changes the program's structure.
    """

    code = "PC108"
    INVALID = (
        "import torch\ng = torch.cuda.CUDAGraph()",
        "from torch.cuda import graphs\ng = graphs.make_graphed_callables(m, (x,))",
    )
    VALID = ("g = Graph()",)


@rule
class CudnnSetting(Rule):
    """## What it does
    Finds `torch.backends.cudnn.*` and `torch.backends.cuda.*` settings and queries
    (`cudnn.benchmark = True`, `cudnn.deterministic`, `cuda.matmul.allow_tf32`, `cudnn.flags(...)`).

    ## Example
    ```python
    torch.backends.cudnn.benchmark = True
    ```

    ## Use instead
    Remove the setting. Precision on Neuron is chosen with neuronx-cc's `--auto-cast`.

    ## Fix safety
    An assignment to a setting that stands alone on its line is removed: safe, the setting has no effect on
    Neuron. A block it would leave empty keeps a `pass` (as does `if x: cudnn.benchmark = True`). Queries and
    `with torch.backends.cudnn.flags(...)` have no fix.
    """

    code = "PC109"
    FIXABLE = True
    INVALID = (
        "import torch\ntorch.backends.cudnn.benchmark = True",
        "from torch.backends import cudnn\ncudnn.deterministic = True",
        "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True",
    )
    VALID = ("import torch\ntorch.backends.mkldnn.enabled = True", "cudnn_benchmark = True")


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
    FIXABLE = True
    INVALID = (
        "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'",
        "from os import environ\nenviron['CUDA_VISIBLE_DEVICES'] = '0'",
        "import os\nos.environ.setdefault('CUDA_VISIBLE_DEVICES', '0')",
    )
    VALID = ("import os\nvisible = os.environ.get('CUDA_VISIBLE_DEVICES')",)


@rule
class CudaApiOther(Rule):
    """## What it does
    Finds every other use of `torch.cuda`: legacy tensor types (`torch.cuda.FloatTensor`), `torch.cuda.nvtx`,
    and the module passed around as a value. (`torch.cuda.amp` is PC601 / PC602.)

    ## Example
    ```python
    x = torch.cuda.FloatTensor(8)
    ```

    ## Use instead
    ```python
    x = torch.empty(8, dtype=torch.float32, device="neuron")
    ```

    ## Fix safety
    No automatic fix: these uses have no documented one-to-one replacement.
    """

    code = "PC111"
    INVALID = (
        "import torch\nx = torch.cuda.FloatTensor(8)",
        "import torch\ntorch.cuda.nvtx.range_push('step')",
    )
    VALID = ("import torch\nx = torch.empty(8)",)
