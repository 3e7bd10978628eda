#!/usr/bin/env python3
"""__TITLE__

On a Neuron host with torch-neuronx, it compiles the model with the plan's neuronx-cc flags and environment
(xla stack: torch_neuronx.trace, or torch_neuronx.bucket_model_trace with one graph per sequence bucket, saved
under --output; native stack: torch.compile(backend="neuron", dynamic=False) on device "neuron", inputs padded
to a bucket), then times warm runs and prints latency and throughput. Where torch-neuronx is absent it says so
and runs the same model with the same inputs eagerly on the CPU: a dry run that checks the script, the model,
the inputs and the bucket kernel, not Neuron.

    python THIS_SCRIPT [--warmup 3] [--runs 20] [--output neuron_artifacts] [--dry-run | --meta]
"""

import argparse
import importlib
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

PLAN = json.loads(r"""__PLAN__""")

for _name, _value in PLAN["env"].items():
    os.environ.setdefault(_name, _value)

import torch  # noqa: E402  (after the environment: the Neuron runtime reads it at import)


def build_model():
    spec = PLAN["model"]
    if spec["hf_config"]:
        import transformers

        data = json.loads(Path(spec["hf_config"]).read_text(encoding="utf-8"))
        data.pop("transformers_version", None)
        data.setdefault("use_cache", False)
        config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
        names = getattr(config, "architectures", None) or []
        cls = next((getattr(transformers, n) for n in names if hasattr(transformers, n)), None)
        options = spec["hf_options"]
        return cls._from_config(config, **options) if cls else transformers.AutoModel.from_config(config, **options)
    if spec["file"]:
        path = Path(spec["file"])
        sys.path.insert(0, str(path.parent))
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
        attribute = spec["callable"]
    else:
        sys.path.insert(0, os.getcwd())
        location, _, attribute = spec["callable"].rpartition(":")
        module = importlib.import_module(location)
    target = module
    for part in attribute.split("."):
        target = getattr(target, part)
    built = target()
    return built[0] if isinstance(built, tuple) else built


def make_inputs(batch, seq):
    """Inputs like the traced example's: its dtypes and value ranges, at this batch and sequence length."""
    out = []
    for fact in PLAN["inputs"]:
        shape = list(fact["shape"])
        if shape and shape[0] == PLAN["example_batch"]:
            shape[0] = batch
        if seq and len(shape) >= 2 and shape[1] == PLAN["example_seq"] and PLAN["example_seq"]:
            shape[1] = seq
        dtype = getattr(torch, fact["dtype"])
        if dtype.is_floating_point:
            value = torch.randn(shape, dtype=torch.float32).to(dtype)
        elif dtype == torch.bool:
            value = torch.ones(shape, dtype=dtype)
        else:
            low = int(fact["low"] if fact["low"] is not None else 0)
            high = int(fact["high"] if fact["high"] is not None else 1)
            value = torch.randint(low, high + 1, shape, dtype=dtype)
        out.append(value)
    return out


class Positional(torch.nn.Module):
    """The model called with tensors in a fixed order (torch_neuronx.trace passes inputs positionally),
    returning only tensors."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.names = [f["name"] for f in PLAN["inputs"]]
        self.positional = sum(1 for f in PLAN["inputs"] if f["positional"])

    def forward(self, *tensors):
        args = tensors[: self.positional]
        kwargs = dict(zip(self.names[self.positional:], tensors[self.positional:], strict=True))
        return _tensors(self.model(*args, **kwargs))


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return out
    values = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else [out]
    kept = tuple(v for v in values if isinstance(v, torch.Tensor))
    return kept[0] if len(kept) == 1 else kept


def bucket_kernel(inputs: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Pad every input whose axis 1 is the sequence up to the smallest bucket that holds it (zeros: pad ids
    and a masked attention), and say which bucket. TorchScript: bucket_model_trace runs it on the device side."""
    length = inputs[0].size(1)
    index = 0
    target = length
    for i, size in enumerate(__BUCKETS__):
        if length <= size:
            index = i
            target = size
            break
    out: list[torch.Tensor] = []
    for tensor in inputs:
        if tensor.dim() >= 2 and tensor.size(1) == length and target > length:
            shape = tensor.size()
            shape[1] = target - length
            out.append(torch.cat([tensor, torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)], dim=1))
        else:
            out.append(tensor)
    return out, torch.tensor([index])


def get_bucket_kernel(*_):
    return torch.jit.script(bucket_kernel)


def neuron_mode(force_dry_run):
    """"xla" or "native" when this host can compile for the plan's stack, else the reason it cannot."""
    if force_dry_run:
        return None, "--dry-run given"
    try:
        import torch_neuronx  # noqa: F401
    except ImportError as exc:
        return None, f"torch-neuronx is not installed here ({exc})"
    if PLAN["target"]["stack"] == "native":
        device = getattr(torch, "neuron", None)
        if device is None or not device.is_available():
            return None, "torch-neuronx is installed but no Neuron device is visible"
        return "native", ""
    return "xla", ""


