"""rules/serving.toml: the documented ways to serve a model on each chip, stack and release (the architectures or
model types each serves natively), compiling without Neuron devices, the arguments each emitted artifact may pass,
and the compile host's memory factors."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from portcheck.knowledge.core import load
from portcheck.knowledge.files import read
from portcheck.knowledge.sdk import known_releases
from portcheck.releases import KnowledgeError, Range, read_range

ARGUMENT_TYPES = ("int", "str", "json", "path", "switch")
# The kinds of model a plan sizes (portcheck/advise/model.py), a path serves some of them.
KINDS = ("decoder", "encoder", "encoder-decoder", "vision", "other")


@dataclass(frozen=True)
class ServingPath:
    id: str
    title: str
    chips: tuple[str, ...]
    stacks: tuple[str, ...]
    kinds: tuple[str, ...]
    releases: Range
    architectures: tuple[str, ...]
    model_types: tuple[str, ...]
    why: str
    source: str
    task: str = ""  # the export task every model it lists is exported for ("": by the model's class)

    @property
    def listed(self) -> bool:
        """Serves only the architectures it lists (a library), not every model of its stack."""
        return bool(self.architectures or self.model_types)

    def serves(self, name: str, model_type: str) -> bool:
        return name in self.architectures or (bool(model_type) and model_type in self.model_types)


@dataclass(frozen=True)
class CompileOnly:
    path: str
    env: dict[str, str]
    how: str
    source: str


@dataclass(frozen=True)
class Argument:
    tool: str
    name: str
    type: str
    choices: tuple[str, ...]
    keys: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Override:
    """An argument the docs add to a path's artifact for some models on some chips (gpt-oss on Trn2: the MXFP4
    checkpoint's quantization_config cleared, so its experts load dequantised to bf16)."""

    path: str
    chips: tuple[str, ...]
    model_types: tuple[str, ...]
    name: str
    value: object
    why: str
    source: str


@dataclass(frozen=True)
class Fp8Recipe:
    """NxD Inference's fp8 weight recipe: what it keeps in bf16, and the NeuronConfig values and environment it
    sets."""

    quantization_type: str
    quantization_dtype: str
    keep: tuple[str, ...]  # "lm_head", "self_attn" (every layer's), "first_mlp", "last_mlp"
    env: dict[str, str]
    kv_env: dict[str, str]
    source: str
    kv_source: str


@dataclass(frozen=True)
class MxFormat:
    """A microscaled weight format (mxfp4, mxfp8): its bits and shared scale, the chips that run it, the modules
    its recipe quantises, and what the recipe passes to vLLM Neuron."""

    name: str
    bits: int
    scale_bits: int
    block: int
    chips: tuple[str, ...]
    quantises: tuple[str, ...]  # of MX_MODULES
    model_types: tuple[str, ...]  # the models the docs run it for ((): any)
    mlp_bf16_from_tp: int  # 0: never
    neuron_config: dict[str, object]
    clear_quantization_config: bool
    source: str

    @property
    def bytes_per_value(self) -> float:
        return (self.bits + self.scale_bits / self.block) / 8


@dataclass(frozen=True)
class Pooling:
    """How a path serves a pooling (embedding) model: the argument and value that select its pooling runner, why,
    what that means for the plan's memory, and whether an fp8 KV cache is refused."""

    path: str
    argument: str
    value: str
    why: str
    sizing: str
    fp8_kv_cache: bool
    source: str
    sizing_source: str


@dataclass(frozen=True)
class ServingData:
    paths: tuple[ServingPath, ...]
    compile_only: dict[str, CompileOnly]
    arguments: dict[str, dict[str, Argument]]  # tool -> name -> argument
    weights_factor: float
    optlevel3_factor: float
    compile_host_source: str
    overrides: tuple[Override, ...] = ()
    fp8: Fp8Recipe | None = None
    mandatory: dict[tuple[str, str], tuple[tuple[str, ...], str]] | None = None  # (tool, task) -> inputs, source
    mx: dict[str, MxFormat] | None = None
    pooling: Pooling | None = None


