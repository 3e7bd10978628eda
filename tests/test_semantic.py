"""The semantic model across a project (portcheck.static.semantic): each piece on real files in a temporary tree,
scanned as `portcheck scan` scans them, with a case that fires and a case that stays quiet; each case fails
without the piece it tests (the severity or the finding is what only the call graph decides)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from portcheck.config import Layer, Settings, resolve
from portcheck.findings import Severity
from portcheck.static import scan as scan_module
from portcheck.static.semantic import graph
from portcheck.static.semantic.graph import module_of


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _settings(root: Path, chip: str = "trn2", stack: str = "native") -> Settings:
    return resolve([Layer(target=chip, stack=stack)], root, None)


def _scan(root: Path, chip: str = "trn2", stack: str = "native", jobs: int = 1,
          paths: list[str] | None = None) -> dict[tuple[str, int, str], Severity]:
    settings = _settings(root, chip, stack)
    result = scan_module.scan_paths(paths or ["."], settings, root, jobs=jobs)
    return {(f.path, f.line, f.code): f.severity for f in result.findings}


PROBE = """\
    import torch

    def has_gpu():
        return torch.cuda.is_available()

    def gpu_only():
        return has_gpu() and torch.cuda.device_count() > 1
    """


def test_a_project_probe_guards_like_torch_cuda_is_available(tmp_path):
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/env.py": PROBE, "pkg/model.py": """\
        import torch
        from pkg.env import has_gpu, gpu_only
        from . import env

        def run(x):
            if has_gpu():
                torch.cuda.synchronize()
            if gpu_only():
                torch.cuda.synchronize()
            if env.has_gpu():
                torch.cuda.synchronize()
            if not has_gpu():
                return x
            torch.cuda.synchronize()
            return x
        """})
    found = _scan(tmp_path)
    for line in (7, 9, 11, 14):
        assert found[("pkg/model.py", line, "PC105")] == Severity.INFO, line


def test_a_function_that_is_not_a_probe_guards_nothing(tmp_path):
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/env.py": "def ready():\n    return True\n", "pkg/model.py": """\
        import torch
        from pkg.env import ready

        def run():
            if ready():
                torch.cuda.synchronize()

        run()
        """})
    assert _scan(tmp_path)[("pkg/model.py", 6, "PC105")] == Severity.ERROR


def test_a_function_called_only_under_cuda_guards_is_cuda_only(tmp_path):
    _tree(tmp_path, {"stats.py": """\
        import torch

        def gpu_memory():
            torch.cuda.synchronize()
            return torch.cuda.mem_get_info()

        def used_everywhere():
            torch.cuda.synchronize()
        """, "train.py": """\
        import torch
        from stats import gpu_memory, used_everywhere

        def step(model, x):
            if torch.cuda.is_available():
                print(gpu_memory())
            used_everywhere()
            if x.is_cuda:
                used_everywhere()
        """})
    found = _scan(tmp_path)
    assert found[("stats.py", 4, "PC105")] == Severity.INFO  # its only caller is guarded
    assert found[("stats.py", 5, "PC105")] == Severity.INFO
    assert found[("stats.py", 8, "PC105")] == Severity.ERROR  # one caller is not


def test_cycles_and_recursion_do_not_make_a_function_cuda_only(tmp_path):
    _tree(tmp_path, {"m.py": """\
        import torch

        def a(n):
            torch.cuda.synchronize()
            return b(n - 1) if n else 0

        def b(n):
            return a(n)

        def entry():
            return a(3)
        """})
    assert _scan(tmp_path)[("m.py", 4, "PC105")] == Severity.ERROR


def test_another_vendors_backend_is_not_a_neuron_path(tmp_path):
    _tree(tmp_path, {"export.py": """\
        import tensorrt as trt
        import torch

        def build_engine(model):
            torch.cuda.synchronize()
            return trt.Builder(None)

        def helper_of_the_engine():
            torch.cuda.synchronize()

        def make():
            helper_of_the_engine()
            return build_engine(None)
        """, "lazy.py": """\
        import torch

        def build_engine(model):
            import tensorrt as trt
            torch.cuda.synchronize()
            return trt.Builder(None)

        def helper_of_the_engine():
            torch.cuda.synchronize()

        def make():
            helper_of_the_engine()
            return build_engine(None)
        """, "model.py": """\
        import torch

        class Net(torch.nn.Module):
            def forward(self, x):
                if torch.onnx.is_in_onnx_export():
                    return x.nonzero()
                return x[x > 0]
        """})
    found = _scan(tmp_path)
    assert found[("export.py", 5, "PC105")] == Severity.INFO
    # export.py cannot load without TensorRT (f5-tts' TensorRT-LLM benchmark): all of it is that runtime's
    assert found[("export.py", 9, "PC105")] == Severity.INFO
    assert found[("lazy.py", 5, "PC105")] == Severity.INFO
    assert found[("lazy.py", 9, "PC105")] == Severity.ERROR  # `make` is no vendor function: it is reachable
    assert found[("model.py", 6, "PC201")] == Severity.INFO
    assert found[("model.py", 7, "PC204")] == Severity.ERROR


def test_code_only_the_data_pipeline_reaches_is_host_side(tmp_path):
    _tree(tmp_path, {"ops.py": """\
        def positive(x):
            return x[x > 0]

        def shared(x):
            return x[x > 0]
        """, "data.py": """\
        from torch.utils.data import Dataset
        from ops import positive, shared

        class Items(Dataset):
            def __getitem__(self, i):
                return positive(self.rows[i]), shared(self.rows[i])
        """, "model.py": """\
        import torch
        from ops import shared

        class Net(torch.nn.Module):
            def forward(self, x):
                return shared(x)
        """})
    found = _scan(tmp_path)
    assert found[("ops.py", 2, "PC204")] == Severity.INFO  # only __getitem__ reaches it
    assert found[("ops.py", 5, "PC204")] == Severity.ERROR  # forward reaches it too


def test_a_host_read_in_a_helper_counts_where_forward_calls_it(tmp_path):
    _tree(tmp_path, {"helpers.py": """\
        import torch

        def count(mask: torch.Tensor):
            return mask.sum().item() + 0

        def unused(mask: torch.Tensor):
            return mask.sum().item() + 0
        """, "model.py": """\
        import torch
        from helpers import count

        class Net(torch.nn.Module):
            def forward(self, x):
                return x * count(x > 0)
        """})
    found = _scan(tmp_path, "inf2", "xla")
    assert found[("helpers.py", 4, "PC701")] == Severity.WARNING
    # nothing on the device step calls it: info, for a caller the scan cannot see
    assert found[("helpers.py", 7, "PC701")] == Severity.INFO


def test_results_do_not_depend_on_jobs_or_file_order(tmp_path):
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/env.py": PROBE, "pkg/a.py": """\
        import torch
        from pkg.env import has_gpu

        def f():
            if has_gpu():
                torch.cuda.synchronize()
        """, "pkg/b.py": "import torch\n\ndef g(x):\n    return x.nonzero()\n"})
    one = _scan(tmp_path, jobs=1)
    assert one == _scan(tmp_path, jobs=2)
    named = _scan(tmp_path, paths=["pkg/b.py", "pkg/a.py", "pkg/env.py", "pkg/__init__.py"])
    assert named == _scan(tmp_path, paths=["pkg/__init__.py", "pkg/env.py", "pkg/a.py", "pkg/b.py"], jobs=2)


def test_the_cache_follows_a_change_in_a_function_another_file_depends_on(tmp_path):
    from portcheck.cache import Cache

    _tree(tmp_path, {"env.py": PROBE, "model.py": """\
        import torch
        from env import has_gpu

        def f():
            if has_gpu():
                torch.cuda.synchronize()
        """})
    settings = _settings(tmp_path)

    def severity() -> Severity:
        result = scan_module.scan_paths(["."], settings, tmp_path, cache=Cache(tmp_path / ".cache"))
        return next(f.severity for f in result.findings if f.path == "model.py" and f.code == "PC105")

    assert severity() == Severity.INFO
    (tmp_path / "env.py").write_text("def has_gpu():\n    return True\n")  # no probe any more
    assert severity() == Severity.ERROR  # model.py itself did not change, and was read from the cache


def test_past_the_bound_the_scan_judges_file_by_file_and_says_so(tmp_path, monkeypatch):
    _tree(tmp_path, {"env.py": PROBE, "model.py": """\
        import torch
        from env import has_gpu

        def f():
            if has_gpu():
                torch.cuda.synchronize()
        """})
    monkeypatch.setattr(graph, "MAX_FUNCTIONS", 2)
    result = scan_module.scan_paths(["."], _settings(tmp_path), tmp_path)
    assert any("more than the call graph's 2" in w for w in result.warnings)
    assert next(f.severity for f in result.findings if f.path == "model.py") == Severity.ERROR


@pytest.mark.parametrize(("path", "module"), [
    ("pkg/sub/mod.py", ("pkg.sub.mod", False)), ("pkg/__init__.py", ("pkg", True)), ("a.py", ("a", False)),
])
def test_module_names_from_paths(path, module):
    assert module_of(path) == module


def test_a_module_imported_by_name_is_known_by_what_it_imports(tmp_path):
    _tree(tmp_path, {"engine.py": """\
        import torch
        from monai.utils import optional_import

        trt, _ = optional_import("tensorrt")

        def build(model):
            torch.cuda.synchronize()
            return trt.Builder(None)
        """})
    assert _scan(tmp_path)[("engine.py", 7, "PC105")] == Severity.INFO


def test_control_flow_on_a_tensor_counts_in_a_training_step_and_what_it_calls(tmp_path):
    _tree(tmp_path, {"trainer.py": """\
        import torch

        class MyTrainer(Trainer):
            def compute_loss(self, model, inputs):
                loss = model(**inputs).loss
                if torch.isnan(loss).any():
                    loss = torch.zeros_like(loss)
                return scaled(loss)

        def scaled(loss):
            if loss.sum() > 10:
                return loss / 10
            return loss

        def report(loss):
            if loss.sum() > 10:
                print("large")
        """})
    found = _scan(tmp_path)
    assert found[("trainer.py", 6, "PC208")] == Severity.WARNING  # transformers' per-step hook
    assert found[("trainer.py", 11, "PC208")] == Severity.WARNING  # called from it
    assert found[("trainer.py", 16, "PC208")] == Severity.INFO  # nothing on the device step calls it


def test_code_that_runs_once_is_set_up(tmp_path):
    """A cached function, a lazy initialisation (`if self.x is None: self.x = ...`, `if not flag: ...; flag =
    True`) and what only they call run once, not every step: a CPU fallback or a data-dependent shape there
    costs one call (info). A parameter tested against None is tested again every call, and float64 made once
    and stored on the object still flows into the step: both keep their severity."""
    _tree(tmp_path, {"model.py": """\
        import functools
        import torch

        def basis(w):
            return w[w > 0]

        def nonzero(w):
            return w[w != 0]

        class Net(torch.nn.Module):
            @functools.cached_property
            def positive(self):
                return nonzero(self.weight[self.weight > 0])

            def forward(self, x, mask=None):
                if self._basis is None:
                    self._basis = basis(self.weight)
                if not self.initialised:
                    self.table = torch.linalg.inv(self.weight)
                    self.initialised = True
                if mask is None:
                    mask = torch.linalg.inv(x)
                y = torch.linalg.svd(x)
                return x[x > 0], y, mask, self.positive

            def reset(self):
                if self._cache is None:
                    self._cache = self.weight[self.weight > 0]
                    self._ones = torch.ones(3, dtype=torch.float64)
        """})
    found = _scan(tmp_path)
    assert found[("model.py", 5, "PC204")] == Severity.INFO  # only the lazy initialisation calls it
    assert found[("model.py", 8, "PC204")] == Severity.INFO  # only the cached property calls it
    assert found[("model.py", 13, "PC204")] == Severity.INFO  # cached
    assert found[("model.py", 19, "PC321")] == Severity.INFO  # under `if not self.initialised:` that sets it
    assert found[("model.py", 22, "PC321")] > Severity.INFO  # a parameter: every call
    assert found[("model.py", 23, "PC321")] > Severity.INFO
    assert found[("model.py", 24, "PC204")] > Severity.INFO
    assert found[("model.py", 28, "PC204")] == Severity.INFO
    assert found[("model.py", 29, "PC303")] > Severity.INFO  # float64 made once and stored is used every step


def test_a_host_read_in_a_helper_a_training_step_calls_is_worded_for_the_step(tmp_path):
    """A helper only a training step reaches keeps its read, worded for the step (a graph cut per step on xla,
    info on native and on a chip that does not train); one nothing on the device calls is dropped."""
    _tree(tmp_path, {"train.py": """\
        import torch

        def entropy(logits: torch.Tensor):
            return (logits.softmax(-1) * logits).sum().item() + 0

        def idle(logits: torch.Tensor):
            return logits.sum().item() + 0

        class Trainer:
            def training_step(self, model, batch):
                out = model(batch)
                self.log(entropy(out))
                return out.mean()
        """})
    found = _scan(tmp_path, "trn1", "xla")
    assert found[("train.py", 4, "PC701")] == Severity.WARNING
    assert found[("train.py", 7, "PC701")] == Severity.INFO  # neither the step nor a forward calls it
    assert _scan(tmp_path)[("train.py", 4, "PC701")] == Severity.INFO
    assert _scan(tmp_path, "inf2", "xla")[("train.py", 4, "PC701")] == Severity.INFO  # inf2 does not train


def test_the_call_method_of_a_torch_module_runs_the_model(tmp_path):
    """A `torch.nn.Module` subclass (through the project's own base class) that overrides `__call__` runs it every
    step, as gpytorch's modules do; a plain class's `__call__` (a data transform) is not the model."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": """\
        import torch

        class Module(torch.nn.Module):
            pass
        """, "pkg/strategy.py": """\
        import torch
        from pkg.base import Module

        class Strategy(Module):
            def __call__(self, x: torch.Tensor):
                if not self.updated.item():
                    x = x * 2
                return x

        class Transform:
            def __call__(self, x: torch.Tensor):
                return x.sum().item() + 0
        """})
    found = _scan(tmp_path, "inf2", "xla")
    assert found[("pkg/strategy.py", 6, "PC701")] == Severity.WARNING  # reads a tensor's value every call
    assert found[("pkg/strategy.py", 12, "PC701")] == Severity.INFO  # a transform: not the model


