"""The rules only `portcheck advise` reports (PC8xx: the plan's memory arithmetic). `portcheck rule CODE` prints
a class's docstring."""

from __future__ import annotations

from portcheck.rules import Pass, Rule, rule


@rule
class NeedsTensorParallelism(Rule):
    """## What it does
    Adds up what one core must hold — the weights, the KV cache, the activations of the largest layer and the
    runtime's own memory — and reports a model that needs more than one schedulable core, with the smallest
    tensor-parallel degree that fits.

    ## Example
    `portcheck advise --params 7e9 --layers 32 --hidden 4096 --heads 32 --target inf2 --seq-len 4096`:
    13 GiB of bf16 weights, 2 GiB of KV cache, 0.4 GiB of activations (one sequence context-encoded with the
    flash kernel) and 1.7 GiB of runtime overhead come to 17.1 GiB, more than a NeuronCore-v2's 16 GiB; tensor
    parallelism 2 fits.

    ## Use instead
    The plan's `tp_degree`: neuronx-distributed parallel layers or NxD Inference with that degree, on the
    instance the plan names.

    ## Fix safety
    Advice only.
    """

    code = "PC801"
    passes = (Pass.ADVISE,)


@rule
class FitsNoInstance(Rule):
    """## What it does
    Reports a model that no documented shape holds: no tensor-parallel degree fits a single instance of the
    target, and no documented combination of instances (a Trn2 UltraServer, instances over EFA where a stack
    splits a model across them for the task) holds it either. It says what would make it fit (another target,
    lower-precision weights, a shorter sequence or smaller batch) and what the docs lack to span instances.

    ## Example
    A 400B-parameter model in bf16 on inf2: 745 GiB of weights, more than inf2.48xlarge's 384 GiB, and no
    documented inference stack splits one model across inf2 instances.

    ## Use instead
    fp8 weights, or the larger target (trn2.48xlarge has 1,536 GiB; a Trn2 UltraServer 6,144 GiB).

    ## Fix safety
    Advice only.
    """

    code = "PC802"
    passes = (Pass.ADVISE,)


@rule
class HeadsNotDivisible(Rule):
    """## What it does
    Reports a tensor-parallel degree that does not divide the number of attention heads (or of KV heads, when
    it is not a multiple of them), with the padded head count.

    ## Example
    BERT-base's 12 heads at tensor parallelism 8: padded to 16 heads.

    ## Use instead
    A degree that divides the heads, or `pad_model(model, tp_degree, n_heads)` before sharding.

    ## Fix safety
    Advice only.
    """

    code = "PC803"
    passes = (Pass.ADVISE,)


@rule
class TensorParallelDegree(Rule):
    """## What it does
    Checks the degree given with `--tp`: a core short of memory at that degree, or a degree larger than the
    cores of the largest instance, is an error that names the smallest degree that fits.

    ## Example
    `--tp 1` for Llama-2-7B on inf2 at sequence 4096.

    ## Use instead
    The degree the plan chooses without `--tp`.

    ## Fix safety
    Advice only.
    """

    code = "PC804"
    passes = (Pass.ADVISE,)


@rule
class CompileHostMemory(Rule):
    """## What it does
    Adds up what compiling the plan asks of the host: the weights in their serving dtype, times the compiler's
    appetite (more at `-O3`), plus a copy of the model in each bucket worker where `bucket_model_trace` builds one,
    and reports an instance whose host memory is smaller, with the instance to compile on instead.

    ## Example
    Llama-2-7B on inf2.xlarge (16 GiB of host memory): 12.6 GiB of bf16 weights need about 25 GiB to load and
    compile.

    ## Use instead
    Compile on the plan's `compile_instance` (or any host with that much memory; `advise --compile-only` writes a
    script that only compiles) and copy the compiled artifacts to the serving instance.

    ## Fix safety
    Advice only.
    """

    code = "PC808"
    passes = (Pass.ADVISE,)


__all__ = ["CompileHostMemory", "FitsNoInstance", "HeadsNotDivisible", "NeedsTensorParallelism", "TensorParallelDegree"]