def shapes_to_run():
    """(batch, length of the inputs made, bucket): each sequence bucket with inputs one token longer than the
    bucket below it (so the kernel pads them), or the one shape."""
    if PLAN["buckets"] and PLAN["example_seq"]:
        below = [PLAN["buckets"][0] // 2, *PLAN["buckets"][:-1]]
        return [(PLAN["batch"], low + 1, bucket) for low, bucket in zip(below, PLAN["buckets"], strict=True)]
    seq = PLAN["seq_len"] if PLAN["example_seq"] else 0
    return [(PLAN["batch"], seq, seq)]


def compile_xla(model, examples, output):
    """One traced graph, or one per bucket packed into one module with the bucket kernel in front."""
    import torch_neuronx

    if len(examples) > 1:
        config = torch_neuronx.BucketModelConfig(get_bucket_kernel)
        traced = torch_neuronx.bucket_model_trace(lambda *_: (model, {}), [tuple(e) for e in examples], config,
                                                  compiler_workdir=str(output / "workdir"),
                                                  compiler_args=PLAN["compiler_args"])
    else:
        traced = torch_neuronx.trace(model, tuple(examples[0]), compiler_args=PLAN["compiler_args"],
                                     compiler_workdir=str(output / "workdir"))
        if PLAN["dynamic_batch"]:
            traced = torch_neuronx.dynamic_batch(traced)
    torch.jit.save(traced, str(output / "model.pt"))
    return traced


def compile_native(model):
    return torch.compile(model.to("neuron"), backend="neuron", dynamic=False)


def measure(run, inputs, warmup, runs, synchronize):
    for _ in range(warmup):
        run(*inputs)
    synchronize()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run(*inputs)
        synchronize()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--output", default="neuron_artifacts", help="where compiled models are saved")
    parser.add_argument("--dry-run", action="store_true", help="run eagerly on the CPU even on a Neuron host")
    parser.add_argument("--meta", action="store_true",
                        help="dry run on the meta device: export each shape without weights (shapes only)")
    args = parser.parse_args()

    mode, why = neuron_mode(args.dry_run or args.meta)
    # fp8 plans size quantized weights; the model as written runs here in bf16
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}.get(PLAN["dtype"])
    print(f"plan: {PLAN['model_name']} on {PLAN['instance']} ({PLAN['target']['chip']}, "
          f"{PLAN['target']['stack']}), tp {PLAN['tp_degree']}, compiler args: {' '.join(PLAN['compiler_args'])}")
    meta = False
    if mode is None:
        print(f"dry run: {why}; running the same model and inputs eagerly on the CPU (no Neuron compile; the "
              "times below are CPU times)")
        try:
            available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES") / 2**30
        except (ValueError, OSError, AttributeError):
            available = float("inf")
        built_gib = PLAN["params"] * 4 / 2**30  # built in fp32 before the cast
        meta = args.meta or built_gib * 1.5 > available
        if meta and not args.meta:
            print(f"dry run on the meta device: {built_gib:.1f} GiB of fp32 weights do not fit this host's "
                  f"{available:.1f} GiB free; shapes are checked, nothing is timed")
    if PLAN["tp_degree"] and PLAN["tp_degree"] > 1:
        print(f"note: the plan shards the model over {PLAN['tp_degree']} cores; this script compiles the model "
              "as written, which fits one core only once it is sharded (neuronx-distributed parallel layers, "
              "NxD Inference with tp_degree)")

    with torch.device("meta") if meta else torch.device("cpu"):
        model = build_model()
    model.eval()
    if dtype is not None and not meta:
        model = model.to(dtype)
    wrapped = Positional(model).eval()
    output = Path(args.output)
    shapes = shapes_to_run()
    kernel = get_bucket_kernel() if len(shapes) > 1 else None

    def inputs_for(batch, length):
        made = make_inputs(batch, length)
        if dtype is not None:
            made = [i.to(dtype) if i.is_floating_point() else i for i in made]
        return [i.to("meta") for i in made] if meta else made

    with torch.inference_mode():
        if mode == "xla":
            output.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            run = compile_xla(wrapped, [inputs_for(batch, bucket) for batch, _, bucket in shapes], output)
            print(f"compiled {len(shapes)} graph(s) in {time.perf_counter() - started:.1f} s: {output / 'model.pt'}")
        elif mode == "native":
            run = compile_native(wrapped)
        else:
            run = wrapped
    synchronize = torch.neuron.synchronize if mode == "native" else (lambda: None)
    results = []
    for number, (batch, length, bucket) in enumerate(shapes):
        inputs = inputs_for(batch, length)
        if kernel is not None and mode != "xla":  # the xla bucket model pads inside; elsewhere pad here
            inputs, index = kernel(inputs)
            if int(index[0]) != number:
                raise SystemExit(f"the bucket kernel chose bucket {int(index[0])} for length {length}, "
                                 f"not {number}")
        if mode == "native":
            inputs = [i.to("neuron") for i in inputs]
        label = f"batch {batch}" + (f", sequence {length} in bucket {bucket}" if length else "")
        with torch.inference_mode():
            if meta:  # eager code may read values (.item()) a meta tensor has not: export traces it instead
                torch.export.export(run, tuple(inputs), strict=False)
                print(f"{label}: exported on the meta device (shapes only)")
                results.append({"batch": batch, "seq": length, "bucket": bucket, "meta": True})
                continue
            times = measure(run, inputs, args.warmup, args.runs, synchronize)
        mean = statistics.fmean(times)
        entry = {"batch": batch, "seq": length, "bucket": bucket, "p50_ms": round(statistics.median(times), 3),
                 "p90_ms": round(sorted(times)[math.ceil(0.9 * len(times)) - 1], 3), "mean_ms": round(mean, 3),
                 "samples_per_s": round(batch * 1000 / mean, 2)}
        if length:
            entry["tokens_per_s"] = round(batch * length * 1000 / mean, 1)
        results.append(entry)
        print(f"{label}: p50 {entry['p50_ms']:.2f} ms, p90 {entry['p90_ms']:.2f} ms, "
              f"{entry['samples_per_s']:.1f} samples/s" + (f", {entry['tokens_per_s']:.0f} tokens/s" if length
                                                          else ""))
    print("result: " + json.dumps({"mode": mode or "dry-run", "reason": why, "runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