def test_what_only_a_constructor_calls_is_set_up(tmp_path):
    """A helper only constructors call runs once, when the model is built; one `forward` calls too, or one a
    class built inside `forward` calls from its constructor, runs every step."""
    _tree(tmp_path, {"model.py": """\
        import torch

        def support(w):
            return w[w != 0]

        def shared(w):
            return w[w > 0]

        def per_step(w):
            return w[w > 1]

        class Window:
            def __init__(self, x):
                self.kept = per_step(x)

        class Net(torch.nn.Module):
            def __init__(self, w):
                super().__init__()
                self.idx = support(w)
                self.first = shared(w)

            def forward(self, x):
                return Window(x).kept, shared(x)
        """})
    found = _scan(tmp_path)
    assert found[("model.py", 4, "PC204")] == Severity.INFO
    assert found[("model.py", 7, "PC204")] == Severity.ERROR
    assert found[("model.py", 10, "PC204")] == Severity.ERROR


def test_an_initialisation_a_method_or_the_rest_of_a_function_finishes_runs_once(tmp_path):
    """The lazy initialisations of normalising flows and codebooks: `if not self.initialized: self._init()` where
    the method ends `self.initialized.fill_(1)` (normflows' Lipschitz layers), `if not self.done > 0.0:` whose body
    sets `self.done` (ActNorm's data-dependent init), and the rest of `init_embed_` after `if self.initted:
    return`, which ends `self.initted.data.copy_(...)` (a codebook's k-means on the first batch): set-up, run once.
    The same shapes whose body, method or rest never sets the flag keep their severity."""
    _tree(tmp_path, {"model.py": """\
        import torch

        class Flow(torch.nn.Module):
            def _init(self, z):
                self.scale = torch.linalg.inv(z)
                self.initialized.fill_(1)

            def _other(self, z):
                self.scale = torch.linalg.inv(z)

            def init_embed_(self, data):
                if self.initted:
                    return
                self.embed.data.copy_(data[data > 0][:4])
                self.initted.data.copy_(torch.Tensor([True]))

            def refresh(self, data):
                if self.fresh:
                    return
                self.embed.data.copy_(data[data > 0][:4])

            def forward(self, z):
                if not self.initialized:
                    self._init(z)
                if not self.done > 0.0:
                    self.shift = torch.linalg.inv(z)
                    self.done = torch.tensor(1.0)
                if not self.ready:
                    self._other(z)
                self.init_embed_(z)
                self.refresh(z)
                return z
        """})
    found = _scan(tmp_path)
    # only the initialisation that the method finishes calls it: set-up, where a CPU fallback is not reported
    assert found.get(("model.py", 5, "PC321"), Severity.INFO) == Severity.INFO
    assert found[("model.py", 14, "PC204")] == Severity.INFO  # the rest after `if self.initted: return`
    assert found[("model.py", 26, "PC321")] == Severity.INFO  # `not self.done > 0.0`, then `self.done = ...`
    assert found[("model.py", 9, "PC321")] > Severity.INFO  # `_other` never sets `self.ready`
    assert found[("model.py", 20, "PC204")] > Severity.INFO  # nothing sets `self.fresh`


def test_a_decode_loop_run_once_is_still_a_workload(tmp_path):
    """trl's A*PO estimates V* on first use (`if self._values is None: self._estimate()`, which generates for every
    prompt): a method that loops is a workload, not set-up, so the decode loop in it keeps its severity."""
    _tree(tmp_path, {"trainer.py": """\
        import torch

        class Trainer:
            def _estimate(self, prompts):
                for ids in prompts:
                    for _ in range(16):
                        logits = self.model(ids)
                        ids = torch.cat([ids, logits[:, -1:].argmax(-1)], dim=-1)
                self._values = {}

            def step(self, batch):
                if self._values is None:
                    self._estimate(batch)
                loss = self.model(batch).sum()
                loss.backward()
        """})
    assert _scan(tmp_path)[("trainer.py", 8, "PC213")] > Severity.INFO


def test_float64_made_once_counts_only_where_the_step_gets_it(tmp_path):
    """Set-up code that makes float64 data to compute something and narrows it costs the step nothing (info); what
    it stores on the object, registers or returns as float64 reaches the device (a warning). The same code in
    `forward` is a warning whatever it does with the value."""
    _tree(tmp_path, {"model.py": """\
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self, n):
                super().__init__()
                w = torch.linspace(0, 1, n, dtype=torch.float64)
                w = w.cumsum(0)
                self.register_buffer("w", w.float())
                u = torch.ones(n, dtype=torch.float64)
                self.register_buffer("u", u)
                self.v = torch.zeros(n).double()
                m = torch.eye(n, dtype=torch.float64)
                self.k = int(m.sum())
                t = torch.eye(n, dtype=torch.float64)
                self.z = nn.Parameter(t * 2)

            def forward(self, x):
                y = torch.linspace(0, 1, 4, dtype=torch.float64, device=x.device)
                return x + y.float()
        """})
    found = _scan(tmp_path)
    assert found[("model.py", 7, "PC303")] == Severity.INFO  # narrowed before it is registered
    assert found[("model.py", 13, "PC303")] == Severity.INFO  # only a Python number leaves
    assert found[("model.py", 10, "PC303")] == Severity.WARNING  # registered as float64
    assert found[("model.py", 12, "PC303")] == Severity.WARNING  # stored on the object
    assert found[("model.py", 15, "PC303")] == Severity.WARNING  # a float64 parameter
    assert found[("model.py", 19, "PC303")] == Severity.WARNING  # every step


