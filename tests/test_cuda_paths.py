"""CUDA-only paths and integrations (issue 17): what runs only with CUDA, or only when the user picks a CUDA
library, is reported as info (or not at all); the same construct outside such a path keeps its severity."""

from __future__ import annotations

import textwrap

import pytest

from portcheck.rules import registry
from portcheck.static.engine import analyse_text

_CODES = frozenset(code for code in registry() if code.startswith(("PC1", "PC5")))


def _severities(text: str, path: str = "model.py", chip: str = "trn2", stack: str = "native") -> dict:
    result = analyse_text(textwrap.dedent(text), path, chip, stack, _CODES)
    found: dict[tuple[int, str], str] = {}
    for f in result.findings:
        found[(f.line, f.code)] = min(found.get((f.line, f.code), "~"), f.severity.name.lower())
    return found


GUARDED = [
    # accelerate utils/bnb.py: `if model_device.type == "cuda":`
    ("def f(model, model_device):\n    if model_device.type == 'cuda':\n        model.cuda(0)\n", 3, "PC101"),
    # kornia enhance/jpeg.py: `if tables[0].is_cuda:`
    ("import torch\ndef f(t):\n    if t[0].is_cuda:\n"
     "        torch.cuda.current_stream(t[0].device).synchronize()\n", 4, "PC107"),
    # kornia contrib/distance_transform.py: `image.is_cuda and ...`
    ("import torch\ndef f(image):\n    return image.is_cuda and torch.cuda.is_current_stream_capturing()\n",
     3, "PC108"),
    # kornia geometry/_ransac_program.py: a conditional expression
    ("import torch\ndef f(d):\n    return torch.cuda.get_device_name(d) if d.type == 'cuda' else None\n",
     3, "PC105"),
    # denoising-diffusion attend.py: an early return
    ("import torch\ndef f(flash):\n    if not torch.cuda.is_available() or not flash:\n        return\n"
     "    return torch.cuda.get_device_properties(0)\n", 5, "PC105"),
    # Lightning accelerators: `if device.type != "cuda": raise`
    ("import torch\ndef f(device):\n    if device.type != 'cuda':\n        raise ValueError(device)\n"
     "    torch.cuda.set_device(device)\n", 5, "PC105"),
    # x-transformers attend.py: an assertion
    ("import torch\ndef f(device):\n    assert device.type == 'cuda'\n"
     "    return torch.cuda.get_device_capability(device)\n",
     4, "PC105"),
    # PyG index.py: a short-circuit in `__repr__`
    ("import torch\nclass I:\n    def __repr__(self):\n        return str(self.device.type == 'cuda' and "
     "torch.cuda.current_device() != self.device.index)\n", 4, "PC105"),
    # the implementation of a `cuda()` method (Lightning's mixin, PyG's Data)
    ("class M:\n    def cuda(self, device=None):\n        return super().cuda(device=device)\n", 3, "PC101"),
    # a local bound to a CUDA test (PyG profile.py)
    ("import torch\ndef f(device):\n    is_cuda = device == 'cuda'\n    return torch.cuda if is_cuda else torch.xpu\n",
     4, "PC111"),
    # stable-baselines3: a `using_cuda` flag
    ("import torch\ndef f(using_cuda):\n    if using_cuda:\n        torch.cuda.manual_seed_all(0)\n", 4, "PC106"),
    # a loop that never runs without CUDA (PyG llm.py)
    ("import torch\ndef f():\n    for i in range(torch.cuda.device_count()):\n        torch.cuda.mem_get_info(i)\n",
     4, "PC105"),
    # monai config/deviceconfig.py: the count held in a name first
    ("import torch\ndef f():\n    n = torch.cuda.device_count()\n    for i in range(n):\n"
     "        torch.cuda.get_device_properties(i)\n", 5, "PC105"),
    # a NVTX range: an opt-in profiling aid
    ("import torch\ndef step():\n    torch.cuda.nvtx.range_push('step')\n", 3, "PC111"),
    # reading a cuDNN flag (Lightning's launcher snapshot)
    ("import torch\nstate = torch.backends.cudnn.benchmark\n", 2, "PC109"),
    # a probe that guards only CUDA housekeeping (peft utils/other.py)
    ("import torch\ndef f():\n    if torch.cuda.is_available():\n        torch.cuda.empty_cache()\n", 3, "PC104"),
    # torch.manual_seed already seeds every device (PyG seed.py)
    ("import torch\ndef seed_everything(s):\n    torch.manual_seed(s)\n    torch.cuda.manual_seed_all(s)\n",
     4, "PC106"),
    # transformers utils/import_utils.py: a query whose error (no CUDA) a broad handler turns into False
    ("def capturing():\n    try:\n        import torch\n        return torch.cuda.is_current_stream_capturing()\n"
     "    except Exception:\n        return False\n", 4, "PC108"),
    ("import torch\ndef f():\n    try:\n        torch.cuda.set_device(0)\n    except:\n        pass\n", 4, "PC105"),
    # a branch for NVIDIA's collectives: only a CUDA process group takes it
    ("import torch\ndef f(backend):\n    if backend == 'nccl':\n        torch.cuda.set_device(0)\n", 4, "PC105"),
    ("import torch\nimport torch.distributed as dist\ndef f(backend):\n    if backend == dist.Backend.NCCL:\n"
     "        torch.cuda.set_device(0)\n", 5, "PC105"),
    # the probe is asked only after the NCCL test holds
    ("import torch\ndef f(backend):\n    if backend == 'nccl' and torch.cuda.is_available():\n        return 1\n"
     "    return None\n", 3, "PC104"),
    # mmengine: CUDA or another accelerator (Apple MPS, Moore Threads MUSA): never a Neuron host
    ("import torch\ndef f():\n    if torch.cuda.is_available() or torch.backends.mps.is_available():\n"
     "        torch.cuda.synchronize()\n", 4, "PC105"),
]


