"""Memory per core at a tensor-parallel degree, the smallest degree that fits, and the instance that holds it.

Weights, KV cache and the runtime's micro-code are counted from documented sizes; activations and the runtime's
remaining buffers are portcheck's estimates, and the plan's reasons say which is which. A decoder is sized as the
serving stacks run it: context encoding a few sequences at a time, the flash-attention kernel where NxD Inference
selects it, the KV cache in its own dtype, model copies (dp) and attention data parallelism as plan dimensions."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from portcheck.advise.model import ModelShape
from portcheck.advise.quantization import attention_params, fp8_weight_bytes, mx_format, mx_weight_bytes
from portcheck.knowledge import ChipHardware, Hardware, Instance

GIB = 2**30
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
# Weight dtypes whose activations (and, unless asked, KV cache) stay bf16: fp8 and the microscaled formats.
QUANTISED = ("fp8", "mxfp4", "mxfp8")
# Mixed-precision Adam keeps per parameter: an fp32 master copy, two fp32 moments (ZeRO, Rajbhandari et al. 2020,
# §3.1: 12 bytes of optimizer state); an fp32 model needs no master copy.
OPTIMIZER_BYTES = {"fp32": 8, "bf16": 12, "fp16": 12, "fp8": 12}
# Scratchpad, DMA rings and collectives buffers are not sized by the docs: portcheck keeps this share of each
# core's memory for them.
RESERVE_SHARE = 0.10
# The flash kernel's working set per head: a 128-row query tile (the partition size) against a key tile of at most
# seq_tile_size (2048) positions, in fp32. portcheck's estimate of what replaces the score matrix.
FLASH_QUERY_TILE = 128
FLASH_KEY_TILE = 2048
# The throughput-oriented configuration doubles the batch per copy up to this many sequences (portcheck's bound).
MAX_THROUGHPUT_BATCH = 256


@dataclass(frozen=True)
class Workload:
    task: str  # "inference" or "training"
    batch: int  # sequences per model copy
    seq: int
    dtype: str  # the weights' dtype
    kv_dtype: str = ""  # the KV cache's ("": the compute dtype)
    context_batch: int = 1  # sequences a decoder's context encoding runs at once
    attention_dp: int = 1  # attention data parallelism inside the tensor-parallel group (decode only)
    dp: int = 1  # model copies on the instance
    # Training as NxD Training (the xla stack) runs it: sequence parallelism, selective activation checkpointing
    # (flash attention's scores never stored) and ZeRO-1 over the data-parallel copies.
    nxd_training: bool = False

    @property
    def compute_dtype(self) -> str:
        """Activations keep the model's 16-bit dtype when only the weights are quantised (fp8, mxfp4, mxfp8)."""
        return "bf16" if self.dtype in QUANTISED else self.dtype

    @property
    def cache_dtype(self) -> str:
        return self.kv_dtype or self.compute_dtype


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


