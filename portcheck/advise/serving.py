"""The serving path a plan names and writes out (`advise --emit-script`): vLLM Neuron, NxD Inference, optimum-neuron,
the native torch.compile script or torch_neuronx tracing, chosen per chip, stack and SDK release; the architecture
check behind the choice; compiling on a host without Neuron devices (`--compile-only`); and the host memory a
compile needs (PC808). Data from rules/serving.toml; pure arithmetic, no torch here."""

from __future__ import annotations

import json
from typing import Any

from portcheck.advise.quantization import mx_format, mx_modules_to_not_convert, nxdi_quantization
from portcheck.advise.rules import CompileHostMemory
from portcheck.advise.values import PORTCHECK, AdviseOptions, Plan, PlanFinding, Serving
from portcheck.dynamic.results import sequence_buckets
from portcheck.errors import UserError
from portcheck.knowledge import load, load_hardware
from portcheck.knowledge.serving import ServingData, load_serving

HF_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16", "mxfp4": "bfloat16",
             "mxfp8": "bfloat16"}
# transformers class-name endings and the optimum-neuron task each is exported for (its --task values)
TASK_SUFFIXES = (("ForCausalLM", "text-generation"), ("LMHeadModel", "text-generation"),
                 ("ForConditionalGeneration", "text2text-generation"), ("ForSequenceClassification",
                 "text-classification"), ("ForMaskedLM", "fill-mask"), ("ForQuestionAnswering", "question-answering"),
                 ("ForTokenClassification", "token-classification"), ("ForMultipleChoice", "multiple-choice"),
                 ("ForImageClassification", "image-classification"))


def choose_serving(plan: Plan, options: AdviseOptions) -> None:
    """The path the chip, stack and release document for the model, why, and its artifact's settings."""
    if plan.task != "inference":
        if options.runner != "auto":
            raise UserError(f"--runner {options.runner} chooses how vLLM serves the model: it is for --task inference")
        return
    data, sdk = load_serving(), options.sdk or load().newest_sdk
    model = plan.model
    open_paths = [p for p in data.paths if plan.chip in p.chips and plan.stack in p.stacks
                  and p.releases.holds(sdk) and model.kind in p.kinds]
    name, model_type = model.name, model.hf_model_type
    serving = [p for p in open_paths if p.listed and p.serves(name, model_type)]
    generic = next((p for p in open_paths if not p.listed), None)
    chosen = serving[0] if serving else generic
    if chosen is None:
        return
    known = bool(model_type) or model.source != "numbers"
    if serving:
        others = "; also " + ", ".join(p.title for p in serving[1:]) if serving[1:] else ""
        plan.reason("serving_path", f"{name} ({model_type or 'no model_type'}) is served natively by {chosen.title} "
                    f"on {plan.chip} at Neuron {sdk}: {chosen.why}{others}", chosen.source)
    elif not known:
        plan.reason("serving_path", f"{chosen.title}: the architecture is unknown for a model given as numbers "
                    "(give --hf-config to check it against the serving libraries' lists)", chosen.source)
    else:
        libraries = [p for p in open_paths if p.listed]
        missing = "; ".join(f"{p.title} lists {', '.join(p.architectures or p.model_types)}" for p in libraries)
        port = (f"not served natively: it needs a custom port to {' or '.join(p.title for p in libraries)} "
                f"({missing}); " if libraries else "")
        plan.reason("serving_path", f"{name} ({model_type or 'no model_type'}) on {plan.chip} at Neuron {sdk}: "
                    f"{port}{chosen.title}: {chosen.why}", "; ".join([*(p.source for p in libraries), chosen.source]))
    plan.serving = Serving(chosen.id, chosen.title, bool(serving), known,
                           chosen.task if serving and chosen.task else _task(model.name, model.kind))
    plan.serving.options = _settings(plan, chosen.id)
    _pooling(plan, options.runner, data)
    _quantization(plan, data)
    if options.compile_only:
        _compile_only(plan, data)
    host_memory(plan, data)


