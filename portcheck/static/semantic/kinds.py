"""The vocabulary a file's summary (portcheck.static.semantic.summary) and the call graph share: what a function is
for (its roles), the guards a call or a region sits under, and the names that decide them."""

from __future__ import annotations

# What a function is for, as its own code says.
FORWARD = "forward"  # a module's forward: what the Neuron compiler sees
STEP = "step"  # a training or evaluation step: calls `backward()` / `optimizer.step()`, or is Lightning's *_step
HOST = "host"  # a data-pipeline entry: `__getitem__`, a collate function, a method of a Dataset or Sampler
PROBE = "probe"  # returns whether CUDA is there (`return torch.cuda.is_available()`)
VENDOR = "vendor"  # drives another vendor's runtime (TensorRT, OpenVINO, CoreML, ONNX Runtime)
CUDA_CLASS = "cuda-class"  # a method of a class that exists for CUDA (`CUDAAccelerator`, `Bnb8bitLinear`)
CUDA_IMPL = "cuda-impl"  # an op's implementation registered for CUDA devices only (`custom_op(device_types="cuda")`)
ONCE = "once"  # runs once per key or object: a cached function (`@functools.cache`, `@cached_property`)
READS = "reads"  # its `return`s read a parameter's tensor data into Python (`return t.tolist()`), on every stack
READS_OFF_XLA = "reads-off-xla"  # the same, except for an XLA tensor, which it passes through (nodes.returns_read)
UNNAMED = "unnamed"  # module-level, undecorated, named by its file only inside itself: dead where no file names it

# Guards, as written at a call site or over a region: "cuda" (runs only with CUDA), "vendor" (only another
# vendor's export or runtime takes it), or "?target" / "!target": under `if target():` / `if not target():`,
# which is a CUDA-only path when `target` turns out to be one of the project's probes.
CUDA_GUARD, VENDOR_GUARD = "cuda", "vendor"
# Under a lazy initialisation: `if self.x is None: self.x = ...`, `if not done: ...; done = True` run once.
ONCE_GUARD = "once"
# Under `if step % N == 0:`, or after `if step % N != 0: return`: what runs once every N steps (semantic.interval).
INTERVAL_GUARD = "interval"
# Under `if __name__ == "__main__":` at a module's top level: what runs only when the file is run as a script.
MAIN_GUARD = "main"

# Training steps only: what a validation, test or predict step adds around the model's forward (metrics, logging)
# runs once per evaluation batch; `compute_loss` is transformers' Trainer's hook, called every micro-batch.
STEP_METHODS = frozenset({"training_step", "train_step", "compute_loss"})
# Decorators that cache a function's result: its body runs once per argument or object, not once a step.
CACHING = frozenset({"cache", "lru_cache", "cached_property", "cached", "memoize", "memoized"})
PROBES = frozenset({"torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.is_initialized"})
DATA_BASES = ("torch.utils.data.Dataset", "torch.utils.data.IterableDataset", "torch.utils.data.Sampler",
               "torch.utils.data.dataset.Dataset", "torch.utils.data.sampler.Sampler",
               # transformers' collators (`Trainer(data_collator=...)`) batch examples on the host
               "transformers.data.data_collator.DataCollatorMixin", "transformers.DataCollatorMixin",
               "transformers.data.DataCollatorMixin")
# What a data loader or a trainer calls to batch or seed examples: the data pipeline, on the host. A function is
# passed (`collate_fn=collate`), or an object whose methods do it (`data_collator=Collator(...)`, as "Collator()").
HOST_KEYWORDS = frozenset({"collate_fn", "worker_init_fn", "data_collator"})
# Another vendor's inference runtime: a module that cannot load without one is that runtime's backend.
VENDOR_RUNTIMES = ("tensorrt", "torch_tensorrt", "tensorrt_llm", "openvino", "coremltools", "onnxruntime", "pycuda",
                   "polygraphy", "tflite_runtime", "ai_edge_litert", "ncnn", "rknn", "rknnlite", "MNN", "ais_bench",
                   "tritonclient", "hailo_platform", "executorch", "ctranslate2", "faster_whisper", "llama_cpp")
VENDOR_MODULES = (*VENDOR_RUNTIMES, "tensorflow", "paddle")
# Calls that export a model for another runtime (ONNX): a function making them is that export's code, and so is
# what only it calls (the dummy inputs it moves to CUDA, the half-precision copy it exports).
VENDOR_EXPORTS = frozenset({"torch.onnx.export", "torch.onnx.dynamo_export"})
VENDOR_TESTS = frozenset({"torch.onnx.is_in_onnx_export", "torch.jit.is_tracing", "torch.jit.is_scripting",
                           "torch.onnx.is_onnx_exporting"})


def negated(side: str) -> str:
    """The guard where a test of polarity `side` ("!cuda", "!f") fails: "cuda", "?f"."""
    return side[1:] if side == "!" + CUDA_GUARD else "?" + side[1:]


def innermost(guards: tuple[str, ...]) -> str:
    """The guard a call or an import records: CUDA's wherever it is among the enclosing ones, else the innermost."""
    return CUDA_GUARD if CUDA_GUARD in guards else guards[-1] if guards else ""


__all__ = ["CACHING", "CUDA_CLASS", "CUDA_GUARD", "CUDA_IMPL", "DATA_BASES", "FORWARD", "HOST", "HOST_KEYWORDS",
           "INTERVAL_GUARD", "MAIN_GUARD", "ONCE", "ONCE_GUARD", "PROBE", "PROBES", "READS", "READS_OFF_XLA", "STEP",
           "STEP_METHODS", "UNNAMED", "VENDOR", "VENDOR_EXPORTS", "VENDOR_GUARD", "VENDOR_MODULES", "VENDOR_RUNTIMES",
           "VENDOR_TESTS", "innermost", "negated"]
