"""Memory per core at a tensor-parallel degree, the smallest degree that fits, and the instance that holds it.

Weights, KV cache and the runtime's micro-code are counted from documented sizes; activations and the runtime's
remaining buffers are portcheck's estimates, and the plan's reasons say which is which."""

from __future__ import annotations

import math
from dataclasses import dataclass

from portcheck.advise.model import ModelShape
from portcheck.knowledge import ChipHardware, Hardware, Instance

GIB = 2**30
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
# Mixed-precision Adam keeps per parameter: an fp32 master copy, two fp32 moments (ZeRO, Rajbhandari et al. 2020,
# §3.1: 12 bytes of optimizer state); an fp32 model needs no master copy.
OPTIMIZER_BYTES = {"fp32": 8, "bf16": 12, "fp16": 12, "fp8": 12}
# Scratchpad, DMA rings and collectives buffers are not sized by the docs: portcheck keeps this share of each
# core's memory for them.
RESERVE_SHARE = 0.10


@dataclass(frozen=True)
class Workload:
    task: str  # "inference" or "training"
    batch: int
    seq: int
    dtype: str


@dataclass(frozen=True)
class Memory:
    """GiB one core holds at degree `tp`."""

    tp: int
    weights: float
    kv_cache: float
    activations: float
    overhead: float
    budget: float
    gradients: float = 0.0
    optimizer: float = 0.0

    @property
    def per_core(self) -> float:
        return self.weights + self.kv_cache + self.activations + self.overhead + self.gradients + self.optimizer

    @property
    def fits(self) -> bool:
        return self.per_core <= self.budget

    def as_dict(self) -> dict[str, float]:
        out = {"weights_gib": _gib(self.weights), "kv_cache_gib": _gib(self.kv_cache),
               "activations_gib": _gib(self.activations), "overhead_gib": _gib(self.overhead),
               "per_core_gib": _gib(self.per_core), "budget_per_core_gib": _gib(self.budget)}
        if self.gradients or self.optimizer:
            out.update(gradients_gib=_gib(self.gradients), optimizer_gib=_gib(self.optimizer))
        return out


def _gib(value: float) -> float:
    return round(value, 3)


def weights_bytes(model: ModelShape, dtype: str) -> int:
    return model.params * DTYPE_BYTES[dtype]


def kv_heads_per_core(model: ModelShape, tp: int) -> int:
    """NxD Inference's GQA sharding: KV heads split evenly when tp divides them, replicated to one a core when
    they divide tp (REPLICATE_TO_TP_DEGREE), otherwise converted to multi-head attention with the query heads,
    padded to a multiple of tp (CONVERT_TO_MHA)."""
    kv = model.kv_heads or model.heads
    if kv % tp == 0:
        return kv // tp
    if tp % kv == 0:
        return 1
    return math.ceil(model.heads / tp)


def has_kv_cache(model: ModelShape, work: Workload) -> bool:
    """Decoders keep keys and values of every earlier token while they generate."""
    return work.task == "inference" and model.kind in ("decoder", "encoder-decoder") and model.is_transformer


def kv_cache_bytes(model: ModelShape, work: Workload, tp: int = 1) -> int:
    """layers × KV heads × head dim × sequence × batch × 2 (K and V) × bytes, with each core's share of the KV
    heads."""
    if not has_kv_cache(model, work):
        return 0
    return (model.layers * kv_heads_per_core(model, tp) * model.attention_head_dim * work.seq * work.batch * 2
            * DTYPE_BYTES[work.dtype])


def activation_bytes(model: ModelShape, work: Workload, tp: int = 1) -> int:
    """One core's live activations.

    Inference, transformer: the largest layer's live set — residual, normalised input, attention output and
    queries (4 × hidden), the MLP's two projections (2 × intermediate / tp) and the attention scores
    (heads / tp × sequence) — per token of batch × sequence. Training, transformer: Korthikanti et al. 2022
    (arXiv:2205.05198, §4, tensor parallelism without sequence parallelism), s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes
    per layer at 16 bits, every layer kept for the backward pass. Other models: the traced graph's largest set
    of live tensors, scaled from its example batch and float32 to the plan's."""
    size = DTYPE_BYTES[work.dtype]
    b, s = work.batch, work.seq
    if model.is_transformer:
        h, a = model.hidden, model.heads
        i = model.intermediate or 4 * h
        if work.task == "training":
            per_layer = s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp)) * size / 2
            return int(per_layer * model.layers)
        return int(b * s * (4 * h + 2 * math.ceil(i / tp) + math.ceil(a / tp) * s) * size)
    if model.peak_activation_bytes:
        scale = (b / (model.example_batch or 1)) * size / 4
        return int(model.peak_activation_bytes * scale / tp)
    return 0


def memory_at(model: ModelShape, work: Workload, chip: ChipHardware, lnc: int, tp: int,
              hardware: Hardware) -> Memory:
    budget = chip.memory_per_core_gib[lnc]
    physical_per_core = chip.physical_cores // chip.cores_per_chip[lnc]
    microcode = hardware.microcode_mib_per_physical_core * physical_per_core / 1024
    overhead = microcode + RESERVE_SHARE * budget
    weights = weights_bytes(model, work.dtype) / tp / GIB
    gradients = optimizer = 0.0
    if work.task == "training":
        gradients = weights
        optimizer = model.params * OPTIMIZER_BYTES[work.dtype] / tp / GIB
    return Memory(tp, weights, kv_cache_bytes(model, work, tp) / GIB, activation_bytes(model, work, tp) / GIB,
                  overhead, budget, gradients, optimizer)


def fitting(model: ModelShape, work: Workload, chip: ChipHardware, lnc: int,
            hardware: Hardware) -> list[tuple[Memory, Instance]]:
    """The supported degrees whose per-core share fits a core and that some instance holds, smallest first,
    with that share and the smallest such instance."""
    total_gib = weights_bytes(model, work.dtype) / GIB
    out = []
    for tp in degrees(chip, lnc, hardware):
        memory = memory_at(model, work, chip, lnc, tp, hardware)
        instance = choose_instance(chip, lnc, tp, total_gib, hardware) if memory.fits else None
        if instance is not None:
            out.append((memory, instance))
    return out


def degrees(chip: ChipHardware, lnc: int, hardware: Hardware) -> list[int]:
    """The tensor-parallel degrees the runtime supports on this chip, up to the cores of its largest instance."""
    largest = max(i.chips * chip.cores_per_chip[lnc] for i in hardware.instances if i.chip == chip.name)
    return [tp for tp in chip.tp_degrees[lnc] if tp <= largest]


def divides_heads(model: ModelShape, tp: int) -> bool:
    if not model.heads:
        return True
    kv = model.kv_heads or model.heads
    return model.heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


def padded_heads(model: ModelShape, tp: int) -> int:
    return math.ceil(model.heads / tp) * tp


def choose_instance(chip: ChipHardware, lnc: int, tp: int, weights_total_gib: float,
                    hardware: Hardware) -> Instance | None:
    """The smallest instance with enough chips for `tp` cores whose host memory holds the weights once while
    they load (an undocumented host memory is taken on trust, and the plan says so)."""
    chips = math.ceil(tp / chip.cores_per_chip[lnc])
    for instance in hardware.instances:
        if instance.chip != chip.name or instance.chips < chips:
            continue
        if instance.host_memory_gib and instance.host_memory_gib < weights_total_gib:
            continue
        return instance
    return None