def weights_bytes(model: ModelShape, dtype: str, tp: int = 0) -> float:
    """The weights in `dtype`; fp8 as NxD Inference's recipe quantises them (its bf16 modules at two bytes), mxfp4 /
    mxfp8 as vLLM Neuron's Trn3 recipes do (at tp ranks: MXFP8 keeps the MLPs in bf16 from 32 on)."""
    if dtype == "fp8" and model.is_transformer:
        return fp8_weight_bytes(model)
    if fmt := mx_format(dtype):
        return mx_weight_bytes(model, fmt, tp)
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
    """layers × KV heads × head dim × sequence × batch × 2 (K and V) × the cache dtype's bytes, with each core's
    share of the KV heads over the attention group (tp / attention-DP) and of the batch over attention-DP."""
    if not has_kv_cache(model, work):
        return 0
    group = max(tp // work.attention_dp, 1)
    batch = math.ceil(work.batch / work.attention_dp)
    return (model.layers * kv_heads_per_core(model, group) * model.attention_head_dim * work.seq * batch * 2
            * DTYPE_BYTES[work.cache_dtype])


def context_rows(model: ModelShape, work: Workload) -> int:
    """Sequences one forward pass holds: a serving decoder encodes its context `context_batch` sequences at a time
    (vLLM Neuron: one); an encoder or a vision model runs its whole batch."""
    if has_kv_cache(model, work):
        return max(1, min(work.context_batch, work.batch))
    return work.batch


def flash_attention(model: ModelShape, work: Workload, lnc: int) -> bool:
    """Whether NxD Inference's context encoding uses the flash-attention kernel at this sequence length (its
    largest bucket): at LNC=2 from 1024 tokens in multiples of 512 (or below 1024 in multiples of 256), at LNC=1
    from 4096 tokens. Only decoders served by NxD Inference / vLLM Neuron; everything else holds the scores."""
    if not has_kv_cache(model, work):
        return False
    s = work.seq
    if lnc > 1:
        return s % 512 == 0 if s >= 1024 else s % 256 == 0
    return s >= 4096


def activation_bytes(model: ModelShape, work: Workload, tp: int = 1, lnc: int = 1) -> int:
    """One core's live activations.

    Inference, transformer: the largest layer's live set in context encoding — residual, normalised input,
    attention output and queries (4 × hidden), the MLP's two projections (2 × intermediate / tp) per token of the
    context rows × sequence — plus the attention scores: heads / tp × sequence² per row without the flash kernel,
    its query × key tile (128 × up to 2048, fp32) per head with it; or one decode step of the whole batch if that
    is larger. Training, transformer, as NxD Training runs it (sequence parallelism with selective activation
    checkpointing): 34·s·b·h/t bytes per layer at 16 bits, the Neuron docs' figure; otherwise Korthikanti et al. 2022
    (arXiv:2205.05198, §4, tensor parallelism without sequence parallelism), s·b·h·(10 + 24/t + 5·a·s/(h·t)); every
    layer kept for the backward pass (a pipeline's first stage holds as many microbatches as there are stages, so
    as many layers). Other models: the traced graph's largest set of live tensors, scaled from its example batch and
    float32 to the plan's."""
    size = DTYPE_BYTES[work.compute_dtype]
    b, s = work.batch, work.seq
    if model.is_transformer:
        h, a = model.hidden, model.heads
        i = model.intermediate or 4 * h
        heads = math.ceil(a / tp)
        if work.task == "training" and work.nxd_training:
            per_layer = 34 * s * b * h / tp * size / 2
            return int(per_layer * model.layers)
        if work.task == "training":
            per_layer = s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp)) * size / 2
            return int(per_layer * model.layers)
        rows = context_rows(model, work)
        per_token = 4 * h + 2 * math.ceil(i / tp)
        if flash_attention(model, work, lnc):
            scores = rows * heads * FLASH_QUERY_TILE * min(s, FLASH_KEY_TILE) * 4
        else:
            scores = rows * heads * s * s * size
        prefill = rows * s * per_token * size + scores
        decode = (b * per_token + b * heads * s) * size if has_kv_cache(model, work) else 0
        return int(max(prefill, decode, tower_activation_bytes(model, work, tp)))
    if model.peak_activation_bytes:
        scale = (b / (model.example_batch or 1)) * size / 4
        return int(model.peak_activation_bytes * scale / tp)
    return 0


def tower_activation_bytes(model: ModelShape, work: Workload, tp: int = 1) -> int:
    """A multimodal decoder's vision tower encodes the images of the context rows before the decoder's context
    encoding (one image each, (image size / patch size)² + 1 tokens, portcheck's assumption): its largest layer's
    live set as for an encoder, the full score matrix included. 0 where the config gives no fixed image size
    (Qwen2-VL's dynamic resolution) or no tower."""
    if not (model.tower == "vision" and model.image_tokens and model.tower_hidden and model.tower_heads):
        return 0
    size = DTYPE_BYTES[work.compute_dtype]
    rows, n, h = context_rows(model, work), model.image_tokens, model.tower_hidden
    i = model.tower_intermediate or 4 * h
    per_token = 4 * h + 2 * math.ceil(i / tp)
    return int(rows * (n * per_token + math.ceil(model.tower_heads / tp) * n * n) * size)


