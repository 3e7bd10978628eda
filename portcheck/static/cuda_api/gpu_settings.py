"""A configured number of CUDA GPUs or a CUDA device's index, and the tests of it that hold only with CUDA in use.

`if args.ngpu > 0:`, `if self.n_gpu:`, `if num_gpus > 1:`, `if gpu_id >= 0:`, `if cuda_device != -1:`,
`if cuda_device is not None:`: a setting that counts or picks NVIDIA GPUs, whose body runs only when the user
configures one. On a Neuron host nobody configures a GPU, so that body never runs there. What the same test places
is the configuration's device choice, which a port changes, and keeps its severity: `"cuda" if args.ngpu > 0 else
"cpu"` (`devices.chosen_device`), and `model.cuda()` or `torch.cuda.set_device` in the body (`probes._PLACEMENTS`).

Both the per-file checks (libcst, `paths.polarity`) and the project's summaries (Python's `ast`) read a test through
these functions, from the setting's name and the comparison's operator and number.
"""

from __future__ import annotations

import ast
import re

import libcst as cst

from portcheck.static.syntax import last_name

_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_GPU = frozenset({"gpu", "gpus", "cuda"})
# A count: `n_gpu`, `num_gpus`, `nb_gpu`, `gpu_count`, and the one-word spellings `ngpu`, `ngpus`, `gpus`.
_COUNT_WORDS = frozenset({"n", "num", "nb", "number", "count", "ngpu", "ngpus", "numgpus", "gpus"})
# An index: `gpu_id`, `gpu_ids`, `cuda_device`, `gpu_index`, `gpu_rank`, and a bare `gpu`.
_INDEX_WORDS = frozenset({"id", "ids", "idx", "index", "device", "rank"})

COUNT, INDEX = "count", "index"


def setting(name: str) -> str | None:
    """COUNT for a name that counts CUDA GPUs, INDEX for one that picks a CUDA device by number, else None. A flag
    (`use_cuda`, `on_gpu`) is neither: `paths._flag` reads those."""
    found = [w.lower() for w in _WORDS.findall(name)]
    if not found:
        return None
    if found[0] in ("ngpu", "ngpus", "numgpus") or (found == ["gpus"]):
        return COUNT
    if not _GPU & set(found):
        return None
    if _COUNT_WORDS & set(found):
        return COUNT
    if _INDEX_WORDS & set(found) or found == ["gpu"]:
        return INDEX
    return None


# What a comparison of a setting with a number says: the operator (as `ast`'s class name) and the number -> CUDA
# in use ("cuda") or not ("!cuda").
def compared(kind: str, operator: str, number: object) -> str | None:
    """The polarity of `<setting> <operator> <number>` ("cuda", "!cuda" or None); `number` None is `is None`."""
    if number is None:
        if kind == INDEX and operator in ("IsNot", "NotEq"):
            return "cuda"
        return "!cuda" if kind == INDEX and operator in ("Is", "Eq") else None
    if not isinstance(number, int) or isinstance(number, bool):
        return None
    low = 1 if kind == COUNT else 0  # the least value that means a GPU is in use
    if (operator == "Gt" and number >= low - 1) or (operator == "GtE" and number >= low) or (
            operator == "Eq" and kind == COUNT and number >= low) or (operator == "NotEq" and number == low - 1):
        # not `gpu == 0` for an index: the first process's logging in a launcher (`if args.gpu == 0: print(...)`)
        return "cuda"
    if (operator == "Eq" and number == low - 1) or (operator == "Lt" and number == low) or (
            operator == "LtE" and number == low - 1):
        return "!cuda"
    return None


def _ast_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def compared_in_ast(left: ast.expr, operator: ast.cmpop, right: ast.expr) -> str | None:
    """`compared` of an `ast` comparison whose left side is a setting; "" where the left side is none."""
    kind = setting(_ast_name(left))
    if kind is None:
        return ""
    if isinstance(right, ast.UnaryOp) and isinstance(right.op, ast.USub) and isinstance(right.operand, ast.Constant):
        number: object = -right.operand.value if isinstance(right.operand.value, int) else ""
    else:
        number = right.value if isinstance(right, ast.Constant) else ""
    return compared(kind, type(operator).__name__, number)


def counted_in_ast(test: ast.expr) -> bool:
    """`if args.ngpu:`, `if n_gpu:`: a number of GPUs as a truth test (holds only with one configured)."""
    return setting(_ast_name(test)) == COUNT


# libcst's comparison operators by `ast`'s names, which `compared` reads
_AST_NAMES = {"GreaterThan": "Gt", "GreaterThanEqual": "GtE", "LessThan": "Lt", "LessThanEqual": "LtE", "Equal": "Eq",
              "NotEqual": "NotEq", "Is": "Is", "IsNot": "IsNot"}


def compared_in_cst(left: cst.BaseExpression, operator: cst.BaseCompOp, right: cst.BaseExpression) -> str | None:
    """`compared` of a libcst comparison whose left side is a setting; "" where the left side is none."""
    kind = setting(last_name(left))
    if kind is None:
        return ""
    number: object = ""
    if isinstance(right, cst.Name) and right.value == "None":
        number = None
    elif isinstance(right, cst.Integer):
        number = right.evaluated_value  # `0`, `0x0`, `1_000`
    elif isinstance(right, cst.UnaryOperation) and isinstance(right.operator, cst.Minus) and isinstance(
            right.expression, cst.Integer):
        number = -right.expression.evaluated_value
    return compared(kind, _AST_NAMES.get(type(operator).__name__, ""), number)


__all__ = ["COUNT", "INDEX", "compared", "compared_in_ast", "compared_in_cst", "counted_in_ast", "setting"]
