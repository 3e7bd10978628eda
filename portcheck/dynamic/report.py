"""Parent side: turn the child's raw result into findings (with messages for the target), the op inventory
with each op's Neuron status, and merge them with the static pass's findings on the same files."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from portcheck.config import Settings
from portcheck.findings import Finding, ScanResult, Severity, Target, fingerprinted
from portcheck.knowledge import OpSupport, load, load_ops

# A traced finding joins a static one at the same line when the static rule names the same problem.
_SAME_PROBLEM = {
    "PC208": frozenset({"PC208", "PC209", "PC701"}),
    "PC701": frozenset({"PC701", "PC209"}),
    "PC210": frozenset({"PC201", "PC202", "PC203", "PC204", "PC205", "PC206", "PC207", "PC209", "PC210"}),
}
_STATUS_ORDER = ("unsupported", "cpu-fallback", "unknown", "restricted", "supported")
_CHIPS = ("trn2", "inf2")


class Lines:
    """Source lines of the files findings point into, read once."""

    def __init__(self) -> None:
        self._files: dict[str, list[str]] = {}

    def get(self, path: str) -> list[str]:
        if path not in self._files:
            try:
                self._files[path] = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                self._files[path] = []
        return self._files[path]


def display_path(path: str, cwd: Path) -> str:
    try:
        return Path(path).resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return path


def op_status(op: str, decomposes_to: list[str] | None, stack: str, ops: dict[str, OpSupport]) -> str:
    """An op's status on a stack: its own entry, else the worst of what it decomposes into, else unknown."""
    entry = ops.get(op)
    if entry is not None and stack in entry.status:
        return entry.status[stack]
    if decomposes_to:
        parts = [op_status(part, None, stack, ops) for part in decomposes_to]
        return min(parts, key=_STATUS_ORDER.index)
    return "unknown"


def stack_of(chip: str, target: Target) -> str:
    return target.stack if chip == target.chip else load().chips[chip].default_stack


def build_report(raw: dict[str, Any], settings: Settings, cwd: Path, static: bool) -> ScanResult:
    target = Target(settings.chip, settings.stack)
    ops_data = load_ops()
    lines = Lines()
    model = raw.get("model") or {}
    anchor = model.get("build_place") or {"file": model.get("source_file") or "", "line": 1}
    inventory = []
    for entry in raw.get("ops", []):
        status = {chip: op_status(entry["op"], entry.get("decomposes_to"), stack_of(chip, target), ops_data)
                  for chip in dict.fromkeys((*_CHIPS, target.chip))}
        inventory.append({**entry, "status": status})
    findings = _graph_findings(raw, settings, inventory, ops_data, anchor)
    findings += _shape_findings(raw, settings, anchor)
    made = [_finding(item, settings, cwd, lines) for item in findings]
    built = _fingerprinted(_dedupe([f for f in made if f is not None]), lines, cwd)
    files = sorted({f.path for f in built} | ({display_path(anchor["file"], cwd)} if anchor["file"] else set()))
    if static:
        built = _merge_static(built, files, settings, cwd)
    result = ScanResult(target, files=len(files), findings=sorted(built, key=lambda f: f.sort_key))
    result.trace = {
        "graph": {**(raw.get("graph") or {}), "steps": raw.get("steps", [])},
        "ops": [_op_dict(e, cwd) for e in inventory],
        "shapes": raw.get("shapes"),
        "model": {k: v for k, v in model.items() if k in ("class", "parameters", "device")},
        "neuron_analyze": raw.get("neuron_analyze"),
    }
    return result


def _op_dict(entry: dict[str, Any], cwd: Path) -> dict[str, Any]:
    place = entry.get("place")
    where = f"{display_path(place['file'], cwd)}:{place['line']}" if place else None
    return {"op": entry["op"], "count": entry["count"], "dtypes": entry["dtypes"], "status": entry["status"],
            "decomposes_to": entry.get("decomposes_to"), "first_at": where}