def tower_reason(model: ModelShape) -> str:
    """What the plan says of a multimodal decoder's encoder tower."""
    what = f"a {model.tower} tower ({model.tower_layers} layers, hidden {model.tower_hidden}) feeds the decoder"
    if tower_activation_bytes(model, Workload("inference", 1, 1, "bf16")):
        return (f"{what}: it encodes one image of {model.image_tokens} tokens per context row first, sized as an "
                "encoder layer with its full score matrix; the larger of it and the decoder's context encoding counts")
    return f"{what}: its activations are not sized (no fixed image size in the config); its weights are counted"


def weight_bytes_per_core(model: ModelShape, work: Workload, tp: int) -> float:
    """The weights over tp; with attention data parallelism portcheck counts the attention projections split over
    the attention group only (tp / attention-DP), the larger of the layouts the docs describe."""
    total = weights_bytes(model, work.dtype, tp)
    if work.attention_dp <= 1 or not model.is_transformer:
        return total / tp
    fmt = mx_format(work.dtype)
    per_value = (fmt.bytes_per_value if "self_attn" in fmt.quantises else 2) if fmt else \
        (2 if work.dtype == "fp8" else DTYPE_BYTES[work.dtype])
    attention = min(attention_params(model), model.params) * per_value
    return (total - attention) / tp + attention / max(tp // work.attention_dp, 1)


def memory_at(model: ModelShape, work: Workload, chip: ChipHardware, lnc: int, tp: int,
              hardware: Hardware) -> Memory:
    budget = chip.memory_per_core_gib[lnc]
    physical_per_core = chip.physical_cores // chip.cores_per_chip[lnc]
    microcode = hardware.microcode_mib_per_physical_core * physical_per_core / 1024
    overhead = microcode + RESERVE_SHARE * budget
    weights = weight_bytes_per_core(model, work, tp) / GIB
    gradients = optimizer = 0.0
    if work.task == "training":
        gradients = weights
        zero1 = work.dp if work.nxd_training else 1  # ZeRO-1: the optimizer state split over the copies
        optimizer = model.params * OPTIMIZER_BYTES[work.dtype] / tp / zero1 / GIB
    return Memory(tp, weights, kv_cache_bytes(model, work, tp) / GIB,
                  activation_bytes(model, work, tp, lnc) / GIB, overhead, budget, gradients, optimizer)


def fitting(model: ModelShape, work: Workload, chip: ChipHardware, lnc: int,
            hardware: Hardware) -> list[tuple[Memory, Instance]]:
    """The supported degrees whose per-core share fits a core and whose dp copies some instance holds, smallest
    first, with that share and the smallest such instance."""
    total_gib = weights_bytes(model, work.dtype) / GIB
    out = []
    for tp in degrees(chip, lnc, hardware):
        if tp % work.attention_dp:
            continue
        memory = memory_at(model, work, chip, lnc, tp, hardware)
        instance = choose_instance(chip, lnc, tp * work.dp, total_gib, hardware) if memory.fits else None
        if instance is not None:
            out.append((memory, instance))
    return out


@dataclass(frozen=True)
class Throughput:
    """The throughput-oriented configuration next to the minimum: the same instance filled with copies of the
    minimum's degree, each with the largest batch that still fits."""

    tp: int
    dp: int
    batch: int
    memory: Memory
    instance: Instance

    def to_json(self) -> dict[str, object]:
        return {"tp_degree": self.tp, "dp": self.dp, "batch": self.batch, "instance": self.instance.name,
                "sequences_in_flight": self.dp * self.batch, "per_core_gib": round(self.memory.per_core, 3),
                "budget_per_core_gib": self.memory.budget}


def throughput(model: ModelShape, work: Workload, chip: ChipHardware, lnc: int, tp: int, instance: Instance,
               hardware: Hardware) -> Throughput:
    """Copies of degree `tp` over the instance's cores (DP × TP up to its cores), and the batch per copy doubled
    from the plan's while it fits, up to MAX_THROUGHPUT_BATCH."""
    dp = max(instance.chips * chip.cores_per_chip[lnc] // tp, 1)
    batch = work.batch
    memory = memory_at(model, work, chip, lnc, tp, hardware)
    while batch * 2 <= MAX_THROUGHPUT_BATCH:
        bigger = memory_at(model, replace(work, batch=batch * 2), chip, lnc, tp, hardware)
        if not bigger.fits:
            break
        batch, memory = batch * 2, bigger
    return Throughput(tp, dp, batch, memory, instance)


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