def test_a_module_only_imported_behind_an_availability_check_is_a_guarded_integration(tmp_path):
    """A module the project imports only under `if is_bnb_available():` or `except ImportError` loads only where
    that library is installed: its own CUDA-library imports are info. One that any import reaches unguarded keeps
    its error, and so does a module nothing imports (a script)."""
    _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/tuners/__init__.py": """\
            from .utils import is_bnb_available
            try:
                from .apex_layers import FusedNorm
            except ImportError:
                FusedNorm = None

            def make(layer):
                if is_bnb_available() and layer is not None:
                    from .bnb import Linear8
                    return Linear8(layer)
                return layer
            """,
        "pkg/tuners/utils.py": "def is_bnb_available():\n    return False\n",
        "pkg/tuners/bnb.py": "import bitsandbytes as bnb\n",
        "pkg/tuners/apex_layers.py": "from apex.normalization import FusedLayerNorm as FusedNorm\n",
        "pkg/tuners/always.py": "import bitsandbytes as bnb\n",
        "pkg/use.py": "from .tuners.always import bnb\n",
        "train.py": "import bitsandbytes as bnb\n",
    })
    found = _scan(tmp_path)
    assert found[("pkg/tuners/bnb.py", 1, "PC501")] == Severity.INFO
    assert found[("pkg/tuners/apex_layers.py", 1, "PC501")] == Severity.INFO
    assert found[("pkg/tuners/always.py", 1, "PC501")] == Severity.ERROR
    assert found[("train.py", 1, "PC501")] == Severity.ERROR


def test_a_default_every_call_overrides_never_applies(tmp_path):
    """`device="cuda"` followed into `.to(device)` (reported at the default) is info where every call of the function
    in the project passes `device` (by keyword or by position, from a function or from module-level code, by name
    beside `**kwargs`); one call that leaves it out, or hides its arguments in `**kwargs`, keeps the error."""
    _tree(tmp_path, {
        "evaluate.py": """\
            import torch

            class Evaluator:
                def __init__(self, model, device="cuda"):
                    self.model = model.to(device)

            def helper(x, device="cuda"):
                return x.to(device)

            def once(x, device="cuda"):
                return x.to(device)

            def hidden(x, device="cuda"):
                return x.to(device)

            def named(x, device="cuda"):
                return x.to(device)

            def forwarded(x, device="cuda"):
                return x.to(device)

            def settled(x, device="cuda"):
                return x.to(device)

            def positional(x, device="cuda"):
                return x.to(device)
            """,
        "wrap.py": """\
            from evaluate import forwarded, settled, positional

            def outer_positional(x, device="cuda"):
                return positional(x, device)

            def outer(x, device="cuda"):
                return forwarded(x, device=device)

            def outer_settled(x, device="cuda"):
                return settled(x, device=device)

            def run(x):
                outer(x)
                outer_settled(x, device="cpu")
                outer_positional(x)
            """,
        "train.py": """\
            from evaluate import Evaluator, helper, once, hidden, named

            def main(model, x, options):
                Evaluator(model, device=x.device)
                once(x)
                hidden(x, **options)
                named(x, **options, device=x.device)

            helper(1, "cpu")
            """,
    })
    found = _scan(tmp_path)
    assert found[("evaluate.py", 4, "PC101")] == Severity.INFO
    assert found[("evaluate.py", 7, "PC101")] == Severity.INFO
    assert found[("evaluate.py", 10, "PC101")] == Severity.ERROR
    assert found[("evaluate.py", 13, "PC101")] == Severity.ERROR
    # audiocraft: `NoiseSchedule(**cfg.schedule, device=self.device)` names the device whatever the dict holds
    assert found[("evaluate.py", 16, "PC101")] == Severity.INFO
    # smp losses/lovasz.py: a call that passes on its caller's own `classes` passes that caller's default wherever
    # the caller is called without it; that default is reported where the caller writes it (`device=device` sends
    # it on), so the callee's own default, which every call overrides, is info (stable-audio's `generate(...,
    # device="cuda")` handing `device` to `sample_k(..., device="cuda")`)
    assert found[("wrap.py", 6, "PC103")] == Severity.ERROR
    assert found[("evaluate.py", 19, "PC101")] == Severity.INFO
    assert found[("evaluate.py", 22, "PC101")] == Severity.INFO
    # passed on by position, nothing reports the caller's default: the callee's default stands for it
    assert ("wrap.py", 3, "PC103") not in found
    assert found[("evaluate.py", 25, "PC101")] == Severity.ERROR


def test_a_cuda_device_in_a_signature_every_call_overrides_never_applies(tmp_path):
    """`device=torch.device("cuda")` written in the signature itself (sam2's frame loaders, timm's PrefetchLoader,
    moshi's KV cache) is info where every call in the tree passes `device`, a constructor's calls included; a
    function one call leaves it to, or hides its arguments from in `**kwargs`, keeps the error."""
    _tree(tmp_path, {
        "loaders.py": """\
            import torch

            class Prefetcher:
                def __init__(self, loader, device=torch.device("cuda")):
                    self.device = device

            def load_frames(path, device=torch.device("cuda")):
                return path

            def load_once(path, device=torch.device("cuda")):
                return path

            def load_hidden(path, device=torch.device("cuda")):
                return path
            """,
        "main.py": """\
            from loaders import Prefetcher, load_frames, load_once

            def run(loader, path, model):
                Prefetcher(loader, device=model.device)
                load_frames(path, model.device)
                load_once(path)
                load_hidden(path, **model.options)
            """,
    })
    found = _scan(tmp_path)
    assert found[("loaders.py", 4, "PC102")] == Severity.INFO
    assert found[("loaders.py", 7, "PC102")] == Severity.INFO
    assert found[("loaders.py", 10, "PC102")] == Severity.ERROR
    assert found[("loaders.py", 13, "PC102")] == Severity.ERROR


def test_a_module_imported_only_where_cuda_is_present_is_cuda_only(tmp_path):
    """whisper's `triton_ops`: imported only inside `if x.is_cuda:` and in a function called only there, its
    `import triton` and its kernels are info; a kernel launched as `kernel[grid](...)` only from code under a CUDA
    guard is CUDA-only too (torchtitan's fused MLA falls back when `not x.is_cuda`). A module that one import loads
    unguarded, and a kernel a model's `forward` launches, keep the error."""
    _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/triton_ops.py": """\
            import triton
            import triton.language as tl


            @triton.jit
            def dtw_kernel(x_ptr, BLOCK: tl.constexpr):
                tl.store(x_ptr, tl.arange(0, BLOCK))


            def median_filter_cuda(x):
                dtw_kernel[(1,)](x, BLOCK=64)
                return x
            """,
        "pkg/timing.py": """\
            def median_filter(x):
                if x.is_cuda:
                    from .triton_ops import median_filter_cuda
                    return median_filter_cuda(x)
                return x


            def dtw_cuda(x):
                from .triton_ops import dtw_kernel
                dtw_kernel[(1,)](x, BLOCK=64)
                return x


            def dtw(x):
                if x.is_cuda:
                    return dtw_cuda(x)
                return x
            """,
        "pkg/shared_ops.py": "import triton\n",
        "pkg/uses.py": """\
            from . import shared_ops


            def f(x):
                if x.is_cuda:
                    from .shared_ops import triton
                return x
            """,
        "pkg/fused.py": """\
            import triton
            import triton.language as tl
            from torch import nn


            @triton.jit
            def rope_kernel(x_ptr, BLOCK: tl.constexpr):
                tl.store(x_ptr, tl.arange(0, BLOCK))


            @triton.jit
            def plain_kernel(x_ptr, BLOCK: tl.constexpr):
                tl.store(x_ptr, tl.arange(0, BLOCK))


            def launch(x):
                rope_kernel[(x.shape[0],)](x, BLOCK=64)
                return x


            class Attention(nn.Module):
                def forward(self, x):
                    return x * 2


            class FusedAttention(Attention):
                def forward(self, x):
                    if not x.is_cuda:
                        return super().forward(x)
                    return launch(x)


            class Plain(nn.Module):
                def forward(self, x):
                    plain_kernel[(1,)](x, BLOCK=64)
                    return x
            """,
    })
    found = _scan(tmp_path)
    assert found[("pkg/triton_ops.py", 1, "PC501")] == Severity.INFO
    assert found[("pkg/triton_ops.py", 5, "PC502")] == Severity.INFO
    assert found[("pkg/shared_ops.py", 1, "PC501")] == Severity.ERROR
    assert found[("pkg/fused.py", 6, "PC502")] == Severity.INFO
    assert found[("pkg/fused.py", 11, "PC502")] == Severity.ERROR
    assert found[("pkg/fused.py", 1, "PC501")] == Severity.ERROR


def test_an_op_registered_for_cuda_devices_only_is_cuda_only(tmp_path):
    """An implementation the dispatcher sends only CUDA tensors (`torch.library.custom_op(..., device_types="cuda")`,
    `torch.library.impl(name, "CUDA")`, `@op.register_kernel("cuda")`) runs only where CUDA is present, and so do
    the Triton kernels only it launches. A registration for every device, or for the CPU too, keeps the error."""
    kernel = "\n\n@triton.jit\ndef {}(x_ptr, BLOCK: tl.constexpr):\n    tl.store(x_ptr, tl.arange(0, BLOCK))\n"
    kernels = "".join(kernel.format(name) for name in ("k_op", "k_impl", "k_kernel", "k_any", "k_both"))
    head = "import torch\nimport triton\nimport triton.language as tl\n" + kernels  # kernels at 6, 11, 16, 21, 26
    (tmp_path / "ops.py").write_text(head + textwrap.dedent("""\


        @torch.library.custom_op("ns::rope", mutates_args={"x"}, device_types="cuda")
        def rope(x: torch.Tensor) -> None:
            k_op[(1,)](x, BLOCK=64)


        @torch.library.impl("ns::scale", "CUDA")
        def scale(x):
            k_impl[(1,)](x, BLOCK=64)
            return x


        @torch.library.custom_op("ns::shift", mutates_args=())
        def shift(x: torch.Tensor) -> torch.Tensor:
            return x + 1


        @shift.register_kernel("cuda")
        def shift_cuda(x):
            k_kernel[(1,)](x, BLOCK=64)
            return x


        @torch.library.custom_op("ns::anywhere", mutates_args={"x"})
        def anywhere(x: torch.Tensor) -> None:
            k_any[(1,)](x, BLOCK=64)


        @torch.library.custom_op("ns::both", mutates_args={"x"}, device_types=("cuda", "cpu"))
        def both(x: torch.Tensor) -> None:
            k_both[(1,)](x, BLOCK=64)
        """))
    found = _scan(tmp_path)
    assert [found[("ops.py", line, "PC502")] for line in (6, 11, 16, 21, 26)] == [Severity.INFO] * 3 + [
        Severity.ERROR] * 2


def test_a_training_steps_code_keeps_its_severity_on_inf2(tmp_path):
    """A training step, and a helper only training steps call (a masked loss), keep their findings on Inf2 beside
    PC607: the rubric counts a training loop as a real finding for training on Inf2, where it would hurt."""
    _tree(tmp_path, {
        "train.py": """\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    return x[x > 0].sum()


            def masked_loss(pred, y):
                return (pred[y > 0] - y[y > 0]).abs().mean()


            class Trainer:
                def __init__(self):
                    self.model = Model()
                    self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

                def train_step(self, x, y):
                    loss = masked_loss(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
                    return loss
            """,
    })
    inf2, trn2 = _scan(tmp_path, "inf2", "xla"), _scan(tmp_path)
    assert inf2[("train.py", 11, "PC204")] > Severity.INFO and inf2[("train.py", 22, "PC607")] > Severity.INFO
    assert trn2[("train.py", 11, "PC204")] > Severity.INFO
    assert inf2[("train.py", 7, "PC204")] > Severity.INFO and trn2[("train.py", 7, "PC204")] > Severity.INFO


def test_a_custom_autograd_functions_apply_calls_its_forward_and_backward(tmp_path):
    """torchtitan's fused MLA: `_Rope.apply(q)` of a `torch.autograd.Function` runs `_Rope.forward` (and its
    `backward`), so what only a CUDA-guarded caller applies is CUDA-only, down to the Triton kernel its forward
    launches; a Function applied in a model's plain path keeps its findings."""
    _tree(tmp_path, {"fused.py": """\
        import torch
        from torch import nn


        class _Rope(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q):
                torch.cuda.synchronize()
                return q

            @staticmethod
            def backward(ctx, grad):
                torch.cuda.synchronize()
                return grad


        class _Plain(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q):
                torch.cuda.synchronize()
                return q


        def fused_rope(q):
            return _Rope.apply(q)


        class FusedAttention(nn.Module):
            def forward(self, x):
                if not x.is_cuda:
                    return x * 2
                return fused_rope(x)


        class PlainAttention(nn.Module):
            def forward(self, x):
                return _Plain.apply(x)
        """})
    found = _scan(tmp_path)
    assert found[("fused.py", 8, "PC105")] == Severity.INFO
    assert found[("fused.py", 13, "PC105")] == Severity.INFO
    assert found[("fused.py", 20, "PC105")] == Severity.ERROR


def test_a_parameter_every_call_passes_a_host_value_for_is_a_host_value(tmp_path):
    """Where every call of a function passes a host value (a `.cpu()` copy, `.to("cpu")`, a numpy value, a local
    name bound to one) for the parameters a finding's value is made of, that code works on the host: info. One
    call that passes a device tensor, or a value made of the object's state, keeps the warning."""
    _tree(tmp_path, {
        "geometry.py": """\
            import torch

            def refine(points, weights):
                inliers = (points[:, 0] > 0).sum()
                n = int(inliers)
                return points[points[:, 0] > 0], n, int(weights.sum())

            def device_side(points):
                return int((points > 0).sum())
            """,
        "model.py": """\
            import numpy as np
            import torch
            from torch import nn
            from geometry import refine, device_side

            class Net(nn.Module):
                def forward(self, x):
                    host = x.detach().cpu()
                    a = refine(host, self.weight)
                    b = refine(np.asarray(host), weights=self.weight)
                    return device_side(x), device_side(host), a, b
            """,
    })
    found = _scan(tmp_path, chip="inf2", stack="xla")
    assert found[("geometry.py", 5, "PC701")] == Severity.INFO  # `points` is a host copy at both calls
    assert found[("geometry.py", 6, "PC204")] == Severity.INFO
    assert found[("geometry.py", 6, "PC701")] == Severity.WARNING  # `weights` is the module's parameter
    assert found[("geometry.py", 9, "PC701")] == Severity.WARNING  # one call passes the device tensor


def test_a_collator_object_batches_on_the_host(tmp_path):
    """An object handed to a trainer or a loader as `data_collator=` / `collate_fn=`, and a subclass of
    transformers' `DataCollatorMixin`, batch examples in the data pipeline: their methods are host code. The same
    code in a class nothing hands over is judged as before."""
    _tree(tmp_path, {"train.py": """\
        import torch
        from transformers import Trainer
        from transformers.data.data_collator import DataCollatorMixin

        class Packer:
            def __call__(self, examples):
                ids = torch.stack(examples)
                return ids.nonzero()

        class Padder(DataCollatorMixin):
            def torch_call(self, examples):
                ids = torch.stack(examples)
                return ids[ids != 0]

        class Model(torch.nn.Module):
            def forward(self, x):
                return x[x > 0]

        def main(model, data):
            Trainer(model=model, train_dataset=data, data_collator=Packer())
        """})
    found = _scan(tmp_path)
    assert found[("train.py", 8, "PC201")] == Severity.INFO
    assert found[("train.py", 13, "PC204")] == Severity.INFO
    assert found[("train.py", 17, "PC204")] == Severity.ERROR


def test_a_step_body_that_steps_its_own_optimizers_reads_every_step(tmp_path):
    """A function that calls `backward()` and steps its optimizers with no loop over the data (Lightning's manual
    optimisation, a `train_step(batch)`) is the step's body, called once a step: a host read or a branch on a
    tensor there costs every step. A function that loops over batches drives the loop: what it reads after the
    loop is read once."""
    _tree(tmp_path, {"train.py": """\
        import torch

        class Task:
            def training_step(self, batch, batch_idx):
                keep = batch["y"].sum(1) > 0
                if not keep.any():
                    return None
                loss = self.model(batch["x"]).mean()
                self.manual_backward(loss)
                for optimizer in self.optimizers():
                    optimizer.step()
                return loss

        def train_step(model, batch, opt):
            loss = model(batch)
            loss.backward()
            opt.step()
            return loss.item()

        def fit(model, loader, opt):
            for batch in loader:
                loss = model(batch)
                loss.backward()
                opt.step()
            return loss.item()
        """})
    found = _scan(tmp_path)
    assert found[("train.py", 6, "PC208")] == Severity.WARNING
    trn1 = _scan(tmp_path, chip="trn1", stack="xla")
    assert trn1[("train.py", 18, "PC701")] == Severity.WARNING
    assert ("train.py", 25, "PC701") not in trn1


def test_a_branch_for_a_parameter_no_call_passes_never_runs(tmp_path):
    """`if mask is not None:` (or `if mask:`) in a private function no call of which passes `mask` (default None
    or False) never runs there: info. A call that passes it, by keyword or position, or hides its arguments in
    `**kwargs`, keeps the finding; so do a function with no caller and a public one (its users may pass it)."""
    _tree(tmp_path, {
        "loss.py": """\
            import torch

            def _z_loss(logits, mask=None):
                if mask is not None:
                    logits = logits[mask > 0]
                return logits.sum()

            def _other_loss(logits, mask=None):
                if mask is not None:
                    logits = logits[mask > 0]
                return logits.sum()

            def _flag_loss(logits, trim=False, **extra):
                if trim:
                    logits = logits[logits > 0]
                return logits.sum()

            def public(logits, mask=None):
                if mask is not None:
                    logits = logits[mask > 0]
                return logits.sum()

            def _trimmed(logits, trim=False):
                if trim:
                    logits = logits[logits > 0]
                return logits.sum()

            class Net(torch.nn.Module):
                def forward(self, x, m, options):
                    y = _z_loss(x) + _other_loss(x, m) + _flag_loss(x) + _flag_loss(x, **options)
                    return y + public(x) + _trimmed(x)
            """,
    })
    found = _scan(tmp_path)
    assert found[("loss.py", 5, "PC204")] == Severity.INFO
    assert found[("loss.py", 10, "PC204")] == Severity.ERROR
    assert found[("loss.py", 15, "PC204")] == Severity.ERROR
    assert found[("loss.py", 20, "PC204")] == Severity.ERROR
    assert found[("loss.py", 25, "PC204")] == Severity.INFO


def test_a_forward_of_a_class_that_is_no_module_starts_no_device_step(tmp_path):
    """A data transform's `forward` (`class Transform(ABC)`, subclassed through a re-export) is no model's: what
    only it calls is not on the device step. A class whose bases the project cannot see may be a Module and keeps
    its `forward`; a method reached through a re-exported base class resolves."""
    _tree(tmp_path, {
        "pkg/__init__.py": "from pkg.base import Transform, Layer\n",
        "pkg/base.py": """\
            from abc import ABC
            import torch

            class Transform(ABC):
                def forward(self, data):
                    return data

            class Layer(torch.nn.Module):
                def norm(self, x):
                    return x / x.sum().item()
            """,
        "pkg/helpers.py": """\
            def count(mask):
                return mask.sum().item() + 0

            def total(mask):
                return mask.sum().item() + 0
            """,
        "pkg/use.py": """\
            import pkg
            from library import Block
            from pkg.helpers import count, total

            class Degree(pkg.Transform):
                def forward(self, data):
                    return count(data.x > 0)

            class Other(Block):
                def forward(self, x):
                    return x * total(x > 0)

            class Net(pkg.Layer):
                def forward(self, x):
                    return self.norm(x)
            """,
    })
    found = _scan(tmp_path, "inf2", "xla")
    assert found[("pkg/helpers.py", 2, "PC701")] == Severity.INFO  # only a transform's forward calls it
    assert found[("pkg/helpers.py", 5, "PC701")] == Severity.WARNING
    assert found[("pkg/base.py", 10, "PC701")] == Severity.WARNING


def test_a_host_value_passed_on_through_a_chain_of_calls_is_one(tmp_path):
    """A parameter passed on as it came (`score(points.double())`) is a host value where every call of the caller
    passes one for it, up the chain; one caller in the chain that passes a device tensor keeps the warning."""
    _tree(tmp_path, {
        "geometry.py": """\
            import torch

            def score(points):
                return int((points[:, 0] > 0).sum())

            def refine(points):
                return score(points.double())

            def rate(points):
                return int((points > 0).sum())

            def relay(points):
                return rate(points[:, :2])
            """,
        "model.py": """\
            from torch import nn
            from geometry import refine, relay

            class Net(nn.Module):
                def forward(self, x):
                    host = x.detach().cpu()
                    return refine(host), relay(host), relay(x)
            """,
    })
    found = _scan(tmp_path, chip="inf2", stack="xla")
    assert found[("geometry.py", 4, "PC701")] == Severity.INFO
    assert found[("geometry.py", 10, "PC701")] == Severity.WARNING


def test_a_class_that_wraps_another_vendors_runtime_is_that_vendors_path(tmp_path):
    """A class, certainly no torch Module, one of whose methods loads another vendor's runtime (a base written in
    the same file counts), runs only for that vendor: the finding in its `forward` is info. An nn.Module that
    imports the same runtime in one method keeps its forward as the model's."""
    _tree(tmp_path, {"backends.py": """\
        from abc import ABC

        import torch


        class Backend(ABC):
            pass


        class CoreMLBackend(Backend):
            def load(self, weight):
                import coremltools as ct
                self.model = ct.models.MLModel(weight)

            def forward(self, im):
                y = self.model.predict({"x": im.numpy()})
                return torch.from_numpy(y["out"]).cuda()


        class Net(torch.nn.Module):
            def export(self, path):
                import coremltools as ct
                return ct.convert(self)

            def forward(self, x):
                return x.cuda()
        """})
    found = _scan(tmp_path)
    assert found[("backends.py", 17, "PC101")] == Severity.INFO
    assert found[("backends.py", 26, "PC101")] == Severity.ERROR


def test_a_class_built_on_another_vendors_class_is_that_vendors_path(tmp_path):
    """A class whose base is another vendor's (a TensorFlow Keras model beside the torch one) is that vendor's code
    in every method, even one that names nothing of the vendor's; a torch Module beside it keeps its severity.
    Chainer is not such a vendor: espnet's PyTorch backend drives its training loop with Chainer's trainer."""
    _tree(tmp_path, {"training.py": """\
        import tensorflow as tf
        import torch
        from chainer import training


        class KerasHead(tf.keras.Model):
            def warm_up(self):
                torch.cuda.synchronize()


        class Updater(training.updaters.StandardUpdater):
            def update_core(self):
                torch.cuda.synchronize()


        class Net(torch.nn.Module):
            def forward(self, x):
                torch.cuda.synchronize()
                return x
        """})
    found = _scan(tmp_path)
    assert found[("training.py", 8, "PC105")] == Severity.INFO
    assert found[("training.py", 13, "PC105")] == Severity.ERROR
    assert found[("training.py", 18, "PC105")] == Severity.ERROR


def test_calls_under_a_cuda_conditional_expression_or_a_probe_held_in_a_name_are_cuda_only(tmp_path):
    """A function called only as `f() if torch.cuda.is_available() else None`, `use and f()` after a probe, or
    under `if cuda:` where `cuda = torch.cuda.is_available()`, is CUDA-only; one more call without a guard, or a
    name bound twice, is not."""
    _tree(tmp_path, {"info.py": """\
        import torch

        def gpu_name(i):
            return torch.cuda.get_device_name(i)

        def gpu_sync():
            torch.cuda.synchronize()

        def gpu_reset():
            torch.cuda.synchronize()
        """, "report.py": """\
        import torch
        from info import gpu_name, gpu_reset, gpu_sync

        def report(device):
            cuda = torch.cuda.is_available()
            name = gpu_name(0) if torch.cuda.device_count() > 0 else None
            done = device.type == "cuda" and gpu_sync()
            if cuda:
                gpu_name(1)
            again = torch.cuda.is_available()
            again = False
            if again:
                gpu_reset()
            return name, done
        """})
    found = _scan(tmp_path)
    assert found[("info.py", 4, "PC105")] == Severity.INFO
    assert found[("info.py", 7, "PC105")] == Severity.INFO
    assert found[("info.py", 10, "PC105")] == Severity.ERROR


def test_a_class_that_updates_a_state_and_computes_a_result_is_a_metric(tmp_path):
    """A class with `update` and `compute` (its own or its project base's) keeps a metric: its methods, and what
    only they call, run on the host side of the step, and its `forward` (a Module's) is no model's. A model's
    `forward` calling the same helper keeps the finding there. (The file is not named `metrics.py`: that name alone
    puts a file on the host side.)"""
    _tree(tmp_path, {"scores.py": """\
        import torch


        class Metric(torch.nn.Module):
            def forward(self, preds, target):
                self.update(preds, target)
                return self.compute()


        class AUROC(Metric):
            def update(self, preds, target):
                self.preds, self.target = preds, target

            def compute(self):
                return curve(self.preds, self.target)


        def curve(preds, target):
            keep = target >= 0
            return preds[keep]


        def shared(x):
            return x[x > 0]


        class Net(torch.nn.Module):
            def forward(self, x):
                return shared(x)


        class Tracker(Metric):
            def update(self, x, y):
                self.x = shared(x)

            def compute(self):
                return self.x
        """})
    found = _scan(tmp_path)
    assert found[("scores.py", 20, "PC204")] == Severity.INFO
    assert found[("scores.py", 24, "PC204")] == Severity.ERROR


@pytest.mark.parametrize("root", ["", "src/"])
def test_a_module_level_name_bound_to_a_cuda_test_guards_where_it_is_imported(tmp_path, root):
    """`SUPPORTS_FLEX = torch.cuda.is_available() and ...` at module level is a CUDA test in its own module and in
    every module that imports it (through a package's re-export too); a flag bound to anything else is not. So
    also where the scan starts above the packages' root (`src/pkg/flags.py`, imported as `pkg.flags`)."""
    _tree(tmp_path, {f"{root}pkg/__init__.py": """\
        from pkg.flags import SUPPORTS_FLEX
        from pkg.attention import attend
        """, f"{root}pkg/flags.py": """\
        import torch

        SUPPORTS_FLEX = torch.cuda.is_available() and torch.__version__ >= "2.5"
        VERBOSE = True


        def local(x):
            if SUPPORTS_FLEX:
                torch.cuda.synchronize()
        """, f"{root}pkg/attention.py": """\
        import torch

        from pkg import SUPPORTS_FLEX
        from pkg.flags import VERBOSE


        def attend(x):
            if SUPPORTS_FLEX:
                torch.cuda.synchronize()
            if VERBOSE:
                torch.cuda.synchronize()
            return x
        """})
    found = _scan(tmp_path)
    assert found[(f"{root}pkg/flags.py", 9, "PC105")] == Severity.INFO
    assert found[(f"{root}pkg/attention.py", 9, "PC105")] == Severity.INFO
    assert found[(f"{root}pkg/attention.py", 11, "PC105")] == Severity.ERROR


def test_a_data_dependent_shape_no_forward_or_step_reaches_is_info(tmp_path):
    """A data-dependent shape is an error where the compiled step holds it: in a helper a module's forward calls
    (here an inherited method, reached through `self` and a base class of the same file) or a training step
    calls. In a function the project places but neither reaches (a utility nothing calls, post-processing) it is
    info, and says why. Rules about the loops that drive the device (a tensor grown per step) keep theirs."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/ops.py": """\
        import torch

        def keep_positive(x):
            return x[x > 0]

        def select_boxes(scores):
            return torch.nonzero(scores > 0.5)

        def generate(model, ids, steps):
            for _ in range(steps):
                logits = model(ids)
                ids = torch.cat([ids, logits.argmax(-1)[:, -1:]], dim=1)
            return ids
        """, "pkg/model.py": """\
        import torch
        from pkg.ops import generate, keep_positive, select_boxes

        class Base(torch.nn.Module):
            def select(self, x):
                return torch.unique(x)

            def forward(self, x):
                return x

        class Net(Base):
            def forward(self, x):
                return keep_positive(x), self.select(x)
        """})
    found = _scan(tmp_path)
    assert found[("pkg/ops.py", 4, "PC204")] == Severity.ERROR
    assert found[("pkg/model.py", 6, "PC205")] == Severity.ERROR
    assert found[("pkg/ops.py", 7, "PC201")] == Severity.INFO
    assert found[("pkg/ops.py", 12, "PC213")] == Severity.WARNING
    settings = _settings(tmp_path)
    result = scan_module.scan_paths(["."], settings, tmp_path, jobs=1)
    note = next(f.message for f in result.findings if f.code == "PC201")
    assert "no module's `forward` and no training step in the scanned files reaches `select_boxes`" in note
    # files named one by one (pre-commit's changed files) may have callers elsewhere: the severity stands
    assert _scan(tmp_path, paths=["pkg/ops.py"])[("pkg/ops.py", 7, "PC201")] == Severity.ERROR


def test_a_module_that_needs_a_cuda_only_library_and_loads_only_behind_a_test_is_cuda_only(tmp_path):
    """A module whose top level imports a CUDA-only library (rules/libraries.toml) and that the project imports
    only behind an availability test integrates that library: none of it loads on a Neuron host. A module that
    imports it only under a test (a type checker's), or that the project imports unconditionally, is not one."""
    layer = "import torch\n{header}\n\nclass Linear8bit(torch.nn.Module):\n    def forward(self, x):\n" \
            "        return x[x > 0]\n"
    _tree(tmp_path, {
        "pkg/__init__.py": """\
            import importlib.util
            from pkg.loaded import Linear8bit as Loaded

            def is_bnb_available():
                return importlib.util.find_spec("bitsandbytes") is not None

            if is_bnb_available():
                from pkg.bnb import Linear8bit
                from pkg.typed import Linear8bit as Again
            """,
        "pkg/bnb.py": layer.format(header="import bitsandbytes as bnb"),
        "pkg/typed.py": layer.format(
            header="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import bitsandbytes"),
        "pkg/loaded.py": layer.format(header="import bitsandbytes as bnb"),
    })
    found = _scan(tmp_path)
    assert found[("pkg/bnb.py", 6, "PC204")] == Severity.INFO
    assert found[("pkg/typed.py", 8, "PC204")] == Severity.ERROR
    assert found[("pkg/loaded.py", 6, "PC204")] == Severity.ERROR


def test_the_truth_of_a_torch_predicate_is_a_read_in_the_step(tmp_path):
    """`if torch.isnan(loss):` takes the truth of a one-element boolean tensor: its value is read on the host,
    in a training step (in a file with no other tensor read to look for) as in `forward`; `math.isnan` of a Python
    number and a predicate of a host tensor read nothing from the device."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/task.py": """\
        import math
        import torch
        import torch.nn.functional as F

        class Task:
            def training_step(self, batch, batch_idx):
                loss = F.mse_loss(self.model(batch), batch)
                if torch.isnan(loss):
                    return None
                if math.isnan(batch_idx):
                    return None
                if not torch.isfinite(loss) or batch_idx > 3:
                    loss = loss * 0
                loss.backward()
                return loss
        """, "pkg/model.py": """\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, scale: float):
                if torch.isnan(torch.tensor(scale)):
                    x = x * 2
                return x
        """})
    found = _scan(tmp_path)
    assert found[("pkg/task.py", 8, "PC208")] == Severity.WARNING
    assert found[("pkg/task.py", 12, "PC208")] == Severity.WARNING
    assert ("pkg/task.py", 10, "PC208") not in found and ("pkg/model.py", 5, "PC208") not in found


def test_a_fallback_for_a_parameter_every_call_passes_never_runs(tmp_path):
    """`if size is None: size = int(index.max()) + 1` runs only when the caller leaves `size` out: where every
    call in the project passes it, the read never happens (info); where one call leaves it out, or the function
    rebinds it elsewhere, it still counts."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/ops.py": """\
        import torch

        def scatter(src, index, dim_size=None):
            if dim_size is None:
                dim_size = int(index.max()) + 1
            return src

        def coo(edge_index, size=None):
            if size is None:
                size = int(edge_index.max()) + 1
            return size

        def both(x, size=None):
            size = size or 3
            if size is None:
                size = int(x.max())
            return size

        def after(x, size=None):
            if size is None:
                size = int(x.max())
            size = (size, size)
            return size

        class M(torch.nn.Module):
            def forward(self, src, index):
                return (scatter(src, index, dim_size=4), coo(index), coo(index, 5), both(src, 3),
                        after(src, size=2))
        """})
    found = _scan(tmp_path, "inf2", "xla")
    assert found[("pkg/ops.py", 5, "PC701")] == Severity.INFO
    assert found[("pkg/ops.py", 10, "PC701")] == Severity.WARNING
    assert found[("pkg/ops.py", 16, "PC701")] == Severity.WARNING
    assert found[("pkg/ops.py", 21, "PC701")] == Severity.INFO  # rebound after the branch only


