#!/usr/bin/env python3
"""__TITLE__

It runs the plan's serving path (PLAN["serving"]):
- vllm-neuron: starts `vllm serve` with the plan's Neuron settings and times completions through its
  OpenAI-compatible API (--client URL times a server that is already running);
- optimum-neuron: runs `optimum-cli export neuron` with the plan's shapes, cores and dtype;
- nxd-inference: builds NxD Inference's NeuronConfig (tp_degree, batch, sequence, buckets), compiles, loads and
  times generation;
- native: torch.compile(backend="neuron", dynamic=False, fullgraph=True) on device "neuron", inputs padded to a
  bucket;
- trace: torch_neuronx.trace, or bucket_model_trace with one graph per sequence bucket, saved under --output
  (a plan with tensor parallelism stops there: tracing does not shard a model as written).
With PLAN["serving"]["compile_only"] it only compiles, on a host without Neuron devices. The model is built in its
serving dtype. Where it cannot run the path it says why and runs the same model with the same inputs eagerly on
the CPU: a dry run that checks the script, the model, the inputs and the bucket kernel, not Neuron.

    python THIS_SCRIPT [--warmup 3] [--runs 20] [--output neuron_artifacts] [--dry-run | --meta] [--buckets N,N]
        [--client URL]
"""

import argparse
import importlib
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import List, Tuple

PLAN = json.loads(r"""__PLAN__""")

SERVING = PLAN["serving"] or {"path": "native" if PLAN["target"]["stack"] == "native" else "trace", "options": {},
                              "compile_only": False, "compile_env": {}, "title": ""}
for _name, _value in {**PLAN["env"], **SERVING["compile_env"]}.items():
    os.environ.setdefault(_name, _value)

import torch  # noqa: E402  (after the environment: the Neuron runtime reads it at import)

# fp8 plans size quantized weights; the model as written runs in bf16
DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}.get(PLAN["dtype"])
BYTES = {torch.bfloat16: 2, torch.float16: 2}.get(DTYPE, 4)


def build_model():
    """The model as `portcheck advise` built it: a transformers config with random weights, or the callable."""
    spec = PLAN["model"]
    if spec["hf_config"]:
        import transformers

        data = json.loads(Path(spec["hf_config"]).read_text(encoding="utf-8"))
        data.pop("transformers_version", None)
        data.update({k: {**v, "use_cache": False} for k, v in data.items() if isinstance(v, dict) and "use_cache" in v})
        data["use_cache"] = False  # as portcheck traced it (sub-configs too), whatever the config ships
        config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
        names = getattr(config, "architectures", None) or []
        cls = next((getattr(transformers, n) for n in names if hasattr(transformers, n)), None)
        options = dict(spec["hf_options"])
        if DTYPE is not None:  # built in the serving dtype: no fp32 copy first
            options["dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"] = DTYPE
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
        sys.path.insert(0, spec["cwd"])
        location, _, attribute = spec["callable"].rpartition(":")
        module = importlib.import_module(location)
    target = module
    for part in attribute.split("."):
        target = getattr(target, part)
    default = torch.get_default_dtype()
    if DTYPE is not None:  # parameters made in the serving dtype, not in fp32 and cast after
        torch.set_default_dtype(DTYPE)
    try:
        built = target()
    finally:
        torch.set_default_dtype(default)
    return built[0] if isinstance(built, tuple) else built


