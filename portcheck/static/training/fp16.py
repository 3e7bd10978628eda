"""fp16 mixed precision (PC603): training set up for fp16 where BF16 is Neuron's mixed-precision type, in
Hugging Face `TrainingArguments` and accelerate's `Accelerator` (autocast to fp16 is reported by autocast.py)."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, FixPlan, Replace, check
from portcheck.static.codegen import literal_like
from portcheck.static.syntax import dotted_name, keyword, string_value


@rule
class Fp16MixedPrecision(Rule):
    """## What it does
    Finds fp16 mixed precision where BF16 is Neuron's choice: autocast to `torch.float16` / `torch.half` on a
    non-CUDA device (`torch.autocast("xla", dtype=torch.float16)`, `device_type=x.device.type`), Hugging Face
    `TrainingArguments(fp16=True)` and accelerate's `Accelerator(mixed_precision="fp16")`. CUDA autocast to
    fp16 is PC601, whose message already asks for bf16. Tensors and models cast to fp16 outside autocast
    (`x.half()`, `dtype=torch.float16`) stay quiet: FP16 is a NeuronCore data type.

    ## Example
    ```python
    args = TrainingArguments(output_dir="out", fp16=True)
    ```

    ## Use instead
    ```python
    args = TrainingArguments(output_dir="out", bf16=True)
    ```

    ## Fix safety
    Unsafe fixes, since fp16 to bf16 changes numerics: `dtype=torch.float16` becomes `torch.bfloat16` in
    autocast, `fp16=True` becomes `bf16=True` (no fix when `bf16=` is passed too), and `mixed_precision="fp16"`
    becomes `"bf16"` (a literal only).
    """

    code = "PC603"
    FIXABLE = True
    INVALID = (
        "import torch\nwith torch.autocast('xla', dtype=torch.float16):\n    pass",
        "import torch\nwith torch.autocast(device_type=x.device.type, dtype=torch.half):\n    pass",
        "from transformers import TrainingArguments\nargs = TrainingArguments('out', fp16=True)",
        "from accelerate import Accelerator\nacc = Accelerator(mixed_precision='fp16')",
    )
    VALID = (
        "import torch\nwith torch.autocast('xla', dtype=torch.bfloat16):\n    pass",
        "import torch\nwith torch.autocast('cpu', dtype=torch.float16):\n    pass",
        "import torch\nx = torch.zeros(2, dtype=torch.float16)",
        "m = m.half()",
        "from transformers import TrainingArguments\nargs = TrainingArguments('out', bf16=True, fp16=False)",
    )


FP16_TOKENS = ("float16", "half", "fp16")

_TRAINING_ARGUMENTS = frozenset({
    "transformers.TrainingArguments", "transformers.Seq2SeqTrainingArguments",
    "transformers.training_args.TrainingArguments", "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
})
_ACCELERATOR = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})


@check(cst.Call, rules=(Fp16MixedPrecision,), tokens=FP16_TOKENS)
def check_fp16_training(node: cst.Call, ctx: Context) -> None:
    """`TrainingArguments(fp16=True)`, `Accelerator(mixed_precision="fp16")` (fp16 autocast: see autocast.py)."""
    qualname = ctx.qualname(node.func)
    if qualname in _TRAINING_ARGUMENTS:
        arg = keyword(node, "fp16")
        if arg is not None and dotted_name(arg.value) == "True":
            assert arg.keyword is not None  # `arg` was found by its keyword
            # fp16 → bf16 changes numerics: unsafe; and no fix where `bf16=` is passed too.
            fix = None if keyword(node, "bf16") is not None else FixPlan(
                "Use `bf16=True`", False, (Replace(arg.keyword, "bf16"),))
            ctx.report(Fp16MixedPrecision, arg, "`fp16=True` trains in fp16 with a CUDA loss scaler; Neuron's "
                       "documented mixed precision is BF16 (its HF Trainer tutorial passes `--bf16`); use "
                       "`bf16=True`", fix=fix)
    elif qualname in _ACCELERATOR:
        arg = keyword(node, "mixed_precision")
        if arg is None:
            return
        value = string_value(arg.value)
        bound = ctx.constant(arg.value)
        if value is None and bound is not None:
            value = string_value(bound[1])
        if value == "fp16":
            literal = literal_like(arg.value, "bf16")
            fix = None if literal is None else FixPlan('Use `mixed_precision="bf16"`', False,
                                                       (Replace(arg.value, literal),))
            ctx.report(Fp16MixedPrecision, arg, '`mixed_precision="fp16"` trains in fp16 with a CUDA loss scaler; '
                       'Neuron\'s documented mixed precision is BF16 (no loss scaling); use `mixed_precision="bf16"`',
                       fix=fix)

