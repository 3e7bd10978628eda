"""What the project's classes are, read from their methods and bases: the base a name in the class's own module
stands for, and the classes that keep a metric (they `update` a state and `compute` a result from it, as
torchmetrics' and ignite's metrics do), whose work is measurement on the host side of the step."""

from __future__ import annotations

from collections import defaultdict

from portcheck.static.semantic.project import DEPTH, Project

_METRIC_PROTOCOL = frozenset({"update", "compute"})


def known_base(project: Project, cls: str, base: str) -> list[str]:
    """The tree's classes a base of `cls` may be: a name defined in the class's own module (`:Base`, recorded
    unresolved) looked up from the class's scope outwards, else what `Project.known_classes` finds."""
    if not base.startswith(":"):
        return project.known_classes(base)
    scope = cls
    while "." in scope:
        scope = scope.rsplit(".", 1)[0]
        if f"{scope}.{base[1:]}" in project.classes:
            return [f"{scope}.{base[1:]}"]
    return []


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
                for known in known_base(project, cls, base):
                    found |= methods(known, depth + 1)
        return found

    return {cls for cls in project.classes if methods(cls) >= _METRIC_PROTOCOL}


__all__ = ["known_base", "metric_classes"]
