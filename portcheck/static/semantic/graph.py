"""The project's call graph, built after every file is analysed, from the files' summaries alone, and what it says
about each finding: where its code runs and whether a CUDA-only or other-vendor path is the only way there.

- **Probes across functions.** A function that returns a CUDA probe (`def has_gpu(): return
  torch.cuda.is_available()`), or returns another such function's value, is a probe: `if has_gpu():` is a CUDA
  guard in every file that imports it.
- **CUDA-only and other-vendor functions.** A function called only under CUDA guards (or only from CUDA-only
  functions) is CUDA-only, and so is a module imported only there; one that drives TensorRT, OpenVINO, CoreML
  or ONNX Runtime, or exports a model with `torch.onnx.export` (and steps no optimizer), or is reached only from
  one, or only under `torch.onnx.is_in_onnx_export()`, or sits in a module that cannot load without such a
  runtime, is another vendor's. Neither runs on Neuron: a finding there is
  info. A function with no caller in the scanned tree (public API, an entry point, a `forward` that `__call__`
  reaches) is none of these.
- **Where code runs.** The device step is what a module's `forward` (not that of a class certainly no Module: a
  data transform built on `ABC`) or a training step (a function that calls `backward()` or `optimizer.step()`,
  Lightning's `*_step`) reaches through the calls the graph resolves (imports inside the tree, methods through
  `self` and the class's bases, re-exports followed). Host code is what only a data-pipeline entry
  reaches (`__getitem__`, a Dataset's or Sampler's methods, a function given as `collate_fn=`). What the graph
  places but neither reaches is "unknown" (a utility nothing calls, post-processing). A rule declares the
  contexts it reports in (`Rule.CONTEXTS`: a data-dependent shape only the device step's); outside them its
  finding is info.
- **Intervals.** What runs once every N steps (`if step % N == 0:`, the rest of a block after `if step % N != 0:
  return`, a function called only there: `semantic.interval`) is "interval" for the rules whose harm is per step
  (a shape, a read, a missing op, float64, attention, autocast); a CUDA call there fails all the same.

What the graph settles about each function is `semantic.facts`; this module applies it to the findings.

Bounded: past `MAX_FUNCTIONS` functions the graph is not built and the scan keeps per-file results (the
caller says so in one line). Every walk is iterative, so cycles and deep call chains cost nothing extra.
"""

from __future__ import annotations

from dataclasses import replace

from portcheck.findings import FileResult, Finding, Severity
from portcheck.rules import contexts_of
from portcheck.static.semantic.callers import (
    asking,
    by_callers,
    enclosing,
    fed_back,
    settled_by_calls,
    written_defaults,
)
from portcheck.static.semantic.compiled import compiled
from portcheck.static.semantic.facts import Facts, facts
from portcheck.static.semantic.masks import MASK
from portcheck.static.semantic.modules import module_of
from portcheck.static.semantic.project import Node, Passed, Project, arguments
from portcheck.static.semantic.summary import (
    CUDA_CLASS,
    CUDA_IMPL,
    INTERVAL_GUARD,
    MAIN_GUARD,
    ONCE,
    ONCE_GUARD,
    READS,
    VENDOR_GUARD,
)
from portcheck.summaries import COMPILED_OF, ELSEWHERE, FED_BACK, MASK_OF, READS_OFF_XLA_OF, READS_PREFIXES, SAME_FILE

MAX_FUNCTIONS = 200_000


# ---- findings ----------------------------------------------------------------------------------------------------