def _pooling(plan: Plan, runner: str, data: ServingData) -> None:
    """An embedding model (its checkpoint's sentence-transformers Pooling module, or --runner pooling) served by
    vLLM Neuron's pooling runner: the documented flag, why, and what prefill-only means for the memory. Elsewhere,
    or for a model the runner is not documented for, the plan stays generative and says so."""
    assert plan.serving is not None
    serving, model, pooling = plan.serving, plan.model, data.pooling
    why = {"pooling": "--runner pooling was given", "generate": ""}.get(runner, model.pooling)
    if runner == "generate" and model.pooling:
        plan.reason("pooling", f"--runner generate: served as a generative model, though {model.pooling}",
                    "command line")
    if not why or pooling is None or model.kind != "decoder":
        return  # an encoder is exported for feature-extraction by its class already
    flag = f"{pooling.argument} {pooling.value}"
    if serving.path != pooling.path or model.tower:
        where = (f"{serving.title} documents no pooling runner" if serving.path != pooling.path else
                 f"vLLM Neuron's pooling runner is documented for single-tower text models, not a {model.tower} tower")
        plan.reason("pooling", f"{why}, but {where}: planned as a generative model", pooling.source)
        return
    if plan.workload.kv_dtype == "fp8" and not pooling.fp8_kv_cache:
        raise UserError(f"--kv-cache-dtype fp8: vLLM Neuron refuses an fp8 KV cache for a pooling model at startup "
                        f"({why}); drop it, or give --runner generate")
    serving.options = {pooling.argument: pooling.value, **serving.options}
    serving.task = "feature-extraction"
    plan.reason("pooling", f"{flag}: {why}; {pooling.why}", pooling.source)
    plan.reason("pooling_memory", pooling.sizing, pooling.sizing_source)


def _quantization(plan: Plan, data: ServingData) -> None:
    """fp8 weights and an fp8 KV cache in the artifact as its documents spell them, and the arguments the docs add
    for the model on this chip (gpt-oss on Trn2: its MXFP4 checkpoint loaded as bf16)."""
    assert plan.serving is not None
    serving, work, model = plan.serving, plan.workload, plan.model
    if serving.path == "nxd-inference":
        config, env = nxdi_quantization(model, work.dtype, work.cache_dtype if work.kv_dtype else "")
        serving.options.update(config)
        plan.env.update(env)
        if config and data.fp8 is not None:
            plan.reason("quantization", "NeuronConfig " + ", ".join(sorted(config)) + " and "
                        + ", ".join(f"{k}={v}" for k, v in sorted(env.items())) + ", as NxD Inference's fp8 recipe "
                        "sets them", f"{data.fp8.source}; {data.fp8.kv_source}")
    if serving.path == "vllm-neuron" and work.kv_dtype == "fp8":
        serving.options["--kv-cache-dtype"] = "fp8"
        plan.reason("quantization", "--kv-cache-dtype fp8: vLLM Neuron quantises the KV cache with the checkpoint's "
                    "scales (calibrated offline); its docs integrate it for Llama 3, other models ignore it",
                    data.arguments["vllm serve"]["--kv-cache-dtype"].source)
    fmt = mx_format(work.dtype)
    if serving.path == "vllm-neuron" and fmt is not None:
        neuron = serving.options["--additional-config"]["neuron_config"]
        neuron.update(fmt.neuron_config)
        if "mlp" in fmt.quantises:
            neuron["modules_to_not_convert"] = mx_modules_to_not_convert(fmt, plan.tp_degree or 1)
        if fmt.clear_quantization_config:
            serving.options["--hf-overrides"] = {"quantization_config": {}}
        plan.reason("quantization", f"--additional-config neuron_config {json.dumps(fmt.neuron_config)}"
                    + (", --hf-overrides '{\"quantization_config\": {}}' (the Neuron loader owns the MX path)"
                       if fmt.clear_quantization_config else "") + ", as vLLM Neuron's recipe passes them",
                    fmt.source)
    for override in data.overrides:
        if (override.path == serving.path and plan.chip in override.chips
                and model.hf_model_type in override.model_types):
            serving.options[override.name] = override.value
            plan.reason("override", f"{override.name} {json.dumps(override.value)}: {override.why}", override.source)


