"""Make the plan: memory per core, the tensor-parallel degree, cores, chips, instance, compiler flags,
environment, buckets, each choice with its reason and source, and the findings (PC8xx) when something does not
fit. Pure arithmetic on rules/ data and the model's numbers: no torch here."""

from __future__ import annotations

import math
from dataclasses import replace

from portcheck.advise.cost import CostOptions, check, plan_cost
from portcheck.advise.flags import choose_buckets, compiler_settings
from portcheck.advise.fleet import Fleet, plan_fleet
from portcheck.advise.model import ModelShape
from portcheck.advise.quantization import fp8_reason, mx_format, mx_note, mx_reason
from portcheck.advise.rules import FitsNoInstance, HeadsNotDivisible, NeedsTensorParallelism, TensorParallelDegree
from portcheck.advise.serving import choose_serving
from portcheck.advise.sizing import (
    GIB,
    QUANTISED,
    RESERVE_SHARE,
    Memory,
    Workload,
    choose_instance,
    context_rows,
    degrees,
    divides_heads,
    fitting,
    flash_attention,
    has_kv_cache,
    memory_at,
    padded_heads,
    throughput,
    tower_reason,
    weights_bytes,
)
from portcheck.advise.values import PORTCHECK, AdviseOptions, LncAlternative, Plan, PlanFinding
from portcheck.errors import UserError
from portcheck.knowledge import ChipHardware, Hardware, load, load_claims, load_compiler, load_hardware

DTYPE_NAMES = {"fp32": "4 bytes (fp32)", "bf16": "2 bytes (bf16)", "fp16": "2 bytes (fp16)", "fp8": "1 byte (fp8)",
               "mxfp4": "0.53125 bytes (mxfp4)", "mxfp8": "1.03125 bytes (mxfp8)"}
COMPILE_HOST_FACTOR = 2


class PlanError(UserError):
    """No plan can be made for this request (training on inf2): one line for the user."""


def plan_refusal(options: AdviseOptions) -> str | None:
    """Why no release-supported stack runs the task on the chip at the chosen SDK release (targets.toml
    [[availability]]): training on xla from 2.30, trn2 + xla from 2.34."""
    if options.task == "training" and options.chip == "inf2":
        return ("training is not planned for inf2: the Neuron docs put Inferentia2 under inference and training "
                "under Trainium (NxD Training covers Trn1/Trn2 only); use --target trn2")
    knowledge = load()
    return knowledge.refusal(options.chip, options.stack, options.sdk or knowledge.newest_sdk, options.task)


def release_reasons(plan: Plan, sdk: str) -> None:
    """What the chosen release says of the plan's stack (maintenance, beta) and which serving paths it has."""
    knowledge = load()
    entry = knowledge.available(plan.chip, plan.stack, sdk, plan.task)
    if entry is not None and entry.note:
        plan.reason("sdk", f"Neuron {sdk}, {plan.stack} stack on {plan.chip}: {entry.note}", entry.source)
    if plan.task == "inference":
        for path in knowledge.serving_paths(plan.chip, sdk):
            plan.reason("serving", f"Neuron {sdk} on {plan.chip}: {path.name}", path.source)


def make_plan(model: ModelShape, options: AdviseOptions) -> Plan:
    hardware = load_hardware()
    chip = hardware.chips[options.chip]
    if refusal := plan_refusal(options):
        raise PlanError(refusal)
    check(options.cost, options.task)
    lnc = options.lnc or chip.default_lnc
    if lnc not in chip.lnc:
        raise PlanError(f"--lnc {lnc} is not available on {chip.name} (allowed: "
                        f"{', '.join(map(str, chip.lnc))})")
    seq, seq_why = _sequence(model, options)
    nxd_training = options.task == "training" and options.stack == "xla"
    fmt = mx_format(options.dtype)
    if fmt and options.task == "training":
        raise PlanError(f"--dtype {fmt.name} is an inference recipe (vLLM Neuron on Trn3): train in bf16")
    dequantised = bool(fmt and options.chip not in fmt.chips)  # runs as bf16 where the chip has no MX kernels
    work = Workload(options.task, options.batch, seq, "bf16" if dequantised else options.dtype, options.kv_dtype,
                    options.context_batch, options.attention_dp, options.dp, nxd_training=nxd_training)
    _check_parallelism(model, work, options)
    plan = Plan(options.chip, options.stack, options.task, work, model, lnc=lnc if len(chip.lnc) > 1 else None)
    if fmt:
        plan.reason("quantization", mx_note(fmt, options.chip, model.hf_model_type), fmt.source)
    plan.reason("workload", f"batch {work.batch}, sequence {seq} ({seq_why}), {work.dtype} weights, "
                f"{work.task}", "command line and model")
    release_reasons(plan, options.sdk or load().newest_sdk)
    _size(plan, chip, lnc, options, hardware)
    compiler_settings(plan, options)
    choose_buckets(plan, options)
    load_compiler().check(plan.compiler_args, plan.env, options.chip, options.stack)
    choose_serving(plan, options)
    _cost(plan, options.cost)
    return plan