class Positional(torch.nn.Module):
    """The model called with its tensor inputs in a fixed order (torch_neuronx.trace passes them positionally),
    its other arguments as traced, and only tensors returned."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *tensors):
        args, kwargs, given, nested = [], {}, iter(tensors), {}
        for fact in PLAN["inputs"]:
            value = fact["constant"] if "constant" in fact else next(given)
            if fact.get("key"):  # a value inside a dict or list input: the input is built once, then filled
                first = fact["name"] not in nested
                root = nested.setdefault(fact["name"], [] if isinstance(fact["key"][0], int) else {})
                _put(root, fact["key"], value)
                if not first:
                    continue
                value = root
            if fact["positional"]:
                args.append(value)
            else:
                kwargs[fact["name"]] = value
        return _tensors(self.model(*args, **kwargs))


def _put(root, key, value):
    """Set `value` at the keys and indices `key` inside the dict or list `root`, making the levels on the way."""
    for index, part in enumerate(key):
        last = index == len(key) - 1
        inner = value if last else ([] if isinstance(key[index + 1], int) else {})
        if isinstance(part, int):
            while len(root) <= part:
                root.append(None)
            if last or root[part] is None:
                root[part] = inner
        elif last or part not in root:
            root[part] = inner
        root = root[part]


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return out
    values = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else [out]
    kept = tuple(v for v in values if isinstance(v, torch.Tensor))
    return kept[0] if len(kept) == 1 else kept


def get_model(*_):
    """What bucket_model_trace calls in each of its workers: the model, ready to trace, and no aliases."""
    model = Positional(build_model()).eval()
    return (model.to(DTYPE) if DTYPE is not None else model), {}


def make_inputs(batch, seq):
    """Tensors like the traced example's: its dtypes and value ranges, at this batch and sequence length."""
    out = []
    for fact in PLAN["inputs"]:
        if "constant" in fact:
            continue
        shape = list(fact["shape"])
        if shape and shape[0] == PLAN["example_batch"]:
            shape[0] = batch
        if seq and len(shape) >= 2 and PLAN["example_seq"] and shape[1] == PLAN["example_seq"]:
            shape[1] = seq
        dtype = getattr(torch, fact["dtype"])
        if dtype.is_floating_point:
            value = torch.randn(shape, dtype=torch.float32).to(DTYPE or dtype)
        elif dtype == torch.bool:
            value = torch.ones(shape, dtype=dtype)
        else:
            low = int(fact["low"] if fact["low"] is not None else 0)
            high = int(fact["high"] if fact["high"] is not None else 1)
            value = torch.randint(low, high + 1, shape, dtype=dtype)
        out.append(value)
    return out


def bucket_kernel(inputs: List[torch.Tensor]) -> Tuple[List[torch.Tensor], torch.Tensor]:
    """Pad every input whose axis 1 is the sequence up to the smallest bucket that holds it (zeros: pad ids and a
    masked attention) and say which bucket. TorchScript: bucket_model_trace runs it in front of the graphs."""
    buckets: List[int] = __BUCKETS__
    length = inputs[0].size(1)
    index = -1
    for i, size in enumerate(buckets):
        if index < 0 and length <= size:
            index = i
    if index < 0:
        raise ValueError("the sequence is longer than the largest compiled bucket")
    target = buckets[index]
    out: List[torch.Tensor] = []
    for tensor in inputs:
        if tensor.dim() >= 2 and tensor.size(1) == length and target > length:
            shape: List[int] = list(tensor.size())
            shape[1] = target - length
            out.append(torch.cat([tensor, torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)], dim=1))
        else:
            out.append(tensor)
    return out, torch.tensor([index])


def get_bucket_kernel(*_):
    return torch.jit.script(bucket_kernel)