def _task(name: str, kind: str) -> str:
    found = next((task for suffix, task in TASK_SUFFIXES if name.endswith(suffix)), "")
    if kind == "decoder":
        return "text-generation"
    return found or "feature-extraction"


def _settings(plan: Plan, path: str) -> dict[str, Any]:
    work, tp = plan.workload, plan.tp_degree or 1
    # the serving libraries bucket every LLM's sequence, whatever the trace of the model as written found
    buckets = plan.buckets or (sequence_buckets(1, work.seq) if work.seq > 1 else [])
    dtype = HF_DTYPES[work.dtype]
    if path == "vllm-neuron":
        seqs = [1 << i for i in range(work.batch.bit_length()) if 1 << i < work.batch] + [work.batch]
        return {"--tensor-parallel-size": tp, "--max-model-len": work.seq, "--max-num-seqs": work.batch,
                "--max-num-batched-tokens": max(buckets or [work.seq]), "--dtype": dtype, "--port": 8000,
                "--additional-config": {"neuron_config": {"num_batched_tokens_buckets": buckets or [work.seq],
                                                          "num_seqs_buckets": seqs}}}
    if path == "optimum-neuron":
        speed = "--auto-cast" in plan.compiler_args and "matmult" in plan.compiler_args
        level = _optlevel(plan)
        settings: dict[str, Any] = {"--batch_size": work.batch}
        if plan.serving is not None and plan.serving.task == "text-to-image":
            settings.update(_image_size(plan))
        elif plan.model.kind != "vision" and work.seq > 1:
            settings["--sequence_length"] = work.seq
        if plan.serving is not None and plan.serving.task == "text2text-generation":
            settings["--num_beams"] = 1  # mandatory for seq2seq exports: greedy decoding unless the user beams
        settings.update({"--tensor_parallel_size": tp, "--auto_cast": "matmul" if speed else "none",
                         "--auto_cast_type": "fp16" if work.dtype == "fp16" else "bf16", "--torch_dtype": dtype,
                         "--instance_type": plan.chip, f"-O{level}": None})
        return settings
    if path == "nxd-inference":
        config: dict[str, Any] = {"tp_degree": tp, "batch_size": work.batch, "seq_len": work.seq,
                                  "max_context_length": work.seq, "torch_dtype": dtype}
        if buckets:
            config.update({"enable_bucketing": True, "context_encoding_buckets": buckets,
                           "token_generation_buckets": buckets})
        if plan.lnc:
            config["logical_nc_config"] = plan.lnc
        return config
    return {"tp_degree": tp, "dtype": dtype}


# Image pixels per latent pixel of the Stable Diffusion / SDXL VAE (diffusers' pipelines: 2 ** (len(VAE
# block_out_channels) - 1), 8 for their four-block VAEs, and 8 without a VAE).
LATENT_SCALE = 8


def _image_size(plan: Plan) -> dict[str, Any]:
    """--height and --width of a diffusers export: the denoiser's traced latent sample × the VAE's scale, and one
    image per prompt; none where the trace has no 4-d sample."""
    sample = next((i for i in plan.model.inputs if i.kind == "tensor" and len(i.shape) == 4), None)
    if sample is None:
        return {"--num_images_per_prompt": 1}
    return {"--height": sample.shape[2] * LATENT_SCALE, "--width": sample.shape[3] * LATENT_SCALE,
            "--num_images_per_prompt": 1}


def command(plan: Plan, model_ref: str, output: str = "neuron_artifacts") -> list[str]:
    """The vllm serve / optimum-cli command of the plan's serving path, for the model at `model_ref`."""
    serving = plan.serving
    if serving is None or serving.path not in ("vllm-neuron", "optimum-neuron"):
        return []
    if serving.path == "vllm-neuron":
        out = ["vllm", "serve", model_ref]
    else:
        out = ["optimum-cli", "export", "neuron", "--model", model_ref, "--task", serving.task]
    for name, value in serving.options.items():
        out.append(name)
        if value is not None:
            out.append(json.dumps(value, separators=(",", ":")) if isinstance(value, dict) else str(value))
    return [*out, output] if serving.path == "optimum-neuron" else out


