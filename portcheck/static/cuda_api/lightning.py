"""Lightning's Trainer and Fabric left to pick the hardware (PC112): `"auto"` knows TPUs, MPS, CUDA and the CPU.

On a Neuron instance none of the first three is found (Lightning counts TPU chips for its XLA accelerator, not
NeuronCores), so the run takes the CPU without a word; `"gpu"` / `"cuda"` raises there.
"""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.syntax import string_value

# Lightning's entry points that take `accelerator=` (Lightning 2.x, and PyTorch Lightning 1.x's names).
_ENTRY_POINTS = frozenset({
    "lightning.Trainer", "lightning.pytorch.Trainer", "lightning.pytorch.trainer.Trainer",
    "lightning.pytorch.trainer.trainer.Trainer", "pytorch_lightning.Trainer", "pytorch_lightning.trainer.Trainer",
    "pytorch_lightning.trainer.trainer.Trainer", "lightning.Fabric", "lightning.fabric.Fabric",
    "lightning.fabric.fabric.Fabric", "lightning_fabric.Fabric", "lightning_fabric.fabric.Fabric",
})
# What Lightning resolves to a GPU, or to whatever it finds (never a NeuronCore).
_NOT_NEURON = frozenset({"auto", "gpu", "cuda"})
# Where a Neuron strategy or accelerator object would come from.
_NEURON_PACKAGES = ("neuronx_distributed", "torch_neuronx", "optimum.neuron")


@rule
class LightningAccelerator(Rule):
    """## What it does
    Finds a Lightning `Trainer(...)` or `Fabric(...)` that leaves the hardware to Lightning: no `accelerator=`
    (its default is `"auto"`), or `accelerator="auto"`, `"gpu"` or `"cuda"`, or PyTorch Lightning 1.x's `gpus=`.
    Lightning's automatic choice tries a TPU, MPS and CUDA, then the CPU: on a Neuron instance the model trains
    (or predicts) on the CPU without a warning, and `"gpu"` raises. Quiet where the call passes `**kwargs` (the
    accelerator is chosen elsewhere), names another accelerator (`"cpu"` on purpose), passes one computed at run
    time, or gets its strategy, accelerator or plugins from a Neuron package (NeuronX Distributed's
    Neuron-PT-Lightning).

    ## Example
    ```python
    trainer = pl.Trainer(max_epochs=10)
    trainer.fit(model, loader)
    ```

    ## Use instead
    On the xla stack, NeuronX Distributed's Neuron-PT-Lightning (`NeuronLTModule`, `NeuronXLAStrategy`,
    `NeuronXLAPrecisionPlugin`); on TorchNeuron (native), a training loop that moves the model and batches to the
    `neuron` device itself.

    ## Fix safety
    No automatic fix: Lightning has no accelerator name for NeuronCores.
    """

    code = "PC112"
    message = ("`{shown}` leaves the hardware to Lightning ({how}), which knows TPUs, MPS, CUDA and the CPU but no "
               "NeuronCore: on a Neuron instance it {outcome}; use NeuronX Distributed's Neuron-PT-Lightning "
               "strategy (xla stack) or drive the `neuron` device yourself (native)")
    INVALID = (
        "import lightning as L\ntrainer = L.Trainer(max_epochs=3)",
        "import pytorch_lightning as pl\ntrainer = pl.Trainer(accelerator='gpu', devices=2)",
        "from lightning.fabric import Fabric\nfabric = Fabric(devices=1, strategy='auto')",
        "from pytorch_lightning import Trainer\ntrainer = Trainer(gpus=1)",
    )
    VALID = (
        "import lightning as L\ntrainer = L.Trainer(accelerator='cpu')",
        "import lightning as L\ntrainer = L.Trainer(**kwargs)",
        "import lightning as L\ntrainer = L.Trainer(accelerator=args.accelerator)",
        "import lightning as L\nfrom neuronx_distributed.lightning import NeuronXLAStrategy\n"
        "trainer = L.Trainer(strategy=NeuronXLAStrategy(tensor_parallel_size=2))",
        "from transformers import Trainer\ntrainer = Trainer(model=model)",
    )


def _from_neuron(ctx: Context, value: cst.BaseExpression) -> bool:
    """`NeuronXLAStrategy(...)`, `[NeuronXLAPrecisionPlugin()]`: an object a Neuron package makes."""
    if isinstance(value, (cst.List, cst.Tuple)):
        return any(isinstance(e, cst.Element) and _from_neuron(ctx, e.value) for e in value.elements)
    target = value.func if isinstance(value, cst.Call) else value
    name = ctx.qualname(target) or ""
    return name.startswith(_NEURON_PACKAGES)


@check(cst.Call, rules=(LightningAccelerator,), tokens=("Trainer", "Fabric"))
def check_lightning_entry(node: cst.Call, ctx: Context) -> None:
    if ctx.qualname(node.func) not in _ENTRY_POINTS or any(a.star for a in node.args):
        return  # not Lightning's, or `Trainer(**kwargs)`: the accelerator is chosen where the kwargs are built
    keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    if any(_from_neuron(ctx, keywords[k]) for k in ("strategy", "accelerator", "plugins") if k in keywords):
        return
    gpus = keywords.get("gpus")
    accelerator = keywords.get("accelerator")
    if accelerator is None and gpus is not None:
        if isinstance(gpus, cst.Integer) and gpus.value == "0":
            return
        how, outcome = "`gpus=`: CUDA devices", "raises (no CUDA device)"
    elif accelerator is None:
        how, outcome = "no `accelerator=`: `\"auto\"`", "runs on the CPU"
    else:
        chosen = string_value(accelerator)
        if chosen not in _NOT_NEURON:
            return  # "cpu" on purpose, "tpu", or chosen at run time
        how = f"`accelerator=\"{chosen}\"`"
        outcome = "runs on the CPU" if chosen == "auto" else "raises (no CUDA device)"
    shown = " ".join(ctx.source(node.func).split())
    ctx.report(LightningAccelerator, node, shown=f"{shown}(...)", how=how, outcome=outcome)