def _where(project: Project, found: Facts, result: FileResult, finding: Finding,
           holders: list[Node], whole: bool) -> tuple[str, str] | None:
    """(context, why) for a finding whose place the graph knows (`holders`: the functions holding it, outermost
    first): "cuda" or "vendor" for a path that never runs on Neuron, "host" for host-side code, "setup" for what
    runs once, "unknown" for a function no forward or training step reaches (in a `whole` folder only); None where
    the per-file analysis stands (module-level code, or code the device step reaches)."""
    for node in holders:
        if node.full in found.cuda_only:
            why = ("it belongs to a class that exists for CUDA" if CUDA_CLASS in node.function.roles
                   else "it is an op's implementation registered for CUDA devices only"
                   if CUDA_IMPL in node.function.roles else "it is called only where CUDA is present")
            return "cuda", f"`{node.function.name}`: {why}"
        if node.full in found.vendor_only:
            return "vendor", f"`{node.function.name}` runs only for another vendor's runtime or export"
    assert result.summary is not None
    module = project.files[result.path][0]
    if module in found.cuda_modules:
        return "cuda", f"`{module.rsplit('.', 1)[-1]}` is imported only where CUDA is present"
    if module in project.runtimes:
        return "vendor", f"`{module.rsplit('.', 1)[-1]}` cannot load without `{project.runtimes[module]}`"
    if finding.category == "cuda-library" and module in project.optional:
        return "optional", f"`{module.rsplit('.', 1)[-1]}` is imported only where an optional dependency is installed"
    if module in project.optional and module in project.cuda_libraries:
        return "cuda", (f"`{module}` needs {project.cuda_libraries[module]} to load and is imported only where an "
                        "optional dependency is installed")
    for line, end, guard in result.summary.regions:
        if line <= finding.line <= end:
            if guard == VENDOR_GUARD:
                return "vendor", "under a test for an ONNX export or a trace"
            if guard == ONCE_GUARD:
                return "setup", "under a lazy initialisation (its test asks for what its body sets)"
            if guard == INTERVAL_GUARD and finding.category in _PERIODIC and not any(
                    h.full in found.forward for h in holders):
                return "interval", "under a test of a step counter's remainder (`if step % N == 0:`)"
            if guard == MAIN_GUARD and module in project.imported and finding.category != "training":
                # a training loop is one wherever it is written (JUDGING: any training loop counts on inf2)
                return "demo", ("under `if __name__ == \"__main__\":` of a module the project imports: a demo or "
                                "self-test, run only when the file is run as a script")
            if guard.startswith("?") and holders:
                callees = project.resolve(guard[1:], holders[-1])
                if callees and all(c in found.probes for c in callees):
                    return "cuda", f"under `{guard[1:].lstrip(':.')}()`, which returns a CUDA probe"
                if project.probe_constant(guard[1:], holders[-1]):
                    return "cuda", f"under `{guard[1:].rsplit('.', 1)[-1]}`, which its module binds to a CUDA probe"
    for node in holders:
        if node.full in found.once:
            why = ("its result is cached" if ONCE in node.function.roles
                   else "it builds an object" if node.function.name.endswith(".__init__")
                   else "it is called only where an object is built, a result cached or initialised once")
            return "setup", f"`{node.function.name}` runs once, not every step: {why}"
    periodic = next((h for h in holders if h.full in found.interval), None)
    if periodic is not None and finding.category in _PERIODIC:
        return "interval", (f"`{periodic.function.name}` is called only under a test of a step counter's remainder "
                            "(`if step % N == 0:`)")
    if holders and not any(h.full in found.device for h in holders):
        if holders[-1].full in found.host:
            return "host", f"`{holders[-1].function.name}` is reached only from the data pipeline"
        if whole and holders[0].full in found.dead:
            return "dead", f"nothing in the scanned files calls `{holders[0].function.name}` or names it"
        if whole:
            return "unknown", f"no module's `forward` and no training step in the scanned files reaches " \
                              f"`{holders[-1].function.name}`"
    return None


# What costs nothing when it runs once every N steps rather than every step (JUDGING: logging, demos and checkpoints
# behind an interval guard): what a NeuronCore computes more slowly, on the CPU, or in a graph of its own. A CUDA
# call or library, a collective or a compile option fails however rarely it runs: those keep their severity.
_PERIODIC = frozenset({"dynamic-shape", "host-sync", "unsupported-op", "dtype", "custom-attention", "training"})

_NOTES = {
    "cuda": "a CUDA-only path, {why}: it does not run on Neuron",
    "vendor": "another vendor's path, {why}: it does not run on Neuron",
    "host": "host-side code, {why}",
    "setup": "set-up code, {why}",
    "optional": "a guarded integration, {why}: a Neuron host without that library never loads it",
    "unknown": "outside the device step as far as this scan sees: {why}; it matters where a model calls it",
    "dead": "dead code as far as this scan sees: {why}",
    "demo": "{why}",
    "interval": "code that runs once every N steps (a demo, a log, an evaluation), {why}",
}
_NOT_NEURON = frozenset({"cuda", "vendor", "optional"})


