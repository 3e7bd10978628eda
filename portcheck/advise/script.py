"""`portcheck advise --emit-script`: a standalone bring-up script (no portcheck import) that builds the model,
compiles it with the plan's settings on a Neuron host and times warm runs — or, without torch-neuronx, runs the
same model and inputs eagerly on the CPU and says it is a dry run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from portcheck import __version__

if TYPE_CHECKING:
    from portcheck.advise.plan import Plan
    from portcheck.dynamic.request import TraceRequest

TEMPLATE = Path(__file__).with_name("bringup_template.py")


def bringup_script(plan: Plan, request: TraceRequest, cwd: Path) -> str:
    model = plan.model
    spec = {"callable": "", "file": "", "hf_config": "", "hf_options": dict(request.hf_options), "cwd": str(cwd)}
    if request.hf_config:
        path = Path(request.hf_config)
        spec["hf_config"] = str((cwd / path / "config.json" if (cwd / path).is_dir() else cwd / path).resolve())
    else:
        location, _, attribute = request.model.rpartition(":")
        if location.endswith(".py") or "/" in location:
            spec["file"] = str((cwd / location).resolve())
            spec["callable"] = attribute
        else:
            spec["callable"] = request.model
    data = {
        "portcheck_version": __version__,
        "model_name": model.name,
        "model": spec,
        "target": {"chip": plan.chip, "stack": plan.stack},
        "instance": plan.instance.name if plan.instance else None,
        "tp_degree": plan.tp_degree,
        "compiler_args": plan.compiler_args,
        "env": plan.env,
        "dtype": plan.workload.dtype,
        "batch": plan.workload.batch,
        "seq_len": plan.workload.seq,
        "buckets": plan.buckets,
        "dynamic_batch": plan.dynamic_batch,
        "inputs": [i.to_json() for i in model.inputs],
        "example_batch": model.example_batch,
        "example_seq": model.example_seq,
        "params": model.params,
    }
    title = (f"Bring-up script for {model.name} on {data['instance'] or plan.chip} ({plan.chip}, {plan.stack} "
             f"stack), written by portcheck {__version__} advise.")
    text = TEMPLATE.read_text(encoding="utf-8")
    text = text.replace("__TITLE__", title).replace("__BUCKETS__", json.dumps(plan.buckets or [0]))
    return text.replace("__PLAN__", json.dumps(data, indent=4, sort_keys=False))