def _graph_findings(raw: dict[str, Any], settings: Settings, inventory: list[dict[str, Any]],
                    ops_data: dict[str, OpSupport], anchor: dict[str, Any]) -> list[dict[str, Any]]:
    chip, stack = settings.chip, settings.stack
    out = []
    named_ops = set()
    for item in raw.get("findings", []):
        detail = item.get("detail") or {}
        named_ops.add(detail.get("op"))
        message, severity = _message(item["code"], item.get("message", ""), detail, stack)
        if item["code"] == "PC316" and detail.get("kind") == "analyze":
            placed = next((e.get("place") for e in inventory if e["op"] == detail.get("op")), None)
            item = {**item, "place": item.get("place") or placed}
        out.append({**item, "message": message, "severity": severity or detail.get("severity")})
    unknown = []
    for entry in inventory:
        status = entry["status"][chip]
        support = ops_data.get(entry["op"])
        usage = f"`{entry['op']}` ({entry['count']}×, {', '.join(entry['dtypes']) or 'no tensor inputs'})"
        if status == "unsupported" and entry["op"] not in named_ops:
            why = f": {support.restriction}" if support and support.restriction else ""
            code = f" ({support.error_code})" if support and support.error_code else ""
            out.append({"code": "PC316", "place": entry.get("place"), "message":
                        f"{usage} is unsupported on {chip} ({stack} stack){why}{code}"})
        elif status == "cpu-fallback":
            out.append({"code": "PC317", "place": entry.get("place"), "message":
                        f"{usage} runs on the host CPU on {chip} ({stack} stack), with copies to and from the "
                        "device"})
        elif status == "unknown":
            unknown.append(entry)
    if unknown:
        names = ", ".join(e["op"].removeprefix("aten::") for e in unknown[:12])
        more = f" and {len(unknown) - 12} more" if len(unknown) > 12 else ""
        first = next((e.get("place") for e in unknown if e.get("place")), None) or anchor
        out.append({"code": "PC318", "place": first, "message":
                    f"{len(unknown)} ATen ops in the graph have no source on {stack}-stack support in "
                    f"rules/ops.toml: {names}{more}; they are unknown, not supported: check them with "
                    "`torch_neuronx.analyze` on a Neuron host (the JSON report lists each with its first line)"})
    return out


def _kernel_advice(detail: dict[str, Any], stack: str) -> str:
    head_dim, seq = detail.get("head_dim"), detail.get("seq_q")
    if isinstance(head_dim, int) and head_dim > 128:
        return f"head_dim {head_dim} is above the 128 the NKI attention kernels take, so it stays unfused"
    kernel = ("the NKI Library's `attention_cte` (prefill) in a `@nki.jit` op" if stack == "native" else
              "NxD Inference's `attn_kernel_enabled=True` or `neuronxcc.nki.kernels.attention.flash_fwd`")
    advice = f"a fused NKI kernel fits (head_dim {head_dim} <= 128): {kernel}"
    if isinstance(seq, int) and seq % 2048:
        advice += f"; NxD's training flash attention needs a sequence that is a multiple of 2048 (this is {seq})"
    return advice


def _shape_text(detail: dict[str, Any]) -> str:
    return (f"{detail.get('heads')} heads, head_dim {detail.get('head_dim')}, "
            f"query × key {detail.get('seq_q')} × {detail.get('seq_k')}")


def _message(code: str, given: str, detail: dict[str, Any], stack: str) -> tuple[str, str | None]:
    """The message for a traced finding (the child sends facts; words for the target are chosen here) and a
    severity other than the rule's, where this occurrence has one."""
    if given:
        return given, None
    if code == "PC403":
        return (f"`scaled_dot_product_attention` ({_shape_text(detail)}): the Neuron compiler takes it as "
                f"PyTorch ops; {_kernel_advice(detail, stack)}"), None
    if code == "PC401":
        return (f"hand-written attention in the graph (matmul → softmax → matmul; {_shape_text(detail)}): it "
                f"builds the whole {detail.get('seq_q')} × {detail.get('seq_k')} score matrix per head; use "
                f"`F.scaled_dot_product_attention`, and for long sequences {_kernel_advice(detail, stack)}",
                "warning")
    if code == "PC208":
        return ("torch.export stopped here: a Python decision depends on a tensor's value "
                f"({detail.get('reason', '')}); Neuron compiles one static graph, so compute both outcomes and "
                "select with `torch.where`, or move the decision out of forward"), None
    if code == "PC720":
        return (f"graph break: {detail.get('reason', '')}; each break cuts the Neuron graph in two "
                "(torch.compile) and `torch_neuronx.trace` freezes it to the example's values"), None
    if code == "PC721":
        return (f"torch.export could not capture the model whole here: {detail.get('reason', '')}"), None
    if code == "PC316":
        where = f" (failed in {detail['failure_at']})" if detail.get("failure_at") else ""
        return f"`torch_neuronx.analyze` reports `{detail.get('op')}` as unsupported{where}", None
    return f"{code} in the traced graph", None


