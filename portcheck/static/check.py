"""The checks of the static pass, and the context they see while the one batched traversal runs.

Detection lives in *checks*: functions registered for the node types they inspect and the rule classes they may
report. One check may serve several rules of a family (a `torch.cuda` reference is PC104 ... PC111 depending on
the attribute), and the engine runs only the checks one of whose rules is enabled, and only in files holding one
of their tokens. A check is typed by its node: `@check(cst.Call, rules=(CudaTensorPlacement,), tokens=...)`
registers a function of a `cst.Call`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import libcst as cst

from portcheck.findings import Severity
from portcheck.knowledge import load
from portcheck.rules import VALUE_CATEGORIES, Rule
from portcheck.static.host_paths import host_path_of
from portcheck.static.names import Names, Scope
from portcheck.static.params import assigned, branch_parameter, default_read, param_roots
from portcheck.static.syntax import parameters
from portcheck.static.walk import parents_of
from portcheck.summaries import ELSEWHERE, READS_PREFIXES, Summary

# The file being analysed, on disk (FileJob.location), where the scan read it from there: set by the engine around
# one file's analysis, read by checks that look beside the file (a compiled extension has no `.py` there).
LOCATION: ContextVar[str] = ContextVar("location", default="")


@dataclass(frozen=True)
class Replace:
    """Put `content` where `node` stands. `whole_lines`: `node` is a statement alone on its lines, and an empty
    `content` deletes those lines."""

    node: cst.CSTNode
    content: str
    whole_lines: bool = False


@dataclass(frozen=True)
class FixPlan:
    """A fix as a check states it: replacements of nodes, and the imports (`import torch_xla`) they need."""

    title: str
    safe: bool
    replacements: tuple[Replace, ...]
    imports: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hit:
    code: str
    node: cst.CSTNode
    message: str
    statement: cst.CSTNode | None
    severity: Severity | None = None  # None: the rule's severity; set where one occurrence is milder or worse
    fix: FixPlan | None = None
    chain: tuple[cst.CSTNode, ...] = ()  # the statements enclosing `node`, outermost first
    requires: str = ""  # see Finding.requires
    kept: bool = False  # see Finding.kept
    default_of: str = ""  # see Finding.default_of
    host_if: tuple[str, ...] = ()  # see Finding.host_if
    unless_passed: str = ""  # see Finding.unless_passed
    start: cst.CSTNode | None = None  # a construct that begins before `node`: the finding starts where it does


N = TypeVar("N", bound=cst.CSTNode)
T = TypeVar("T")
CheckFn = Callable[[N, "Context"], bool | None]  # False: do not descend into the node


@dataclass(frozen=True)
class Check:
    fn: Callable[[cst.CSTNode, Context], bool | None]
    node_types: tuple[type[cst.CSTNode], ...]
    codes: frozenset[str]
    tokens: tuple[str, ...]  # a file without any of these substrings cannot produce this check's rules


CHECKS: list[Check] = []


N1 = TypeVar("N1", bound=cst.CSTNode)
N2 = TypeVar("N2", bound=cst.CSTNode)
N3 = TypeVar("N3", bound=cst.CSTNode)
N4 = TypeVar("N4", bound=cst.CSTNode)
N5 = TypeVar("N5", bound=cst.CSTNode)
Rules = Iterable[type[Rule]]


# One overload per number of node types, so that a check of `cst.Import, cst.ImportFrom` is typed as a function of
# `cst.Import | cst.ImportFrom` (a single type variable would be solved to their common base).
@overload
def check(t1: type[N1], /, *, rules: Rules, tokens: Iterable[str]) -> Callable[[CheckFn[N1]], CheckFn[N1]]: ...
@overload
def check(t1: type[N1], t2: type[N2], /, *, rules: Rules,
          tokens: Iterable[str]) -> Callable[[CheckFn[N1 | N2]], CheckFn[N1 | N2]]: ...
@overload
def check(t1: type[N1], t2: type[N2], t3: type[N3], /, *, rules: Rules,
          tokens: Iterable[str]) -> Callable[[CheckFn[N1 | N2 | N3]], CheckFn[N1 | N2 | N3]]: ...
@overload
def check(t1: type[N1], t2: type[N2], t3: type[N3], t4: type[N4], /, *, rules: Rules,
          tokens: Iterable[str]) -> Callable[[CheckFn[N1 | N2 | N3 | N4]], CheckFn[N1 | N2 | N3 | N4]]: ...
@overload
def check(t1: type[N1], t2: type[N2], t3: type[N3], t4: type[N4], t5: type[N5], /, *, rules: Rules,
          tokens: Iterable[str]) -> Callable[[CheckFn[N1 | N2 | N3 | N4 | N5]], CheckFn[N1 | N2 | N3 | N4 | N5]]: ...
def check(*node_types: type[cst.CSTNode], rules: Rules, tokens: Iterable[str]) -> Callable[[Any], Any]:
    """Register a check of `node_types` that may report `rules` (a file holding none of `tokens` skips it)."""
    codes = frozenset(r.code for r in rules)

    def register(fn: Callable[[Any, Context], bool | None]) -> Callable[[Any, Context], bool | None]:
        CHECKS.append(Check(fn, node_types, codes, tuple(tokens)))
        return fn

    return register


class Context:
    """Per-file state shared by all checks during the traversal."""

    def __init__(self, module: cst.Module, chip: str, stack: str, enabled: frozenset[str],
                 text: str | None = None, path: str = "", sdk: str = "") -> None:
        self.module = module
        self.path = path  # as reported (some checks read what a file's name says it is for)
        self.location = LOCATION.get()  # the file on disk, where a scan read it from there; else ""
        self._text = text
        self.chip = chip
        self.stack = stack
        self.sdk = sdk or load().newest_sdk  # the Neuron SDK release whose facts apply
        self.enabled = enabled
        self.names = Names(module)
        # what the file's summary says of its own functions (portcheck.static.semantic.summary), where one was made
        self.summary: Summary | None = None
        self.hits: list[Hit] = []
        self.statements: list[cst.CSTNode] = []
        self.scopes: list[Scope] = []
        self.functions: list[cst.FunctionDef] = []
        self.loops: list[cst.For | cst.While] = []
        self.chains: dict[cst.CSTNode, tuple[cst.CSTNode, ...]] = {}  # statement -> the statements holding it
        self._memo: dict[tuple[str, int], object] = {}
        self._inference_only: bool | None = None
        self._qualnames: dict[int, str | None] = {}
        # Nodes that are not expressions in load position (attribute names, keywords, parameters) or
        # that an outer node already judged: name resolution skips them.
        self.skip: set[int] = set()
        # the folder or file name that puts this file in the data pipeline (host_paths), or None: a value rule's
        # finding in a function of such a file is kept where the call graph places it in the device step
        self.host_path = host_path_of(path)

    def report(self, rule: type[Rule] | str, node: cst.CSTNode, message: str | None = None,
               severity: Severity | None = None, fix: FixPlan | None = None, requires: str = "",
               kept: bool = False, start: cst.CSTNode | None = None, **fields: object) -> None:
        """A finding of `rule` at `node`, worded by `message` or else by the rule's template and `fields`;
        `requires="device"`: only if the project's call graph puts the code in the device step; `start`: where a
        construct that ends at `node` begins, in the same function (the finding spans both)."""
        code = rule if isinstance(rule, str) else rule.code
        if code in self.enabled:
            if message is None:
                assert not isinstance(rule, str)
                message = rule.format(**fields)
            statement = self.statements[-1] if self.statements else None
            if self.functions and self.host_path is not None and load().rules[code].category in VALUE_CATEGORIES:
                placed = _in_device_step(requires)
                if placed is None:
                    return  # the info kept where nothing places the code: a data-pipeline path places it
                requires = placed
            default_of, host_if, unless_passed = self._reads(code, node)
            self.hits.append(Hit(code, node, message, statement, severity, fix, tuple(self.statements), requires,
                                 kept, default_of, host_if, unless_passed, start))

    @property
    def inference_only(self) -> bool:
        """The chip serves inference only (PC607, training on it, applies): training steps never run on it."""
        if self._inference_only is None:
            self._inference_only = load().rules["PC607"].applies_to(self.chip, self.stack)
        return self._inference_only

    def _reads(self, code: str, node: cst.CSTNode) -> tuple[str, tuple[str, ...], str]:
        """(Finding.default_of, Finding.host_if, Finding.unless_passed) for a finding of `code` at `node`; host_if
        only for the categories a host value settles (rules.VALUE_CATEGORIES)."""
        if not self.functions or not isinstance(self.functions[-1], cst.FunctionDef):
            return "", (), ""
        function = self.functions[-1]

        def names() -> frozenset[str]:
            return self.memo("assigned-names", function, lambda: assigned(function))

        roots: tuple[str, ...] = ()
        if load().rules[code].category in VALUE_CATEGORIES:
            roots = param_roots(function, node, self.constant, self.qualname, names)
        index = next((i for i, s in enumerate(self.statements) if s is function), -1)
        chain = self.statements[index + 1:]  # the statements holding `node` inside its function, outermost first
        header = index >= 0 and not chain  # `node` is in the function's signature (a default), not its body
        return default_read(function, node, self.constant, header), roots, branch_parameter(
            function, chain, node, names, lambda statement: self.memo("parents", statement,
                                                                      lambda: parents_of(statement)))

    def memo(self, kind: str, node: cst.CSTNode, compute: Callable[[], T]) -> T:
        """A per-file cache for facts about a node (is this loop a training loop?) that several checks ask."""
        key = (kind, id(node))
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]  # type: ignore[return-value]  # `kind` names one type of fact

    @property
    def in_forward(self) -> bool:
        """Inside a `forward` method (or a function nested in one): the code the Neuron compiler sees."""
        return any(f.name.value == "forward" for f in self.functions)

    def qualname(self, node: cst.BaseExpression) -> str | None:
        # Several checks ask about the same callee or attribute chain: resolve each node once. Whether a local
        # shadows the import is asked each time, of the scopes being visited: a check that walks a whole class asks
        # about nodes of other methods first, and their answer must not stand for the node's own function.
        key = id(node)
        try:
            found = self._qualnames[key]
        except KeyError:
            found = self._qualnames[key] = self.names.qualname(node)
        if found is not None and self.scopes and _shadowed(node, self.scopes):
            return None  # `loss, _ = self.model(x)` in a function of a file that imports a module `loss`
        return found

    def constant(self, node: cst.BaseExpression) -> tuple[str, cst.BaseExpression] | None:
        """For a bare name bound once to an expression in the nearest scope that binds it: (name, expr)."""
        if not isinstance(node, cst.Name):
            return None
        for scope in reversed(self.scopes):
            if node.value in scope.bound:
                value = scope.constant(node.value)
                return None if value is None else (node.value, value)
        value = self.names.module_scope.constant(node.value)
        return None if value is None else (node.value, value)

    def parameter_default(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """The default of an enclosing function's parameter that the bare name `node` stands for (never rebound),
        or None: `device` in `def build(device="cuda"): model.to(device)` is `"cuda"` in the signature."""
        bound = self.constant(node)
        if bound is None or not any(p.default is bound[1] for f in self.functions for p in parameters(f)):
            return None
        return bound[1]

    @property
    def text(self) -> str:
        """The file's source as read (regenerating it from the tree costs a whole code generation)."""
        if self._text is None:
            self._text = self.module.code
        return self._text

    def source(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    @property
    def enclosing_class(self) -> cst.ClassDef | None:
        """The innermost class holding the code being read."""
        return next((s for s in reversed(self.statements) if isinstance(s, cst.ClassDef)), None)

    @property
    def uses_torch(self) -> bool:
        """The file names torch or a library built on it: code that never does (a tokenizer, a socket buffer, a
        turtle's `backward(distance)`) slices, loops and steps no tensors."""
        return self.memo("uses-torch", self.module, lambda: bool(_TORCH_WORLD.search(self.text)))


# What a file working with tensors names somewhere: torch itself, or a library that hands tensors around.
_TORCH_WORLD = re.compile(r"\b(torch\w*|lightning|pytorch_lightning|transformers|accelerate|deepspeed|Tensor)\b")


def _in_device_step(requires: str) -> str | None:
    """What a finding in a file its path puts in the data pipeline requires: the device step ("device") where it
    required nothing more; what it required where that already is a caller's reach; None for an info kept only
    where nothing reaches the code (ELSEWHERE), which the path answers."""
    head, newline, then = requires.partition("\n")
    if newline:  # `reads:NAME` and what the code's place must also be
        then = _in_device_step(then) or ""
        return f"{head}\n{then}" if then else None
    if requires.startswith(READS_PREFIXES):
        return f"{requires}\ndevice"
    if requires == ELSEWHERE:
        return None
    return requires or "device"


def _shadowed(node: cst.BaseExpression, scopes: list[Scope]) -> bool:
    """The name a dotted expression starts with is bound in an enclosing function (a parameter, an assignment, a
    loop target), so there it is that local, not what the file imports under that name."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name) and any(node.value in scope.bound for scope in scopes)


__all__ = ["CHECKS", "Check", "Context", "FixPlan", "Hit", "Replace", "check"]