@functools.cache
def load_serving() -> ServingData:
    """rules/serving.toml, checked: known chips, stacks, kinds and releases, a source on every entry."""
    data = read("serving.toml")
    knowledge, known = load(), known_releases()
    paths = []
    for entry in data.get("path", []):
        where = f"serving.toml: path {entry.get('id')!r}"
        path = ServingPath(entry.get("id", ""), entry.get("title", ""), tuple(entry.get("chips", ())),
                           tuple(entry.get("stacks", ())), tuple(entry.get("kinds", ())),
                           read_range(where, entry, known),
                           tuple(entry.get("architectures", ())), tuple(entry.get("model_types", ())),
                           entry.get("why", ""), entry.get("source", ""), entry.get("task", ""))
        if not (path.id and path.title and path.why and path.source.strip() and path.chips and path.stacks
                and path.kinds) or not set(path.chips) <= set(knowledge.chips) or not set(path.stacks) <= \
                set(knowledge.stacks) or not set(path.kinds) <= set(KINDS):
            raise KnowledgeError(f"{where}: needs an id, a title, why, a source and known chips, stacks and kinds")
        paths.append(path)
    ids = {p.id for p in paths}
    compile_only = {}
    for entry in data.get("compile_only", []):
        found = CompileOnly(entry.get("path", ""), dict(entry.get("env", {})), entry.get("how", ""),
                            entry.get("source", ""))
        if found.path not in ids or not found.how or not found.source.strip():
            raise KnowledgeError(f"serving.toml: compile_only {found.path!r} needs a known path, how and a source")
        compile_only[found.path] = found
    arguments: dict[str, dict[str, Argument]] = {}
    for entry in data.get("argument", []):
        argument = Argument(entry.get("tool", ""), entry.get("name", ""), entry.get("type", ""),
                            tuple(entry.get("choices", ())), tuple(entry.get("keys", ())), entry.get("source", ""))
        if not argument.tool or not argument.name or argument.type not in ARGUMENT_TYPES or not argument.source:
            raise KnowledgeError(f"serving.toml: argument {argument.name!r} needs a tool, a type "
                                 f"({', '.join(ARGUMENT_TYPES)}) and a source")
        arguments.setdefault(argument.tool, {})[argument.name] = argument
    host = data.get("compile_host", {})
    if not host.get("source") or float(host.get("weights_factor", 0)) < 1:
        raise KnowledgeError("serving.toml: [compile_host] needs weights_factor >= 1 and a source")
    overrides = []
    for entry in data.get("override", []):
        override = Override(entry.get("path", ""), tuple(entry.get("chips", ())), tuple(entry.get("model_types", ())),
                            entry.get("name", ""), entry.get("value"), entry.get("why", ""), entry.get("source", ""))
        if override.path not in ids or not override.name or override.value is None or not override.why \
                or not override.source.strip() or not set(override.chips) <= set(knowledge.chips):
            raise KnowledgeError(f"serving.toml: override {override.name!r} needs a known path, chips, a value, why "
                                 "and a source")
        overrides.append(override)
    mandatory = {}
    for entry in data.get("mandatory_inputs", []):
        inputs = tuple(entry.get("inputs", ()))
        if not entry.get("source") or any(f"--{i}" not in arguments.get(entry.get("tool", ""), {}) for i in inputs):
            raise KnowledgeError(f"serving.toml: mandatory_inputs {entry.get('task')!r} needs a source and "
                                 "documented arguments")
        mandatory[entry["tool"], entry.get("task", "")] = (inputs, entry["source"])
    return ServingData(tuple(paths), compile_only, arguments, float(host["weights_factor"]),
                       float(host.get("optlevel3_factor", 1)), host["source"], tuple(overrides), _fp8(data),
                       mandatory, _mx(data, set(knowledge.chips)), _pooling(data, arguments, ids))


def _pooling(data: dict[str, object], arguments: dict[str, dict[str, Argument]], ids: set[str]) -> Pooling | None:
    entry = data.get("pooling")
    if entry is None:
        return None
    assert isinstance(entry, dict)
    found = Pooling(entry.get("path", ""), entry.get("argument", ""), entry.get("value", ""), entry.get("why", ""),
                    entry.get("sizing", ""), bool(entry.get("fp8_kv_cache", True)), entry.get("source", ""),
                    entry.get("sizing_source", ""))
    documented = arguments.get("vllm serve", {}).get(found.argument)
    if found.path not in ids or documented is None or found.value not in documented.choices or not (
            found.why and found.sizing and found.source.strip() and found.sizing_source.strip()):
        raise KnowledgeError("serving.toml: [pooling] needs a known path, a documented vllm serve argument and value, "
                             "why, sizing and their sources")
    return found


FP8_KEEP = ("lm_head", "self_attn", "first_mlp", "last_mlp")


def _fp8(data: dict[str, object]) -> Fp8Recipe | None:
    entry = data.get("fp8_recipe")
    if entry is None:
        return None
    assert isinstance(entry, dict)
    recipe = Fp8Recipe(entry.get("quantization_type", ""), entry.get("quantization_dtype", ""),
                       tuple(entry.get("keep", ())), dict(entry.get("env", {})), dict(entry.get("kv_env", {})),
                       entry.get("source", ""), entry.get("kv_source", ""))
    if not (recipe.quantization_type and recipe.quantization_dtype and recipe.source.strip()
            and recipe.kv_source.strip()) or not set(recipe.keep) <= set(FP8_KEEP):
        raise KnowledgeError(f"serving.toml: [fp8_recipe] needs quantization_type, quantization_dtype, keep (of "
                             f"{', '.join(FP8_KEEP)}), a source and a kv_source")
    return recipe


MX_MODULES = ("experts", "self_attn", "mlp")


def _mx(data: dict[str, object], chips: set[str]) -> dict[str, MxFormat]:
    out = {}
    entries = data.get("mx_format", [])
    assert isinstance(entries, list)
    for entry in entries:
        found = MxFormat(entry.get("name", ""), int(entry.get("bits", 0)), int(entry.get("scale_bits", 0)),
                         int(entry.get("block", 0)), tuple(entry.get("chips", ())), tuple(entry.get("quantises", ())),
                         tuple(entry.get("model_types", ())), int(entry.get("mlp_bf16_from_tp", 0)),
                         dict(entry.get("neuron_config", {})), bool(entry.get("clear_quantization_config", False)),
                         entry.get("source", ""))
        complete = (found.name and found.bits > 0 and found.block > 0 and found.chips and found.quantises
                    and found.source.strip())
        if not complete or not set(found.chips) <= chips or not set(found.quantises) <= set(MX_MODULES):
            raise KnowledgeError(f"serving.toml: mx_format {found.name!r} needs a name, bits, a block, known chips, "
                                 f"quantises (of {', '.join(MX_MODULES)}) and a source")
        out[found.name] = found
    return out