@pytest.mark.parametrize(("text", "line", "code"), GUARDED)
def test_a_cuda_only_path_is_info(text: str, line: int, code: str) -> None:
    assert _severities(text).get((line, code)) == "info"


UNGUARDED = [
    ("def f(model):\n    return model.cuda(0)\n", 2, "PC101"),
    ("import torch\ndef f(t):\n    torch.cuda.current_stream(t.device).synchronize()\n", 3, "PC107"),
    ("import torch\ndef f(d):\n    return torch.cuda.get_device_name(d) if d.type == 'cpu' else None\n",
     3, "PC105"),
    # an early return that does not depend on CUDA
    ("import torch\ndef f(flash):\n    if not flash:\n        return\n    return torch.cuda.get_device_properties(0)\n",
     5, "PC105"),
    # `include_cuda` asks for CUDA's state; it does not say CUDA is there (Lightning seed.py)
    ("import torch\ndef f(include_cuda):\n    if include_cuda:\n        torch.cuda.set_rng_state_all([])\n",
     4, "PC111"),
    # accelerate testing.py: a probe inside the XLA branch
    ("import torch\ndef get_backend(xla):\n    if xla:\n        return 'xla', torch.cuda.device_count()\n", 4, "PC104"),
    # a probe that picks the device (audiocraft musicgen.py); one that only synchronizes is housekeeping (judged
    # harmless where it stands on monai and torch-geometric: tests/test_value_kinds.py)
    ("import torch\ndef f():\n    if torch.cuda.device_count():\n        device = 'cuda'\n    else:\n"
     "        device = 'cpu'\n    return device\n", 3, "PC104"),
    # stable-baselines3: the requested device falls back to the CPU
    ("import torch\ndef f(device):\n    if device.type == 'cuda' and not torch.cuda.is_available():\n"
     "        return torch.device('cpu')\n    return device\n", 3, "PC104"),
    # Lightning ddp.py: a stream for any non-CPU device
    ("import torch\ndef f(device_ids):\n    if device_ids is not None:\n        s = torch.cuda.Stream()\n", 4, "PC107"),
    ("import torch\ndef f():\n    torch.cuda.manual_seed(0)\n", 3, "PC106"),
    ("import bitsandbytes as bnb\n", 1, "PC501"),
    # a handler that does not catch what it raises without CUDA, or one that raises again
    ("import torch\ndef f():\n    try:\n        torch.cuda.set_device(0)\n    except ImportError:\n        pass\n",
     4, "PC105"),
    ("import torch\ndef f():\n    try:\n        torch.cuda.set_device(0)\n    except Exception:\n        raise\n",
     4, "PC105"),
    # in the handler, not the body
    ("import torch\ndef f():\n    try:\n        pass\n    except Exception:\n        torch.cuda.set_device(0)\n",
     6, "PC105"),
]