def sequence_buckets(low: int, high: int) -> list[int]:
    """Powers of two from 128 (NxD Inference's automatic buckets) up to the longest sequence."""
    buckets, size = [], 128
    while size < high:
        if size >= low:
            buckets.append(size)
        size *= 2
    return [*buckets, high]


def _shape_findings(raw: dict[str, Any], settings: Settings, anchor: dict[str, Any]) -> list[dict[str, Any]]:
    shapes = raw.get("shapes") or {}
    if not shapes.get("ok") or not anchor.get("file"):
        return []
    limit = (raw.get("model") or {}).get("max_positions") or 0
    out = []
    dynamic, pinned = [], []
    for axis in shapes.get("axes", []):
        name = f"`{axis['input']}` axis {axis['axis']} ({axis['label']}, traced at {axis['size']})"
        if axis.get("dynamic") is False:
            pinned.append(f"{name} to {axis['max']}")
        elif axis.get("dynamic"):
            high = axis.get("max")
            bound = f"up to {high}" if high else "with no upper bound export could see"
            text = f"{name} stays dynamic, {bound}"
            if "seq" in axis["label"]:
                longest = min(x for x in (high, limit) if x) if (high or limit) else 0
                if longest:
                    source = "the model's position limit" if longest == limit else "export's bound"
                    text += (f"; compile sequence buckets {', '.join(map(str, sequence_buckets(1, longest)))} "
                             f"({source}: {longest})")
                else:
                    text += "; compile powers of two from 128 up to your longest sequence"
            else:
                text += "; compile one graph per batch size you serve (or pad to one)"
            dynamic.append(text)
    if pinned:
        out.append({"code": "PC212", "place": anchor, "message":
                    f"export fixed {', '.join(pinned)}: the model's code pins these sizes, so it compiles for "
                    "them only and cannot be bucketed"})
    if dynamic:
        out.append({"code": "PC211", "place": anchor, "message":
                    "Neuron compiles static shapes: " + "; ".join(dynamic)})
    return out


def _finding(item: dict[str, Any], settings: Settings, cwd: Path, lines: Lines) -> Finding | None:
    code = item["code"]
    info = load().rules.get(code)
    place = item.get("place")
    if info is None or code not in settings.enabled or not place or not place.get("file"):
        return None
    path = display_path(place["file"], cwd)
    if code not in settings.enabled_for(path):
        return None
    line = int(place.get("line") or 1)
    text = lines.get(place["file"])
    source_line = text[line - 1] if 0 < line <= len(text) else ""
    column = len(source_line) - len(source_line.lstrip()) + 1
    end_column = max(len(source_line.rstrip()) + 1, column)
    severity = Severity.parse(item["severity"]) if item.get("severity") else info.severity
    return Finding(code, info.name, info.category, severity, item["message"], path, line, column, line,
                   end_column, evidence=("traced",))


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


def _merge_static(traced: list[Finding], files: list[str], settings: Settings, cwd: Path) -> list[Finding]:
    from portcheck.static.engine import analyse_file

    rules = load().rules
    # Rules on by default only in trace (PC401) report static evidence only where the graph confirms it.
    trace_only_default = {c for c, r in rules.items() if r.trace_default and not r.default}
    static: list[Finding] = []
    for path in files:
        location = cwd / path
        if location.suffix != ".py" or not location.is_file():
            continue
        result = analyse_file(settings.job(path, location))
        static += result.findings
    by_line: dict[tuple[str, int], list[int]] = defaultdict(list)
    for index, f in enumerate(static):
        by_line[(f.path, f.line)].append(index)
    merged: list[Finding] = list(static)
    for f in traced:
        same = _SAME_PROBLEM.get(f.code, frozenset({f.code}))
        match = next((i for i in by_line.get((f.path, f.line), []) if merged[i].code in same), None)
        if match is None:
            merged.append(f)
            continue
        old = merged[match]
        merged[match] = replace(old, evidence=("static", "traced"), severity=max(old.severity, f.severity),
                                message=f"{old.message} [traced: {f.message}]")
    return [f for f in merged if f.code not in trace_only_default or "traced" in f.evidence]