def _cost(plan: Plan, options: CostOptions) -> None:
    """Price × instances per hour; per million tokens at the throughput the user measured; against a GPU."""
    if plan.instance is None:
        return
    plan.cost = cost = plan_cost(plan.instance.name, plan.instance_count, options)
    each = cost.price.usd_per_hour
    if each is None:
        plan.reason("cost", cost.price.origin, "rules/prices.toml")
        return
    where = [f"region: {cost.price.region}" if cost.price.region else "", f"as of {cost.price.date}" if
             cost.price.date else ""]
    origin = "; ".join(x for x in (cost.price.origin, *where) if x)
    plan.reason("cost", f"${each:,.2f} per {plan.instance.name} hour ({origin}) × {cost.count} = "
                f"${cost.usd_per_hour:,.2f} per hour", cost.price.source or cost.price.origin)
    if cost.usd_per_million_tokens is not None:
        plan.reason("usd_per_million_tokens", f"${cost.usd_per_hour:,.2f} per hour / ({cost.tokens_per_second:g} "
                    f"tokens/s × 3,600 s) × 1,000,000 = ${cost.usd_per_million_tokens:,.4f} (at the throughput given "
                    "with --tokens-per-second)", "command line")
    baseline = cost.baseline
    if baseline is not None:
        ratio = cost.tokens_per_dollar_ratio
        theirs = baseline.usd_per_million_tokens
        plan.reason("baseline", f"{baseline.instance}: " + (
            f"${theirs:,.4f} per million tokens at {baseline.tokens_per_second:g} tokens/s; {ratio:.2f}× its tokens "
            f"per dollar (its price: {baseline.price.dated})" if theirs is not None and ratio is not None
            else baseline.price.origin),
            baseline.price.source or baseline.price.origin)
        for claim, source in load_claims().get(plan.chip, ()):
            plan.reason("claim", f"{claim} (a vendor claim, not a measurement: the ratio above is yours)", source)


def _check_parallelism(model: ModelShape, work: Workload, options: AdviseOptions) -> None:
    """Attention data parallelism as NxD Inference validates it and as the docs place it (Trn2, decoders that
    generate); a KV cache dtype only where there is a KV cache."""
    if work.attention_dp > 1:
        if options.chip not in ("trn2", "trn3"):
            raise PlanError(f"--attention-dp is documented for Trn2 and Trn3 (vLLM Neuron's attention DP), not "
                            f"{options.chip}")
        if not has_kv_cache(model, work):
            raise PlanError("--attention-dp shards the KV cache of a decoder while it generates: this model or task "
                            "has none")
        if work.batch % work.attention_dp:
            raise PlanError(f"--attention-dp {work.attention_dp} must divide the batch ({work.batch})")
        if options.tp and options.tp % work.attention_dp:
            raise PlanError(f"--attention-dp {work.attention_dp} must divide --tp {options.tp}")
    if options.kv_dtype and not has_kv_cache(model, work):
        raise PlanError("--kv-cache-dtype applies to a decoder that generates: this model or task has no KV cache")