@pytest.mark.parametrize(("text", "line", "code"), UNGUARDED)
def test_the_same_construct_elsewhere_keeps_its_severity(text: str, line: int, code: str) -> None:
    assert _severities(text).get((line, code)) in ("warning", "error")


QUIET = [
    # CUDA-gated tests report nothing, whatever the `tests` setting (static/gated_tests.py): a test skipped
    # without CUDA, and the marker that decides whether a CUDA test runs (accelerate testing.py)
    ("import pytest, torch\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')\ndef test_x():\n"
     "    torch.cuda.synchronize()\n", 4, "PC105"),
    ("import torch, unittest\ndef require_single_gpu(t):\n"
     "    return unittest.skipUnless(torch.cuda.device_count() == 1, 'gpu')(t)\n", 3, "PC104"),
    # stable-baselines3: `th.device("cuda").type` only spells "cuda" for a comparison
    ("import torch\ndef f(device):\n    return device.type == torch.device('cuda').type\n", 3, "PC102"),
    # a test's stub of torch.cuda
    ("import torch\ndef test_x(monkeypatch):\n    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)\n",
     3, "PC111"),
]


@pytest.mark.parametrize(("text", "line", "code"), QUIET)
def test_what_is_no_use_of_cuda_stays_quiet(text: str, line: int, code: str) -> None:
    assert (line, code) not in _severities(text)


INTEGRATIONS = [
    ("lightning/precision/precision.py",
     "class TransformerEnginePrecision:\n    def f(self):\n        import transformer_engine.pytorch as te\n", 3),
    ("peft/utils/integrations.py", "def dequantize_bnb_weight(w):\n    import bitsandbytes as bnb\n", 2),
    ("peft/utils/quantization_utils.py",
     "class Bnb8bitBackend:\n    def f(self):\n        import bitsandbytes as bnb\n", 3),
    ("tests/test_notebook.py", "@require_bnb\ndef test_imports():\n    import bitsandbytes as bnb\n", 3),
    ("audiocraft/modules/transformer.py",
     "def f(method):\n    if method.startswith('xformers'):\n        from xformers.checkpoint import checkpoint\n", 3),
    ("audiocraft/utils/profiler.py",
     "def f(enabled):\n    if enabled:\n        from xformers.profiler import profile\n", 3),
    # the tiny-cuda-nn flavour of an encoding, named by the library's short name (`import tinycudann as tcnn`)
    ("fields/encodings.py",
     "class TCNNHashGrid:\n    def build(self):\n        import tinycudann as tcnn\n", 3),
]


@pytest.mark.parametrize(("path", "text", "line"), INTEGRATIONS)
def test_an_integration_of_a_cuda_library_is_info(path: str, text: str, line: int) -> None:
    assert _severities(text, path).get((line, "PC501")) == "info"


def test_an_import_in_model_code_keeps_its_severity() -> None:
    # audiocraft modules/transformer.py: the memory-efficient attention of the model itself
    text = "def get_mask(self):\n    if self.memory_efficient:\n        from xformers.ops import LowerTriangularMask\n"
    assert _severities(text, "audiocraft/modules/transformer.py").get((3, "PC501")) == "error"


def test_a_files_name_decides_no_severity() -> None:
    """Issue 32: a training script named `train_cuda.py` or `bitsandbytes_train.py` is a training script; the code
    says what is CUDA-only (a class that exists for CUDA), not the file's name."""
    text = "import torch\ndef get_parallel_devices(ids):\n    return [torch.device('cuda', i) for i in ids]\n"
    for name in ("lightning_fabric/accelerators/cuda.py", "train_cuda.py", "cuda_train.py", "bitsandbytes_train.py"):
        assert _severities(text, name).get((3, "PC102")) == "error", name
    assert _severities("import bitsandbytes as bnb\n", "peft/tuners/hira/bnb.py").get((1, "PC501")) == "error"
    in_class = ("import torch\nclass CUDAAccelerator:\n    def devices(self, ids):\n"
                "        return [torch.device('cuda', i) for i in ids]\n")
    assert _severities(in_class, "accelerators/cuda.py").get((4, "PC102")) == "info"


