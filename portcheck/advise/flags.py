"""The plan's neuronx-cc flags, environment variables and buckets, each with its reason and source; what may
be emitted at all is rules/compiler.toml's to say (make_plan checks every flag against it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from portcheck.dynamic.results import sequence_buckets
from portcheck.knowledge import load_compiler, load_dtypes, load_hardware

if TYPE_CHECKING:
    from portcheck.advise.values import AdviseOptions, Plan


def compiler_settings(plan: Plan, options: AdviseOptions) -> None:
    """The neuronx-cc flags and environment variables the plan needs, each with its reason."""
    flags = load_compiler().flags
    model = plan.model
    pairs: list[tuple[str, str | None]] = []  # (flag, value or None for a switch)

    def add(name: str, value: str | None, why: str) -> None:
        pairs.append((name, value))
        shown = name if value is None else f"{name} {value}"
        plan.reason(shown, why, flags[name].cited(value))

    core = load_hardware().chips[plan.chip].neuron_core
    if plan.chip in flags["--target"].values:
        add("--target", plan.chip, f"compile for {plan.chip} ({core}); a NEFF only runs on the core generation it "
            "was built for")
    else:  # trn3: the compiler reference lists no value for it
        plan.reason("--target", f"neuronx-cc's reference lists no --target value for {plan.chip} ({core}): the "
                    "framework sets it from the instance (NEURON_PLATFORM_TARGET_OVERRIDE where no device is "
                    "attached)", flags["--target"].source)
    model_type, why = model.model_type_flag()
    add("--model-type", model_type, why)
    if options.prefer == "speed":
        cast_type = "fp8_e4m3" if options.dtype == "fp8" else "bf16"
        add("--auto-cast", "matmult", "--prefer speed: FP32 matrix multiplies are cast down (the pre-2.27 "
            "default); accuracy can drop, e.g. with RoPE position ids")
        add("--auto-cast-type", cast_type, "FP8 (e4m3) compute for a model sized with fp8 weights" if
            cast_type == "fp8_e4m3" else "BF16 keeps FP32's range (no loss scaling, no overflow)")
    else:
        add("--auto-cast", "none", "--prefer accuracy: no compiler downcasting, the same numerics as the model "
            "(the default since Neuron 2.27)")
    if options.dtype == "fp8":
        plan.reason("fp8", "weights sized at 1 byte, as an fp8-quantized checkpoint stores them; the compiler "
                    "does not quantize weights, and the bring-up script runs the model in bf16",
                    load_hardware().sizing.fp8_weights)
    if options.prefer == "speed" and plan.task == "inference":
        add("--optlevel", "3", "--prefer speed: more optimisation for a longer compile with more host memory")
    else:
        add("--optlevel", "2", "the balance of compile time and performance (the default)")
    if plan.lnc is not None:
        add("--logical-nc-config", str(plan.lnc), f"{plan.lnc} physical cores per logical core; the runtime must agree "
            "(NEURON_LOGICAL_NC_CONFIG)")
        plan.env["NEURON_LOGICAL_NC_CONFIG"] = str(plan.lnc)
        plan.reason(f"NEURON_LOGICAL_NC_CONFIG={plan.lnc}", "the runtime's LNC must equal the compiler's --lnc",
                    load_compiler().env["NEURON_LOGICAL_NC_CONFIG"].source)
    _int64(plan, options, add)
    if plan.chip == "trn1" and model_type == "transformer" and options.prefer == "accuracy":
        add("--enable-saturate-infinity", None, "trn1: clamps ±inf to the largest finite values in "
            "compiler-inserted transposes, which avoids NaN there")
    plan.compiler_args = [part for name, value in pairs for part in (name, value) if part is not None]
    if plan.tp_degree:
        last = plan.tp_degree - 1
        plan.env["NEURON_RT_VISIBLE_CORES"] = "0" if not last else f"0-{last}"
        plan.reason(f"NEURON_RT_VISIBLE_CORES={plan.env['NEURON_RT_VISIBLE_CORES']}",
                    f"one replica on the first {plan.tp_degree} core(s); start further replicas at multiples of "
                    f"{plan.tp_degree}", load_compiler().env["NEURON_RT_VISIBLE_CORES"].source)
    if plan.stack == "native":
        _native_env(plan, pairs)
    if plan.task == "training" and options.dtype in ("bf16", "fp16"):
        plan.env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1"
        plan.reason("NEURON_RT_STOCHASTIC_ROUNDING_EN=1", "16-bit training: stochastic rounding keeps small "
                    "updates", load_compiler().env["NEURON_RT_STOCHASTIC_ROUNDING_EN"].source)


AUTOMATIC = ("--target", "--logical-nc-config", "--optlevel")


def _native_env(plan: Plan, pairs: list[tuple[str, str | None]]) -> None:
    """TorchNeuron picks --target and the LNC from the instance (NEURON_LOGICAL_NC_CONFIG) and appends
    NEURON_CC_FLAGS to its own compile command: the rest of the flags go there."""
    compiler = load_compiler()
    defaults = compiler.native_defaults
    given = list(zip(defaults.args[::2], defaults.args[1::2], strict=True)) if defaults else []
    # TorchNeuron already passes its base arguments: repeating them in NEURON_CC_FLAGS adds nothing.
    rest = [part for name, value in pairs if name not in AUTOMATIC and (name, value) not in given
            for part in (name, value) if part is not None]
    already = f"; it already passes {' '.join(defaults.args)} itself" if defaults else ""
    if rest:
        plan.env["NEURON_CC_FLAGS"] = " ".join(rest)
        plan.reason("NEURON_CC_FLAGS", "torch.compile(backend=\"neuron\") compiles with neuronx-cc and appends "
                    "NEURON_CC_FLAGS to its own arguments; --target and the LNC it takes from the instance, the "
                    f"optimisation level it sets itself (-O2 for compiled graphs){already}",
                    f"{compiler.env['NEURON_CC_FLAGS'].source}; {compiler.compile.native_wrapper}"
                    + (f"; {defaults.source}" if defaults else ""))
    elif defaults:
        plan.reason("NEURON_CC_FLAGS", f"not needed: TorchNeuron passes {' '.join(defaults.args)} itself and takes "
                    "--target and the LNC from the instance", f"{defaults.source}; {compiler.compile.native_wrapper}")
    level = dict(pairs).get("--optlevel")
    if defaults and level and level != defaults.compile_optlevel:
        plan.env["NEURON_COMPILER_OPT_LEVEL"] = f"-O{level}"
        plan.reason(f"NEURON_COMPILER_OPT_LEVEL=-O{level}", f"TorchNeuron sets the optimisation level itself "
                    f"(-O{defaults.compile_optlevel} for torch.compile graphs, -O{defaults.eager_optlevel} eager); "
                    "this variable replaces it", compiler.env["NEURON_COMPILER_OPT_LEVEL"].source)
    plan.env["TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"] = "1"
    plan.reason("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1", "a graph that fails to compile raises instead of "
                "silently running eagerly: a bring-up must see it (set explicitly: the default changed)",
                compiler.env["TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"].source)


def _int64(plan: Plan, options: AdviseOptions, add: Callable[[str, str | None, str], None]) -> None:
    model = plan.model
    if plan.chip not in load_compiler().flags["--native-int64"].targets:  # NeuronCore-v2: no int64 datapath
        if model.int64_in_graph:
            plan.reason("int64", f"{plan.chip} has no int64 datapath: the compiler computes int64 tensors as "
                        "int32 (ids and positions below 2^31 are unaffected)",
                        load_dtypes().named("torch.int64").source)
        return
    if model.int64_in_graph is None:
        plan.reason("int64", "not traced: give a model spec to learn whether its graph holds int64 tensors "
                    f"(then --native-int64 enabled applies on {plan.chip})", "portcheck")
        return
    if not model.int64_in_graph:
        return
    if plan.stack == "xla":
        plan.reason("int64", "the graph holds int64 tensors, but --native-int64 is new in Neuron 2.32 and the xla "
                    "stack stops at 2.31: they are computed as int32", load_compiler().flags["--native-int64"].source)
    elif options.prefer == "speed":
        plan.reason("int64", "the graph holds int64 tensors; --prefer speed keeps the default downcast to int32 "
                    "(native int64 costs about 20-30%)", load_compiler().flags["--native-int64"].source)
    else:
        add("--native-int64", "enabled", "the graph holds int64 tensors (ids, positions): computed natively, as "
            "on the GPU, instead of silently as int32 (announced as the default after Neuron 2.32; no "
            "release note confirms it shipped)")


def choose_buckets(plan: Plan, options: AdviseOptions) -> None:
    """Sequence buckets where the sequence varies, and dynamic batching, with how each stack compiles them."""
    model = plan.model
    sources = load_compiler().compile
    seq_axes = [a for a in model.dynamic_axes if a.endswith(":1")]
    batch_axes = [a for a in model.dynamic_axes if a.endswith(":0")]
    token_model = model.kind in ("decoder", "encoder", "encoder-decoder") and model.is_transformer
    variable_seq = token_model if model.source == "numbers" else bool(seq_axes)
    if variable_seq and plan.workload.seq >= 2:
        plan.buckets = sequence_buckets(1, plan.workload.seq)
        how = ("torch_neuronx.bucket_model_trace: one compiled graph per bucket in one artifact, inputs padded "
               "up to the next bucket" if plan.stack == "xla" else
               "torch.compile(backend=\"neuron\", dynamic=False) compiles one graph per shape: pad inputs to the "
               "next bucket so only these shapes compile")
        found = f" ({', '.join(seq_axes)} stays dynamic in the trace)" if seq_axes else ""
        plan.reason("buckets", f"sequences vary{found}: {how}", f"{sources.buckets}; {sources.stacks[plan.stack]}")
    elif model.source != "numbers" and token_model:
        plan.reason("buckets", "the trace found no dynamic sequence axis: one compiled shape", "portcheck trace")
    if batch_axes or (model.source == "numbers" and plan.task == "inference"):
        plan.dynamic_batch = True
        how = ("torch_neuronx.dynamic_batch splits and pads larger batches along dim 0 to the compiled batch"
               if plan.stack == "xla" else "pad the batch to the compiled size (dynamic=False)")
        plan.reason("dynamic_batch", how, sources.stacks[plan.stack])