def apply(results: list[FileResult], whole: bool = False) -> tuple[list[FileResult], str | None]:
    """The results with what the call graph knows applied; and a line to tell the user when it was not built.
    Findings that require the device step are kept where the graph puts their code there, and dropped elsewhere
    (or everywhere, when there is no graph). Only for a `whole` folder (not files named one by one, as pre-commit's
    or a review's) is a function no forward reaches outside the device step: a caller may be in a file not named."""
    if not any(r.summary is not None and r.findings for r in results):
        return [settled(r) for r in results], None
    count = sum(len(r.summary.functions) for r in results if r.summary is not None)
    if count > MAX_FUNCTIONS:
        return [settled(r) for r in results], (
            f"the project holds {count:,} functions, more than the call graph's {MAX_FUNCTIONS:,}: findings are "
            "judged file by file")
    project = Project(results)
    found = facts(project)
    passed: dict[str, list[Passed]] | None = None  # built when a finding asks
    written: frozenset[tuple[str, str]] | None = None  # the defaults findings are reported at, built likewise
    out = []
    for result in results:
        if result.summary is None or not result.findings:
            out.append(settled(result))
            continue
        changed = []
        nodes = project.files[result.path][2]
        for finding in result.findings:
            holders = enclosing(nodes, finding.line)
            if finding.code == "PC701" and len(holders) == 1 and "." not in holders[0].function.name \
                    and READS in holders[0].function.roles \
                    and not finding.requires.startswith(READS_PREFIXES):
                continue  # `return t.item()` of a module's function: each call handing it a tensor is reported
            prefix = next((p for p in READS_PREFIXES if finding.requires.startswith(p)), None)
            if prefix is not None:
                # `reads:NAME`, or `reads:NAME` and a line with what the code's place must also be
                name, _, then = finding.requires[len(prefix):].partition("\n")
                if not project.reads_data(name, result.path, holders[-1] if holders else None,
                                          off_xla=prefix == READS_OFF_XLA_OF,
                                          roles=(MASK,) if prefix == MASK_OF else ()):
                    continue
                finding = replace(finding, requires=then)
            if finding.requires == FED_BACK:  # a parameter grown and handed back: where a decode loop feeds it on
                passed = arguments(project, results, asking(project, results)) if passed is None else passed
                if not holders or not fed_back(passed, holders[-1]):
                    continue
                finding = replace(finding, requires="")
            if finding.requires.startswith(COMPILED_OF):  # `_C.op(x)` of `from . import _C`: kept where it is one
                if not compiled(project, finding.requires[len(COMPILED_OF):], result.path):
                    continue
                finding = replace(finding, requires="")
            if finding.requires == ELSEWHERE:
                kept = _elsewhere(project, found, result, finding, holders, whole)
                if kept is None:
                    continue
                finding = kept
            elif finding.requires:
                if not _reached(found, finding, holders):
                    continue
                finding = replace(finding, requires="")
            if settled_by_calls(finding) and holders:
                if passed is None:
                    passed = arguments(project, results, asking(project, results))
                if written is None:
                    written = written_defaults(project, results)
                finding = by_callers(finding, passed, holders[-1], project, written)
            place = _where(project, found, result, finding, holders, whole)
            finding = replace(finding, runs=_runs(found, holders, place))
            if finding.severity > Severity.INFO and place is not None:
                context, why = place
                if context in _NOT_NEURON or context not in contexts_of(finding.code) or (
                        context == "setup" and finding.category == "dtype" and not finding.kept):
                    note = _NOTES[context].format(why=why)
                    if context == "setup" and finding.category == "dtype":
                        note += ", and the value is narrowed, used or handed back there, not stored for the step"
                    finding = replace(finding, severity=Severity.INFO, message=f"{finding.message} ({note})",
                                      fix=None)
            changed.append(finding)
        out.append(replace(result, findings=tuple(changed)))
    return out, None


def _elsewhere(project: Project, found: Facts, result: FileResult, finding: Finding, holders: list[Node],
               whole: bool) -> Finding | None:
    """A finding for code that no forward and no training step of the scan reaches (Finding.requires ELSEWHERE),
    as info: its function may yet be what a model calls (a callback, a distribution's `log_prob`, a user's loop).
    None where a forward or a step does reach it (another candidate speaks there) or the graph places the code
    where it cannot hurt: host-side, set-up, a CUDA-only or another vendor's path."""
    if not holders or any(h.full in found.device for h in holders):
        return None
    place = _where(project, found, result, finding, holders, whole)
    if place is not None and place[0] not in ("unknown", "dead"):
        return None
    note = _NOTES[place[0] if place is not None else "unknown"].format(why=place[1] if place is not None else (
        f"no module's `forward` and no training step among the files scanned reaches `{holders[-1].function.name}`"))
    return replace(finding, requires="", severity=Severity.INFO, fix=None, message=f"{finding.message} ({note})")


def _runs(found: Facts, holders: list[Node], place: tuple[str, str] | None) -> str:
    """Where the finding's code runs (findings.RUNS)."""
    if place is not None and place[0] in _NOT_NEURON:
        return "not-neuron"
    names = [h.full for h in holders]
    if any(name in found.forward for name in names):
        return "model"
    if any(name in found.device for name in names):
        return "step"
    if place is not None and place[0] in ("setup", "unknown", "dead", "demo", "interval"):
        return "other"
    if place is not None or any(name in found.host for name in names):
        return "host"
    return "other" if holders else "module"


def _reached(found: Facts, finding: Finding, holders: list[Node]) -> bool:
    """The finding's function is reached as it requires: "forward" from a module's forward, "device" from a
    forward or a training step, "step" from a training step and not from a forward."""
    if not holders or finding.requires == SAME_FILE:  # across the functions of one file: wherever there is a graph
        return finding.requires == SAME_FILE
    function = holders[-1].full
    if finding.requires == "step":  # a training step reaches it, and no forward does (that is "forward"'s)
        return function in found.device and function not in found.forward
    return function in (found.forward if finding.requires == "forward" else found.device)


def settled(result: FileResult) -> FileResult:
    """The result without the findings only the call graph could have kept."""
    if not any(f.requires for f in result.findings):
        return result
    return replace(result, findings=tuple(f for f in result.findings if not f.requires))


__all__ = ["MAX_FUNCTIONS", "Facts", "Project", "apply", "facts", "module_of", "settled"]