def test_cuda_only_paths_offer_no_fix() -> None:
    text = "def f(model, device):\n    if device.type == 'cuda':\n        model.cuda()\n"
    result = analyse_text(text, "model.py", "trn2", "native", _CODES)
    assert [f.fix for f in result.findings if f.code == "PC101"] == [None]


def test_more_cuda_only_paths_and_probes() -> None:
    # accelerate test_script.py: a branch for a GPU distributed type
    text = ("import torch\ndef f(state):\n    if state.distributed_type == DistributedType.MULTI_GPU:\n"
            "        return torch.cuda.device_count()\n")
    assert _severities(text).get((4, "PC104")) == "info"
    # kornia onnx.py: whether CUDA was set up in this process (RNG state)
    text = "import torch\ndevices = list(range(3)) if torch.cuda.is_initialized() else []\n"
    assert _severities(text).get((2, "PC104")) == "info"
    # PyG profile.py: the probe picks a CUDA profiler column
    text = ("import torch\ndef f():\n    if torch.cuda.is_available():\n        key = 'self_cuda_time_total'\n"
            "    else:\n        key = 'self_cpu_time_total'\n    return key\n")
    assert _severities(text).get((3, "PC104")) == "info"
    # …but one that picks the device does not (x-transformers attend.py)
    text = "import torch\ndef f():\n    if torch.cuda.is_available():\n        return torch.device('cuda')\n"
    assert _severities(text).get((3, "PC104")) == "warning"


def test_a_probe_reached_only_under_another_is_info() -> None:
    text = "import torch\ndevices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []\n"
    assert _severities(text).get((2, "PC104")) == "info"


def test_hiding_every_gpu_is_info_and_messages_name_real_replacements() -> None:
    text = "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = ''\nos.environ['CUDA_VISIBLE_DEVICES'] = '0,1'\n"
    found = _severities(text)
    assert found[(2, "PC110")] == "info" and found[(3, "PC110")] == "warning"
    text = ("import torch\nmem = torch.cuda.get_device_properties(0).total_memory\n"
            "dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16\n")
    result = analyse_text(text, "model.py", "trn2", "native", _CODES)
    messages = {f.line: f.message for f in result.findings}
    assert "has no `.total_memory`" in messages[2] and "use `True` (every NeuronCore" in messages[3]


def test_the_index_of_a_reported_cuda_device_is_part_of_that_finding() -> None:
    """`torch.device("cuda", torch.cuda.current_device())` and `model.cuda(torch.cuda.current_device())` are one
    problem each, reported (and fixed, index included) as the CUDA device; the call on its own is PC105's."""
    found = _severities("""\
        import torch

        def f(model):
            device = torch.device("cuda", torch.cuda.current_device())
            model.cuda(torch.cuda.current_device())
            return device, torch.cuda.current_device()
        """)
    assert found[(4, "PC102")] == "error" and (4, "PC105") not in found
    assert found[(5, "PC101")] == "error" and (5, "PC105") not in found
    assert found[(6, "PC105")] == "error"


def test_what_iterates_over_cuda_devices_runs_only_with_cuda() -> None:
    """monai engines/utils.py: a comprehension over `range(torch.cuda.device_count())` makes nothing without CUDA,
    as a `for` loop over it runs nothing; the count itself, which makes the list empty on Neuron, is the finding."""
    found = _severities("""\
        import torch

        def devices_of(devices=None):
            if devices is None:
                devices = [torch.device(f"cuda:{d:d}") for d in range(torch.cuda.device_count())]
            n = torch.cuda.device_count()
            every = {i: torch.device("cuda", i) for i in range(n) if i % 2}
            return devices, every, [torch.device("cuda", i) for i in range(4)]
        """)
    assert found[(5, "PC102")] == "info" and found[(5, "PC104")] == "warning"
    assert found[(7, "PC102")] == "info"
    assert found[(8, "PC102")] == "error"  # four CUDA devices whatever the host has


