"""Tests gated on CUDA: `@pytest.mark.skipif(not torch.cuda.is_available(), ...)`, `@unittest.skipUnless(
torch.cuda.is_available(), ...)`, `@require_cuda`-style markers (and their definitions), Lightning's
`@RunIf(min_cuda_gpus=1)`, a module's `pytestmark = pytest.mark.skipif(...)`. What such a test runs is a CUDA-only
path: skipped on a Neuron host on purpose, so nothing in it (its gate included) is a porting blocker. The engine
drops findings inside them, whether test files are scanned or not (`tests = "include"`).
"""

from __future__ import annotations

import re

import libcst as cst

from portcheck.static.syntax import dotted_name

# `require_cuda`, `requires_gpu`, `require_multi_gpu`, `skip_if_no_cuda`, `needs_cuda`, `only_cuda`, `cuda_only`.
_GATE_NAME = re.compile(r"^(requires?|needs?|only|skip_?if_?no|skip_?unless|run_?if)_?\w*(cuda|gpu)s?$|"
                        r"^(cuda|gpu|multi_?gpu)_?(only|required)$", re.IGNORECASE)
_MARKERS = frozenset({"cuda", "gpu", "multi_gpu", "multigpu", "requires_cuda", "requires_gpu"})
_SKIPS = ("skipif", "skipIf", "skipUnless")
_CUDA_WORDS = re.compile(r"cuda|gpu", re.IGNORECASE)


def _is_gate(decorator: cst.BaseExpression) -> bool:
    func = decorator.func if isinstance(decorator, cst.Call) else decorator
    name = dotted_name(func) or ""
    last = name.rsplit(".", 1)[-1]
    if _GATE_NAME.match(last) or (name.startswith("pytest.mark.") and last in _MARKERS):
        return True
    if not isinstance(decorator, cst.Call):
        return False
    if last in _SKIPS and decorator.args:
        condition = decorator.args[0].value
        return bool(_CUDA_WORDS.search(cst.Module(body=()).code_for_node(condition)))
    if last.lstrip("_") == "RunIf":  # Lightning's `_RunIf(min_cuda_gpus=2)`
        return any(arg.keyword is not None and _CUDA_WORDS.search(arg.keyword.value) for arg in decorator.args)
    return False


def _gated(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.FunctionDef) and _GATE_NAME.match(node.name.value):
        return True  # the definition of a `require_cuda` marker: the skip it builds is the intent
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return any(_is_gate(decorator.decorator) for decorator in node.decorators)
    return False


def _module_gated(module: cst.Module) -> bool:
    """`pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), ...)` (or a list holding one)."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == "pytestmark" for t in small.targets):
                values = ([e.value for e in small.value.elements]
                          if isinstance(small.value, (cst.List, cst.Tuple)) else [small.value])
                if any(_is_gate(value) for value in values):
                    return True
    return False


class CudaGatedTests:
    """Answers, once per file and per enclosing definition, whether a statement chain is in a CUDA-gated test."""

    def __init__(self, module: cst.Module) -> None:
        self._module = module
        self._whole: bool | None = None
        self._known: dict[int, bool] = {}

    def holds(self, chain: tuple[cst.CSTNode, ...]) -> bool:
        if self._whole is None:
            self._whole = _module_gated(self._module)
        if self._whole:
            return True
        for node in chain:
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                found = self._known.get(id(node))
                if found is None:
                    found = self._known[id(node)] = _gated(node)
                if found:
                    return True
        return False


__all__ = ["CudaGatedTests"]