def _sequence(model: ModelShape, options: AdviseOptions) -> tuple[int, str]:
    limits = [x for x in (model.max_positions, model.seq_bound) if x]
    if options.seq_len:
        if limits and options.seq_len > min(limits):
            raise PlanError(f"--seq-len {options.seq_len} is longer than the {min(limits)} positions the model "
                            "takes")
        return options.seq_len, "--seq-len"
    if model.kind == "vision":
        if model.image_tokens:
            return model.image_tokens, "(image size / patch size)² patches + the class token, from the config"
        if model.is_transformer:
            raise PlanError("a vision transformer's sequence is its patches + 1 (197 for 224-pixel images in 16-pixel "
                            "patches): give --seq-len")
    if limits:
        limit = min(limits)
        if limit > 4096:
            return 4096, f"the model allows {limit}; portcheck plans for 4096 unless --seq-len says otherwise"
        return limit, "the model's longest sequence"
    if model.example_seq:
        return model.example_seq, "the traced example's sequence"
    return (2048, "assumed: give --seq-len") if model.is_transformer else (1, "no sequence axis")


def _size(plan: Plan, chip: ChipHardware, lnc: int, options: AdviseOptions, hardware: Hardware) -> None:
    model, work = plan.model, plan.workload
    sdk = options.sdk or load().newest_sdk
    total_gib = weights_bytes(model, work.dtype) / GIB
    candidates = degrees(chip, lnc, hardware)
    at = {tp: memory_at(model, work, chip, lnc, tp, hardware) for tp in candidates}
    fits = [memory.tp for memory, _ in fitting(model, work, chip, lnc, hardware)]
    budget = chip.memory_per_core_gib[lnc]
    lnc_text = f" at LNC={lnc}" if len(chip.lnc) > 1 else ""
    plan.reason("budget_per_core_gib", f"{budget:g} GiB of HBM per schedulable {chip.neuron_core} core{lnc_text}",
                chip.source)
    plan.reason("overhead_gib", f"{hardware.microcode_mib_per_physical_core:g} MiB micro-code per physical core, "
                f"plus {RESERVE_SHARE:.0%} of the core kept for scratchpad, DMA rings and collectives "
                "(not sized by the docs)", f"{hardware.runtime_source}; {PORTCHECK} for the reserve")
    _memory_reasons(plan, lnc)
    if options.tp and options.tp > candidates[-1] and work.dp == 1:  # more cores than one instance: several?
        fleet, gaps = plan_fleet(model, work, chip, lnc, hardware, options.stack, sdk, total_tp=options.tp)
        if fleet is not None:
            plan.memory = at[candidates[-1]]
            _place_fleet(plan, fleet, total_gib, hardware)
            return
    given = at.get(options.tp) if options.tp else None
    if given is not None and not given.fits and work.dp == 1:  # too small a degree for one instance: stages or FSDP
        fleet, _ = plan_fleet(model, work, chip, lnc, hardware, options.stack, sdk, tp_within=options.tp)
        if fleet is not None:
            plan.memory = at[options.tp]
            _place_fleet(plan, fleet, total_gib, hardware)
            return
    if options.tp:
        tp, why = options.tp, "given with --tp"
        memory = at.get(tp) or memory_at(model, work, chip, lnc, tp, hardware)
        _check_given(plan, memory, candidates, fits[0] if fits else 0, chip)
    elif fits:
        tp, why = _smallest_divisor(model, fits, at, budget)
        memory = at[tp]
    else:
        if work.dp > 1 and (one := fitting(model, replace(work, dp=1), chip, lnc, hardware)):
            raise PlanError(f"--dp {work.dp}: no {chip.name} instance holds {work.dp} copies of the smallest degree "
                            f"that fits ({one[0][0].tp} cores each)")
        plan.memory = at[candidates[-1]]
        fleet, gaps = plan_fleet(model, work, chip, lnc, hardware, options.stack, sdk) \
            if work.dp == 1 else (None, [f"--dp {work.dp}: copies of a model that spans instances are not planned"])
        if fleet is None:
            _fits_nowhere(plan, chip, lnc, total_gib, hardware, gaps)
        else:
            _place_fleet(plan, fleet, total_gib, hardware)
        return
    plan.memory = memory
    plan.tp_degree, plan.dp = tp, work.dp
    plan.cores = tp * work.dp
    plan.chips = math.ceil(plan.cores / chip.cores_per_chip[lnc])
    plan.reason("tp_degree", why + f"; degrees the runtime supports on {chip.name}: "
                f"{', '.join(map(str, chip.tp_degrees[lnc]))}", chip.tp_source or hardware.sizing.tp_degrees)
    if not at[1].fits and not options.tp:
        plan.findings.append(PlanFinding(NeedsTensorParallelism, f"one core would need {at[1].per_core:.2f} GiB "
                                         f"({_parts(at[1])}) of its {budget:g} GiB: shard it with tensor parallelism "
                                         f"degree {tp}"))
    if model.heads and not divides_heads(model, tp) and tp <= candidates[-1]:
        plan.findings.append(PlanFinding(HeadsNotDivisible, _padding(model, tp)))
    _place(plan, chip, lnc, total_gib, hardware, given=bool(options.tp) and tp <= candidates[-1])
    _throughput(plan, chip, lnc, hardware)
    if len(chip.lnc) > 1:
        _other_lnc(plan, chip, lnc, hardware)


