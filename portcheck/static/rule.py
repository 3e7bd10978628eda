"""What a rule is, and the context its checks see while the one batched traversal runs.

A rule is a small class: its docstring is the user documentation (`portcheck rule PC101` prints it), and
its VALID / INVALID examples are run as tests. Detection lives in *checks*: functions registered for the
node types they inspect and the codes they may report. One check may serve several rules of a family
(a `torch.cuda` reference is PC104 ... PC111 depending on the attribute), and the engine runs only the
checks whose codes are enabled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from portcheck.findings import Severity
from portcheck.static.names import Names, Scope, dotted_name


class Rule:
    code: ClassVar[str]
    TARGET: ClassVar[tuple[str, str]] = ("trn2", "native")  # the (chip, stack) its examples are checked for
    VALID: ClassVar[tuple[str, ...]] = ()
    INVALID: ClassVar[tuple[str, ...]] = ()
    FIXABLE: ClassVar[bool] = False  # some occurrences carry a fix (its safety is decided per occurrence)


RULES: dict[str, type[Rule]] = {}


def rule(cls: type[Rule]) -> type[Rule]:
    RULES[cls.code] = cls
    return cls


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


CheckFn = Callable[[cst.CSTNode, "Context"], bool | None]


@dataclass(frozen=True)
class Check:
    fn: CheckFn
    node_types: tuple[type[cst.CSTNode], ...]
    codes: frozenset[str]
    tokens: tuple[str, ...]  # a file without any of these substrings cannot produce this check's codes


CHECKS: list[Check] = []


def check(*node_types: type[cst.CSTNode], codes: Iterable[str], tokens: Iterable[str]) -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        CHECKS.append(Check(fn, node_types, frozenset(codes), tuple(tokens)))
        return fn

    return register


class Context:
    """Per-file state shared by all checks during the traversal."""

    def __init__(self, module: cst.Module, chip: str, stack: str, enabled: frozenset[str],
                 text: str | None = None) -> None:
        self.module = module
        self._text = text
        self.chip = chip
        self.stack = stack
        self.enabled = enabled
        self.names = Names(module)
        self.hits: list[Hit] = []
        self.statements: list[cst.CSTNode] = []
        self.scopes: list[Scope] = []
        self.functions: list[cst.FunctionDef] = []
        self.loops: list[cst.For | cst.While] = []
        self.chains: dict[cst.CSTNode, tuple[cst.CSTNode, ...]] = {}  # statement -> the statements holding it
        self._memo: dict[tuple[str, int], object] = {}
        self._qualnames: dict[int, str | None] = {}
        # Nodes that are not expressions in load position (attribute names, keywords, parameters) or
        # that an outer node already judged: name resolution skips them.
        self.skip: set[int] = set()

    def report(self, code: str, node: cst.CSTNode, message: str, severity: Severity | None = None,
               fix: FixPlan | None = None) -> None:
        if code in self.enabled:
            statement = self.statements[-1] if self.statements else None
            self.hits.append(Hit(code, node, message, statement, severity, fix, tuple(self.statements)))

    def memo(self, kind: str, node: cst.CSTNode, compute: Callable[[], object]) -> object:
        """A per-file cache for facts about a node (is this loop a training loop?) that several checks ask."""
        key = (kind, id(node))
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @property
    def in_forward(self) -> bool:
        """Inside a `forward` method (or a function nested in one): the code the Neuron compiler sees."""
        return any(f.name.value == "forward" for f in self.functions)

    def qualname(self, node: cst.BaseExpression) -> str | None:
        # Several checks ask about the same callee or attribute chain: resolve each node once.
        key = id(node)
        try:
            return self._qualnames[key]
        except KeyError:
            found = self._qualnames[key] = self.names.qualname(node)
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

    @property
    def text(self) -> str:
        """The file's source as read (regenerating it from the tree costs a whole code generation)."""
        if self._text is None:
            self._text = self.module.code
        return self._text

    def source(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


def string_value(node: cst.BaseExpression) -> str | None:
    """The text of a string literal (plain or implicitly concatenated), or None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def string_prefix(node: cst.BaseExpression) -> str | None:
    """The literal text a string expression starts with: `"cuda:"` for `f"cuda:{rank}"`, `"cuda:" + r`,
    `"cuda:%d" % r` or `"cuda:{}".format(r)`; the whole text for a plain literal."""
    value = string_value(node)
    if value is not None:
        return value
    if isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        return first.value if isinstance(first, cst.FormattedStringText) else ""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Modulo)):
        return string_prefix(node.left)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "format":
        return string_prefix(node.func.value)
    return None


def call_name(node: cst.Call) -> str | None:
    """The last segment of what is called: `to` for `x.to(...)`, `device` for `torch.device(...)`."""
    func = node.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def keyword(node: cst.Call, name: str) -> cst.Arg | None:
    return next((arg for arg in node.args if arg.keyword is not None and arg.keyword.value == name), None)


def positional(node: cst.Call, index: int) -> cst.Arg | None:
    args = [arg for arg in node.args if arg.keyword is None and not arg.star]
    return args[index] if index < len(args) else None


__all__ = [
    "CHECKS", "RULES", "Check", "Context", "FixPlan", "Hit", "Replace", "Rule", "call_name", "check", "dotted_name",
    "keyword", "positional", "rule", "string_prefix", "string_value",
]