def test_a_fallback_expression_for_a_parameter_every_call_passes_never_runs(tmp_path):
    """`device if device is not None else <probe>`, `<probe> if device is None else device` and `device or <probe>`
    evaluate the probe only where the caller leaves `device` out: info where every call passes it, a warning where
    one call leaves it out."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/place.py": """\
        import torch

        def first(x, device=None):
            device = device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu")
            return x.to(device)

        def second(x, device=None):
            device = ("cuda" if torch.cuda.is_available() else "cpu") if device is None else device
            return x.to(device)

        def third(x, device=None):
            device = device or ("cuda" if torch.cuda.is_available() else "cpu")
            return x.to(device)

        def run(x, d):
            return first(x, device=d), second(x, d), third(x, device=d), third(x)
        """})
    found = _scan(tmp_path)
    assert found[("pkg/place.py", 4, "PC104")] == Severity.INFO
    assert found[("pkg/place.py", 8, "PC104")] == Severity.INFO
    assert found[("pkg/place.py", 12, "PC104")] == Severity.WARNING  # `third(x)` leaves it out


def test_a_size_a_helper_of_another_file_or_a_method_reads_from_tensor_data(tmp_path):
    """A size returned by a function of another module or by a method, every `return` of which reads a
    parameter's data into Python (`return t.tolist()`), is a size taken from tensor data; a helper returning a
    shape, or one given a host value, is not."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/util.py": """\
        def sizes(t):
            return t.tolist()

        def count(t):
            return t.shape[0]
        """, "pkg/model.py": """\
        import torch
        from pkg import util
        from pkg.util import count, sizes

        class Net(torch.nn.Module):
            def lengths(self, mask):
                return int(mask.sum().item())

            def forward(self, x, lengths, mask):
                a = torch.split(x, sizes(lengths))
                b = torch.zeros(count(lengths))
                c = torch.split(x, util.sizes(lengths))
                d = torch.zeros(self.lengths(mask))
                e = torch.split(x, sizes(lengths.cpu()))
                n = sizes(lengths)
                return a, b, c, d, e, x.view(n)
        """})
    found = _scan(tmp_path)
    for line in (10, 12, 13, 16):
        assert found[("pkg/model.py", line, "PC209")] == Severity.ERROR
    assert ("pkg/model.py", 11, "PC209") not in found and ("pkg/model.py", 14, "PC209") not in found


