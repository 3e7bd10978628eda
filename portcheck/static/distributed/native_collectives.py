"""Collectives TorchNeuron's "neuron" process-group backend does not implement: point-to-point send/recv,
`monitored_barrier`, `reduce_scatter_coalesced`, uneven `all_to_all_single` splits, `barrier` on a subgroup
(PC609)."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.syntax import call_name, keyword, positional


@rule
class NativeMissingCollective(Rule):
    """## What it does
    On TorchNeuron native, finds `torch.distributed` calls its "neuron" backend does not implement:
    `send` / `recv` / `isend` / `irecv` / `batch_isend_irecv` (point-to-point; `recv` without `src` is
    `recv_anysource`), `monitored_barrier`, `reduce_scatter_coalesced`, `barrier(group=...)` on a group other
    than the default one, and `all_to_all_single` with split sizes other than `None` or all ones. Split sizes
    written as a literal list are judged (a warning unless every size is 1); split sizes computed at run time
    (a name, a call) are info, since only equal splits of one element each run. `barrier()` on the default
    group, `all_to_all_single(out, inp)` and the collectives the backend has (`all_reduce`, `all_gather`,
    `reduce_scatter`, `broadcast`, ...) stay quiet. `barrier(group=g)` is a warning where `g` is made in the file
    from `new_group(ranks)` or `new_subgroups`; a group that comes from elsewhere (a parameter, an attribute) is
    info, since it is often the default group.

    ## Example
    ```python
    dist.send(tensor, dst=1)
    dist.all_to_all_single(out, inp, output_split_sizes=[2, 6], input_split_sizes=[4, 4])
    ```

    ## Use instead
    ```python
    dist.all_gather_into_tensor(out, tensor)     # or broadcast / all_reduce from the sender
    dist.all_to_all_single(out, inp)             # equal splits; pad each rank's chunk to one size
    ```

    ## Fix safety
    No automatic fix: replacing point-to-point with a collective, or padding uneven splits, changes the
    algorithm.
    """

    code = "PC609"
    message = ""
    INVALID = (
        "import torch.distributed as dist\ndist.send(t, dst=1)",
        "import torch.distributed as dist\nreq = dist.irecv(t, src=0)",
        "from torch import distributed as dist\ndist.recv(t)",
        "import torch.distributed as dist\nreqs = dist.batch_isend_irecv(ops)",
        "import torch.distributed as dist\ndist.monitored_barrier(timeout=t)",
        "pg.reduce_scatter_coalesced(outs, ins, opts)",
        "import torch.distributed as dist\ntp_group = dist.new_group([0, 1])\ndist.barrier(group=tp_group)",
        "import torch.distributed as dist\ndist.all_to_all_single(out, inp, [2, 6], [4, 4])",
        "import torch.distributed as dist\ndist.all_to_all_single(out, inp, output_split_sizes=splits)",
    )
    VALID = (
        "import torch.distributed as dist\ndist.barrier()",
        "import torch.distributed as dist\ndist.barrier(group=dist.group.WORLD)",
        "import torch.distributed as dist\ndist.barrier(group=None)",
        "import torch.distributed as dist\ng = dist.new_group(backend='gloo')\ndist.barrier(group=g)",
        "import torch.distributed as dist\ndist.all_to_all_single(out, inp)",
        "import torch.distributed as dist\ndist.all_to_all_single(out, inp, [1, 1, 1, 1], [1, 1, 1, 1])",
        "import torch.distributed as dist\ndist.all_reduce(t)",
        "sock.send(data)",
        "queue.recv()",
        "x = 'dist.send(t, dst=1)'",
    )


TOKENS = ("send", "recv", "monitored_barrier", "reduce_scatter_coalesced", "barrier", "all_to_all_single")

_DIST = ("torch.distributed.", "torch.distributed.distributed_c10d.")
_P2P = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"})
_WORLD = frozenset({"torch.distributed.group.WORLD", "torch.distributed.GroupMember.WORLD",
                    "torch.distributed.distributed_c10d.GroupMember.WORLD"})
_SOURCE = "TorchNeuron's process-group backend"
_FORWARD = ("use collectives it has (`broadcast`, `all_gather_into_tensor`, `all_to_all_single` with equal splits) "
            "instead")


def _dist_function(ctx: Context, node: cst.Call) -> str | None:
    """`send` for `dist.send(...)` / `torch.distributed.distributed_c10d.send(...)`, else None."""
    qualname = ctx.qualname(node.func) or ""
    for prefix in _DIST:
        if qualname.startswith(prefix) and "." not in qualname[len(prefix):]:
            return qualname[len(prefix):]
    return None


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


@check(cst.Call, rules=(NativeMissingCollective,), tokens=TOKENS)
def check_native_collective(node: cst.Call, ctx: Context) -> None:
    function = _dist_function(ctx, node)
    if function in _P2P:
        anysource = function in ("recv", "irecv") and (keyword(node, "src") or positional(node, 1)) is None
        what = "point-to-point `recv` from any source (`recv_anysource`)" if anysource else \
            f"point-to-point `{function}`"
        ctx.report(NativeMissingCollective, node, f"{what}: {_SOURCE} implements no send/recv, so the call fails on "
                   f"TorchNeuron native; {_FORWARD}")
    elif function == "monitored_barrier":
        ctx.report(NativeMissingCollective, node, f"`monitored_barrier`: {_SOURCE} raises NotImplementedError for "
                   "it; use `dist.barrier()` on the default group")
    elif function == "barrier":
        group = keyword(node, "group") or positional(node, 0)
        if group is not None and not _is_none(group.value) and ctx.qualname(group.value) not in _WORLD:
            subgroup = _makes_subgroup(ctx, group.value)
            if subgroup is False:
                return
            ctx.report(NativeMissingCollective, group, f"`barrier` on group `{ctx.source(group.value)}`"
                       f"{'' if subgroup else ', which comes from elsewhere'}: {_SOURCE} implements barrier only for "
                       "the default group (all ranks) and raises NotImplementedError on a subgroup; synchronize a "
                       "subgroup with a small `all_reduce` on it instead",
                       severity=None if subgroup else Severity.INFO)
    elif function == "all_to_all_single":
        _check_splits(node, ctx)
    elif function == "reduce_scatter_coalesced" or (function is None and
                                                     call_name(node) == "reduce_scatter_coalesced"):
        ctx.report(NativeMissingCollective, node, f"`reduce_scatter_coalesced`: {_SOURCE} raises "
                   "NotImplementedError for it; call `reduce_scatter_tensor` per tensor")


_SUBGROUPS = {"torch.distributed.new_group": 0, "torch.distributed.distributed_c10d.new_group": 0,
              "torch.distributed.new_subgroups": None, "torch.distributed.distributed_c10d.new_subgroups": None,
              "torch.distributed.new_subgroups_by_enumeration": None}


def _makes_subgroup(ctx: Context, node: cst.BaseExpression) -> bool | None:
    """True for `new_group([0, 1])` (ranks given), `new_subgroups(...)`, or a name bound once to one: a group smaller
    than the world; False for `new_group()` over all ranks; None for a group made elsewhere."""
    bound = ctx.constant(node)
    value = bound[1] if bound is not None else node
    if isinstance(value, cst.Subscript):
        value = value.value  # new_subgroups(...)[0]
    if not isinstance(value, cst.Call) or (qualname := ctx.qualname(value.func)) not in _SUBGROUPS:
        return None
    index = _SUBGROUPS[qualname]
    if index is None:
        return True
    ranks = keyword(value, "ranks") or positional(value, index)
    return ranks is not None and not _is_none(ranks.value)


def _check_splits(node: cst.Call, ctx: Context) -> None:
    for name, index in (("output_split_sizes", 2), ("input_split_sizes", 3)):
        arg = keyword(node, name) or positional(node, index)
        if arg is None or _is_none(arg.value):
            continue
        value = arg.value
        if isinstance(value, (cst.List, cst.Tuple)):
            sizes = [e.value for e in value.elements]
            if not sizes or all(isinstance(s, cst.Integer) and s.evaluated_value == 1 for s in sizes):
                continue
            ctx.report(NativeMissingCollective, arg, f"`all_to_all_single` with {name}={ctx.source(value)}: "
                       f"{_SOURCE} runs only equal splits (None, or every size 1) and raises NotImplementedError "
                       "for uneven ones; pad each rank's chunk to one size and pass no split sizes")
        else:
            ctx.report(NativeMissingCollective, arg, f"`all_to_all_single` with {name}={ctx.source(value)}, "
                       f"computed at run time: {_SOURCE} runs only equal splits (None, or every size 1) and raises "
                       "NotImplementedError for uneven ones; if the sizes can differ, pad to one size",
                       severity=Severity.INFO)
        return