def test_a_probe_bound_with_other_names_or_switched_off_later_is_followed() -> None:
    """monai inferers/utils.py: `non_blocking, start = torch.cuda.is_available(), -1`, later set to False, and only
    ever passed as `non_blocking=`: it picks no device. Bound with another name, a probe that picks one still
    does."""
    found = _severities("""\
        import torch

        def copy(slices):
            non_blocking, start = torch.cuda.is_available(), -1
            for x in slices:
                if x[1] < start:
                    non_blocking = False
                y = x.to("cpu", non_blocking=non_blocking)

        def pick():
            use_gpu, n = torch.cuda.is_available(), 2
            return torch.device("cuda" if use_gpu else "cpu"), n
        """)
    assert found[(4, "PC104")] == "info" and found[(11, "PC104")] == "warning"


def test_a_private_cuda_debugging_hook_is_housekeeping() -> None:
    """torchtune _profiler.py: a probe that only decides whether the memory snapshot (`torch.cuda.memory.
    _dump_snapshot`, a private hook) is written picks no device."""
    found = _severities("""\
        import torch

        def dump(prof):
            if prof.profile_memory and torch.cuda.is_available():
                prof.export_memory_timeline("timeline.html")
                torch.cuda.memory._dump_snapshot("snapshot.pickle")
        """)
    assert found[(4, "PC104")] == "info"


def test_a_probe_that_decides_only_memory_counters_or_copies_picks_no_device() -> None:
    """fairseq's `_log_oom` prints `torch.cuda.memory_summary` per device under a probe; a DataLoader pins memory
    where CUDA is: neither places anything, so off CUDA only the extra goes. A device chosen by it still counts."""
    found = _severities("""\
        import torch
        from torch.utils.data import DataLoader

        def log_oom(log):
            if torch.cuda.is_available():
                for i in range(torch.cuda.device_count()):
                    log(torch.cuda.memory_summary(device=i))

        def loader(ds):
            return DataLoader(ds, pin_memory=torch.cuda.is_available())

        def pick():
            return "cuda" if torch.cuda.is_available() else "cpu"

        def budget():
            if torch.cuda.is_available():
                torch.cuda.set_device(0)
        """)
    assert found[(5, "PC104")] == "info" and found[(10, "PC104")] == "info"
    assert found[(13, "PC104")] == "warning" and found[(16, "PC104")] == "warning"


def test_a_name_bound_to_a_probe_and_other_tests_decides_what_the_probe_does() -> None:
    """fairseq's Adam: `use_fused = fused_cls is not None and torch.cuda.is_available()` only picks the fused
    optimizer class, with a pure-torch fallback; the same name picking `model.cuda()` still places the model."""
    found = _severities("""\
        import torch

        def optimizer(cfg, params, fused_cls):
            use_fused = not cfg.old and fused_cls is not None and torch.cuda.is_available()
            if use_fused:
                return fused_cls(params, lr=cfg.lr)
            return torch.optim.Adam(params, lr=cfg.lr)

        def place(model, wanted):
            on_gpu = wanted and torch.cuda.is_available()
            if on_gpu:
                model.cuda()
        """)
    assert found[(4, "PC104")] == "info" and found[(10, "PC104")] == "warning"


def test_the_body_of_a_cuda_device_context_runs_only_with_cuda() -> None:
    """fairseq's `multi_tensor_total_norm`: `with torch.cuda.device(device):` raises without CUDA before its body
    runs, so what the body does is that statement's problem; CuPy's device context is the same. Plain code after
    the `with` keeps its severity."""
    found = _severities("""\
        import cupy as cp
        import torch

        def norm(grads, device):
            with torch.cuda.device(device):
                total = torch.stack(grads).cuda()
            with cp.cuda.Device(0):
                other = torch.zeros(2).cuda()
            return total.cuda(), other
        """)
    assert found[(6, "PC101")] == "info" and found[(8, "PC101")] == "info" and found[(9, "PC101")] == "error"