def _parts(memory: Memory) -> str:
    parts = {"weights": memory.weights, "gradients": memory.gradients, "optimizer": memory.optimizer,
             "KV cache": memory.kv_cache, "activations": memory.activations, "overhead": memory.overhead}
    return ", ".join(f"{name} {value:.2f}" for name, value in parts.items() if value)


def _smallest_divisor(model: ModelShape, fits: list[int], at: dict[int, Memory], budget: float) -> tuple[int, str]:
    """The smallest fitting degree that divides the heads, else the smallest fitting one (padded: PC803)."""
    smallest = fits[0]
    tp = next((t for t in fits if divides_heads(model, t)), smallest)
    why = (f"the smallest degree whose per-core share ({at[tp].per_core:.2f} GiB) fits {budget:g} GiB"
           + (" and divides the attention heads" if model.heads and divides_heads(model, tp) else ""))
    if tp != smallest:
        why += f" ({smallest} fits too, but does not divide {model.heads} heads)"
    return tp, why


def _check_given(plan: Plan, memory: Memory, candidates: list[int], smallest: int, chip: ChipHardware) -> None:
    tp = memory.tp
    hint = f"; the smallest degree that fits is {smallest}" if smallest else "; no degree fits"
    if tp > candidates[-1]:
        message = f"--tp {tp} is more than the {candidates[-1]} cores of the largest {chip.name} instance" + hint
    elif not memory.fits:
        message = f"--tp {tp}: each core needs {memory.per_core:.2f} GiB, more than its {memory.budget:g} GiB" + hint
    elif tp not in candidates:
        message = (f"--tp {tp} is not a degree the Neuron runtime supports on {chip.name} "
                   f"({', '.join(map(str, candidates))})")
    else:
        return
    plan.findings.append(PlanFinding(TensorParallelDegree, message))


def _place(plan: Plan, chip: ChipHardware, lnc: int, total_gib: float, hardware: Hardware, given: bool) -> None:
    """The smallest instance for the plan's cores, and how many replicas it runs."""
    tp = plan.tp_degree
    plan.instance = choose_instance(chip, lnc, plan.cores, total_gib, hardware)
    if plan.instance is None:
        copies = f" × {plan.dp} copies" if plan.dp > 1 else ""
        if given or plan.dp > 1:
            plan.findings.append(PlanFinding(TensorParallelDegree, f"--tp {tp}{copies}: no {chip.name} instance has "
                                             f"the chips and the host memory for {total_gib:.1f} GiB of weights"))
        return
    cores_there = plan.instance.chips * chip.cores_per_chip[lnc]
    plan.replicas = cores_there // tp
    host = (f"{plan.instance.host_memory_gib:g} GiB host memory holds the {total_gib:.1f} GiB of weights while "
            "they load" if plan.instance.host_memory_gib else
            f"host memory is not in the Neuron docs: check it holds the {total_gib:.1f} GiB of weights")
    plan.reason("instance", f"the smallest {chip.name} shape with {plan.chips} chip(s) for {plan.cores} core(s); "
                f"{cores_there} cores there run {plan.replicas} replica(s); {host}", plan.instance.source)
    host_gib = plan.instance.host_memory_gib
    if host_gib and host_gib < COMPILE_HOST_FACTOR * total_gib:
        plan.compile_instance = next((i for i in hardware.instances if i.chip == chip.name
                                      and i.host_memory_gib >= COMPILE_HOST_FACTOR * total_gib), None)
        where = (f"compile on {plan.compile_instance.name} ({plan.compile_instance.host_memory_gib:g} GiB) and copy "
                 "the compiled artifacts" if plan.compile_instance else "compile on a larger host")
        plan.reason("compile_instance", f"{host_gib:g} GiB of host memory is less than twice the "
                    f"{total_gib:.1f} GiB of weights: {where} (portcheck's margin: the compiler needs host memory "
                    "beyond the weights)", hardware.sizing.compile_host)


