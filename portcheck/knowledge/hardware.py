"""rules/hardware.toml: per chip its schedulable cores and memory per core at each LNC setting, the instance
shapes, how instances join (UltraServers, EFA), and the sources of the sizing figures."""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields

from portcheck.knowledge.files import citations, read
from portcheck.knowledge.sdk import known_releases
from portcheck.releases import KnowledgeError, Range, read_range


@dataclass(frozen=True)
class ChipHardware:
    """One chip's schedulable cores and the device memory each may use, per logical-NeuronCore setting."""

    name: str
    neuron_core: str
    physical_cores: int
    hbm_gib: float
    lnc: tuple[int, ...]
    default_lnc: int
    cores_per_chip: dict[int, int]
    memory_per_core_gib: dict[int, float]
    tp_degrees: dict[int, tuple[int, ...]]
    source: str
    tp_source: str = ""  # where the chip's degrees come from, when not [sizing].tp_degrees (trn3)


@dataclass(frozen=True)
class Instance:
    name: str
    chip: str
    chips: int
    vcpus: int  # 0: not documented
    host_memory_gib: float  # 0: not documented
    source: str
    efa_gbps: float = 0.0  # 0: not documented
    interconnect: str = ""  # the link between its chips


@dataclass(frozen=True)
class SizingSources:
    """Where a plan's sizing comes from (hardware.toml [sizing]): each the `source` of one of its reasons."""

    tp_degrees: str
    kv_cache: str
    training_activations: str
    training_optimizer: str
    fp8_weights: str
    compile_host: str
    context_encoding: str
    flash_attention: str
    kv_cache_dtype: str
    data_parallel: str
    attention_dp: str


@dataclass(frozen=True)
class Hardware:
    chips: dict[str, ChipHardware]
    instances: tuple[Instance, ...]  # smallest first, per chip
    microcode_mib_per_physical_core: float
    runtime_source: str
    sizing: SizingSources
    ultraservers: tuple[UltraServer, ...] = ()
    scale_out: tuple[ScaleOut, ...] = ()


@dataclass(frozen=True)
class UltraServer:
    """Instances joined by NeuronLink into one domain (hardware.toml [[ultraserver]])."""

    name: str
    instance: str
    count: int
    allocations: tuple[int, ...]
    interconnect: str
    source: str


@dataclass(frozen=True)
class ScaleOut:
    """A documented (or, with supported false, a missing) way to split one model across instances."""

    chip: str  # "*": every chip
    task: str
    stacks: tuple[str, ...]
    link: str  # "ultraserver" or "efa"
    supported: bool
    across: str
    why: str
    missing: str
    releases: Range
    source: str


@functools.cache
def load_hardware() -> Hardware:
    """rules/hardware.toml, read only by `advise`."""
    data = read("hardware.toml")
    chips = {}
    for name, c in data["chips"].items():
        chip = ChipHardware(
            name, c["neuron_core"], c["physical_cores"], float(c["hbm_gib"]), tuple(c["lnc"]), c["default_lnc"],
            {int(k): int(v) for k, v in c["cores_per_chip"].items()},
            {int(k): float(v) for k, v in c["memory_per_core_gib"].items()},
            {int(k): tuple(v) for k, v in c["tp_degrees"].items()}, c["source"], c.get("tp_source", ""))
        if not set(chip.lnc) == set(chip.cores_per_chip) == set(chip.memory_per_core_gib) == set(chip.tp_degrees) \
                or chip.default_lnc not in chip.lnc or not chip.source:
            raise KnowledgeError(f"hardware.toml: chip {name} needs cores and memory for each of its LNC values")
        chips[name] = chip
    instances = tuple(sorted((Instance(i["name"], i["chip"], i["chips"], i["vcpus"], float(i["host_memory_gib"]),
                                       i["source"], float(i.get("efa_gbps", 0)), i.get("interconnect", ""))
                              for i in data["instance"]),
                             key=lambda i: (i.chip, i.chips, i.host_memory_gib, i.name)))
    for instance in instances:
        if instance.chip not in chips or instance.chips < 1 or not instance.source:
            raise KnowledgeError(f"hardware.toml: instance {instance.name} names an unknown chip or no source")
    runtime = data["runtime"]
    sizing = SizingSources(**citations("hardware.toml", "sizing", data.get("sizing"),
                                      {f.name for f in fields(SizingSources)}))
    names = {i.name for i in instances}
    ultraservers = tuple(UltraServer(u["name"], u["instance"], u["count"], tuple(u["allocations"]), u["interconnect"],
                                     u["source"]) for u in data.get("ultraserver", []))
    if any(u.instance not in names or u.count < 2 or not u.source for u in ultraservers):
        raise KnowledgeError("hardware.toml: an ultraserver names an unknown instance, fewer than two, or no source")
    known = known_releases()
    scale_out = tuple(ScaleOut(s["chip"], s["task"], tuple(s["stacks"]), s["link"], s.get("supported", True),
                               s["across"], s["why"], s["missing"],
                               read_range(f"hardware.toml: scale_out {s['chip']} {s['task']}", s, known), s["source"])
                      for s in data.get("scale_out", []))
    if any(s.link not in ("ultraserver", "efa") or s.task not in ("inference", "training") for s in scale_out):
        raise KnowledgeError("hardware.toml: a scale_out entry needs link ultraserver or efa and a task")
    return Hardware(chips, instances, float(runtime["microcode_mib_per_physical_core"]), runtime["source"], sizing,
                    ultraservers, scale_out)