def test_a_probe_set_as_a_reports_entry_by_its_text_key_is_only_shown() -> None:
    """An environment report (`info["CUDA available"] = torch.cuda.is_available()`, or an entry a helper makes from
    a label and a lambda) shows the answer; a configuration's device entry set from the probe still picks the
    device."""
    found = _severities("""\
        import torch

        def env_info():
            info = {}
            info["CUDA available"] = torch.cuda.is_available()
            return info

        def pick(cfg):
            cfg["device"] = "cuda" if torch.cuda.is_available() else "cpu"

        def gpu_info(output):
            count = torch.cuda.device_count()
            _dict_append(output, "Num GPUs", lambda: count)
            _dict_append(output, "Has CUDA", lambda: bool(torch.cuda.is_available()))
            run(lambda: torch.cuda.is_available())
        """)
    assert found[(5, "PC104")] == "info" and found[(9, "PC104")] == "warning"
    # monai's report helper takes each entry's label and a lambda that makes its value: shown, not decided
    assert found[(12, "PC104")] == "info" and found[(14, "PC104")] == "info"
    assert found[(15, "PC104")] == "warning"  # a lambda handed on without a label may decide anything


@pytest.mark.parametrize(("name", "cuda"), [
    ("BnB4BitDiffusersQuantizer", True), ("DeepSpeedStrategy", True), ("BitsAndBytesConfig", True),
    ("XFormersAttnProcessor", True), ("Bnb8bitLinear", True), ("CUDAAccelerator", True),
    # a project's own layer named like a CUDA-only package that implements it is plain PyTorch as often as not
    ("CausalConv1d", False), ("GroupedGemm", False), ("DeepSupervision", False), ("SelfAttention", False),
])
def test_a_class_named_for_a_cuda_library_in_its_own_capitals_is_a_cuda_integration(name: str, cuda: bool) -> None:
    text = f"import torch\nclass {name}:\n    def place(self, x):\n        return x.cuda()\n"
    assert _severities(text).get((4, "PC101")) == ("info" if cuda else "error")


def test_a_configured_number_of_gpus_or_a_gpus_index_guards_a_cuda_only_path() -> None:
    """espnet's `if args.ngpu > 0:`, allennlp's `if cuda_device >= 0:`, fairseq's `if cuda_device is not None:`: the
    body runs only where the user configured an NVIDIA GPU, which nobody does on a Neuron host. The device choice the
    same setting makes (`"cuda" if ngpu > 0 else "cpu"`, `if gpu_id >= 0: model.cuda(gpu_id)`, `set_device`) is still
    reported where it is made; a rank, a plain count or `gpu == 0` (the first process's logging) guards nothing."""
    found = _severities("""\
        import torch

        def f(args, cuda_device, n_gpu, gpu_id, world_size, model):
            if args.ngpu > 0:
                torch.cuda.synchronize()
            if cuda_device >= 0:
                torch.cuda.current_device()
            if cuda_device is not None:
                torch.cuda.get_device_name(cuda_device)
            if self.config.n_gpu:
                torch.cuda.synchronize()
            if n_gpu == 0:
                pass
            else:
                torch.cuda.synchronize()
            device = "cuda" if args.ngpu > 0 else "cpu"
            if world_size > 1:
                torch.cuda.synchronize()
            if args.gpu == 0:
                torch.cuda.synchronize()
            return model.to(device)

        def g(gpu_id, model):
            if gpu_id == -1:
                return model
            torch.cuda.synchronize()
            if gpu_id >= 0:
                model.cuda(gpu_id)
                torch.cuda.set_device(gpu_id)
        """)
    for line in (5, 7, 9, 11, 15, 26):
        assert found[(line, "PC105")] == "info", line
    assert found[(18, "PC105")] == "error" and found[(20, "PC105")] == "error"
    assert found[(21, "PC101")] == "warning"  # `.to(device)`: the configured choice of CUDA or the CPU
    # where the configuration places the model or picks the process's device, the port has to change it
    assert found[(28, "PC101")] in ("warning", "error") and found[(29, "PC105")] == "error"