def _padding(model: ModelShape, tp: int) -> str:
    parts = []
    if model.heads % tp:
        parts.append(f"tensor parallelism {tp} does not divide the {model.heads} attention heads: pad them to "
                     f"{padded_heads(model, tp)} with pad_model")
    kv = model.kv_heads or model.heads
    if kv != model.heads and kv % tp and tp % kv:
        parts.append(f"its {kv} KV heads neither divide tensor parallelism {tp} nor are divided by it, so NxD "
                     "Inference converts them to multi-head attention (CONVERT_TO_MHA: a KV head per query head)")
    return "; ".join(parts)


def _memory_reasons(plan: Plan, lnc: int) -> None:
    model, work = plan.model, plan.workload
    sizing = load_hardware().sizing
    weights = f"{model.params:,} parameters × {DTYPE_NAMES[work.dtype]} / tp (the weights only: --dtype does not " \
              f"change the activations' {work.compute_dtype} or the KV cache's dtype)"
    recipe = ""
    if work.dtype == "fp8" and model.is_transformer:
        weights, recipe = fp8_reason(model)
    elif (fmt := mx_format(work.dtype)) and model.is_transformer:
        weights, recipe = mx_reason(model, fmt, plan.tp_degree or 1)
    if work.attention_dp > 1:
        weights += (f"; the attention projections counted over tp / {work.attention_dp} (the attention group), the "
                    "larger of the layouts the docs describe")
    plan.reason("weights_gib", weights, "parameter count " + ("of the traced model" if model.source != "numbers"
                                                              else "given with --params")
                + (f"; {sizing.attention_dp}" if work.attention_dp > 1 else "") + (f"; {recipe}" if recipe else ""))
    if has_kv_cache(model, work):
        share = f"batch {work.batch}" + (f" / attention-DP {work.attention_dp}" if work.attention_dp > 1 else "")
        cache = ("--kv-cache-dtype" if work.kv_dtype else "the compute dtype: quantised only with --kv-cache-dtype")
        plan.reason("kv_cache_gib", f"{model.layers} layers × {model.kv_heads or model.heads} KV heads × head dim "
                    f"{model.attention_head_dim} × sequence {work.seq} × {share} × 2 (K, V) × "
                    f"{DTYPE_NAMES[work.cache_dtype]} ({cache}), with each core's share of the KV heads (split when "
                    "the attention group divides them, one replicated head when they divide it, else converted to "
                    "multi-head attention)", f"{sizing.kv_cache}; {sizing.kv_cache_dtype}"
                    + (f"; {sizing.attention_dp}" if work.attention_dp > 1 else ""))
    if model.is_transformer and work.task == "training":
        plan.reason("activations_gib", "34 × sequence × batch × hidden / tp bytes a layer (16-bit), every layer kept: "
                    "NxD Training's sequence parallelism with selective activation checkpointing" if work.nxd_training
                    else "every layer's activations kept for the backward pass (tensor parallelism without sequence "
                    "parallelism: the worst case)", sizing.training_activations)
    elif model.is_transformer:
        rows = context_rows(model, work)
        if has_kv_cache(model, work):
            plan.reason("context_batch", f"context encoding runs {rows} sequence(s) at a time (--context-batch; "
                        "vLLM Neuron sets ctx_batch_size 1, NxD Inference alone defaults to the batch): the "
                        "activations are sized for that many, not the whole batch", sizing.context_encoding)
        if flash_attention(model, work, lnc):
            scores = (f"the flash-attention kernel at sequence {work.seq} (LNC={lnc}): no score matrix, a 128 × "
                      f"{min(work.seq, 2048)} fp32 tile per head / tp")
        else:
            where = ("NxD Inference uses the flash kernel only from 4096 tokens at LNC=1 and from 1024 tokens in "
                     "multiples of 512 at LNC=2" if has_kv_cache(model, work) else
                     "the flash kernels are NxD Inference's for decoders; a traced encoder holds its scores")
            scores = f"the full score matrix, heads / tp × sequence² per sequence ({where})"
        plan.reason("attention", scores, sizing.flash_attention)
        plan.reason("activations_gib", f"the largest layer's live tensors for {rows} sequence(s) of {work.seq} "
                    f"tokens in {work.compute_dtype}: 4 × hidden + 2 × intermediate / tp per token, plus the "
                    "attention above; or one decode step of the whole batch when that is larger", PORTCHECK)
        if model.tower:
            plan.reason("tower", tower_reason(model), PORTCHECK)
    elif model.peak_activation_bytes:
        plan.reason("activations_gib", f"the traced graph's largest set of live tensors "
                    f"({model.peak_activation_bytes / 2**20:.1f} MiB at batch {model.example_batch or 1}, fp32), "
                    "scaled to the plan's batch and dtype", "torch.export graph, liveness walk")
    elif not model.is_transformer:
        plan.reason("activations_gib", "unknown, counted as 0: a model that is not a transformer, given as numbers, "
                    "has no graph to size its activations from; give the model (SPEC or --hf-config) so its trace "
                    "measures them, and keep headroom until then", PORTCHECK)
    if work.dp > 1:
        plan.reason("dp", f"{work.dp} model copies of tp cores each, every copy serving its own batch of "
                    f"{work.batch}", sizing.data_parallel)
    if work.task == "training":
        zero1 = f" and over the {work.dp} data-parallel copies (ZeRO-1)" if work.nxd_training and work.dp > 1 else ""
        plan.reason("optimizer_gib", "gradients in the weights' dtype and Adam's state (fp32 moments, plus an "
                    f"fp32 master copy for 16-bit weights) per parameter, split over tp{zero1}",
                    sizing.training_optimizer)