def test_a_function_called_only_under_cuda_or_another_accelerator_is_cuda_only(tmp_path):
    """`if is_cuda_available() or is_musa_available(): get_max_cuda_memory()`: the project's own probe or another
    accelerator's test holds only off Neuron, so what only that branch calls is a CUDA-only path (info); an `or`
    with a test that holds on Neuron is no such guard."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/device.py": """\
        import torch

        def is_cuda_available():
            return torch.cuda.is_available()

        def is_musa_available():
            return hasattr(torch, "musa") and torch.musa.is_available()

        def peak():
            return torch.cuda.reset_peak_memory_stats()

        def sync():
            return torch.cuda.synchronize()
        """, "pkg/log.py": """\
        from pkg.device import is_cuda_available, is_musa_available, peak, sync

        def report(log, verbose):
            if is_cuda_available() or is_musa_available():
                log["memory"] = peak()
            if is_cuda_available() or verbose:
                sync()
            return log
        """})
    found = _scan(tmp_path)
    assert found[("pkg/device.py", 10, "PC105")] == Severity.INFO
    assert found[("pkg/device.py", 13, "PC105")] == Severity.ERROR


def test_a_generic_function_runs_the_implementations_registered_for_it(tmp_path):
    """pyannote utils/permutation.py: `permutate` is a `functools.singledispatch` function whose tensor
    implementation a `forward` reaches through `permutate(y1, y2)`; its host copy is the model's (warning on the
    xla stack). The numpy implementation, which calls the generic one on host tensors made from its arrays (and
    Python-typed options), copies nothing from the device."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/permutation.py": """\
        from functools import singledispatch
        from typing import Callable, Literal

        import numpy as np
        import torch
        from scipy.optimize import linear_sum_assignment

        @singledispatch
        def permutate(y1, y2, cost_func: Callable | Literal["mse"] = "mse"):
            raise TypeError(type(y1))

        @permutate.register
        def permutate_torch(y1: torch.Tensor, y2: torch.Tensor, cost_func: Callable | Literal["mse"] = "mse"):
            cost = torch.cdist(y1, y2)
            rows, cols = linear_sum_assignment(cost.cpu())
            return y2[:, cols]

        @permutate.register
        def permutate_numpy(y1: np.ndarray, y2: np.ndarray, cost_func: Callable | Literal["mse"] = "mse"):
            output = permutate(torch.from_numpy(y1), torch.from_numpy(y2), cost_func=cost_func)
            return output.numpy()
        """, "pkg/task.py": """\
        import torch
        from pkg.permutation import permutate

        class Aligned(torch.nn.Module):
            def forward(self, x, reference):
                return permutate(self.model(x), reference)
        """})
    found = _scan(tmp_path, "inf2", "xla")
    assert found[("pkg/permutation.py", 15, "PC702")] == Severity.WARNING
    assert ("pkg/permutation.py", 21, "PC702") not in found


