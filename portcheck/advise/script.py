"""`portcheck advise --emit-script`: a standalone bring-up script (no portcheck import) that runs the plan's serving
path (serving.py: `vllm serve`, `optimum-cli export neuron`, NxD Inference, torch.compile or torch_neuronx tracing)
with the plan's settings on a Neuron host and times it — or, where it cannot, runs the same model and inputs
eagerly on the CPU and says it is a dry run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from portcheck import __version__
from portcheck.advise.serving import command
from portcheck.escape import printable

if TYPE_CHECKING:
    from portcheck.advise.values import Plan
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
    config_file = spec["hf_config"]
    model_dir = str(Path(config_file).parent) if isinstance(config_file, str) and config_file else \
        "/path/to/checkpoint"
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
        "serving": plan.serving.to_json() if plan.serving else None,
        "model_dir": model_dir,  # the checkpoint the serving libraries load (a config directory has no weights)
        "model_type": model.hf_model_type,
        "command": command(plan, model_dir),
        "cost": {"instance": plan.instance.name if plan.instance else None, "instance_count": plan.instance_count,
                 "usd_per_hour": plan.cost.usd_per_hour if plan.cost else None,
                 "price_from": plan.cost.price.origin if plan.cost else "no instance"},
    }
    served = f", {plan.serving.title}" if plan.serving else ""
    title = (f"Bring-up script for {model.name} on {data['instance'] or plan.chip} ({plan.chip}, {plan.stack} "
             f"stack{served}), written by portcheck {__version__} advise.")
    # the title opens the script's docstring: a model's class name or model_type comes from the model's files, so
    # control characters, backslashes and quotes are escaped (a `"""` in a name ended the docstring: code)
    title = printable(title).replace("\\", "\\\\").replace('"', '\\"')
    text = TEMPLATE.read_text(encoding="utf-8")
    text = text.replace("__TITLE__", title).replace("__BUCKETS__", json.dumps(plan.buckets or [0]))
    return text.replace("__PLAN__", json.dumps(data, indent=4, sort_keys=False))
