"""Hugging Face `generate()` with its default dynamic KV cache (PC213): the decode loop lives in transformers, and the
cache it grows by one position per token makes every step a new shape."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.static.check import Context, check
from portcheck.static.dynamic_shape.grown import TensorGrownPerStep
from portcheck.static.syntax import call_name, keyword

# Arguments only transformers' `generate()` takes together: what tells its call from another `generate` method.
_GENERATION_ARGUMENTS = frozenset({"max_new_tokens", "do_sample", "num_beams", "generation_config",
                                   "num_return_sequences", "top_p", "top_k", "pad_token_id", "eos_token_id"})
# A cache of fixed size, named anywhere in the file: `cache_implementation="static"`, `StaticCache(...)`.
_FIXED_CACHE = re.compile(r"""cache_implementation\s*[=:]\s*["'](static|offloaded_static|sliding_window|hybrid)"""
                          r"""|StaticCache|HybridCache|SlidingWindowCache""")
# The file works with transformers' models (directly, or through trl / peft, which wrap them).
_TRANSFORMERS = re.compile(r"^\s*(from|import)\s+(transformers|trl|peft)\b", re.M)
# Libraries whose `generate()` compiles fixed-shape decoding for Neuron.
_NEURON_SERVING = re.compile(r"^\s*(from|import)\s+(optimum\.neuron|neuronx_distributed_inference|vllm)\b", re.M)

MESSAGE = ("`{shown}` decodes with transformers' default dynamic KV cache, which grows by one position per generated "
           "token: each step is a new input shape, so Neuron compiles a new graph per token; give it a cache of the "
           "maximum length (`cache_implementation=\"static\"`) and bucket the prompt lengths, or serve the model "
           "with optimum-neuron or NxD Inference, which compile fixed-shape decoding")


@check(cst.Call, rules=(TensorGrownPerStep,), tokens=("generate(",))
def check_generate(node: cst.Call, ctx: Context) -> None:
    if call_name(node) != "generate" or not isinstance(node.func, cst.Attribute) or ctx.qualname(node.func):
        return
    receiver = node.func.value
    if isinstance(receiver, cst.Name) and receiver.value in ("self", "super"):
        return  # the class's own `generate`: its loop is in view, and read there
    if not any(a.keyword is not None and a.keyword.value in _GENERATION_ARGUMENTS for a in node.args):
        return
    if keyword(node, "cache_implementation") is not None or keyword(node, "past_key_values") is not None:
        return  # the caller chose the cache
    dynamic = ctx.memo("dynamic-cache", ctx.module, lambda: bool(_TRANSFORMERS.search(ctx.text)) and not (
        _FIXED_CACHE.search(ctx.text) or _NEURON_SERVING.search(ctx.text)))
    if not dynamic:
        return  # not transformers' `generate` (another library's has its own cache), or a fixed cache is chosen
    shown = " ".join(ctx.source(node.func).split()) + "(...)"
    ctx.report(TensorGrownPerStep, node, MESSAGE.format(shown=shown))
