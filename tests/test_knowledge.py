"""The shipped data is consistent, and what it records about torch still holds for the torch installed."""

import importlib.util
import re
import shutil
import warnings
from dataclasses import fields

import pytest

from portcheck import knowledge
from portcheck.knowledge import load

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install -e '.[dev]')")
# These import torch into this process: under xdist they run on one worker (with test_advise's), which imports it once.
in_process_torch = pytest.mark.xdist_group("in-process-torch")


def test_data_loads_and_versions():
    k = load()
    assert len(k.rules) >= 12 and len(k.cuda_api) >= 40
    assert re.fullmatch(r"[0-9a-f]{12}", k.data_version)
    for chip in k.chips.values():
        assert chip.default_stack in chip.stacks
    assert k.chips["trn2"].default_stack == "native" and k.chips["inf2"].default_stack == "xla"


@needs_torch
@in_process_torch
def test_native_replacements_exist_in_torch():
    import torch

    for api in load().cuda_api.values():
        name = api.native.split("(")[0]
        if name.startswith("torch.neuron."):  # TorchNeuron's device module: exists only with torch-neuronx
            assert api.native_since and api.native_source, f"{api.name}: {name} needs its release and source"
            continue
        if not name.startswith("torch."):
            continue
        obj = torch
        for part in name.split(".")[1:]:
            assert hasattr(obj, part), f"{api.name}: {name} does not exist in torch {torch.__version__}"
            obj = getattr(obj, part)


@needs_torch
@in_process_torch
def test_every_torch_name_a_library_advice_names_exists_in_torch():
    """rules/libraries.toml tells what to write instead of each CUDA-only library (`torch.cdist`, `torch.bmm`):
    each `torch.` name in that advice must be real."""
    import torch

    from portcheck.knowledge.libraries import libraries

    for library in set(libraries().values()):
        for name in re.findall(r"`(torch(?:\.\w+)+)", library.native + " " + library.xla):
            obj = torch
            for part in name.split(".")[1:]:
                assert hasattr(obj, part), f"{library.title}: {name} does not exist in torch {torch.__version__}"
                obj = getattr(obj, part)


def _call(torch, name):
    target = getattr(torch.cuda, name)
    arguments = {
        "set_device": (0,), "device": (0,), "manual_seed": (0,), "manual_seed_all": (0,),
        "set_rng_state": (torch.ByteTensor(8),), "set_per_process_memory_fraction": (0.5,),
        "stream": (object(),), "set_stream": (object(),), "graph": (object(),),
        "make_graphed_callables": (torch.nn.Linear(2, 2), (torch.zeros(1, 2),)),
    }.get(name, ())
    if name == "default_generators":
        return target
    result = target(*arguments)
    if name in ("device", "stream", "graph"):
        result.__enter__()
    return result


