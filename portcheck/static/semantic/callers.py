"""What the calls of a function settle about a finding in it: a default every call overrides, a branch for a
parameter no call passes (or every call does), host values every call passes (Finding.default_of, unless_passed,
host_if). Read by the call graph (portcheck.static.semantic.graph) once it is built."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace

from portcheck.findings import FileResult, Finding, Severity
from portcheck.static.semantic.grows import REGROWS
from portcheck.static.semantic.project import DEPTH, Node, Passed, Project
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


def written_defaults(project: Project, results: list[FileResult]) -> frozenset[tuple[str, str]]:
    """(function, parameter) for every default a finding is reported at (Finding.default_of marked "=")."""
    found: set[tuple[str, str]] = set()
    for result in results:
        if result.path not in project.files:
            continue
        nodes = project.files[result.path][2]
        for finding in result.findings:
            if finding.default_of.startswith("=") and (holders := enclosing(nodes, finding.line)):
                found.add((holders[-1].full, finding.default_of[1:]))
    return frozenset(found)


def by_callers(finding: Finding, passed: dict[str, list[Passed]], holder: Node, project: Project,
               reported: frozenset[tuple[str, str]] = frozenset()) -> Finding:
    """The finding as the calls of its function settle it: info where every call passes the parameter whose
    default it reads, where no call passes the parameter its branch needs, or where every call passes host values
    for every parameter its value is made of."""
    name = holder.function.name
    param = finding.default_of.lstrip("=")
    if param and always_passed(passed, holder, param, project, reported=reported):
        note = f"every call of `{name}` in the project passes `{param}`: its default never applies"
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


def _position(holder: Node, param: str) -> int | None:
    """Which positional argument fills `param` (a method's `self` left out), None for a keyword-only one."""
    return holder.function.params.index(param) if param in holder.function.params else None


def _places(holder: Node, param: str) -> tuple[str, ...]:
    """How a call records an argument for `param` (Passed's host values): its keyword, and `#i` where the i-th
    positional argument fills it."""
    index = _position(holder, param)
    return (param,) if index is None else (param, f"#{index}")


def _filled(holder: Node, param: str, call: Passed) -> bool:
    """`call` passes `param`, by keyword (named, whatever `**kwargs` it also unpacks: `f(**cfg, device=d)`) or by
    position."""
    count, keywords = call[0], call[1]
    index = _position(holder, param)
    return param in keywords or (count >= 0 and index is not None and count > index)


def _forwarded(holder: Node, param: str, call: Passed) -> str:
    """The caller's own parameter `call` passes on as it came for `param` (Passed's `#i@p` / `keyword@p`), or ""."""
    places = _places(holder, param)
    return next((h.split("@", 1)[1] for h in call[2] if "@" in h and h.split("@", 1)[0] in places), "")


def always_passed(passed: dict[str, list[Passed]], holder: Node, param: str, project: Project,
                  seen: frozenset[str] = frozenset(), reported: frozenset[tuple[str, str]] = frozenset()) -> bool:
    """Every call of `holder` in the tree passes `param`; there is at least one. A call that passes on its caller's
    own parameter as it came (`f(x, classes=classes)`) passes it where every call of the caller in the tree does
    too, or no call in the tree reaches the caller (up a chain at most DEPTH long and without a cycle), or a finding
    is `reported` at that parameter's default in the caller (then what the caller's default sends on is the caller's
    finding: stable-audio's `generate(..., device="cuda")` using it itself and passing it to `sample_k`)."""
    calls = passed.get(holder.full, [])
    if not calls or len(seen) >= DEPTH or holder.full in seen:
        return False
    for call in calls:
        if not _filled(holder, param, call):
            return False
        forwarded = _forwarded(holder, param, call)
        caller = project.nodes.get(call[3]) if forwarded else None
        if caller is not None and (caller.full, forwarded) in reported:
            continue
        # a caller no call in the tree reaches is called from outside it: what it is passed is not known here
        if caller is not None and passed.get(caller.full) and not always_passed(
                passed, caller, forwarded, project, seen | {holder.full}, reported):
            return False
    return True


def always_host(passed: dict[str, list[Passed]], holder: Node, params: tuple[str, ...], project: Project,
                seen: frozenset[str] = frozenset()) -> bool:
    """Every call of `holder` in the tree passes a host value for each of `params`: the value itself, or a
    parameter of its caller that every call of the caller passes a host value for, and so on up a chain at most
    DEPTH long and without a cycle; there is at least one call."""
    calls = passed.get(holder.full, [])
    if not calls or len(seen) >= DEPTH or holder.full in seen:
        return False
    for call in calls:
        if call[0] < 0:
            return False
        for param in params:
            if any(h in _places(holder, param) for h in call[2]):
                continue
            forwarded = _forwarded(holder, param, call)
            caller = project.nodes.get(call[3]) if forwarded else None
            if caller is None or not always_host(passed, caller, (forwarded,), project, seen | {holder.full}):
                return False
    return True


def never_passed(passed: dict[str, list[Passed]], holder: Node, param: str) -> bool:
    """`holder` is private (`_name`: the project's calls are all its calls), no call of it in the tree passes
    `param`, and every call is known (no `*args` / `**kwargs`, the function not handed on as a value); there is at
    least one. A public function's users may pass what the project never does."""
    last = holder.function.name.rsplit(".", 1)[-1]
    if not last.startswith("_") or last.endswith("__"):
        return False
    calls = passed.get(holder.full, [])
    return bool(calls) and all(call[0] >= 0 and not _filled(holder, param, call) for call in calls)


__all__ = ["always_host", "always_passed", "asking", "by_callers", "enclosing", "fed_back", "never_passed",
           "settled_by_calls", "written_defaults"]
