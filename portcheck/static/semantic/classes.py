"""What the project's classes are, read from their methods and bases: the classes that keep a metric (they
`update` a state and `compute` a result from it, as torchmetrics' and ignite's metrics do), whose work is
measurement on the host side of the step."""

from __future__ import annotations

from collections import defaultdict

from portcheck.static.semantic.project import DEPTH, Project

_METRIC_PROTOCOL = frozenset({"update", "compute"})


def metric_classes(project: Project) -> set[str]:
    """The classes that define, or inherit from the project's own classes, both `update` and `compute`."""
    own: dict[str, set[str]] = defaultdict(set)
    for node in project.nodes.values():
        cls = project.class_of(node)
        if cls is not None:
            own[cls].add(node.function.name.rsplit(".", 1)[-1])

    def methods(cls: str, depth: int = 0) -> set[str]:
        found = set(own.get(cls, ()))
        if depth < DEPTH:
            for base in project.classes.get(cls, ()):
                for known in project.base_classes(cls, base):
                    found |= methods(known, depth + 1)
        return found

    return {cls for cls in project.classes if methods(cls) >= _METRIC_PROTOCOL}


__all__ = ["metric_classes"]
