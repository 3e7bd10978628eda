"""Packed sequences (PC215): `pack_padded_sequence(x, lengths)` turns a padded batch into one whose data holds as
many rows as the lengths add up to, a size that changes with every batch."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.reach import STATIC, report_compiled
from portcheck.static.syntax import keyword, positional


@rule
class PackedSequenceData(Rule):
    """## What it does
    Finds `torch.nn.utils.rnn.pack_padded_sequence(x, lengths)` and `pack_sequence(...)` in code that reaches
    the model: the packed data holds one row per valid time step of every sequence, `sum(lengths)` rows, so its
    shape follows the lengths in the batch (and `pad_packed_sequence` pads back to the longest one unless given
    `total_length=`). Quiet in host-side code (data loading, collation) and on host values.

    ## Example
    ```python
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, _ = self.lstm(packed)
    out, _ = pad_packed_sequence(out, batch_first=True)
    ```

    ## Use instead
    ```python
    out, _ = self.lstm(x)  # the padded batch as it is: one static shape
    last = out.gather(1, (lengths - 1).view(-1, 1, 1).expand(-1, 1, out.size(-1))).squeeze(1)
    ```
    Mask the padded steps where the model reads them (a bidirectional RNN reads the padding backwards: there,
    bucket the lengths instead).

    ## Fix safety
    No automatic fix: running on the padded batch changes what a bidirectional RNN's backward direction sees.
    """

    code = "PC215"
    message = ("`{shown}` packs the batch into data of `sum(lengths)` rows, a shape that changes with the lengths of "
               "every batch: " + STATIC + ", so each new combination is a new graph; run the RNN on the padded "
               "batch and mask the padded steps (or pick each sequence's last valid output by its length), or "
               "bucket the lengths")
    INVALID = (
        "from torch.nn.utils.rnn import pack_padded_sequence\nclass M:\n    def forward(self, x, lengths):\n"
        "        return self.rnn(pack_padded_sequence(x, lengths.cpu(), batch_first=True))",
        "import torch.nn as nn\nclass M:\n    def forward(self, x, lengths):\n"
        "        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)\n"
        "        return self.lstm(packed)",
        "from torch.nn.utils import rnn\nclass M:\n    def forward(self, seqs):\n"
        "        return self.gru(rnn.pack_sequence(seqs, enforce_sorted=False))",
    )
    VALID = (
        "from torch.nn.utils.rnn import pad_sequence\nclass M:\n    def forward(self, seqs):\n"
        "        return self.rnn(pad_sequence(seqs, batch_first=True))",
        "def pack_padded_sequence(x, lengths):\n    return x\ny = pack_padded_sequence(a, b)",
        "# pack_padded_sequence(x, lengths) would make the shape dynamic\nnote = 'pack_sequence'",
        "from torch.nn.utils.rnn import pack_padded_sequence\ndef collate_fn(batch):\n"
        "    return pack_padded_sequence(batch.x, batch.lengths)",
    )


_PACKERS = frozenset({"torch.nn.utils.rnn.pack_padded_sequence", "torch.nn.utils.rnn.pack_sequence"})


@check(cst.Call, rules=(PackedSequenceData,), tokens=("pack_padded_sequence", "pack_sequence"))
def check_packed_sequence(node: cst.Call, ctx: Context) -> None:
    if ctx.qualname(node.func) not in _PACKERS:
        return
    lengths = positional(node, 1) or keyword(node, "lengths")
    if lengths is not None and isinstance(lengths.value, cst.Call):
        ctx.skip.add(id(lengths.value))  # `lengths.cpu()`, which packing demands: part of this one problem
    data = positional(node, 0) or keyword(node, "input") or keyword(node, "sequences")
    report_compiled(ctx, PackedSequenceData, node, value=data.value if data is not None else None,
                    shown=" ".join(ctx.source(node.func).split()) + "(...)")
