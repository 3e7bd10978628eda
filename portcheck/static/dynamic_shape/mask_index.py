"""Reads through a boolean mask (PC204): `x[mask]`, `x[x > 0]`, `x[~pad]`."""

from __future__ import annotations

import re
from contextvars import ContextVar

import libcst as cst

from portcheck.rules import Pass, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.helper_masks import helper_mask
from portcheck.static.dynamic_shape.random_size import RandomSize
from portcheck.static.dynamic_shape.reach import STATIC, report_compiled
from portcheck.static.dynamic_shape.shape_from_data import ShapeFromData, report_slice_from_data
from portcheck.static.reaching import reaching
from portcheck.static.rebindings import rebindings, updated_in_place
from portcheck.static.scope import host_value
from portcheck.static.syntax import call_name, parameters, string_value
from portcheck.summaries import ELSEWHERE, MASK_OF


@rule
class BooleanMaskIndex(Rule):
    """## What it does
    Finds reads through a boolean mask: `x[mask]` where the mask is a comparison (`x[x > 0]`), an inverted
    index (`x[~pad]`), a `.bool()` / `torch.isin` / `torch.isnan` result, or a local name bound to one (every
    binding of it, where it is bound more than once).
    Writes (`x[mask] = 0`, also inside a tuple target `a[m], b[m] = f(x)`) keep the shape and are PC216's;
    integer and slice indexing stay quiet. An augmented assignment (`x[mask] += y`) reads `x[mask]` first and is
    reported. A mask reshaped (`mask.view(-1)`) is still a mask.

    ## Example
    ```python
    keep = ids != pad_id
    tokens = hidden[keep]
    ```

    ## Use instead
    ```python
    tokens = hidden * keep[..., None]           # same shape, padding zeroed
    hidden = hidden.masked_fill(~keep[..., None], 0.0)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "PC204"
    passes = (Pass.STATIC, Pass.TRACE)
    message = ("indexing with a boolean mask (`{shown}`) returns as many elements as the mask holds True; " + STATIC
               + "; use `torch.where(mask, x, fill)` or multiply by the mask")
    INVALID = (
        "y = x[x > 0]",
        "keep = ids != pad\ny = hidden[keep]",
        "y = x[:, mask.bool()]",
        "y = x[~padding]",
        "import torch\ny = x[torch.isin(ids, special)]",
        "flat = (pos >= start).view(-1)\nout[flat] += delta",
        "def f(x, a, b, strict):\n    ok = a > 0\n    if strict:\n        ok = (b > 0) & (a > 0)\n    return x[ok]",
        "import torch\ndef f(x, ws):\n    ok = torch.ones(len(x), dtype=torch.bool)\n    for w in ws:\n"
        "        ok &= x @ w > 0\n    return x[ok]",
        "def f(x, t, pad):\n    m = t.ne(pad)\n    if x.is_cpu:\n        m = None\n    if m is not None:\n"
        "        x = x[m]\n    return x",
        "y = x[(x > 0)[:, 0]]",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, out):\n"
        "        return x[out['padding_mask'].T]",
        "import torch\ndef f(p, v):\n    keep = torch.ne(v, 0)\n    keep = torch.repeat_interleave(keep, 4, dim=-1)\n"
        "    return p[keep]",
        "import torch\nimport torch.nn.functional as F\ndef f(p, v):\n    edge = F.pad(v, (1, 0))\n"
        "    edge = torch.eq(torch.diff(edge), -1)\n    return p[edge]",
        "def f(edges, lo, hi, q):\n    hit = (lo <= q) * (q < hi)\n    return edges[hit]", "y = x[x.isclose(ref)]",
    )
    VALID = (
        "x[x > 0] = 0",
        "out[m > 0], log_det[m > 0] = spline(x)",
        "y = x[idx]",
        "y = x[:, 0]",
        "y = x[1:-1]",
        "y = cache[key is None]",
        "x[idx] += 1",
        "def f(x, a, strict):\n    ok = a > 0\n    if strict:\n        ok = a.nonzero()\n    return x[ok]",
        "import torch\na = torch.where(x > 0, x, 0)\ny = x[a]",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        mask = (x > 0).any(-1).nonzero(as_tuple=True)[0]\n        return x[mask]",
        "import torch\nv = (x > 0).to(torch.float)\ny = x[v]", "def f(e, q, s):\n    w = (q > 0) * s\n    return e[w]",
        "import torch\ndef f(x, ws):\n    ok = torch.ones(len(x), dtype=torch.long)\n    for w in ws:\n"
        "        ok &= x @ w > 0\n    return x[ok]",
        "import torch\ndef f(p, v):\n    keep = torch.ne(v, 0)\n    keep = keep.nonzero(as_tuple=True)[0]\n"
        "    return p[keep]",
    )


TOKENS = ("[",)

# `any` / `all` reduce booleans to booleans: `x[is_eos.any(dim=1)]` selects the rows holding one.
_MASK_METHODS = frozenset({"bool", "eq", "ne", "gt", "lt", "ge", "le", "isnan", "isinf", "isfinite", "isclose",
                           "logical_and", "logical_or", "logical_not", "logical_xor", "isin", "any", "all", "signbit"})
# Methods whose result holds the same elements, reshaped, moved about or copied: a mask stays a mask.
_SAME_ELEMENT_METHODS = frozenset({"view", "reshape", "flatten", "squeeze", "unsqueeze", "expand", "expand_as",
                                   "contiguous", "clone", "detach", "transpose", "permute", "t", "flip", "roll",
                                   "triu", "tril", "repeat", "repeat_interleave", "tile", "broadcast_to", "narrow",
                                   "index_select", "gather", "movedim", "swapaxes", "unflatten", "view_as",
                                   "reshape_as"})
_MASK_FUNCTIONS = frozenset(f"torch.{n}" for n in ("isnan", "isinf", "isfinite", "isin", "logical_and", "isclose",
                                                   "logical_or", "logical_not", "logical_xor", "eq", "ne", "gt",
                                                   "lt", "ge", "le", "isneginf", "isposinf", "any", "all", "signbit"))


def is_mask(ctx: Context, node: cst.BaseExpression, depth: int = 0, named: bool = True) -> bool:
    """`node` is a boolean mask by what makes it (a comparison, `~m`, `.bool()`, `torch.isin`) or, with `named`,
    by its name (`_named_mask`)."""
    if depth > 3:
        return False
    if isinstance(node, cst.Comparison):
        # `a is None`, `x in y` are Python truth values, never tensors.
        return all(isinstance(t.operator, (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual,
                                            cst.GreaterThan, cst.GreaterThanEqual))
                   for t in node.comparisons)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        return True  # `x[~m]`: inverting an index only makes sense for a boolean mask
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return is_mask(ctx, node.left, depth + 1, named) or is_mask(ctx, node.right, depth + 1, named)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):  # `(lo <= q) * (q < hi)`
        return is_mask(ctx, node.left, depth + 1, named) and is_mask(ctx, node.right, depth + 1, named)
    if isinstance(node, cst.Call):
        qualname = ctx.qualname(node.func)
        if qualname is not None:
            if qualname in _BOOL_FACTORIES or qualname in _LIKE_FACTORIES:  # `torch.ones(n, dtype=torch.bool)`
                return any(a.keyword is not None and a.keyword.value == "dtype" and ctx.qualname(a.value) in _BOOL
                           for a in node.args)
            if qualname in _SAME_ELEMENTS and node.args:  # `torch.triu(m)`, `torch.flip(m, (0,))`
                return is_mask(ctx, node.args[0].value, depth + 1, named)
            if qualname == "torch.where" and len(node.args) == 3:  # `torch.where(c, m, m.new([True]))`
                return _selected_mask(ctx, [a.value for a in node.args[1:]], depth, named)
            return qualname in _MASK_FUNCTIONS
        if isinstance(node.func, cst.Attribute) and (call_name(node) in _SAME_ELEMENT_METHODS or _moved(node)):
            return is_mask(ctx, node.func.value, depth + 1, named)  # `mask.view(-1)`, `mask.to(x.device)`
        return isinstance(node.func, cst.Attribute) and call_name(node) in _MASK_METHODS
    if isinstance(node, cst.Subscript):  # a part of a mask is a mask: `mask[:, 1:]`, `masks[i]`
        if is_mask(ctx, node.value, depth + 1, named):
            return True
        key = node.slice[0].slice if len(node.slice) == 1 else None
        name = string_value(key.value) if isinstance(key, cst.Index) else None
        return named and name is not None and _named_mask(ctx, name, [])  # `net_output["padding_mask"]`
    if isinstance(node, cst.Name):
        assumed = _ASSUMED.get()
        if assumed is not None and node.value in assumed:
            return assumed[node.value]
        bound = ctx.constant(node)
        if bound is not None and is_mask(ctx, bound[1], depth + 1, named):
            return True
        if bound is None and _mask_bindings(ctx, node.value, depth):
            # `keep = a > 0`, then `keep = (b > 0) & (a > 0)`; `ok = torch.ones(n, dtype=torch.bool)`, then
            # `ok &= x > 0`; a mask or None
            return True
        if bound is None and ctx.scopes and node.value not in ctx.scopes[-1].plain and _annotated_mask(ctx, node.value):
            return True  # `batch_filter: torch.BoolTensor | None`: a parameter typed as a boolean tensor
        if named and _named_mask(ctx, node.value, [bound[1]] if bound is not None else rebindings(ctx, node.value)):
            return True
        return bound is None and _reached_mask(ctx, node, depth)
    if isinstance(node, cst.Attribute):  # `data.train_mask`, `self.keep_mask`
        if node.attr.value in ("T", "mT", "data"):  # `mask.T`: the same elements, transposed
            return is_mask(ctx, node.value, depth + 1, named)
        return named and _named_mask(ctx, node.attr.value, [])
    return False


# Factories that make a tensor of the dtype they are given: `torch.zeros(n, dtype=torch.bool)` is a mask to fill.
_BOOL_FACTORIES = frozenset(f"torch.{n}" for n in ("ones", "zeros", "full", "empty", "tensor", "as_tensor", "eye"))
_LIKE_FACTORIES = frozenset(f"torch.{n}_like" for n in ("ones", "zeros", "full", "empty"))
_BOOL = frozenset({"torch.bool", "builtins.bool"})
# Functions whose result holds the elements of their first argument, moved or masked off: a mask stays a mask.
_SAME_ELEMENTS = frozenset(f"torch.{n}" for n in ("triu", "tril", "transpose", "permute", "flip", "roll", "t",
                                                  "flatten", "reshape", "squeeze", "unsqueeze", "clone",
                                                  "repeat_interleave", "tile", "broadcast_to", "narrow",
                                                  "index_select", "gather", "movedim", "swapaxes", "unflatten"))


def _moved(call: cst.Call) -> bool:
    """`m.to(x.device)`, `m.to("cuda")`, `m.cuda()`: the same values on another device, so a mask stays a mask.
    (`m.to(x)` and `m.to(torch.float)` take another dtype: not these.)"""
    name = call_name(call)
    if name in ("cuda", "cpu"):
        return True
    if name != "to" or not call.args:
        return False
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value != "device":
                return False
        elif not ((isinstance(arg.value, cst.Attribute) and arg.value.attr.value == "device")
                  or string_value(arg.value) is not None):
            return False
    return True


# What a name read inside one of its own bindings stands for while the bindings that reach a use are read in turn.
_ASSUMED: ContextVar[dict[str, bool] | None] = ContextVar("assumed-masks", default=None)


def _reached_mask(ctx: Context, node: cst.Name, depth: int) -> bool:
    """The bindings of a name bound more than once that reach this use make a mask, read oldest first, each one with
    the name standing for what the one before made: `m = F.pad(p, (1, 0))`, `m = torch.eq(torch.diff(m), -1)`,
    then `x[m]`; `m = x.ne(0)`, `m = torch.repeat_interleave(m, 4)`."""
    reached = reaching(ctx, node)
    if reached is None or not reached[0]:
        return False
    state = False
    for value in reversed(reached[0]):
        token = _ASSUMED.set({**(_ASSUMED.get() or {}), node.value: state})
        try:
            state = is_mask(ctx, value, depth + 1, named=False)
        finally:
            _ASSUMED.reset(token)
    return state


def _selected_mask(ctx: Context, branches: list[cst.BaseExpression], depth: int, named: bool) -> bool:
    """Both branches of a `torch.where` are masks, or one is and the other a Python truth value or a mask made
    from it (`m.new([True])`): the selection is a mask too."""
    def truth(value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Name) and value.value in ("True", "False"):
            return True
        return (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                and call_name(value) in ("new", "new_ones", "new_zeros", "new_full", "new_tensor")
                and is_mask(ctx, value.func.value, depth + 1, named))
    masks = [is_mask(ctx, b, depth + 1, named) for b in branches]
    return any(masks) and all(m or truth(b) for m, b in zip(masks, branches, strict=True))


def _mask_bindings(ctx: Context, name: str, depth: int) -> bool:
    """`name` is bound more than once in the function, and each binding keeps it a mask: a mask by what makes it,
    `None` (a mask or nothing), a selection between it and something (`torch.where(any, m, m.new([True]))`), or an
    in-place logical update (`m &= x > 0`); at least one binding makes a mask."""
    values = updated_in_place(ctx, name)
    if not values:
        values = rebindings(ctx, name)
        if len(values) < 2:
            return False
    found = False
    for value in values:
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        if (isinstance(value, cst.Call) and ctx.qualname(value.func) == "torch.where" and len(value.args) == 3
                and any(isinstance(a.value, cst.Name) and a.value.value == name for a in value.args[1:])):
            continue
        if not is_mask(ctx, value, depth + 1, named=False):
            return False
        found = True
    return found


def _annotated_mask(ctx: Context, name: str) -> bool:
    """`name` is a parameter of the function being read annotated as a boolean tensor: `torch.BoolTensor`, a name
    the file imports as `BoolTensor` (a project's alias of it), or jaxtyping's `Bool[Tensor, "b n"]`; optional
    (`X | None`, `Optional[X]`) too."""
    if not ctx.functions:
        return False
    param = next((p for p in parameters(ctx.functions[-1]) if p.name.value == name), None)
    kind = param.annotation.annotation if param is not None and param.annotation is not None else None
    while kind is not None:
        if isinstance(kind, cst.BinaryOperation) and isinstance(kind.operator, cst.BitOr):  # `X | None`
            kind = kind.right if isinstance(kind.left, cst.Name) and kind.left.value == "None" else kind.left
        elif isinstance(kind, cst.Subscript) and (ctx.qualname(kind.value) or "").endswith("Optional"):
            kind = kind.slice[0].slice.value if isinstance(kind.slice[0].slice, cst.Index) else None
        else:
            break
    if isinstance(kind, cst.Subscript):  # jaxtyping's `Bool[Tensor, "..."]`
        return ctx.qualname(kind.value) == "jaxtyping.Bool"
    if isinstance(kind, (cst.Name, cst.Attribute)):
        qualname = ctx.qualname(kind) or ""
        return qualname.endswith(".BoolTensor") or (  # `torch.BoolTensor`, `from mylib.typing import BoolTensor`
            isinstance(kind, cst.Name) and kind.value == "BoolTensor" and not qualname)  # `from .typing import ...`
    return False


# What the code calls a mask: `mask`, `masks`, `key_padding_mask`, `batch.train_mask` (not `mask_ids`, `mask_token`).
_MASK_NAME = re.compile(r"(^|_)masks?$")
# Results that are indices or numbers, never a boolean mask.
_INDEX_METHODS = frozenset({"long", "int", "nonzero", "argsort", "argmax", "argmin", "tolist", "item", "indices"})


def _named_mask(ctx: Context, name: str, values: list[cst.BaseExpression] | tuple[cst.BaseExpression, ...]) -> bool:
    """A value named as a mask is one, unless a binding in the function makes it something else (`mask =
    torch.arange(n)`, `mask = keep.nonzero()`): a parameter, an attribute or the result of the project's own
    helper is taken at its name's word."""
    if not _MASK_NAME.search(name):
        return False
    for value in values:
        while isinstance(value, cst.Subscript) and isinstance(value.value, cst.Call):
            value = value.value  # `mask = x.nonzero(as_tuple=True)[0]`: a part of what the call gives
        if isinstance(value, (cst.List, cst.Tuple, cst.Integer, cst.SimpleString, cst.Dict)):
            return False
        if isinstance(value, cst.Call):
            qualname = ctx.qualname(value.func)
            if qualname is not None and qualname.startswith("torch.") and qualname not in _MASK_FUNCTIONS:
                return False
            if isinstance(value.func, cst.Attribute) and call_name(value) in _INDEX_METHODS:
                return False
        if isinstance(value, cst.Attribute) and value.attr.value == "indices":
            return False
    return True


# What a tensor's attributes are (not its methods): `x[x.data > 0]` still indexes a tensor by its own values.
_TENSOR_ATTRIBUTES = frozenset({"data", "grad", "real", "imag", "T", "mT", "H", "mH", "shape", "dtype", "device",
                                "ndim", "is_cuda", "requires_grad", "layout", "names", "is_leaf", "itemsize"})


def host_mask(ctx: Context, base: cst.BaseExpression, mask: cst.BaseExpression) -> bool:
    """The mask says the indexing runs on the host: it is a numpy value or a tensor copied to the host
    (`scores = np.asarray(conf); boxes[scores > t]`), or it reads columns of the very value it indexes
    (`df[df["start"] < end]`, `df[df.ds >= start]`): a tensor has no columns named by strings or attributes, a
    DataFrame or a record array has."""
    if host_value(ctx, mask, factories=False) or isinstance(base, (cst.Tuple, cst.List, cst.Dict, cst.SimpleString)):
        return True  # `(a, b)[flag]`: a Python container picks by a Python truth value
    if not isinstance(base, cst.Name):
        return False
    todo = [mask]
    while todo:
        part = todo.pop()
        if (isinstance(part, cst.Subscript) and isinstance(part.value, cst.Name) and part.value.value == base.value
                and any(isinstance(e.slice, cst.Index) and string_value(e.slice.value) is not None
                        for e in part.slice)):
            return True
        if (isinstance(part, cst.Attribute) and isinstance(part.value, cst.Name) and part.value.value == base.value
                and part.attr.value not in _TENSOR_ATTRIBUTES):
            return True  # `df[df.ds >= start]`: a column read as an attribute, which no tensor has
        if isinstance(part, cst.Call) and isinstance(part.func, cst.Attribute):  # `x.abs()`: a method, no column
            todo.extend([part.func.value, *(a.value for a in part.args)])
            continue
        todo.extend(c for c in part.children if isinstance(c, cst.BaseExpression))
    return False


@check(cst.Assign, cst.AnnAssign, cst.Del, rules=(BooleanMaskIndex,), tokens=TOKENS)
def skip_stores(node: cst.Assign | cst.AnnAssign | cst.Del, ctx: Context) -> None:
    """`x[mask] = 0` writes in place and keeps the shape: only reads through a mask are dynamic. (`x[mask] += y`
    reads `x[mask]` first, so an augmented assignment is a read.)"""
    targets: list[cst.BaseExpression]
    if isinstance(node, cst.Del):
        targets = [node.target]
    else:
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    while targets:
        target = targets.pop()
        if isinstance(target, cst.Subscript):
            ctx.skip.add(id(target))
        elif isinstance(target, (cst.Tuple, cst.List)):  # `out[m], log_det[m] = f(...)`
            targets.extend(element.value for element in target.elements)
        elif isinstance(target, cst.StarredElement):
            targets.append(target.value)


@check(cst.Subscript, rules=(BooleanMaskIndex, ShapeFromData, RandomSize), tokens=TOKENS)
def check_mask_index(node: cst.Subscript, ctx: Context) -> None:
    report_slice_from_data(ctx, node)
    if id(node) in ctx.skip:
        return
    report_first_mask(ctx, BooleanMaskIndex, node)


def report_first_mask(ctx: Context, rule: type[Rule], node: cst.Subscript) -> bool:
    """Report `node` for the first element of its index that is a mask (`x[~pad, :]`), by what makes it or by what
    a function of the project returns: whether one was."""
    for element in node.slice:
        index = element.slice
        if isinstance(index, cst.Index) and is_mask(ctx, index.value):
            report_masked(ctx, rule, node, index.value)
            return True
        if isinstance(index, cst.Index) and report_helper_masked(ctx, rule, node, index.value):
            return True
    return False


def report_masked(ctx: Context, rule: type[Rule], node: cst.Subscript, mask: cst.BaseExpression) -> None:
    """Report `node`, indexed by `mask`, unless the mask says it runs on the host; a mask known by its name alone
    counts where the device step reaches it, and is info elsewhere."""
    if host_mask(ctx, node.value, mask):
        return
    shown = " ".join(ctx.source(node).split())
    for requires in ("",) if is_mask(ctx, mask, named=False) else ("device", ELSEWHERE):
        report_compiled(ctx, rule, node, value=node.value, shown=shown, requires=requires)


def report_helper_masked(ctx: Context, rule: type[Rule], node: cst.Subscript, index: cst.BaseExpression) -> bool:
    """Report `node`, indexed by what a function of the project returns, where the call graph finds that function
    returns a boolean mask (and the device step reaches the code; info where nothing does): whether it did."""
    helper = helper_mask(ctx, index)
    if helper is None or host_mask(ctx, node.value, index):
        return False
    shown = " ".join(ctx.source(node).split())
    for then in ("device", ELSEWHERE):
        report_compiled(ctx, rule, node, value=node.value, shown=shown, requires=f"{MASK_OF}{helper}\n{then}")
    return True


__all__ = ["BooleanMaskIndex", "host_mask", "is_mask", "report_first_mask", "report_helper_masked", "report_masked"]