def test_a_message_a_check_builds_only_on_failure_only_words_the_error(tmp_path):
    """kornia enhance/jpeg.py, `torch._check`: `check(ok, lambda: f"got {q.amin().item()}")` builds its message
    only when the check fails, so the read there runs only to word the error. The check's own test reads every
    call (a warning on the xla stack, where a `forward` reaches it), and so does a lambda that computes."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/jpeg.py": """\
        import torch

        def jpeg(image, q, check):
            check(q.amin().item() >= 0,
                  lambda: f"got {q.amin().item()}")
            check(q.amax().item() <= 100,
                  lambda: ("out of range: " f"{q.amax().item()}"))
            order = sorted(range(len(q)), key=lambda i: q[i].item())
            return image[order]

        class Jpeg(torch.nn.Module):
            def forward(self, image, q):
                return jpeg(image, q, torch._check)
        """})
    found = {key: severity for key, severity in _scan(tmp_path, "inf2", "xla").items() if key[2] == "PC701"}
    lines = sorted(line for _, line, _ in found)
    assert lines == [4, 6, 8]  # the checks' tests and the sort key; not the messages (lines 5 and 7)
    assert all(severity == Severity.WARNING for severity in found.values())


def test_a_host_fallback_op_nothing_places_is_info_and_set_up_or_host_code_keeps_none(tmp_path):
    """`torch.linalg.cholesky` outside `forward`: a warning where a forward or a training step reaches it, info where
    nothing in the scan does (a distribution's `log_prob`, a function handed to a sampler), and nothing where the
    graph places the code in set-up or the data pipeline."""
    _tree(tmp_path, {"ops.py": """\
        import torch
        from torch.utils.data import Dataset

        def factor(k: torch.Tensor):
            return torch.linalg.cholesky(k)

        def loss_of(k: torch.Tensor):
            return torch.linalg.cholesky(k).sum()

        def loose(k: torch.Tensor):
            return torch.linalg.cholesky(k)

        def prepared(k: torch.Tensor):
            return torch.linalg.cholesky(k)

        def loaded(k: torch.Tensor):
            return torch.linalg.cholesky(k)

        class Net(torch.nn.Module):
            def __init__(self, k):
                super().__init__()
                self.l = prepared(k)

            def forward(self, x):
                return factor(x)

        class Items(Dataset):
            def __getitem__(self, i):
                return loaded(self.k[i])

        def train(model, batches, optimizer):
            for b in batches:
                loss = loss_of(model(b))
                loss.backward()
                optimizer.step()
        """})
    found = _scan(tmp_path)
    assert found[("ops.py", 5, "PC321")] == Severity.WARNING  # forward reaches it
    assert found[("ops.py", 8, "PC321")] == Severity.WARNING  # every training step reaches it
    assert found[("ops.py", 11, "PC321")] == Severity.INFO  # nothing in the scan does
    assert ("ops.py", 14, "PC321") not in found  # set-up: once, on purpose
    assert ("ops.py", 17, "PC321") not in found  # the data pipeline
    assert ("ops.py", 11, "PC321") not in _scan(tmp_path, "inf2", "xla")  # PyTorch/XLA lowers it


def test_a_loop_that_steps_each_of_its_optimizers_is_the_training_loop(tmp_path):
    """`for opt in optimizers: opt.step()` (here `scaler.step(optimizer)` over `enumerate(zip(optimizers,
    schedulers))`) inside the loop over batches steps that loop: a test that takes a
    tensor's truth there (`if not torch.isfinite(grad_norm):`) reads it every step. A loop over epochs around a loop
    over batches is not the step itself, and a check that only raises stays quiet."""
    _tree(tmp_path, {"train.py": """\
        import torch

        def train(model, loader, optimizers, epochs):
            for epoch in range(epochs):
                if torch.isnan(model.scale):
                    print("nan")
                for batch in loader:
                    loss = model(batch)
                    if torch.isnan(loss):
                        raise FloatingPointError(batch)
                    loss.backward()
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    if not torch.isfinite(grad_norm):
                        continue
                    for i, (optimizer, scheduler) in enumerate(zip(optimizers, schedulers)):
                        scaler.step(optimizer)
        """})
    found = _scan(tmp_path, "trn1", "xla")
    assert found[("train.py", 13, "PC701")] == Severity.WARNING
    assert ("train.py", 5, "PC701") not in found and ("train.py", 9, "PC701") not in found
    assert _scan(tmp_path)[("train.py", 13, "PC701")] == Severity.INFO  # native: a sync, advice


# A helper that returns its argument's value in Python, passing a Python number through (pyro's `torch_item`).
TORCH_ITEM = """\
    import numbers

    def torch_item(x):
        return x if isinstance(x, numbers.Number) else x.item()
    """


def test_a_helper_that_returns_its_arguments_value_is_read_where_it_is_called(tmp_path):
    """`torch_item(loss)` with `def torch_item(x): return x if isinstance(x, Number) else x.item()`: the read is
    reported at each call that hands it a tensor (worded for the training loop, or info where nothing places the
    caller), and not inside the helper; a call with a host value reads nothing."""
    _tree(tmp_path, {"util.py": TORCH_ITEM, "train.py": """\
        from util import torch_item

        def train(model, loader, optimizer):
            for batch in loader:
                loss = model(batch)
                loss.backward()
                optimizer.step()
                print(torch_item(loss), torch_item(3.0))

        def elbo(sites):
            return sum(torch_item(site["log_prob"]) for site in sites)
        """})
    found = _scan(tmp_path, "trn1", "xla")
    assert found[("train.py", 8, "PC701")] == Severity.WARNING
    assert found[("train.py", 11, "PC701")] == Severity.INFO
    assert not any(path == "util.py" for path, _, _ in found)


def test_a_converter_whose_tensor_branch_copies_to_numpy_is_read_where_a_model_calls_it(tmp_path):
    """`to_numpy(x)` that returns `x.detach().cpu().numpy()` under `if isinstance(x, torch.Tensor):` and converts
    numbers, lists and dicts otherwise: what a tensor argument gets is its value on the host, so a call in `forward`
    reads it there. The converter calling itself on a list's items is no read of its own; a converter whose tensor
    branch hands the tensor back (`to_device`) reads nothing."""
    _tree(tmp_path, {"convert.py": """\
        import numpy as np
        import torch

        def to_numpy(x):
            if isinstance(x, torch.Tensor):
                return x.detach().cpu().numpy()
            if isinstance(x, (list, tuple)):
                return [to_numpy(v) for v in x]
            return np.asanyarray(x)

        def to_device(x, device):
            if isinstance(x, torch.Tensor):
                return x.to(device)
            return x
        """, "policy.py": """\
        import torch
        from convert import to_device, to_numpy

        class Policy(torch.nn.Module):
            def forward(self, obs):
                q = self.net(to_device(obs, "xla"))
                act = to_numpy(q.argmax(dim=1))
                return act, to_device(q, "xla")
        """})
    found = _scan(tmp_path, "trn1", "xla")
    assert found[("policy.py", 7, "PC701")] == Severity.WARNING
    assert not any(path == "convert.py" for path, _, code in found if code == "PC701")
    assert ("policy.py", 6, "PC701") not in found and ("policy.py", 8, "PC701") not in found


def test_a_helper_that_reads_on_one_path_and_passes_the_value_through_on_the_others_reads(tmp_path):
    """fairseq's `item(tensor)` returns `tensor.detach()` for an XLA tensor, `tensor.item()` for any other, and
    `tensor[0]` or the value itself for what is no tensor: a call handing it a device tensor reads it on the native
    stack, and not on PyTorch/XLA, whose tensors take the first branch. A helper one of whose returns computes
    something else (`tensor * 2`) is no reader."""
    _tree(tmp_path, {"util.py": """\
        import torch

        def item(tensor):
            if torch.is_tensor(tensor) and tensor.device.type == "xla":
                return tensor.detach()
            if hasattr(tensor, "item"):
                return tensor.item()
            if hasattr(tensor, "__getitem__"):
                return tensor[0]
            return tensor

        def scaled(tensor):
            if hasattr(tensor, "item"):
                return tensor.item()
            return tensor * 2
        """, "train.py": """\
        from util import item, scaled

        def train(model, loader, optimizer):
            for batch in loader:
                loss = model(batch)
                loss.backward()
                optimizer.step()
                print(item(loss), scaled(loss))
        """})
    native = _scan(tmp_path)
    assert native[("train.py", 8, "PC701")] == Severity.INFO  # native: every step read is info
    assert [key for key in native if key[0] == "train.py" and key[2] == "PC701"] == [("train.py", 8, "PC701")]
    xla = _scan(tmp_path, "trn1", "xla")
    assert ("train.py", 8, "PC701") not in xla
    assert ("util.py", 14, "PC701") in xla  # `scaled` reads inside itself: reported there


def test_a_data_pipeline_path_is_a_prior_the_call_graph_overrules(tmp_path):
    """A file below `data/` or `transforms/` counts as host-side code, except for what a model's `forward` (or a
    training step) outside such paths reaches: fairseq's `data/data_utils.lengths_to_padding_mask`, called in an
    encoder's forward, sizes a tensor by its lengths' data. A transform's own `forward` is no model's, and a
    data helper nothing on the device step calls stays quiet."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/data/__init__.py": "", "pkg/transforms/__init__.py": "",
                     "pkg/data/data_utils.py": """\
        import torch

        def lengths_to_padding_mask(lens):
            max_lens = torch.max(lens).item()
            return torch.arange(max_lens).to(lens.device)[None, :] >= lens[:, None]

        def pad_batch(items):
            lens = torch.tensor([len(i) for i in items])
            return lens[lens > 0], lens.max().item()
        """, "pkg/transforms/crop.py": """\
        import torch

        class RandomCrop(torch.nn.Module):
            def forward(self, img):
                return img[img > 0]
        """, "pkg/model.py": """\
        import torch
        from pkg.data.data_utils import lengths_to_padding_mask

        class Encoder(torch.nn.Module):
            def forward(self, x, lengths):
                return x.masked_fill(lengths_to_padding_mask(lengths)[..., None], 0.0)
        """})
    found = _scan(tmp_path, "inf2", "xla")
    assert found[("pkg/data/data_utils.py", 4, "PC209")] == Severity.ERROR  # its size comes from the data (read: 4)
    assert not any(path in ("pkg/transforms/crop.py",) for path, _, _ in found)
    assert not any(path == "pkg/data/data_utils.py" and line > 6 for path, line, _ in found)