def _throughput(plan: Plan, chip: ChipHardware, lnc: int, hardware: Hardware) -> None:
    """The throughput-oriented configuration, kept when it differs from the minimum."""
    if plan.instance is None or plan.task != "inference" or plan.memory is None or not plan.memory.fits:
        return
    found = throughput(plan.model, plan.workload, chip, lnc, plan.tp_degree, plan.instance, hardware)
    if found.dp == plan.dp and found.batch == plan.workload.batch:
        return
    plan.throughput = found
    copies = f"{found.dp} cop{'y' if found.dp == 1 else 'ies'}"
    plan.reason("throughput", f"on {found.instance.name}: {copies} of tp {found.tp} (DP × TP up to its cores), "
                f"{found.batch} sequences each (the batch doubled while a core still holds it, at most 256), "
                f"{found.dp * found.batch} in flight at {found.memory.per_core:.2f} GiB a core",
                f"{hardware.sizing.data_parallel}; {PORTCHECK} for the batch search")


def _place_fleet(plan: Plan, fleet: Fleet, total_gib: float, hardware: Hardware) -> None:
    """No single instance holds the model, several do: tensor parallelism within each instance, the plan's
    `across` parallelism between them."""
    one = plan.memory  # the largest degree one instance has
    assert one is not None  # _size sets it first
    plan.fleet, plan.instance, plan.memory = fleet, fleet.instance, fleet.memory
    plan.tp_degree, plan.dp, plan.replicas = fleet.tp, 1, 1
    plan.cores = fleet.tp * fleet.count
    plan.chips = fleet.chips
    plan.reason("tp_degree", f"tensor parallelism {fleet.tp} within each instance (its {fleet.within}); on one "
                f"instance each of its cores would need {one.per_core:.2f} GiB of its {one.budget:g} "
                f"({total_gib:.1f} GiB of weights)", hardware.sizing.tp_degrees)
    total = f" (one tensor-parallel group of {fleet.tp * fleet.count} cores)" if fleet.tensor_across else ""
    plan.reason("instance", f"{fleet.count} × {fleet.instance.name} ({fleet.name}, {fleet.chips} chips): "
                f"{fleet.across} between the instances ({fleet.between}){total}, because {fleet.why}; "
                f"{fleet.memory.per_core:.2f} GiB a core", fleet.source)
    if fleet.missing:
        plan.reason("missing", fleet.missing, fleet.source)


