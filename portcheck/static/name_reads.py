"""Where a value goes when a local name holds it (`has_gpu = torch.cuda.is_available()`): the name a
statement binds, and every read of each name in a scope with the nodes that hold it, read once per scope for all
the probes or values in it (cuda_api checkpoints.py and shown.py, dtype references.py judge the reads)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from portcheck.static.check import Context
from portcheck.static.walk import visit


@dataclass
class Reads:
    bindings: int = 0  # plain `name = ...`, `name += ...`, `name: T = ...` statements binding the name
    constants: int = 0  # of those, the ones binding `True`, `False` or `None` (`non_blocking = False`)
    # id of each binding's target name -> how many reads came before it (reads are in source order)
    reads_before: dict[int, int] = field(default_factory=dict)
    paths: list[list[cst.CSTNode]] = field(default_factory=list)  # per read: its holders, outermost first, then it


def bound_name(stmt: cst.CSTNode | None, holders: Sequence[cst.CSTNode] = ()) -> tuple[str, cst.BaseExpression] | None:
    """(name, value) of a statement that is one plain `name = value`; with `holders` (a node and the nodes holding
    it), also the element of `a, b = x, y` whose value is one of them. None for anything else."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1):
        return None
    target, value = stmt.body[0].targets[0].target, stmt.body[0].value
    if isinstance(target, cst.Name):
        return target.value, value
    if not holders or not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(value, (cst.Tuple, cst.List)):
        return None
    if len(target.elements) != len(value.elements) or any(
            isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)):
        return None
    return next(((t.value.value, v.value) for t, v in zip(target.elements, value.elements, strict=True)
                 if isinstance(t.value, cst.Name) and any(v.value is h for h in holders)), None)


def reads_in_scope(ctx: Context, name: str) -> Reads:
    """The bindings and reads of `name` in the current function (the module at module level); attribute and
    keyword names are neither."""
    scope: cst.CSTNode = ctx.functions[-1] if ctx.functions else ctx.module
    return ctx.memo("name-reads", scope, lambda: _reads(scope)).get(name, Reads())


def _reads(scope: cst.CSTNode) -> dict[str, Reads]:
    found: dict[str, Reads] = {}
    stack: list[cst.CSTNode] = []
    targets: set[int] = set()
    constants: set[int] = set()
    skipped: set[int] = set()

    class Finder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.Attribute):
                skipped.add(id(node.attr))  # `torch.device` is no use of a name `device`
            elif isinstance(node, cst.Arg) and node.keyword is not None:
                skipped.add(id(node.keyword))  # the keyword of `map_location=map_location` is no use of the name
            elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                for target in (node.targets if isinstance(node, cst.Assign) else [node]):
                    if isinstance(target.target, (cst.Tuple, cst.List)):  # `a, b = x, y`: each name bound once
                        targets.update(id(e.value) for e in target.target.elements if isinstance(e.value, cst.Name))
                    elif isinstance(target.target, cst.Name):
                        targets.add(id(target.target))
                        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value in (
                                "True", "False", "None"):
                            constants.add(id(target.target))
            elif isinstance(node, cst.Name) and id(node) not in skipped:
                reads = found.setdefault(node.value, Reads())
                if id(node) in targets:
                    reads.bindings += 1
                    reads.constants += id(node) in constants
                    reads.reads_before[id(node)] = len(reads.paths)
                else:
                    reads.paths.append([*stack, node])
            stack.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            stack.pop()

    visit(scope, Finder())
    return found


__all__ = ["Reads", "bound_name", "reads_in_scope"]