@needs_torch
@in_process_torch
@pytest.mark.parametrize("name", sorted(load().cuda_api))
def test_recorded_behaviour_without_cuda(name):
    """cuda_api.toml's `behaviour` is what this torch does on this CUDA-less machine."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present; the recorded behaviour is for hosts without one")
    api = load().cuda_api[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = _call(torch, name)
        except Exception:
            assert api.behaviour == "raises", f"torch.cuda.{name} raised, recorded as {api.behaviour}"
            return
    assert api.behaviour != "raises", f"torch.cuda.{name} returned {result!r}, recorded as raises"
    if api.behaviour == "returns-false":
        assert result is False
    elif api.behaviour == "returns-zero":
        assert not result
    # "ignored": returning at all without CUDA is the recorded behaviour, checked above.


@needs_torch
@in_process_torch
def test_every_torch_fix_callee_exists_in_torch():
    """A `native_fix` / `xla_fix` with a `torch:` callee names a function of the installed torch."""
    import torch

    checked = 0
    for api in load().cuda_api.values():
        for fix in api.fixes.values():
            module, _, attribute = fix.call.partition(":")
            if module != "torch":
                continue
            obj = torch
            for part in attribute.split("."):
                assert hasattr(obj, part), f"{api.name}: torch.{attribute} does not exist in torch {torch.__version__}"
                obj = getattr(obj, part)
            assert callable(obj)
            checked += 1
    assert checked >= 5


# The facts both passes read (rules/ops.toml's limits and codes, rules/dtypes.toml) and the citations `advise`
# reads (hardware.toml [sizing], compiler.toml [compile] and value_sources): each loaded, and a wrong value refused.


def test_fact_fields_load():
    topk = knowledge.load_ops()["aten::topk"]
    assert topk.limits["k"].max == 16384 and topk.limits["k"].error_code == "NCC_EVRF014" and topk.limits["k"].source
    assert knowledge.load_ops()["aten::convolution"].error_codes == ("NCC_EVRF010", "NCC_EVRF011")
    dtypes = knowledge.load_dtypes()
    assert dtypes.get("torch.double") is dtypes.entries["float64"] and dtypes.get("torch.float32") is None
    assert {e.name for e in dtypes.reported_by("PC312")} == {"float8_e4m3fnuz", "float8_e5m2fnuz", "float4_e2m1fn_x2",
                                                             "float8_e4m3fn"}
    assert dtypes.entries["float8_e4m3fn"].chips == ("trn2", "trn1", "inf2")  # native on Trn3 (NCC_EVRF051)
    assert all(e.source and e.status in knowledge.DTYPE_STATUSES for e in dtypes.entries.values())
    sizing = knowledge.load_hardware().sizing
    assert all(getattr(sizing, f.name) for f in fields(sizing))
    compiler = knowledge.load_compiler()
    assert set(compiler.compile.stacks) == set(knowledge.load().stacks) and compiler.compile.buckets
    assert compiler.flags["--auto-cast"].cited("none").endswith("; SDK:compiler/neuronx-cc/faq.rst")
    assert compiler.flags["--optlevel"].cited("2") == compiler.flags["--optlevel"].source


@needs_torch
@in_process_torch
def test_every_dtype_and_its_aliases_name_one_torch_dtype():
    """rules/dtypes.toml's names are this torch's: the trace looks them up on `torch`, the static pass by name."""
    import torch

    for entry in knowledge.load_dtypes().entries.values():
        named = {getattr(torch, name, None) for name in entry.names}
        assert len(named) == 1 and isinstance(named.pop(), torch.dtype), f"{entry.names} in torch {torch.__version__}"


def _edited(tmp_path, monkeypatch, name: str, old: str, new: str) -> None:
    """A copy of rules/ with one edit in `name`, which the loaders then read."""
    copy = tmp_path / "rules"
    shutil.copytree(knowledge.rules_dir(), copy)
    text = (copy / name).read_text(encoding="utf-8")
    assert old in text, f"{name} no longer holds {old!r}"
    (copy / name).write_text(text.replace(old, new, 1), encoding="utf-8")
    monkeypatch.setattr(knowledge.files, "rules_dir", lambda: copy)


WRONG = [
    ("ops.toml", "max = 16384", "max = 0", "must be a positive integer", "load_ops"),
    ("ops.toml", "max = 16384", 'max = "16384"', "must be a positive integer", "load_ops"),
    ("ops.toml", 'error_code = "NCC_EVRF014"', 'error_code = "EVRF014"', "malformed error_code", "load_ops"),
    ("ops.toml", 'error_code = "NCC_EVRF013"', 'error_code = "NCC_EVRF013, NCC_EVRF014"', "malformed", "load_ops"),
    ("ops.toml", "max = 16384\n", "max = 16384\nsince = \"2.32\"\n", "exactly max, error_code and source",
     "load_ops"),
    ("ops.toml", 'dtypes = ["int32", "int64"]\n', 'dtypes = "int32"\n', "restricted_dtypes needs exactly",
     "load_ops"),
    ("ops.toml", 'dtypes = ["int32", "int64"]\nsource = "SDK:', 'dtypes = ["int32", "int64"]\nsource = " "\nx = "',
     "restricted_dtypes needs exactly", "load_ops"),
    ("dtypes.toml", 'status = "narrowed"', 'status = "fine"', "not one of", "load_dtypes"),
    ("dtypes.toml", 'rule = "PC303"', 'rule = "PC301"', "not a dtype rule", "load_dtypes"),
    ("dtypes.toml", 'error_code = "NCC_EVRF005"', 'error_code = "EVRF005"', "malformed error_code", "load_dtypes"),
    ("dtypes.toml", 'aliases = ["double"]', 'aliases = ["cfloat"]', "named twice", "load_dtypes"),
    ("dtypes.toml", 'aliases = ["double"]', 'aliases = "double"', "a list of them as aliases", "load_dtypes"),
    ("dtypes.toml", 'kind = "FP4"\nerror_code = "NCC_ESPP004"', 'kind = "FP4"', "without the error_code",
     "load_dtypes"),
    ("dtypes.toml", 'kind = "FP64"\n', "", "needs aliases, status, rule, kind and source", "load_dtypes"),
    ("catalog/memory.toml", 'code = "PC801"', 'code = "PC709"', "PC7 codes are host-sync or compile", "load_catalog"),
    ("catalog/memory.toml", 'code = "PC801"', 'code = "PC001"', "PC0 codes are unassigned", "load_catalog"),
    ("hardware.toml", "compile_host = ", "compile_hosts = ", r"\[sizing\] needs exactly", "load_hardware"),
    ("hardware.toml", 'fp8_weights = "SDK:', 'fp8_weights = " "#', "non-empty citation", "load_hardware"),
    ("hardware.toml", 'instance = "trn2u.48xlarge"\ncount = 4', 'instance = "trn9.48xlarge"\ncount = 4',
     "ultraserver names an unknown instance", "load_hardware"),
    ("hardware.toml", 'link = "efa"\nacross = "FSDP', 'link = "rdma"\nacross = "FSDP', "link ultraserver or efa",
     "load_hardware"),
    ("hardware.toml", 'since = "2.33"', 'since = "2.99"', "not a release rules/sdk.toml knows", "load_hardware"),
    ("prices.toml", "usd_per_hour = 0.758", "usd_per_hour = -0.758", "needs a positive price", "load_prices"),
    ("prices.toml", 'date = "2023-09-28"', 'date = ""', "needs a positive price, a date", "load_prices"),
    ("prices.toml", 'chip = "trn1"\nclaim = ', 'chip = "trn1"\nclaims = ', "needs its text and source", "load_claims"),
    ("compiler.toml", "native_wrapper = ", "native_compiler = ", r"\[compile\] needs exactly", "load_compiler"),
    ("compiler.toml", "value_sources = { matmult", "value_sources = { bf16", "must cite values the flag takes",
     "load_compiler"),
]


@pytest.mark.parametrize(("name", "old", "new", "error", "loader"), WRONG,
                         ids=[f"{w[0]}:{w[2][:30]}" for w in WRONG])
def test_a_wrong_fact_is_a_knowledge_error(tmp_path, monkeypatch, name, old, new, error, loader):
    _edited(tmp_path, monkeypatch, name, old, new)
    with pytest.raises(knowledge.KnowledgeError, match=error):
        getattr(knowledge, loader).__wrapped__()  # past the cache: the edited copy, not the shipped data


def test_a_fact_a_check_reads_must_be_there(tmp_path, monkeypatch):
    with pytest.raises(knowledge.KnowledgeError, match="no entry for aten::gone"):
        knowledge.load_op("aten::gone")
    with pytest.raises(knowledge.KnowledgeError, match=r"has no limits\.gone"):
        knowledge.load_op("aten::topk").limit("gone")
    with pytest.raises(knowledge.KnowledgeError, match=r"no entry for torch\.float32"):
        knowledge.load_dtypes().named("torch.float32")