def neuron_mode(force_dry_run):
    """(the mode, "") when this host can compile (and run) the plan's serving path, else (None, why not)."""
    if force_dry_run:
        return None, "a dry run was asked for"
    path, compile_only = SERVING["path"], SERVING["compile_only"]
    if path in ("vllm-neuron", "optimum-neuron"):
        tool = PLAN["command"][0]
        return (path, "") if shutil.which(tool) else (None, f"{tool} ({SERVING['title']}) is not installed here")
    if path == "nxd-inference":
        if importlib.util.find_spec("neuronx_distributed_inference") is None:
            return None, "neuronx-distributed-inference (NxD Inference) is not installed here"
        if not compile_only and not Path("/dev/neuron0").exists():
            return None, "no Neuron device here (/dev/neuron0): advise --compile-only writes a script that compiles"
        return path, ""
    try:
        import torch_neuronx
    except ImportError as exc:
        return None, f"torch-neuronx is not installed here ({exc})"
    if PLAN["target"]["stack"] == "native":
        if compile_only:
            return None, "TorchNeuron compiles on first use on a Neuron device: it has no compile-only mode"
        device = getattr(torch, "neuron", None)
        if device is None or not device.is_available():
            return None, "torch-neuronx is installed but no Neuron device is visible to TorchNeuron"
        return "native", ""
    if not hasattr(torch_neuronx, "trace"):
        return None, "this torch-neuronx is the native (TorchNeuron) backend: the xla stack needs Neuron <= 2.31"
    if not compile_only and not Path("/dev/neuron0").exists():
        return None, "no Neuron device here (/dev/neuron0): advise --compile-only writes a script that compiles"
    return "xla", ""


def shapes_to_run():
    """(batch, length of the inputs made, bucket): for each sequence bucket, inputs one token longer than the
    bucket below (so the kernel pads them); or the one shape."""
    if PLAN["buckets"] and PLAN["example_seq"]:
        below = [PLAN["buckets"][0] // 2, *PLAN["buckets"][:-1]]
        return [(PLAN["batch"], low + 1, bucket) for low, bucket in zip(below, PLAN["buckets"])]
    seq = PLAN["seq_len"] if PLAN["example_seq"] else 0
    return [(PLAN["batch"], seq, seq)]


def compile_xla(examples, output):
    """One traced graph (dynamic batch on dim 0 where the plan says so), or one per bucket packed into one module
    behind the bucket kernel; saved for torch.jit.load."""
    import torch_neuronx

    if SERVING["compile_only"]:  # cpu_backend: no device here; --target is in the compiler arguments
        for example in examples:
            traced = torch_neuronx.trace(get_model()[0], tuple(example), compiler_args=PLAN["compiler_args"],
                                         compiler_workdir=str(output / "workdir"), cpu_backend=True)
            torch.jit.save(traced, str(output / f"model_{example[0].size(-1)}.pt"))
        return None
    if len(examples) > 1:
        traced = torch_neuronx.bucket_model_trace(get_model, [tuple(e) for e in examples],
                                                  torch_neuronx.BucketModelConfig(get_bucket_kernel),
                                                  compiler_workdir=str(output / "workdir"),
                                                  compiler_args=PLAN["compiler_args"])
    else:
        traced = torch_neuronx.trace(get_model()[0], tuple(examples[0]), compiler_args=PLAN["compiler_args"],
                                     compiler_workdir=str(output / "workdir"))
        if PLAN["dynamic_batch"]:
            traced = torch_neuronx.dynamic_batch(traced)
    torch.jit.save(traced, str(output / "model.pt"))
    return traced


def time_client(url, warmup, runs):
    """Completions through the server's OpenAI-compatible API (POST /v1/completions): latency and tokens/s."""
    body = json.dumps({"model": PLAN["command"][2], "prompt": "Hello, my name is",
                       "max_tokens": 32, "temperature": 0}).encode()
    times, tokens = [], 0
    for number in range(warmup + runs):
        request = urllib.request.Request(url.rstrip("/") + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=600) as response:
            answer = json.loads(response.read())
        if number >= warmup:
            times.append((time.perf_counter() - started) * 1000)
            tokens += int(answer.get("usage", {}).get("completion_tokens", 0))
    mean = statistics.fmean(times)
    return {"p50_ms": round(statistics.median(times), 3), "mean_ms": round(mean, 3),
            "tokens_per_s": round(tokens * 1000 / sum(times), 1)}


def serve_vllm(warmup, runs):
    """vllm serve in the background until it answers /health, then the client timing; or, compile-only, the
    command until it ends."""
    if SERVING["compile_only"]:
        return {"returncode": subprocess.run(PLAN["command"], check=False).returncode}
    port = SERVING["options"]["--port"]
    server = subprocess.Popen(PLAN["command"])
    try:
        for _ in range(7200):
            if server.poll() is not None:
                raise SystemExit(f"vllm serve ended with code {server.returncode} before answering")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).close()
                break
            except OSError:
                time.sleep(1)
        return time_client(f"http://127.0.0.1:{port}", warmup, runs)
    finally:
        server.terminate()
        server.wait(timeout=60)


