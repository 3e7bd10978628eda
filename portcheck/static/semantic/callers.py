"""What the calls of a function settle about a finding in it: a default every call overrides, a branch for a
parameter no call passes (or every call does), host values every call passes (Finding.default_of, unless_passed,
host_if). Read by the call graph (portcheck.static.semantic.graph) once it is built."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace

from portcheck.findings import FileResult, Finding, Severity
from portcheck.static.semantic.grows import REGROWS
from portcheck.static.semantic.project import (
    Node,
    Passed,
    Project,
    always_host,
    always_passed,
    never_passed,
)
from portcheck.summaries import FED_BACK


def enclosing(nodes: list[Node], line: int) -> list[Node]:
    """The functions holding `line`, outermost first (`nodes` sorted by first line)."""
    end = bisect_right(nodes, line, key=lambda n: n.function.line)
    return [n for n in nodes[:end] if n.function.end_line >= line]


def asking(project: Project, results: list[FileResult]) -> set[str]:
    """The functions holding a finding that what their calls pass could settle (Finding.default_of / host_if /
    unless_passed, or requires FED_BACK)."""
    needed: set[str] = set()
    for result in results:
        if result.summary is None or result.path not in project.files:
            continue
        nodes = project.files[result.path][2]
        for finding in result.findings:
            if settled_by_calls(finding) or finding.requires == FED_BACK:
                holders = enclosing(nodes, finding.line)
                if holders:
                    needed.add(holders[-1].full)
    return needed


def fed_back(passed: dict[str, list[Passed]], holder: Node) -> bool:
    """A call of `holder` is a decode loop's feedback: its result rebinds what it is given, which the loop hands on
    to another call (semantic.grows)."""
    return any(REGROWS in call[2] for call in passed.get(holder.full, []))


def settled_by_calls(finding: Finding) -> bool:
    return bool(finding.default_of or finding.host_if or finding.unless_passed) and finding.severity > Severity.INFO


def by_callers(finding: Finding, passed: dict[str, list[Passed]], holder: Node, project: Project) -> Finding:
    """The finding as the calls of its function settle it: info where every call passes the parameter whose
    default it reads, where no call passes the parameter its branch needs, or where every call passes host values
    for every parameter its value is made of."""
    name = holder.function.name
    if finding.default_of and always_passed(passed, holder, finding.default_of, project):
        note = f"every call of `{name}` in the project passes `{finding.default_of}`: its default never applies"
    elif finding.unless_passed.startswith("!") and always_passed(passed, holder, finding.unless_passed[1:], project):
        note = (f"every call of `{name}` in the project passes `{finding.unless_passed[1:]}`: the branch for its "
                "absence never runs here")
    elif finding.unless_passed and never_passed(passed, holder, finding.unless_passed):
        note = (f"no call of `{name}` in the project passes `{finding.unless_passed}`: the branch that needs it "
                "never runs here")
    elif finding.host_if and always_host(passed, holder, finding.host_if, project):
        shown = ", ".join(f"`{p}`" for p in finding.host_if)
        note = (f"every call of `{name}` in the project passes a host value for {shown} (a `.cpu()` copy, a numpy "
                "value, or a parameter its own callers fill so): this code works on the host")
    else:
        return finding
    return replace(finding, severity=Severity.INFO, fix=None, message=f"{finding.message} ({note})")


__all__ = ["asking", "by_callers", "enclosing", "fed_back", "settled_by_calls"]
