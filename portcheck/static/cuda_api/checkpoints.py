"""A CUDA probe whose value only picks where a checkpoint's tensors load (`torch.load(f, map_location="cuda" if
torch.cuda.is_available() else "cpu")`): on Neuron they load on the CPU and move with the model, as they should.
Or one that only picks asynchronous copies or pinned memory (`non_blocking=`, `pin_memory=`), which work without."""

from __future__ import annotations

import libcst as cst

from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context
from portcheck.static.walk import visit


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
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1 and isinstance(stmt.body[0].targets[0].target, cst.Name)
            and any(n is stmt.body[0].value for n in path)):
        return False
    scope: cst.CSTNode = ctx.functions[-1] if ctx.functions else ctx.module
    uses, mapped = ctx.memo("name-uses " + " ".join(keywords), scope, lambda: _name_uses(scope, keywords)).get(
        stmt.body[0].targets[0].target.value, (0, 0))
    return mapped > 0 and uses == mapped + 1  # every use but the assignment itself is a `keyword=name`


def _name_uses(scope: cst.CSTNode, keywords: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """Per name in the scope: how often it appears (attribute and keyword names left out), and how often as an
    argument for one of `keywords`."""
    counts: dict[str, list[int]] = {}
    attributes: set[int] = set()

    class Finder(cst.CSTVisitor):
        def visit_Arg(self, arg: cst.Arg) -> None:
            if arg.keyword is not None:
                attributes.add(id(arg.keyword))  # the keyword of `map_location=map_location` is no use of the name
            if arg.keyword is not None and arg.keyword.value in keywords and isinstance(arg.value, cst.Name):
                counts.setdefault(arg.value.value, [0, 0])[1] += 1

        def visit_Attribute(self, attribute: cst.Attribute) -> None:
            attributes.add(id(attribute.attr))  # `torch.device` is no use of a name `device`

        def visit_Name(self, name: cst.Name) -> None:
            if id(name) not in attributes:
                counts.setdefault(name.value, [0, 0])[0] += 1

    visit(scope, Finder())
    return {name: (uses, mapped) for name, (uses, mapped) in counts.items()}


__all__ = ["COPY_OPTIONS", "only_maps_a_checkpoint", "only_passed_as"]