def run_nxdi(output, warmup, runs):
    """NxD Inference: the plan's NeuronConfig, compiled (and, unless compile-only, loaded and timed)."""
    # the nxd-inference path is chosen for inf2 / trn1 (and trn2 up to Neuron 2.33) only (rules/serving.toml)
    from neuronx_distributed_inference.models import config as nxdi  # portcheck: ignore[PC722]
    from neuronx_distributed_inference.utils import constants, hf_adapter  # portcheck: ignore[PC722]

    model_dir = PLAN["model_dir"]
    cls = constants.MODEL_TYPES[PLAN["model_type"]]["causal-lm"]
    config = cls.get_config_cls()(nxdi.NeuronConfig(**SERVING["options"]),
                                  load_config=hf_adapter.load_pretrained_config(model_dir))
    model = cls(model_dir, config)
    started = time.perf_counter()
    model.compile(str(output))
    result = {"compile_s": round(time.perf_counter() - started, 1)}
    if SERVING["compile_only"]:
        return result
    model.load(str(output))
    generator = hf_adapter.HuggingFaceGenerationAdapter(model)
    ids = torch.randint(1, 100, (PLAN["batch"], min(PLAN["seq_len"] // 2, 128)))
    times = measure(lambda: generator.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=32), [],
                    warmup, runs, lambda: None)
    result.update({"p50_ms": round(statistics.median(times), 3),
                   "tokens_per_s": round(PLAN["batch"] * 32 * 1000 / statistics.fmean(times), 1)})
    return result


def serving_preview():
    """What the serving path would run, printed in a dry run."""
    if PLAN["command"]:
        return "command: " + " ".join(_quoted(part) for part in PLAN["command"])
    if SERVING["path"] == "nxd-inference":
        return f"NeuronConfig({', '.join(f'{k}={v!r}' for k, v in SERVING['options'].items())})"
    return ""


def _quoted(part):
    return "'" + part.replace("'", "'\\''") + "'" if any(c in part for c in " {}\"'[],") else part


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


def free_memory_gib():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return float("inf")


def print_cost(tokens_per_s, dry_run):
    """$ per million tokens from the throughput this run measured and the plan's price per hour."""
    cost = PLAN["cost"]
    if not tokens_per_s:
        return
    where = f"{cost['instance_count']} × {cost['instance']}"
    label = "dry run, CPU throughput (not a Neuron figure): " if dry_run else ""
    if not cost["usd_per_hour"]:
        print(f"cost: {label}{tokens_per_s:.1f} tokens/s measured; {cost['price_from']} (re-run advise with "
              "--price-per-hour)")
        return
    usd = cost["usd_per_hour"] / (tokens_per_s * 3600) * 1_000_000
    print(f"cost: {label}${usd:,.4f} per million tokens at {tokens_per_s:.1f} tokens/s and "
          f"${cost['usd_per_hour']:,.2f} per hour ({where}, {cost['price_from']})")


def bucket_list(text):
    """`--buckets 128,4096`: sequence buckets, as integers."""
    return [int(n) for n in text.split(",") if n.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--output", default="neuron_artifacts", help="where the compiled model is saved")
    parser.add_argument("--dry-run", action="store_true", help="run eagerly on the CPU even on a Neuron host")
    parser.add_argument("--meta", action="store_true",
                        help="dry run on the meta device: export each shape without weights (shapes only)")
    parser.add_argument("--buckets", metavar="N,N", type=bucket_list,
                        help="run (time, or export with --meta) only these sequence buckets of the plan; all by "
                             "default")
    parser.add_argument("--client", metavar="URL",
                        help="vllm-neuron: time completions from a server already running at URL, nothing else")
    args = parser.parse_args()
    print(f"plan: {PLAN['model_name']} on {PLAN['instance']} ({PLAN['target']['chip']}, "
          f"{PLAN['target']['stack']}), tp {PLAN['tp_degree']}, serving path {SERVING['path']}"
          + (" (compile only)" if SERVING["compile_only"] else "")
          + f", compiler args: {' '.join(PLAN['compiler_args'])}")
    if args.client:
        if SERVING["path"] != "vllm-neuron":
            raise SystemExit(f"--client times a vLLM server; this plan's serving path is {SERVING['path']}")
        timed = time_client(args.client, args.warmup, args.runs)
        print(f"client: p50 {timed['p50_ms']:.2f} ms, {timed['tokens_per_s']:.1f} tokens/s")
        print_cost(timed["tokens_per_s"], False)
        print("result: " + json.dumps({"mode": "client", "reason": "", "runs": [timed]}))
        return 0

    mode, why = neuron_mode(args.dry_run or args.meta)
    output = Path(args.output)
    if mode in ("vllm-neuron", "optimum-neuron", "nxd-inference"):
        output.mkdir(parents=True, exist_ok=True)
        if mode == "vllm-neuron":
            done = serve_vllm(args.warmup, args.runs)
        elif mode == "optimum-neuron":
            done = {"returncode": subprocess.run(PLAN["command"], check=False).returncode}
        else:
            done = run_nxdi(output, args.warmup, args.runs)
        print_cost(done.get("tokens_per_s"), False)
        print("result: " + json.dumps({"mode": mode, "reason": "", "runs": [done]}))
        return int(done.get("returncode", 0))
    if mode == "xla" and PLAN["tp_degree"] and PLAN["tp_degree"] > 1:  # never compiled unsharded
        raise SystemExit(f"tensor parallelism {PLAN['tp_degree']}: {SERVING['title']} cannot shard a model as "
                         "written; port it to NxD Inference, or build it from neuronx-distributed parallel layers "
                         "and trace it with ModelBuilder V2 (neuronx_distributed.trace.model_builder)")
    refused = SERVING.get("compile_only_refused")
    if (refused or (SERVING["compile_only"] and mode is None)) and not args.dry_run and not args.meta:
        raise SystemExit(f"compile only: {refused or why}")
    meta = args.meta
    if mode is None:
        print(f"dry run: {why}; running the same model and inputs eagerly on the CPU (no Neuron compile; the "
              "times below are CPU times)")
        if serving_preview():
            print(f"{SERVING['title']}: {serving_preview()}")
        built_gib = PLAN["params"] * BYTES / 2**30  # built in the serving dtype
        if not meta and built_gib * 1.5 > free_memory_gib():
            meta = True
            print(f"dry run on the meta device: {built_gib:.1f} GiB of weights do not fit this host's free "
                  "memory; shapes are checked, nothing is timed")
    if PLAN["tp_degree"] and PLAN["tp_degree"] > 1:
        how = {"trace": "tracing cannot shard a model as written, so on a Neuron host this script stops before "
                        "compiling it: port it to NxD Inference, or to neuronx-distributed parallel layers traced "
                        "with ModelBuilder V2",
               "native": "torch.compile compiles it as written, which fits one core only once it is sharded "
                         "(a custom port with TorchNeuron's tensor parallelism)"}
        print(f"note: the plan shards the model over {PLAN['tp_degree']} cores; "
              + how.get(SERVING["path"], f"{SERVING['title']} shards it with tensor parallelism {PLAN['tp_degree']}"))

    shapes = shapes_to_run()
    kernel = get_bucket_kernel() if len(shapes) > 1 else None
    planned = [bucket for _, _, bucket in shapes]
    chosen = set(planned if args.buckets is None else args.buckets)
    if not chosen <= set(planned):
        raise SystemExit(f"--buckets {','.join(map(str, sorted(chosen)))}: the plan's buckets are "
                         f"{', '.join(map(str, planned))}")

    def inputs_for(batch, length):
        made = make_inputs(batch, length)
        return [i.to("meta") for i in made] if meta else made

    with torch.no_grad():
        if mode == "xla":
            output.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            run = compile_xla([inputs_for(batch, bucket) for batch, _, bucket in shapes], output)
            print(f"compiled {len(shapes)} graph(s) in {time.perf_counter() - started:.1f} s: {output}")
            if SERVING["compile_only"]:
                print("result: " + json.dumps({"mode": "compile-only", "reason": "", "runs": []}))
                return 0
        elif meta:
            with torch.device("meta"):
                run = Positional(build_model()).eval()
        else:
            run = get_model()[0]
            if mode == "native":
                run = torch.compile(run.to("neuron"), backend="neuron", dynamic=False, fullgraph=True)
    synchronize = torch.neuron.synchronize if mode == "native" else (lambda: None)
    results = []
    for number, (batch, length, bucket) in enumerate(shapes):
        if bucket not in chosen:
            continue
        inputs = inputs_for(batch, length)
        if kernel is not None and mode != "xla":  # the xla bucket model pads inside; elsewhere pad here
            inputs, index = kernel(inputs)
            if int(index[0]) != number:
                raise SystemExit(f"the bucket kernel chose bucket {int(index[0])} for length {length}, not {number}")
        if mode == "native":
            inputs = [i.to("neuron") for i in inputs]
        label = f"batch {batch}" + (f", sequence {length} in bucket {bucket}" if length else "")
        with torch.no_grad():
            if meta:  # eager code may read values (.item()) a meta tensor has not: export traces it instead
                torch.export.export(run, tuple(inputs), strict=False)
                print(f"{label}: exported on the meta device (shapes only)")
                results.append({"batch": batch, "seq": length, "bucket": bucket, "meta": True})
                continue
            try:
                started = time.perf_counter()
                run(*inputs)
                synchronize()
                first = time.perf_counter() - started
            except Exception as exc:  # e.g. an fp32 constant made in forward meeting bf16 weights
                raise SystemExit(f"{label}: the first call failed: {type(exc).__name__}: {exc}"[:500]) from None
            times = measure(run, inputs, args.warmup, args.runs, synchronize)
        mean = statistics.fmean(times)
        entry = {"batch": batch, "seq": length, "bucket": bucket, "first_call_s": round(first, 3),
                 "p50_ms": round(statistics.median(times), 3),
                 "p90_ms": round(sorted(times)[math.ceil(0.9 * len(times)) - 1], 3), "mean_ms": round(mean, 3),
                 "samples_per_s": round(batch * 1000 / mean, 2)}
        if length:
            entry["tokens_per_s"] = round(batch * length * 1000 / mean, 1)
        results.append(entry)
        compiled = " (compiles this shape)" if mode == "native" else ""
        print(f"{label}: first call {first:.2f} s{compiled}, p50 {entry['p50_ms']:.2f} ms, p90 "
              f"{entry['p90_ms']:.2f} ms, {entry['samples_per_s']:.1f} samples/s"
              + (f", {entry['tokens_per_s']:.0f} tokens/s" if length else ""))
    timed = [r for r in results if r.get("tokens_per_s")]
    if timed:  # the plan's longest shape: the sequence it was sized for
        print_cost(timed[-1]["tokens_per_s"], mode is None)
    print("result: " + json.dumps({"mode": mode or "dry-run", "reason": why, "runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