def _fits_nowhere(plan: Plan, chip: ChipHardware, lnc: int, total_gib: float, hardware: Hardware,
                  gaps: list[str]) -> None:
    """PC802, with the changes that would make the model fit, each tried: lower-precision weights, a shorter
    sequence or a smaller batch, the larger target; and what the docs lack to span instances."""
    largest = max((i for i in hardware.instances if i.chip == chip.name), key=lambda i: i.chips)
    cores = largest.chips * chip.cores_per_chip[lnc]
    model, work, memory = plan.model, plan.workload, plan.memory
    assert memory is not None  # _size sets it first
    tries = []
    if work.dtype not in QUANTISED:
        tries.append(("fp8 weights (--dtype fp8)", replace(work, dtype="fp8"), chip, lnc))
    if has_kv_cache(model, work) and work.cache_dtype != "fp8":
        tries.append(("an fp8 KV cache (--kv-cache-dtype fp8)", replace(work, kv_dtype="fp8"), chip, lnc))
    if work.batch > 1:
        tries.append(("--batch 1", replace(work, batch=1), chip, lnc))
    if work.seq > 128 and (memory.kv_cache or memory.activations):
        tries.append((f"--seq-len {work.seq // 2}", replace(work, seq=work.seq // 2), chip, lnc))
    if chip.name not in ("trn2", "trn3"):  # a smaller chip: the larger target
        trn2 = hardware.chips["trn2"]
        tries.append(("--target trn2", work, trn2, trn2.default_lnc))
    ideas = []
    for text, changed, other_chip, other_lnc in tries:
        found = fitting(model, changed, other_chip, other_lnc, hardware)
        if found:
            first, instance = found[0]
            ideas.append(f"{text} (tp {first.tp} on {instance.name}, {first.per_core:.2f} GiB a core)")
    fits = f"; it would fit with {' or '.join(ideas)}" if ideas else ""
    across = f"; across instances: {'; '.join(gaps)}" if gaps else ""
    plan.findings.append(PlanFinding(FitsNoInstance, f"needs {memory.per_core:.2f} GiB per core even at "
                                     f"tensor parallelism {memory.tp} on {largest.name} ({cores} cores of "
                                     f"{chip.memory_per_core_gib[lnc]:g} GiB, {total_gib:.1f} GiB of weights), and "
                                     f"no documented shape or combination of instances holds it{fits}{across}"))


def _other_lnc(plan: Plan, chip: ChipHardware, lnc: int, hardware: Hardware) -> None:
    other = next(x for x in chip.lnc if x != lnc)
    there = next((m for m, _ in fitting(plan.model, plan.workload, chip, other, hardware)
                  if divides_heads(plan.model, m.tp)), None)
    if there is None:
        return
    chips = math.ceil(there.tp / chip.cores_per_chip[other])
    plan.alternatives.append(LncAlternative(other, there.tp, chips, round(there.per_core, 3),
                                            chip.memory_per_core_gib[other]))
    default = " (the default)" if lnc == chip.default_lnc else ""
    plan.reason("lnc", f"LNC={lnc}{default} gives {chip.cores_per_chip[lnc]} cores of "
                f"{chip.memory_per_core_gib[lnc]:g} GiB per chip; LNC={other} gives "
                f"{chip.cores_per_chip[other]} of {chip.memory_per_core_gib[other]:g} GiB and would need "
                f"tp {there.tp} on {chips} chip(s)", chip.source)
