"""A CUDA probe whose value only picks where a checkpoint's tensors load (`torch.load(f, map_location="cuda" if
torch.cuda.is_available() else "cpu")`): on Neuron they load on the CPU and move with the model, as they should.
Or one that only picks asynchronous copies or pinned memory (`non_blocking=`, `pin_memory=`), which work without."""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context
from portcheck.static.name_reads import bound_name, reads_in_scope


def only_maps_a_checkpoint(ctx: Context, node: cst.CSTNode, stmt: cst.CSTNode | None) -> bool:
    """The probe's value is a `map_location=` argument, directly or through a name used only that way."""
    return only_passed_as(ctx, node, stmt, "map_location")


# Keywords a probe's value may pick with a working fallback off CUDA: asynchronous copies and pinned memory.
COPY_OPTIONS = ("non_blocking", "pin_memory")


def only_passed_as(ctx: Context, node: cst.CSTNode, stmt: cst.CSTNode | None, *keywords: str) -> bool:
    """The probe's value is an argument for one of `keywords`, directly or through a name used only that way."""
    if stmt is None:
        return False
    path = ancestors(ctx, node)  # the nodes holding the probe on its statement's lines, read up, not searched
    if any(isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value in keywords for n in path):
        return True
    holders = [*path, node]
    bound = bound_name(stmt, holders)
    if bound is None or not any(n is bound[1] for n in holders):
        return False
    # Bound to the probe once (other bindings only switch it off: `non_blocking = False`), and every read is a
    # `keyword=name` argument.
    reads = reads_in_scope(ctx, bound[0])
    return (reads.bindings - reads.constants == 1 and bool(reads.paths)
            and all(_passed_as(read, keywords) for read in reads.paths))


def _passed_as(path: list[cst.CSTNode], keywords: tuple[str, ...]) -> bool:
    """The read (`path[-1]`) is the whole argument for one of `keywords`."""
    holder = path[-2] if len(path) > 1 else None
    return (isinstance(holder, cst.Arg) and holder.value is path[-1] and holder.keyword is not None
            and holder.keyword.value in keywords)


__all__ = ["COPY_OPTIONS", "only_maps_a_checkpoint", "only_passed_as"]