def test_a_cuda_library_whose_import_works_without_cuda_is_info_at_its_import() -> None:
    """`from numba import cuda` imports on a host without CUDA (observed: numba 0.68.1), and so does `pynvml`: what
    fails is launching a kernel or `nvmlInit()`, so the import is info and says so. apex's import fails: error."""
    found = _severities("from numba import cuda\nimport pynvml\nimport apex\n")
    assert found[(1, "PC501")] == "info" and found[(2, "PC501")] == "info" and found[(3, "PC501")] == "error"



def test_a_name_bound_to_an_availability_test_is_one() -> None:
    """`_CAN_USE_FLASH = is_flash_attn_available() and ...` then `if _CAN_USE_FLASH: from flash_attn import ...`
    (diffusers' attention dispatcher): the import, and calls of what it imports, have a fallback, as under
    `if is_flash_attn_available():`. A flag bound to something else is no availability test."""
    text = """\
        from .utils import is_flash_attn_available
        _CAN_USE_FLASH = is_flash_attn_available() and VERSION >= 2
        _WANT_FLASH = read_flag("flash")
        if _CAN_USE_FLASH:
            from flash_attn import flash_attn_func
        if _WANT_FLASH:
            from flash_attn import flash_attn_varlen_func

        def attend(q, k, v):
            a = flash_attn_func(q, k, v)
            return a + flash_attn_varlen_func(q, k, v)
        """
    result = analyse_text(textwrap.dedent(text), "model.py", "trn2", "native", frozenset({"PC402", "PC501"}))
    found = {(f.line, f.code): f.severity.name.lower() for f in result.findings}
    assert found[(5, "PC501")] == "info"
    assert found[(7, "PC501")] == "error"
    assert found[(10, "PC402")] == "info"
    assert found[(11, "PC402")] == "error"


def test_a_probe_that_refuses_a_cuda_only_librarys_path_is_info() -> None:
    """`assert torch.cuda.is_available(), "CUDA required for APEX optimizers"` where the code picked an apex
    optimizer, or `elif not torch.cuda.is_available(): raise` after the xformers check (with an `else` taking the
    library's path or not): the code refuses a CUDA-only library's path off CUDA, which a port never takes. The
    same refusal with no library in view stops the port."""
    text = """\
        import torch

        def build(opt_class):
            if opt_class.startswith("apex."):
                assert torch.cuda.is_available(), "CUDA required for APEX optimizers"
            return make(opt_class)

        def enable(use_xformers):
            if use_xformers:
                if not is_xformers_available():
                    raise ModuleNotFoundError("pip install it")
                elif not torch.cuda.is_available():
                    raise ValueError("memory efficient attention needs a GPU")

        def main(args):
            assert torch.cuda.is_available(), "a GPU is required"

        def enable_checked(use_xformers):
            if use_xformers:
                if not is_xformers_available():
                    raise ModuleNotFoundError("pip install it")
                elif not torch.cuda.is_available():
                    raise ValueError("memory efficient attention needs a GPU")
                else:
                    import xformers.ops
                    q = torch.randn((1, 2, 40), device="cuda")
                    xformers.ops.memory_efficient_attention(q, q, q)
        """
    result = analyse_text(textwrap.dedent(text), "model.py", "trn2", "native", frozenset({"PC104"}))
    found = {f.line: f.severity.name.lower() for f in result.findings}
    assert found == {5: "info", 12: "info", 16: "warning", 22: "info"}  # 22: the CUDA path in its `else`


def test_the_way_an_older_pytorch_takes_is_not_neurons() -> None:
    """`torch.accelerator.current_accelerator() if hasattr(torch, "accelerator") else torch.cuda.current_device()`:
    every Neuron release's PyTorch has `torch.accelerator` (rules/cuda_api.toml), so the `else` runs only on an older
    PyTorch. A test for a part that is no such fact (`hasattr(torch, "xpu")`) decides nothing."""
    text = """\
        import torch
        from torch import cuda
        def sync():
            index = torch.accelerator.current_device_index() if hasattr(torch, "accelerator") else cuda.current_device()
            if not hasattr(torch, "accelerator"):
                torch.cuda.synchronize()
            if hasattr(torch, "xpu"):
                torch.cuda.synchronize()
            return index
        """
    result = analyse_text(textwrap.dedent(text), "model.py", "trn2", "native", frozenset({"PC105"}))
    found = {f.line: f.severity.name.lower() for f in result.findings}
    assert found == {4: "info", 6: "info", 8: "error"}