def test_a_check_on_a_tensor_in_a_helper_of_forward_is_an_info_host_read(tmp_path):
    """`assert x.size(1) <= lengths.max()` or `if torch.isnan(x).any(): raise` in a helper `forward` calls reads
    the tensor on the host, as in `forward` itself: info, since it only guards an error; and a host read (PC701),
    not a branch (PC208), since it chooses no graph."""
    _tree(tmp_path, {"model.py": """\
        import torch

        def encode(x, lengths):
            assert x.size(1) <= lengths.max()
            if torch.isnan(x).any():
                raise ValueError("nan")
            return x

        class Net(torch.nn.Module):
            def forward(self, x, lengths):
                return encode(x, lengths)
        """})
    found = _scan(tmp_path, "inf2", "xla")
    assert found[("model.py", 4, "PC701")] == Severity.INFO
    assert found[("model.py", 5, "PC701")] == Severity.INFO
    assert not any(code == "PC208" for _, _, code in found)


def test_a_check_that_prints_before_it_raises_is_a_check(tmp_path):
    """`if torch.isnan(loss): print(...); raise ...` in a training step: the prints are the failure's diagnostics,
    so the test is a check (a host read, info), not a branch that chooses what the step computes."""
    _tree(tmp_path, {"model.py": """\
        import torch

        class Net(torch.nn.Module):
            def training_step(self, batch):
                loss = self.loss(self(batch))
                if torch.isnan(loss):
                    print("inputs", batch)
                    raise Exception("loss is NaN")
                if loss.sum() > 0:
                    loss = loss * 2
                return loss
        """})
    found = _scan(tmp_path, "trn2", "native")
    assert found[("model.py", 6, "PC701")] == Severity.INFO
    assert found[("model.py", 9, "PC208")] == Severity.WARNING  # a branch: it chooses what the step computes
    assert ("model.py", 6, "PC208") not in found


def test_the_iteration_of_a_module_list_subclass_is_the_forward_that_loops_over_it(tmp_path):
    """A `torch.nn.ModuleList` subclass that overrides `__iter__` (LayerDrop's list, which yields a random subset
    of its layers) runs in the forward that loops over it: its random branch is the model's. A dataset's
    `__iter__` stays the data pipeline's."""
    _tree(tmp_path, {"layers.py": """\
        import torch

        class LayerDropList(torch.nn.ModuleList):
            def __iter__(self):
                probs = torch.empty(len(self)).uniform_()
                for i, m in enumerate(super().__iter__()):
                    if not self.training or probs[i] > self.p:
                        yield m

        class Stream(torch.utils.data.IterableDataset):
            def __iter__(self):
                for i in range(3):
                    if torch.rand(1) < 0.5:
                        yield i
        """})
    found = _scan(tmp_path, "trn2", "native")
    assert found[("layers.py", 7, "PC217")] == Severity.WARNING
    assert ("layers.py", 13, "PC217") not in found


def test_a_reading_helper_called_through_its_module_or_as_a_method_keeps_its_read(tmp_path):
    """`util.torch_item(loss)` is read at the call, as `torch_item(loss)` is; a method that returns its argument's
    value (`self.count(x > 0)`), whose calls are not read one by one, keeps the read inside it."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/util.py": TORCH_ITEM, "pkg/train.py": """\
        import torch
        from pkg import util

        def train(model, loader, optimizer):
            for batch in loader:
                loss = model(batch)
                loss.backward()
                optimizer.step()
                print(util.torch_item(loss))

        class Net(torch.nn.Module):
            def count(self, mask):
                return mask.sum().item()

            def forward(self, x):
                return x * self.count(x > 0)
        """})
    found = _scan(tmp_path, "trn1", "xla")
    assert found[("pkg/train.py", 9, "PC701")] == Severity.WARNING
    assert found[("pkg/train.py", 13, "PC701")] == Severity.WARNING
    assert not any(path == "pkg/util.py" for path, _, _ in found)


def test_a_concatenation_where_the_state_is_none_grows_no_cache(tmp_path):
    """`assert static_k is None` (or `if past is None:`) before `k = torch.cat([k, bias_k...])`: the keys there are
    not the state a caller passed back, so nothing grows per step (fairseq's learned key/value bias, appended once).
    The same concatenation where the state may be given still reports."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/attn.py": """\
        import torch

        def attention(x, w, bias_k=None, static_k=None, past=None):
            q, k = (x @ w).chunk(2, dim=-1)
            if static_k is not None:
                k = static_k
            if bias_k is not None:
                assert static_k is None, "bias cannot be added to static key"
                k = torch.cat([k, bias_k])
            return q @ k.transpose(-1, -2)

        def cached(x, w, past=None):
            q, k = (x @ w).chunk(2, dim=-1)
            if past is not None:
                k = torch.cat([past, k], dim=-2)
            return q @ k.transpose(-1, -2), k

        def fresh(x, w, past=None):
            q, k = (x @ w).chunk(2, dim=-1)
            if past is None:
                k = torch.cat([k, w], dim=-2)
            else:
                k = past
            return q @ k.transpose(-1, -2), k

        class Attn(torch.nn.Module):
            def forward(self, x, past=None, static_k=None):
                return attention(x, self.w, self.b, static_k), cached(x, self.w, past), fresh(x, self.w, past)
        """})
    found = _scan(tmp_path)
    grown = {line for (path, line, code) in found if code == "PC213"}
    assert grown == {15}


def test_a_function_nothing_calls_or_names_is_dead_code(tmp_path):
    """A module-level function that no file calls, passes, imports or reads off its module (and that its own file
    names only inside itself) is dead code: its findings are info. A function named anywhere stays a warning: read
    off its module (`loss = ops.spectrum`), imported, or in a module the code looks names up in (`getattr(ops,
    name)`, `globals()`)."""
    _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/ops.py": """\
            import torch


            def unused(x):
                \"\"\"`unused` names itself in its docstring only.\"\"\"
                return torch.fft.rfft(x)


            def spectrum(x):
                return torch.fft.rfft(x)


            def imported(x):
                return torch.fft.rfft(x)
            """,
        "pkg/model.py": """\
            from pkg import ops
            from pkg.ops import imported

            LOSS = ops.spectrum
            """,
        "pkg/registry.py": """\
            import torch


            def picked(x):
                return torch.fft.rfft(x)


            def by_name(name, x):
                return globals()[name](x)
            """,
        "pkg/lookup.py": """\
            import torch


            def looked_up(x):
                return torch.fft.rfft(x)
            """,
        "pkg/use.py": """\
            from pkg import lookup


            def run(name, x):
                return getattr(lookup, name)(x)
            """,
        "pkg/public.py": """\
            import torch


            def exported(x):
                return torch.fft.rfft(x)
            """,
        "pkg/api.py": "from .public import *\n",
        "pkg/cli.py": """\
            import torch


            def main(argv=None):
                torch.cuda.synchronize()
            """,
    })
    found = _scan(tmp_path)
    assert found[("pkg/ops.py", 6, "PC301")] == Severity.INFO
    assert found[("pkg/ops.py", 10, "PC301")] == Severity.ERROR
    assert found[("pkg/ops.py", 14, "PC301")] == Severity.ERROR
    assert found[("pkg/registry.py", 5, "PC301")] == Severity.ERROR
    assert found[("pkg/lookup.py", 5, "PC301")] == Severity.ERROR
    assert found[("pkg/public.py", 5, "PC301")] == Severity.ERROR
    # callable with no argument: maybe a console script's entry point, named in packaging metadata
    assert found[("pkg/cli.py", 5, "PC105")] == Severity.ERROR
    # a file named on its own (pre-commit's) may have callers the scan does not see
    assert _scan(tmp_path, paths=["pkg/ops.py"])[("pkg/ops.py", 6, "PC301")] == Severity.ERROR


@pytest.mark.parametrize(("body", "mask"), [
    ("    mask = np.full(shape, False)\n    mask[0, 1] = True\n    return mask", True),
    ("    return ~other(shape)", True),
    ("    m = torch.arange(n).view(1, n)\n    m = m.expand(2, -1) >= shape.view(2, 1)\n    return m", True),
    ("    m = np.zeros(shape, dtype=bool)\n    m = torch.from_numpy(m).to('cpu')\n    return m", True),
    ("    return torch.isnan(shape).logical_not()", True),
    ("    return shape == 'train'", False),  # a Python string compared
    ("    return bool(shape)", False),  # Python's bool
    ("    shape = torch.from_numpy(shape)\n    return shape", False),  # a parameter converted: unknown
    ("    m = shape > 0\n    m = m.long()\n    return m", False),  # the last binding is no mask
    ("    if n:\n        return shape > 0\n    return None", False),  # one return is no mask
])
def test_a_function_returning_a_boolean_mask_is_read_from_its_returns(body: str, mask: bool) -> None:
    from portcheck.static.semantic.masks import returns_mask

    function = ast.parse(f"def make(shape, n):\n{body}\n").body[0]
    assert isinstance(function, ast.FunctionDef)
    assert returns_mask(function) is mask


def test_a_mask_made_in_another_file_is_a_mask_where_it_indexes(tmp_path):
    """fairseq's wav2vec2: `compute_mask_indices` (data_utils.py) builds a numpy boolean mask, the model moves it to
    the device and writes through it. A helper returning positions is no mask."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/utils.py": """\
        import numpy as np
        import torch

        def compute_mask(shape, p):
            mask = np.full(shape, False)
            mask[:, : int(shape[1] * p)] = True
            return mask

        def positions(n):
            return torch.arange(n)
        """, "pkg/model.py": """\
        import torch
        from torch import nn
        from pkg import utils
        from pkg.utils import compute_mask

        class Encoder(nn.Module):
            def forward(self, x):
                m = compute_mask(x.shape[:2], 0.5)
                m = torch.from_numpy(m).to(x.device)
                x[m] = 0
                y = x[utils.compute_mask(x, 0.1)]
                return y, x[utils.positions(2)]
        """})
    found = _scan(tmp_path)
    assert found[("pkg/model.py", 10, "PC216")] == Severity.INFO
    assert found[("pkg/model.py", 11, "PC204")] == Severity.ERROR
    assert not [key for key in found if key[0] == "pkg/model.py" and key[1] == 12]
    alone = _scan(tmp_path, paths=["pkg/model.py"])  # the helper not scanned: nothing says what it returns
    assert not [key for key in alone if key[1] in (10, 11)]


def test_a_function_called_only_where_a_gpu_is_configured_is_cuda_only(tmp_path):
    """espnet's trainer: `if args.ngpu > 0:` (or `if gpu_id >= 0:`) around the only call of a helper makes the helper
    CUDA-only, like `torch.cuda.is_available()` would; a helper also called without that test is not."""
    _tree(tmp_path, {"util.py": """\
        import torch

        def pin(rank):
            torch.cuda.set_device(rank)

        def sync():
            torch.cuda.synchronize()
        """, "train.py": """\
        from util import pin, sync

        def main(args, gpu_id):
            if args.ngpu > 0:
                pin(args.rank)
            if gpu_id >= 0:
                sync()
            if args.rank > 0:
                sync()
        """})
    found = _scan(tmp_path)
    assert found[("util.py", 4, "PC105")] == Severity.INFO
    assert found[("util.py", 7, "PC105")] == Severity.ERROR  # `args.rank > 0` is no GPU setting