def _optlevel(plan: Plan) -> str:
    """The plan's neuronx-cc optimisation level: its --optlevel (the native stack's NEURON_COMPILER_OPT_LEVEL)."""
    args = plan.compiler_args
    return args[args.index("--optlevel") + 1] if "--optlevel" in args[:-1] else "2"


def _compile_only(plan: Plan, data: ServingData) -> None:
    assert plan.serving is not None
    entry = data.compile_only.get(plan.serving.path)
    if entry is None:
        plan.serving.compile_only_refused = f"{plan.serving.title} has no documented compile-only mode"
        plan.reason("compile_only", f"{plan.serving.title} compiles on first use on a Neuron device: no documented "
                    "way to compile it on a host without one (the script refuses --compile-only)",
                    next(p.source for p in data.paths if p.id == plan.serving.path))
        return
    plan.serving.compile_only = True
    plan.serving.compile_env = {k: v.replace("{target}", plan.chip) for k, v in entry.env.items()}
    env = " ".join(f"{k}={v}" for k, v in plan.serving.compile_env.items())
    plan.reason("compile_only", entry.how + (f" ({env})" if env else ""), entry.source)


def host_memory(plan: Plan, data: ServingData) -> None:
    """What compiling and loading the weights ask of the host, against the instance's host RAM (PC808)."""
    from portcheck.advise.sizing import GIB, weights_bytes

    serving = plan.serving
    if serving is None or plan.instance is None:
        return
    weights = weights_bytes(plan.model, plan.workload.dtype) / GIB
    level3 = _optlevel(plan) == "3"
    factor = data.weights_factor * (data.optlevel3_factor if level3 else 1)
    # bucket_model_trace builds the model in every bucket's worker; the serving libraries load the checkpoint once
    workers = len(plan.buckets) if serving.path == "trace" and len(plan.buckets) > 1 else 1
    need = weights * factor + weights * (workers - 1)
    serving.compile_host_gib = need
    parts = f"{weights:.1f} GiB of {plan.workload.dtype} weights × {factor:g}" + (" (-O3)" if level3 else "") + \
        (f" + a copy in each of {workers - 1} more bucket workers" if workers > 1 else "")
    hardware = load_hardware()
    host = plan.instance.host_memory_gib
    plan.reasons = [r for r in plan.reasons if r.item != "compile_instance"]
    plan.compile_instance = None
    if not host:
        plan.reason("compile_host_gib", f"about {need:.1f} GiB ({parts}); {plan.instance.name}'s host memory is not "
                    "in the Neuron docs: check it", f"{data.compile_host_source}; {PORTCHECK}")
        return
    plan.reason("compile_host_gib", f"about {need:.1f} GiB of host memory to load and compile ({parts}) of "
                f"{plan.instance.name}'s {host:g} GiB", f"{data.compile_host_source}; {PORTCHECK}")
    if need <= host:
        return
    plan.compile_instance = next((i for i in hardware.instances if i.chip == plan.chip and i.host_memory_gib >= need),
                                 None)
    where = (f"compile on {plan.compile_instance.name} ({plan.compile_instance.host_memory_gib:g} GiB)"
             if plan.compile_instance else f"compile on a host with at least {need:.0f} GiB")
    only = "" if serving.compile_only else " (advise --compile-only writes a script that only compiles)"
    plan.reason("compile_instance", f"{where}{only} and copy the compiled artifacts", hardware.sizing.compile_host)
    plan.findings.append(PlanFinding(CompileHostMemory, f"compiling needs about {need:.1f} GiB of host memory "
                                     f"({parts}), more than {plan.instance.name}'s {host:g} GiB: {where}{only}"))
