"""Batches padded to their own longest sequence (PC218): `pad_sequence(seqs, batch_first=True)` in a collate
function, a Hugging Face tokenizer called with `padding=True` / `"longest"`, a data collator that pads each batch
dynamically. Every batch whose longest sequence differs is a new input shape for the model."""

from __future__ import annotations

import libcst as cst

from portcheck.findings import Severity
from portcheck.rules import EVERYWHERE, Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.syntax import keyword, string_value
from portcheck.static.walk import visit


@rule
class PaddedToLongest(Rule):
    """## What it does
    Finds batches padded to the longest sequence they happen to hold: `torch.nn.utils.rnn.pad_sequence(seqs)`
    (it has no fixed length), a Hugging Face tokenizer called with `padding=True` or `padding="longest"` (and
    `tokenizer.pad(...)`, whose default pads so), and `DataCollatorWithPadding`, `DataCollatorForSeq2Seq`,
    `DataCollatorForTokenClassification` and `DataCollatorForLanguageModeling` built without
    `padding="max_length"` or `pad_to_multiple_of=`. Quiet where the function pads the result on to a fixed size
    (`F.pad`), where `padding="max_length"` or `pad_to_multiple_of=` is given, `pad_sequence` inside a module's
    `forward` (the lengths come with the input there), and in a file that names neither torch nor a library built
    on it. Advice (info): how many lengths a run meets depends on the data.

    ## Example
    ```python
    def collate(batch):
        return pad_sequence([item["input_ids"] for item in batch], batch_first=True)
    ```

    ## Use instead
    ```python
    def collate(batch):  # one length for every batch (or a few buckets: pad_to_multiple_of=128)
        return tokenizer.pad(batch, padding="max_length", max_length=512, return_tensors="pt")
    ```

    ## Fix safety
    No automatic fix: the maximum length (or the bucket size) is the user's to choose.
    """

    code = "PC218"
    CONTEXTS = EVERYWHERE  # the padding happens in the data pipeline; the shape it makes is the model's input
    message = ("{shown} pads each batch to its own longest sequence, so the model meets a new sequence length "
               "whenever that changes, and Neuron compiles a new graph for each; pad to a fixed length "
               "(`padding=\"max_length\"`) or to a few buckets (`pad_to_multiple_of=`)")
    INVALID = (
        "from torch.nn.utils.rnn import pad_sequence\ndef collate(b):\n    return pad_sequence(b, batch_first=True)",
        "import transformers\ndef enc(tok, texts):\n    return tok(texts, padding=True, return_tensors='pt')",
        "import torch\nfrom transformers import DataCollatorWithPadding\ncollator = DataCollatorWithPadding(tok)",
    )
    VALID = (
        "import transformers\ndef enc(tok, texts):\n    return tok(texts, padding='max_length', max_length=64)",
        "import torch\nfrom transformers import DataCollatorWithPadding\n"
        "collator = DataCollatorWithPadding(tok, pad_to_multiple_of=128)",
        "import torch.nn.functional as F\nfrom torch.nn.utils.rnn import pad_sequence\ndef collate(b):\n"
        "    x = pad_sequence(b, batch_first=True)\n    return F.pad(x, (0, 512 - x.size(1)))",
    )


_PAD_SEQUENCE = frozenset({"torch.nn.utils.rnn.pad_sequence"})
_COLLATORS = frozenset(f"transformers.{name}" for name in (
    "DataCollatorWithPadding", "DataCollatorForSeq2Seq", "DataCollatorForTokenClassification",
    "DataCollatorForLanguageModeling", "data.data_collator.DataCollatorWithPadding",
    "data.data_collator.DataCollatorForSeq2Seq", "data.data_collator.DataCollatorForTokenClassification",
    "data.data_collator.DataCollatorForLanguageModeling"))
_HF = ("transformers", "tokenizers", "sentence_transformers")


@check(cst.Call, rules=(PaddedToLongest,), tokens=("pad_sequence", "padding", "DataCollator", ".pad("))
def check_padding(node: cst.Call, ctx: Context) -> None:
    if not ctx.uses_torch:
        return
    qualname = ctx.qualname(node.func)
    if qualname in _PAD_SEQUENCE:
        # inside the model the lengths come with the input (sliced by data: PC209; packed: PC215): what pads a
        # batch to its longest is the data pipeline's collate, or the caller's
        if not ctx.in_forward and not _padded_on(ctx, node):
            _report(ctx, node, f"`{qualname.rsplit('.', 1)[-1]}(...)`")
        return
    if qualname in _COLLATORS:
        if not _fixed(node):
            _report(ctx, node, f"`{qualname.rsplit('.', 1)[-1]}(...)`")
        return
    if qualname is not None or not _imports_hf(ctx):
        return  # a torch function, or a file without Hugging Face's tokenizers: `padding=` means something else
    padding = keyword(node, "padding")
    pad_method = isinstance(node.func, cst.Attribute) and node.func.attr.value == "pad" and bool(node.args)
    if padding is None and not pad_method:
        return
    if pad_method and (padding is None and keyword(node, "max_length") is None):
        _report(ctx, node, f"`{ctx.source(node.func)}(...)`")  # `tokenizer.pad` pads to the longest by default
    elif padding is not None and _longest(padding.value) and keyword(node, "pad_to_multiple_of") is None:
        _report(ctx, node, f"`{ctx.source(node.func)}(..., padding={ctx.source(padding.value)})`")


def _report(ctx: Context, node: cst.Call, shown: str) -> None:
    ctx.report(PaddedToLongest, node, PaddedToLongest.format(shown=shown), Severity.INFO)


def _longest(value: cst.BaseExpression) -> bool:
    """`padding=True` or `padding="longest"`."""
    return (isinstance(value, cst.Name) and value.value == "True") or string_value(value) == "longest"


def _fixed(node: cst.Call) -> bool:
    """A collator given a fixed length or buckets (`padding="max_length"`, `pad_to_multiple_of=`); without
    `padding=` it pads to the longest."""
    if keyword(node, "pad_to_multiple_of") is not None:
        return True
    padding = keyword(node, "padding")
    return padding is not None and not _longest(padding.value)


def _imports_hf(ctx: Context) -> bool:
    return ctx.memo("imports-hf", ctx.module, lambda: any(
        target.split(".")[0] in _HF for target in ctx.names.aliases.values()))


def _padded_on(ctx: Context, node: cst.Call) -> bool:
    """The function goes on to pad to a fixed size (`F.pad`, `torch.nn.functional.pad`) after `pad_sequence`."""
    if not ctx.functions:
        return False
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            nonlocal found
            found = found or ctx.qualname(call.func) == "torch.nn.functional.pad"

    visit(ctx.functions[-1], Finder())
    return found


__all__ = ["PaddedToLongest"]