def test_the_main_block_of_a_module_the_project_imports_is_a_demo(tmp_path):
    """trl's `vllm_client.py` ends in `if __name__ == "__main__":` with a usage example that moves a model to CUDA:
    the project imports that module, so the block runs only when someone runs the file as a script (a demo or a
    self-test). A script nothing imports (`train.py`) keeps its severity: its main block is the program. A training
    loop there is still one."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/client.py": """\
        import torch

        def connect(model):
            return model

        if __name__ == "__main__":
            model = torch.nn.Linear(2, 2).cuda()
            connect(model)
            opt = torch.optim.SGD(model.parameters())
            for x in range(3):
                model(torch.ones(2)).sum().backward()
                opt.step()
        """, "pkg/trainer.py": """\
        from pkg.client import connect
        """, "train.py": """\
        import torch

        if __name__ == "__main__":
            model = torch.nn.Linear(2, 2).cuda()
        """})
    found = _scan(tmp_path)
    assert found[("pkg/client.py", 7, "PC101")] == Severity.INFO
    assert found[("train.py", 4, "PC101")] > Severity.INFO
    # a training loop is one wherever it is written: on inf2 it keeps its severity
    on_inf2 = _scan(tmp_path, "inf2", "xla")
    assert any(path == "pkg/client.py" and code == "PC607" and severity > Severity.INFO
               for (path, _, code), severity in on_inf2.items())


def test_a_method_of_what_an_attribute_is_built_as_runs_where_its_caller_does(tmp_path):
    """`self.dist = make_distribution(n)` (a function of the project that returns one of its classes) or `self.head =
    Head()` in `__init__`: `self.dist.proba(x)` and `self.head.score(x)` in `forward` call those classes' methods, so a
    host read there is the model's. An attribute bound to what the caller passed in names no class: its methods
    stay unplaced (info)."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/dists.py": """\
        import torch

        class Gaussian:
            def proba(self, x):
                return x * float(x.sum())

        class Discrete:
            def proba(self, x):
                return x + x.max().item()

        class Loose:
            def proba(self, x):
                return x - x.min().item()

        def make_distribution(n):
            if n > 1:
                return Discrete()
            return Gaussian()
        """, "pkg/model.py": """\
        import torch
        from pkg.dists import make_distribution

        class Head:
            def score(self, x):
                return x.mean().item()

        class Policy(torch.nn.Module):
            def __init__(self, n, other):
                super().__init__()
                self.dist = make_distribution(n)
                self.head = Head()
                self.other = other

            def forward(self, x):
                return self.dist.proba(x) + self.head.score(x) + self.other.proba(x)
        """})
    found = _scan(tmp_path, "inf2", "xla")
    assert found[("pkg/dists.py", 5, "PC701")] == Severity.WARNING
    assert found[("pkg/dists.py", 9, "PC701")] == Severity.WARNING
    assert found[("pkg/model.py", 6, "PC701")] == Severity.WARNING
    assert found[("pkg/dists.py", 13, "PC701")] == Severity.INFO  # `Loose` is built nowhere the graph can see


def test_a_distribution_built_where_no_forward_or_step_is_seen_to_reach_is_info(tmp_path):
    """A likelihood's `_distr(params)` builds `Normal(mu, sigma)` with validation on; the model holds the likelihood
    in an attribute bound to what its caller passed, which the call graph cannot follow: the construction is info
    (its function may yet be what the model calls), and a warning where a training step on xla reaches it (Trn1:
    Inf2 runs no training step)."""
    _tree(tmp_path, {"likelihood.py": """\
        import torch
        from torch.distributions import Normal

        class Likelihood:
            def _distr(self, params):
                return Normal(params[..., 0], params[..., 1].exp())

        def nll(params, target):
            return -Normal(params[..., 0], params[..., 1].exp()).log_prob(target).mean()

        def train_step(model, batch, optimizer):
            loss = nll(model(batch), batch)
            loss.backward()
            optimizer.step()
        """})
    found = _scan(tmp_path, "trn1", "xla")
    assert found[("likelihood.py", 6, "PC704")] == Severity.INFO
    assert found[("likelihood.py", 9, "PC704")] == Severity.WARNING



def test_a_method_that_initialises_may_loop_a_fixed_count_not_over_data():
    """once.setters_of: a seed search of ten tries (normflows' `_initialize_u_v`) initialises; a loop over a
    dataset, or a `while`, is a workload."""
    from portcheck.static.semantic.once import setters_of

    cls = ast.parse(textwrap.dedent("""\
        class Layer:
            def seeded(self):
                for _ in range(10):
                    self.u.copy_(self.u * 2)
                self.initialized.fill_(1)

            def estimate(self, data):
                for batch in data:
                    self.values = batch
                self.ready = True

            def converge(self):
                while self.err > 1:
                    self.err = self.err / 2
                self.done = True
        """)).body[0]
    assert isinstance(cls, ast.ClassDef)
    found = setters_of(cls)
    assert "self.initialized" in found["seeded"]
    assert "estimate" not in found and "converge" not in found


def test_a_nested_classs_initialiser_is_not_the_outer_classs(tmp_path):
    """`setters_of` belongs to the class being read: after a nested class whose `_init` sets `self.initialized`,
    the outer class's own `_init`, which sets nothing, does not make its `if not self.initialized:` run once."""
    _tree(tmp_path, {"model.py": """\
        import torch

        class Outer(torch.nn.Module):
            class Inner:
                def _init(self, z):
                    self.initialized = True

            def _init(self, z):
                self.scale = torch.linalg.inv(z)

            def forward(self, z):
                if not self.initialized:
                    self._init(z)
                return z
        """})
    assert _scan(tmp_path)[("model.py", 9, "PC321")] > Severity.INFO


def test_a_reading_helper_imported_relatively_is_reported_where_a_step_hands_it_a_tensor(tmp_path):
    """`from .torch_tools import to_numpy` names a function of the project: the call graph finds that it copies its
    argument to the host, so a training step's `to_numpy(loss)` is a host read every step; a relatively imported
    function that reads nothing (`detached`) is not."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/tools/__init__.py": "", "pkg/tools/torch_tools.py": """\
        def to_numpy(t):
            return t.cpu().detach().numpy()

        def detached(t):
            return t.detach()
        """, "pkg/tools/train.py": """\
        from .torch_tools import detached, to_numpy

        def take_step(model, batch, optimizer):
            optimizer.zero_grad()
            loss = model(batch).sum()
            loss.backward()
            optimizer.step()
            value = to_numpy(loss)
            kept = detached(loss)
            return value, kept
        """})
    found = _scan(tmp_path)
    assert ("pkg/tools/train.py", 8, "PC701") in found
    assert ("pkg/tools/train.py", 9, "PC701") not in found


def test_code_that_runs_once_every_n_steps_is_an_interval(tmp_path):
    """JUDGING: logging and demos behind an interval guard are harmless. The body of `if step % N == 0:` and the
    rest of a block after `if step % N != 0: return` run once in N steps, and so does a function called only
    there: an FFT, autocast or float64 there is info. A shape's parity (`if n % 2 == 1:` on a size), a block that
    steps an optimizer (gradient accumulation), a forward's own layer pattern, and a CUDA call keep their
    severity."""
    _tree(tmp_path, {"train.py": """\
        import torch

        def spectrogram_image(audio):
            return torch.stft(audio, 512, return_complex=True)

        class DemoCallback:
            def on_train_batch_end(self, trainer, module, batch):
                if (trainer.global_step - 1) % self.demo_every != 0:
                    return
                fakes = module.generate(batch); module.loss(fakes).backward()  # a saliency image's gradients
                image = torch.fft.rfft(fakes)
                return spectrogram_image(fakes), image

        def train(model, loader, optimizer, log_every, accumulate):
            for step, batch in enumerate(loader):
                loss = model(batch)
                loss.backward()
                if step % log_every == 0:
                    spectrum = torch.fft.fft(batch)
                    torch.cuda.synchronize()
                if (step + 1) % accumulate == 0:
                    optimizer.step()
                    table = torch.fft.ifft(batch)
                n = batch.shape[-1]
                if n % 2 == 1:
                    odd = torch.fft.rfft(batch)

        class Net(torch.nn.Module):
            def forward(self, x):
                for i, layer in enumerate(self.layers):
                    if i % self.every == 0:
                        x = torch.fft.rfft(x).real
                return x
        """})
    found = _scan(tmp_path)
    assert found[("train.py", 4, "PC301")] == Severity.INFO  # called only from the rest of an off-interval return
    assert found[("train.py", 11, "PC301")] == Severity.INFO  # the rest of the block after the off-interval return
    assert found[("train.py", 19, "PC301")] == Severity.INFO  # under `if step % log_every == 0:`
    assert found[("train.py", 20, "PC105")] > Severity.INFO  # a CUDA call fails however rarely it runs
    assert found[("train.py", 23, "PC301")] > Severity.INFO  # the block steps the optimizer: the step itself
    assert found[("train.py", 26, "PC301")] > Severity.INFO  # a size's parity is no interval
    assert found[("train.py", 32, "PC301")] > Severity.INFO  # the forward's own layer pattern


def test_complex_data_set_up_once_and_stored_as_real_numbers_is_not_the_step(tmp_path):
    """A constructor that makes a complex twiddle table and registers only its real view (`torch.view_as_real`),
    or keeps only its real part, leaves no complex tensor for the step: set-up, info. One that registers the complex
    table as it is hands complex data to every forward: it keeps its severity."""
    _tree(tmp_path, {"mdct.py": """\
        import torch

        class Mdct(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
                pre = torch.exp(-1j * torch.pi * torch.arange(n, device="meta") / n)
                self.register_buffer("pre", torch.view_as_real(pre))
                gain = (2j * torch.ones(n, device="meta")).real
                self.register_buffer("gain", gain)
                post = torch.exp(1j * torch.pi * torch.arange(n, device="meta") / n)
                self.register_buffer("post", post)

            def forward(self, x):
                return x * self.gain
        """})
    found = _scan(tmp_path)
    assert found[("mdct.py", 6, "PC302")] == Severity.INFO  # only its real view is registered
    assert found[("mdct.py", 8, "PC302")] == Severity.INFO  # only its real part is kept
    assert found[("mdct.py", 10, "PC302")] > Severity.INFO  # registered complex: every forward reads it


def test_a_function_that_exports_to_onnx_is_another_vendors_code(tmp_path):
    """JUDGING: ONNX export is another vendor's path. A function that calls `torch.onnx.export` is that export's
    code, and so is what only it calls: the CUDA moves of its dummy inputs are info. A training function that
    exports at its end is still the training step, and the model's forward is still the model's."""
    _tree(tmp_path, {"export.py": """\
        import torch

        def dummy(batch):
            return torch.randn(batch, 100).cuda()

        def export_vocoder(model, path):
            model = model.cuda().eval()
            torch.onnx.export(model, (dummy(1),), path)

        def train(model, loader, optimizer, path):
            for batch in loader:
                model(batch.cuda()).backward()
                optimizer.step()
            torch.onnx.export(model, (batch,), path)
        """})
    found = _scan(tmp_path)
    assert found[("export.py", 4, "PC101")] == Severity.INFO  # called only by the export
    assert found[("export.py", 7, "PC101")] == Severity.INFO  # the export's own move
    assert found[("export.py", 12, "PC101")] > Severity.INFO  # the training loop's


def test_a_class_with_an_onnx_export_method_wraps_no_runtime(tmp_path):
    """A plain class whose methods use another vendor's runtime wraps it (every method is that vendor's); one whose
    `save` can export to ONNX does not: what its training calls keeps its findings."""
    _tree(tmp_path, {"tabular.py": """\
        import torch

        class TabularModel:
            def fit(self, loader, optimizer):
                for batch in loader:
                    self.model(batch).backward()
                    optimizer.step()
                    self.report(batch)

            def report(self, samples):
                return torch.quantile(samples, 0.5, dim=-1)

            def save(self, path, kind):
                if kind == "onnx":
                    torch.onnx.export(self.model, (torch.zeros(1, 4),), path)
        """})
    found = _scan(tmp_path)
    assert found[("tabular.py", 11, "PC321")] > Severity.INFO