def test_a_torch_feature_newer_than_neurons_oldest_pytorch_is_refused(monkeypatch) -> None:
    from portcheck.knowledge import cuda_api

    original = cuda_api.read

    def newer(name: str):
        data = original(name)
        if name == "cuda_api.toml":
            data = {**data, "torch_features": {**data["torch_features"], "future": {"since_torch": "9.0",
                                                                                    "source": "x"}}}
        return data

    monkeypatch.setattr(cuda_api, "read", newer)
    cuda_api.load_torch_features.cache_clear()
    try:
        with pytest.raises(cuda_api.KnowledgeError, match="future"):
            cuda_api.load_torch_features()
    finally:
        cuda_api.load_torch_features.cache_clear()


def test_a_flag_the_class_sets_only_from_a_cuda_test_guards_a_cuda_only_path() -> None:
    """stable-audio-tools: `self.use_flash = torch.cuda.is_available() and ...` in `__init__`, then `if not
    self.use_flash: return` there and `if self.use_flash:` in `forward`; a flag the class also sets from a
    parameter, or that a nested class's `self` sets, guards nothing."""
    found = _severities("""\
        import torch


        class Attend:
            def __init__(self):
                self.use_flash = torch.cuda.is_available() and torch.__version__ >= "2"
                if not self.use_flash:
                    return
                self.props = torch.cuda.get_device_properties(0)

            def forward(self, q):
                if self.use_flash:
                    torch.cuda.synchronize()
                return q


        class Mixed:
            def __init__(self, fast):
                self.use_fast = torch.cuda.is_available()
                if fast:
                    self.use_fast = fast

            def forward(self, q):
                if self.use_fast:
                    torch.cuda.synchronize()
                return q


        class Outer:
            class Inner:
                def __init__(self):
                    self.fast_path = torch.cuda.is_available()

            def forward(self, q):
                if self.fast_path:
                    torch.cuda.synchronize()
                return q
        """)
    assert found[(9, "PC105")] == "info"
    assert found[(13, "PC105")] == "info"
    assert found[(25, "PC105")] == "error"
    assert found[(36, "PC105")] == "error"


def test_a_probe_held_in_a_class_flag_decides_what_every_read_of_the_flag_decides() -> None:
    """stable-audio-tools: `self.use_flash = torch.cuda.is_available() and ...` read only by `if not
    self.use_flash: return` (GPU queries follow) and `if self.use_flash:` (a CUDA SDPA kernel choice, with a plain
    attention after it) picks no device: info. A flag one read of which moves the model (`x.cuda()`) keeps the
    warning, as does one the class also sets elsewhere."""
    found = _severities("""\
        import torch
        import torch.nn.functional as F


        class Attend(torch.nn.Module):
            def __init__(self):
                self.use_flash = torch.cuda.is_available() and torch.__version__ >= "2"
                if not self.use_flash:
                    return
                self.props = torch.cuda.get_device_properties(0)

            def forward(self, q, k, v):
                if self.use_flash:
                    with torch.backends.cuda.sdp_kernel(enable_flash=True):
                        return F.scaled_dot_product_attention(q, k, v)
                return (q @ k.transpose(-1, -2)).softmax(-1) @ v


        class Places(torch.nn.Module):
            def __init__(self):
                self.use_cuda = torch.cuda.is_available()

            def forward(self, x):
                if self.use_cuda:
                    x = x.cuda()
                return x


        class Twice(torch.nn.Module):
            def __init__(self, fast):
                self.fast = torch.cuda.is_available()
                self.fast = fast

            def forward(self, x):
                if self.fast:
                    torch.cuda.synchronize()
                return x
        """)
    assert found[(7, "PC104")] == "info"
    assert found[(21, "PC104")] == "warning"
    assert found[(31, "PC104")] == "warning"
