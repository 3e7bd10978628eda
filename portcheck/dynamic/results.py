"""Parent side: turn the child's result into portcheck's results: findings (with messages for the target), the
op inventory with each op's Neuron status, merged with the static pass's findings on the same files."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from portcheck.config import Settings
from portcheck.dynamic.judgment import once_at_trace, weigh_attention
from portcheck.dynamic.outcome import OpCount, TraceOutcome
from portcheck.dynamic.ran import RanCode, Scope
from portcheck.dynamic.rules import (
    EXPORT_ONLY,
    CpuFallbackOp,
    DynamicAxes,
    SpecialisedAxis,
    TracedUnsupportedOp,
    UnknownOps,
    custom_op,
)
from portcheck.findings import Finding, ScanResult, Severity, Target, fingerprinted, python_lines
from portcheck.knowledge import OpSupport, load, load_integer_sort, load_op_releases, load_ops
from portcheck.rules import Rule, TracedFinding
from portcheck.static.dynamic_shape.control_flow import TensorControlFlow
from portcheck.static.dynamic_shape.data_sized import (
    BincountUnbounded,
    MaskedSelect,
    Nonzero,
    RepeatInterleaveTensor,
    Unique,
    WhereSingleArgument,
)
from portcheck.static.dynamic_shape.mask_index import BooleanMaskIndex
from portcheck.static.dynamic_shape.nms import UnbackedSize
from portcheck.static.dynamic_shape.shape_from_data import ShapeFromData
from portcheck.static.host_sync.reads import HostValueRead
from portcheck.static.unsupported_op.sort import IntegerSortInput
from portcheck.traced import OpStatus, Place, StaticScope, TracedModel, TraceResult


def _codes(*rules: type[Rule]) -> frozenset[str]:
    return frozenset(r.code for r in rules)


# A traced finding joins a static one (or another traced one) at the same line when that rule names the same
# problem: every rule of an output sized by the data is one problem (`x[mask]` is static PC204 and, on the AOT
# path, traced "PC201 aten::nonzero").
_DATA_SIZED = _codes(Nonzero, WhereSingleArgument, MaskedSelect, BooleanMaskIndex, Unique, RepeatInterleaveTensor,
                     BincountUnbounded, ShapeFromData, UnbackedSize)
_SAME_PROBLEM = {
    TensorControlFlow.code: _codes(TensorControlFlow, ShapeFromData, HostValueRead),
    HostValueRead.code: _codes(HostValueRead, ShapeFromData),
    **{code: _DATA_SIZED for code in _DATA_SIZED},
}
_STATUS_ORDER = ("unsupported", "cpu-fallback", "unknown", "restricted", "supported")
# Ops judged by another op's entry: the CPU kernel SDPA dispatches to on a graph captured on the CPU.
JUDGED_AS = {"aten::_scaled_dot_product_flash_attention_for_cpu": "aten::scaled_dot_product_attention",
             **EXPORT_ONLY}
_CHIPS = ("trn2", "trn3", "inf2")  # rules/hardware.toml [chips]
# An op of the inventory with its status per chip.
Judged = tuple[OpCount, Mapping[str, str]]


class Lines:
    """Source lines of the files findings point into, read once."""

    def __init__(self) -> None:
        self._files: dict[str, list[str]] = {}

    def get(self, path: str) -> list[str]:
        if path not in self._files:
            try:
                self._files[path] = python_lines(Path(path).read_text(encoding="utf-8", errors="replace"))
            except OSError:
                self._files[path] = []
        return self._files[path]


def shown_path(path: str, cwd: Path) -> str:
    """A path as reports show it: relative to `cwd` when it is under it, else as given."""
    try:
        return Path(path).resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return path


def op_status(op: str, decomposes_to: Sequence[str] | None, stack: str, ops: dict[str, OpSupport], *,
              operand_dtypes: Sequence[str] = (), over_limit: bool = False, overloads: Sequence[str] = ()) -> str:
    """An op's status on a stack: its own entry, else the worst of what it decomposes into, else unknown. An op that
    decomposes into nothing does no work. A restriction about dtypes holds only for the dtypes the graph called the
    op with (`operand_dtypes`, of its first tensor operand; unknown: it holds), one about an argument's limit only
    when a call exceeded it (`over_limit`). Each overload the graph called (`overloads`) is judged by its own key
    where ops.toml has one (`aten::rsub.Scalar`), else by the name's; the op's status is the worst of them."""
    if any(f"{op}.{overload}" in ops for overload in overloads):
        judged = [op_status(f"{op}.{o}" if f"{op}.{o}" in ops else op, decomposes_to, stack, ops,
                            operand_dtypes=operand_dtypes, over_limit=over_limit) for o in overloads]
        return min(judged, key=_STATUS_ORDER.index)
    entry = ops.get(JUDGED_AS.get(op, op))
    if (entry is None or stack not in entry.status) and stack == "xla" and op.endswith("_"):
        entry = ops.get(op.removesuffix("_"))  # functionalization makes `add_` an `add` (ops.toml `xla_views`)
    if entry is not None and stack in entry.status:
        status = entry.status[stack]
        narrowed = entry.restricted_dtypes
        if status == "restricted" and narrowed is not None and operand_dtypes and not over_limit and \
                not narrowed.dtypes & set(operand_dtypes):
            return "supported"
        return status
    if decomposes_to is not None and not decomposes_to:
        return "supported"
    if decomposes_to:
        parts = [op_status(part, None, stack, ops, operand_dtypes=operand_dtypes) for part in decomposes_to]
        return min(parts, key=_STATUS_ORDER.index)
    return "unknown"



def stack_of(chip: str, target: Target, sdk: str = "") -> str:
    knowledge = load()
    return target.stack if chip == target.chip else knowledge.default_stack(chip, sdk or knowledge.newest_sdk)


def build_report(outcome: TraceOutcome, settings: Settings, cwd: Path, static: bool) -> ScanResult:
    target = settings.target
    ops_data = load_ops()
    lines = Lines()
    model = outcome.model
    anchor = (model.build_place if model else None) or Place(model.source_file if model else "", 1)
    inventory: list[Judged] = []
    sdk = settings.sdk or load().newest_sdk
    releases = load_op_releases()
    for entry in outcome.ops:
        status = {}
        for chip in dict.fromkeys((*_CHIPS, target.chip)):
            stack = stack_of(chip, target, sdk)
            # A stack's statuses hold for its releases only (ops.toml [releases]), on a chip the release supports
            # (hardware.toml [[availability]]): outside them, unknown.
            supported = releases[stack].holds(sdk) and (chip == target.chip or load().available(chip, stack, sdk))
            status[chip] = op_status(entry.op, entry.decomposes_to, stack, ops_data,
                                     operand_dtypes=entry.operand_dtypes, over_limit=entry.over_limit,
                                     overloads=entry.overloads) if supported else "unknown"
        inventory.append((entry, status))
    findings = _graph_findings(outcome, settings, inventory, ops_data, anchor)
    findings += _shape_findings(outcome, anchor)
    made = [_finding(item, settings, cwd, lines) for item in findings]
    built = _fingerprinted(_dedupe([f for f in made if f is not None]), lines, cwd)
    ran = outcome.ran or RanCode()
    # The user owns the build file (or the --hf-config file), not the class's module: that is transformers' own.
    scope = Scope(cwd, {anchor.file})
    # The files never depend on the target: the anchor, the build file, and the files whose lines ran.
    scanned = scope.files(ran, [str(cwd / f.path) for f in built])
    read = scanned if static else [anchor.file] if anchor.file else []
    files = sorted({shown_path(p, cwd) for p in read} | {f.path for f in built})
    built = _merge_static(built, scanned, scope, ran, settings, cwd) if static else _join([], built)
    built = once_at_trace(built, settings.stack, cwd)
    result = ScanResult(target, files=len(files), findings=sorted(built, key=lambda f: f.sort_key))
    result.trace = TraceResult(
        graph=outcome.graph,
        steps=tuple(outcome.steps),
        ops=tuple(_op_status(entry, status, cwd) for entry, status in inventory),
        shapes=outcome.shapes,
        model=TracedModel(model.class_name, model.parameters, model.device, tuple(i.to_json() for i in model.inputs),
                          model.config_use_cache, model.traced_use_cache, model.dtype, model.quantization)
        if model else None,
        neuron_analyze=outcome.neuron_analyze,
        scope=StaticScope(tuple(shown_path(p, cwd) for p in scanned), ran.source) if static else None,
    )
    return result


def _op_status(entry: OpCount, status: Mapping[str, str], cwd: Path) -> OpStatus:
    place = entry.place
    where = f"{shown_path(place.file, cwd)}:{place.line}" if place else None
    return OpStatus(entry.op, entry.count, entry.dtypes, status, entry.decomposes_to, where)



# What the native stack's CPU-fallback statuses speak for, and what is known of torch.compile (rules/ops.toml,
# sources native_eager and native_compile): TorchNeuron's eager dispatch; the compiled path lowers whole graphs.
_FALLBACK_MODE = {"native": {
    "mode": " when run eagerly (`.to(\"neuron\")` without `torch.compile`)",
    "caveat": ("; under `torch.compile(backend=\"neuron\")`, which compiles whole graphs, whether this op compiles "
               "or runs on the CPU is not documented: a graph that fails to compile raises by default (Neuron 2.33+) "
               "or, with `TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0`, runs eagerly as above"),
}}


def _graph_findings(outcome: TraceOutcome, settings: Settings, inventory: list[Judged],
                    ops_data: dict[str, OpSupport], anchor: Place) -> list[TracedFinding]:
    chip, stack = settings.chip, settings.stack
    out = []
    named_ops = set()
    sort_fails = load_integer_sort().fails(settings.sdk or load().newest_sdk)
    for item in outcome.findings:
        if item.chips and chip not in item.chips:
            continue  # a dtype refused on other chips only (float8_e4m3fn is native on Trn3)
        if item.rule is IntegerSortInput and item.op != "aten::topk" and not sort_fails:
            continue  # an integer sort compiles at this release (ops.toml [integer_sort]); topk's refusal stays
        named_ops.add(item.op)
        message = item.message or item.rule.traced_message(item, stack)
        if item.rule is TracedUnsupportedOp and item.place is None:  # torch_neuronx.analyze's: at the op's line
            item = replace(item, place=next((e.place for e, _ in inventory if e.op == item.op), None))
        out.append(weigh_attention(item, outcome.model, message))
    unknown = []
    for entry, status in inventory:
        support = ops_data.get(entry.op)
        usage = f"`{entry.op}` ({entry.count}×, {', '.join(entry.dtypes) or 'no tensor inputs'})"
        if status[chip] == "unsupported" and entry.op not in named_ops:
            why = f": {support.restriction}" if support and support.restriction else ""
            code = f" ({support.error_code})" if support and support.error_code else ""
            out.append(TracedFinding(TracedUnsupportedOp, entry.place, TracedUnsupportedOp.format(
                usage=usage, chip=chip, stack=stack, why=why, error=code)))
        elif status[chip] == "cpu-fallback":
            out.append(TracedFinding(CpuFallbackOp, entry.place, CpuFallbackOp.format(
                usage=usage, chip=chip, stack=stack, **_FALLBACK_MODE.get(stack, {"mode": "", "caveat": ""}))))
        elif status[chip] == "unknown" and not custom_op(entry.op):  # a custom op is PC320's
            unknown.append(entry)
    if unknown:
        names = ", ".join(e.op.removeprefix("aten::") for e in unknown[:12])
        more = f" and {len(unknown) - 12} more" if len(unknown) > 12 else ""
        first = next((e.place for e in unknown if e.place), None) or anchor
        out.append(TracedFinding(UnknownOps, first, UnknownOps.format(count=len(unknown), stack=stack, names=names,
                                                                      more=more)))
    return out


def sequence_buckets(low: int, high: int) -> list[int]:
    """Powers of two from 128 (NxD Inference's automatic buckets) up to the longest sequence."""
    buckets, size = [], 128
    while size < high:
        if size >= low:
            buckets.append(size)
        size *= 2
    return [*buckets, high]


_SERVED = {"samples": "audio length", "height": "image height", "width": "image width", "batch": "batch size"}


def _shape_findings(outcome: TraceOutcome, anchor: Place) -> list[TracedFinding]:
    shapes = outcome.shapes
    if shapes is None or not shapes.ok or not anchor.file:
        return []
    limit = outcome.model.max_positions if outcome.model else 0
    out = []
    dynamic: list[str] = []
    pinned: list[tuple[Place, str]] = []
    unsure: list[str] = []
    # What to compile for, each piece of advice once however many axes share it (input_ids and attention_mask).
    advice: dict[str, list[str]] = {}
    for axis in shapes.axes:
        name = f"`{axis.input}` axis {axis.axis} ({axis.label}, traced at {axis.size})"
        if axis.dynamic is False:
            at = f"{axis.max}" if axis.probed is None else \
                f"{axis.max} (portcheck's probe made it {axis.probed}; the example has {axis.size})"
            short = f"`{axis.input}` axis {axis.axis} ({axis.label})"
            if axis.runs_at_other:  # export fixed it, but the model runs at another size: one graph per size
                dynamic.append(f"{short} is fixed by export at {at}, but the model also runs at {axis.other}")
                advice.setdefault(f"compile one graph per {_SERVED.get(axis.label, 'size')} you serve (or pad to "
                                  "one)", []).append(axis.label)
            elif axis.runs_at_other is False:
                pinned.append((axis.pinned_at or anchor, f"{short} runs only at {at}: at {axis.other}, a size "
                               f"portcheck's probe tried, it raised {axis.pinned_by}"))
            elif axis.other is not None:  # the run failed at the example's size too (meta): no evidence either way
                unsure.append(f"export fixed {short} at {at}; whether the model runs at another size could not be "
                              f"tried here (it did not run at its example's size either, as on the meta device)")
            else:
                pinned.append((anchor, f"export fixed {short} at {at}: the model's code pins it"))
        elif axis.dynamic:
            high = axis.max
            bound = f"up to {high}" if high else "with no upper bound export could see"
            dynamic.append(f"{name} stays dynamic, {bound}")
            if "seq" in axis.label:
                longest = min(x for x in (high, limit) if x) if (high or limit) else 0
                if longest:
                    source = "the model's position limit" if longest == limit else "export's bound"
                    text = (f"compile sequence buckets {', '.join(map(str, sequence_buckets(1, longest)))} "
                            f"({source}: {longest})")
                else:
                    text = "compile powers of two from 128 up to your longest sequence"
            else:
                text = f"compile one graph per {_SERVED.get(axis.label, 'batch size')} you serve (or pad to one)"
            advice.setdefault(text, []).append(axis.label)
    by_place: dict[Place, list[str]] = {}
    if unsure:
        out.append(TracedFinding(SpecialisedAxis, anchor, "; ".join(unsure) + ": the exported graph is for that "
                                 "size; compile one graph per size you serve", Severity.INFO))
    for place, pin in pinned:  # one finding a line: the axes it pins
        by_place.setdefault(place, []).append(pin)
    for place, pins in by_place.items():
        out.append(TracedFinding(SpecialisedAxis, place, SpecialisedAxis.format(axes="; ".join(pins))))
    if dynamic:
        todo = "; ".join(text if len(advice) == 1 else f"{'/'.join(dict.fromkeys(labels))}: {text}"
                         for text, labels in advice.items())
        out.append(TracedFinding(DynamicAxes, anchor, DynamicAxes.format(axes=f"{'; '.join(dynamic)}. {todo}")))
    return out


def _finding(item: TracedFinding, settings: Settings, cwd: Path, lines: Lines) -> Finding | None:
    code, place = item.rule.code, item.place
    if code not in settings.enabled or place is None or not place.file:
        return None
    path = shown_path(place.file, cwd)
    if code not in settings.enabled_for(path):
        return None
    info = item.rule.info()
    line = place.line
    text = lines.get(place.file)
    source_line = text[line - 1] if 0 < line <= len(text) else ""
    column = len(source_line) - len(source_line.lstrip()) + 1
    end_column = max(len(source_line.rstrip()) + 1, column)
    return Finding.of(info, item.message, path, line, column, line, end_column, severity=item.severity,
                      evidence=("traced",))


def _fingerprinted(findings: list[Finding], lines: Lines, cwd: Path) -> list[Finding]:
    by_path: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_path[f.path].append(f)
    # A display path is relative to cwd, or absolute outside it: joining it to cwd finds the file either way.
    return [g for path, group in by_path.items() for g in fingerprinted(group, lines.get(str(cwd / path)), path)]


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """One finding a code and line: the two SDPA calls of one line are one place to change."""
    grouped: dict[tuple[str, str, int], list[Finding]] = defaultdict(list)
    for f in findings:
        grouped[(f.code, f.path, f.line)].append(f)
    out = []
    for group in grouped.values():
        first = max(group, key=lambda f: f.severity)
        if len(group) > 1 and len({f.message for f in group}) == 1:
            first = replace(first, message=f"{first.message} ({len(group)} times in the graph)")
        out.append(first)
    return out


def _merge_static(traced: list[Finding], files: list[str], scope: Scope, ran: RanCode, settings: Settings,
                  cwd: Path) -> list[Finding]:
    """The static pass's findings on `files` joined with the traced ones: all of the user's files, and in other
    files (libraries) only the findings on lines that ran."""
    from portcheck.cache import Cache, CacheRefused, directory_for
    from portcheck.static.scan import run_jobs

    rules = load().rules
    # Rules whose trace reading is the graph's (PC401) report static evidence only where the graph confirms it.
    trace_only_default = {c for c, r in rules.items() if r.trace_default}
    jobs = [settings.job(shown_path(path, cwd), Path(path)) for path in files
            if path.endswith(".py") and Path(path).is_file()]
    locations = {job.path: job.location or "" for job in jobs}
    # Library files are large (modeling_utils.py is 280 kB) and never change: they come from `scan`'s results
    # cache when it has them, and two or more to analyse are worth a pool.
    try:
        directory = directory_for(None, False, settings.root)
    except CacheRefused:  # a cache that came with the files is not trusted: the trace goes on without one
        directory = None
    cache = Cache(directory if directory.is_absolute() else cwd / directory) if directory else None
    workers = None if sum(Path(location).stat().st_size for location in locations.values()) > 200_000 else 1
    scanned = run_jobs(jobs, settings, workers, cache)
    static = [f for f in scanned.findings if scope.owned(locations[f.path])
              or ran.ran(locations[f.path], f.line, f.end_line)]
    merged = _join(static, traced)
    return [f for f in merged if f.code not in trace_only_default or "traced" in f.evidence]


# The lines of a static finding a traced one may join it on: a construct's span, not a whole function's.
_SPAN_LINES = 40


def _join(static: list[Finding], traced: list[Finding]) -> list[Finding]:
    """One finding a construct: a traced finding joins the finding on its line that names the same problem (the
    same rule first), keeping both witnesses. A static finding that spans lines (a size read on one line and used
    on the next, an attention from its scores to its values) is on each of them."""
    merged: list[Finding] = list(static)
    by_line: dict[tuple[str, int], list[int]] = defaultdict(list)
    for index, f in enumerate(static):
        for line in range(f.line, min(f.end_line, f.line + _SPAN_LINES) + 1):
            by_line[(f.path, line)].append(index)
    for f in traced:
        same = _SAME_PROBLEM.get(f.code, frozenset({f.code}))
        here = by_line[(f.path, f.line)]
        match = next((i for i in here if merged[i].code == f.code), None)
        if match is None:
            match = next((i for i in here if merged[i].code in same), None)
        if match is None:
            here.append(len(merged))
            merged.append(f)
            continue
        old = merged[match]
        evidence = tuple(e for e in ("static", "traced") if e in old.evidence or e in f.evidence)
        merged[match] = replace(old, evidence=evidence, severity=max(old.severity, f.severity),
                                message=f"{old.message} [traced: {f.message}]")
    return merged
