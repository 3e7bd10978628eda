"""Plans beyond one instance: a model no single instance holds, placed on an UltraServer (instances joined by
NeuronLink) or on several instances over EFA, only where a documented stack splits a model that way for the task
and the SDK release (hardware.toml [[scale_out]]). Pure arithmetic on rules/ data: no torch here.

Tensor parallelism stays within each instance's NeuronLink. What crosses the link between instances is the entry's
`across`: tensor parallelism over an UltraServer's NeuronLink (every core holds 1 / (tp × instances) of the
weights), or FSDP / pipeline stages (each instance holds 1 / instances of the model state)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from portcheck.advise.model import ModelShape
from portcheck.advise.sizing import GIB, Memory, Workload, memory_at, weights_bytes
from portcheck.knowledge import ChipHardware, Hardware, Instance, ScaleOut

# The most instances an EFA plan tries (portcheck's bound: the docs name no limit).
MAX_INSTANCES = 64


@dataclass(frozen=True)
class Fleet:
    """Several instances holding one model copy, and the links between them."""

    layout: str  # "ultraserver" or "efa"
    name: str  # "Trn2 UltraServer", or "instances over EFA"
    instance: Instance
    count: int
    tp: int  # tensor parallelism within each instance
    memory: Memory
    across: str  # the parallelism that crosses the link between instances
    within: str  # the link between the chips of one instance
    between: str  # the link between the instances
    why: str
    missing: str  # what the docs do not say ("": nothing)
    source: str

    @property
    def tensor_across(self) -> bool:
        return self.across.startswith("tensor")

    @property
    def chips(self) -> int:
        return self.instance.chips * self.count

    def to_json(self) -> dict[str, Any]:
        return {"layout": self.layout, "name": self.name, "instance": self.instance.name,
                "instance_count": self.count, "tp_degree_per_instance": self.tp,
                "tp_degree_total": self.tp * self.count if self.tensor_across else self.tp,
                "chips": self.chips, "across_instances": self.across,
                "interconnect": {"within_instance": self.within, "between_instances": self.between},
                "documented": not self.missing, "missing": self.missing or None, "source": self.source}


def entries(hardware: Hardware, chip: str, task: str, stack: str, sdk: str, link: str) -> list[ScaleOut]:
    return [s for s in hardware.scale_out if s.chip in (chip, "*") and s.task == task and stack in s.stacks
            and s.link == link and s.releases.holds(sdk)]


def fleet_memory(model: ModelShape, work: Workload, chip: ChipHardware, lnc: int, tp: int, count: int,
                 hardware: Hardware, tensor_across: bool) -> Memory:
    """One core's share when `count` instances hold the model: tensor parallelism over all their cores, or each
    instance a 1 / count share of the model state (weights, KV cache, gradients, optimizer) at degree `tp`."""
    if tensor_across:
        return replace(memory_at(model, work, chip, lnc, tp * count, hardware), tp=tp)
    one = memory_at(model, work, chip, lnc, tp, hardware)
    return replace(one, weights=one.weights / count, kv_cache=one.kv_cache / count,
                   gradients=one.gradients / count, optimizer=one.optimizer / count)


def plan_fleet(model: ModelShape, work: Workload, chip: ChipHardware, lnc: int, hardware: Hardware, stack: str,
               sdk: str, total_tp: int | None = None, tp_within: int | None = None) -> tuple[Fleet | None, list[str]]:
    """The smallest documented multi-instance layout that holds the model (an UltraServer first, then instances over
    EFA), and, when there is none, what the docs lack, one sentence per link. `total_tp` (a --tp larger than one
    instance): only a layout whose tensor parallelism spans exactly that many cores over the instances' link.
    `tp_within` (a --tp one instance has, too small there): only a layout that splits the model between instances
    some other way (pipeline stages, FSDP), at that degree within each."""
    gaps: list[str] = []
    total_gib = weights_bytes(model, work.dtype) / GIB
    for link, candidates in (("ultraserver", _ultraservers(chip, hardware)), ("efa", _efa(chip, hardware))):
        if not candidates:
            if link == "efa":
                gaps.append(f"no {chip.name} instance has an EFA network in the Neuron docs")
            continue
        found = entries(hardware, chip.name, work.task, stack, sdk, link)
        documented = [s for s in found if s.supported]
        if not documented:
            over = "an UltraServer's NeuronLink" if link == "ultraserver" else "EFA"
            gaps.append(found[0].missing if found else
                        f"no documented {work.task} stack on {chip.name} splits one model across instances over {over}")
            continue
        entry = documented[0]
        if total_tp is not None and not entry.across.startswith("tensor"):
            gaps.append(f"--tp {total_tp}: {entry.across}, not tensor parallelism, crosses the link between "
                        f"{chip.name} instances over {link}")
            continue
        if tp_within is not None and entry.across.startswith("tensor"):
            continue
        for name, instance, count, between, source in candidates:
            cores = instance.chips * chip.cores_per_chip[lnc]
            tp = max(t for t in chip.tp_degrees[lnc] if t <= cores)
            if tp_within is not None:
                if tp_within > cores:
                    continue
                tp = tp_within
            if total_tp is not None and tp * count != total_tp:
                continue
            memory = fleet_memory(model, work, chip, lnc, tp, count, hardware, entry.across.startswith("tensor"))
            host_ok = not instance.host_memory_gib or instance.host_memory_gib * count >= total_gib
            if memory.fits and host_ok:
                return Fleet(link, name, instance, count, tp, memory, entry.across, instance.interconnect, between,
                             entry.why, entry.missing, f"{source}; {entry.source}"), gaps
        if total_tp is None:
            largest = candidates[-1]
            gaps.append(f"{largest[2]} × {largest[1].name} ({largest[0]}) do not hold it either")
        else:
            gaps.append(f"no {name_of(link)} of {chip.name} instances spans --tp {total_tp} and holds the model")
    return None, gaps


def name_of(link: str) -> str:
    return "UltraServer allocation" if link == "ultraserver" else "set of instances over EFA"


Candidate = tuple[str, Instance, int, str, str]  # name, instance, count, the link between them, source


def _ultraservers(chip: ChipHardware, hardware: Hardware) -> list[Candidate]:
    by_name = {i.name: i for i in hardware.instances}
    out = []
    for server in hardware.ultraservers:
        instance = by_name[server.instance]
        if instance.chip != chip.name:
            continue
        for count in sorted(c for c in server.allocations if c > 1):
            label = server.name if count == server.count else f"{count} of a {server.name}'s {server.count} instances"
            out.append((label, instance, count, server.interconnect, server.source))
    return out


def _efa(chip: ChipHardware, hardware: Hardware) -> list[Candidate]:
    """2, 4, 8, ... of the chip's largest instance with a documented EFA bandwidth."""
    networked = [i for i in hardware.instances if i.chip == chip.name and i.efa_gbps]
    if not networked:
        return []
    instance = max(networked, key=lambda i: (i.chips, i.efa_gbps))
    counts = [2 ** k for k in range(1, int(math.log2(MAX_INSTANCES)) + 1)]
    return [("instances over EFA", instance, n, f"EFA, {instance.efa_gbps:,.0f} Gbps per instance", instance.source)
            for n in counts]

