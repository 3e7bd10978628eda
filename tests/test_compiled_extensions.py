"""Calls of compiled extensions (PC505) across a project: a module of the project's own package with no Python source
(`from . import _C`), a custom-op namespace re-exported by a package, and what stays quiet because Python is there
(a sibling module, a name the package binds, a package a `from .x.y import f` shows was left out)."""

from __future__ import annotations

from pathlib import Path

from portcheck.findings import Severity
from tests.test_semantic import _scan, _tree

MODEL = """\
    import torch
    from . import _C
    from . import helpers, config
    from pkg import _C as absolute_C
    from .megatron.mpu import gather
    from .fused import fused_gelu

    class Model(torch.nn.Module):
        def forward(self, x):
            x = _C.march_rays(x)
            x = absolute_C.composite(x)
            x = helpers.scale(x)
            x = config.apply(x)
            x = gather(x)
            return fused_gelu(x)

    class Frames(torch.utils.data.Dataset):
        def __getitem__(self, index):
            return _C.decode(index)
    """


def _project(root: Path) -> None:
    _tree(root, {
        "pkg/__init__.py": "from .settings import Config\nconfig = Config()\n",
        "pkg/settings.py": "class Config:\n    def apply(self, x):\n        return x\n",
        "pkg/helpers.py": "def scale(x):\n    return x * 2\n",
        "pkg/model.py": MODEL,
        "pkg/ops/__init__.py": "try:\n    from torch.ops import my_kernels\nexcept ImportError:\n"
                               "    my_kernels = None\n",
        "pkg/ops/use.py": "import torch\nfrom . import my_kernels\n\nclass Op(torch.nn.Module):\n"
                          "    def forward(self, x):\n        return my_kernels.forward.default(x)\n",
        "pkg/star/__init__.py": "from .impl import *\n",
        "pkg/star/impl.py": "def blend(x):\n    return x\n",
        "pkg/star/use.py": "from . import blend\n\ndef run(x):\n    return blend(x)\n",
    })


def test_calls_of_a_module_the_project_has_no_python_for_are_compiled_extension_calls(tmp_path):
    _project(tmp_path)
    found = {key: severity for key, severity in _scan(tmp_path).items() if key[2] == "PC505"}
    model = "pkg/model.py"
    assert found == {
        (model, 10, "PC505"): Severity.ERROR,  # `from . import _C`: no `_C.py`, nothing in `__init__.py`
        (model, 11, "PC505"): Severity.ERROR,  # `from pkg import _C`: the package's own absolute import
        (model, 15, "PC505"): Severity.ERROR,  # `from .fused import fused_gelu`: the module `fused` is the extension
        (model, 19, "PC505"): Severity.INFO,  # only the data pipeline calls it: host data
        ("pkg/ops/use.py", 6, "PC505"): Severity.ERROR,  # re-exported `from torch.ops import my_kernels`
    }
    # quiet: `helpers.py` is there, `config` is bound in `__init__.py`, `.megatron.mpu` is a package left out,
    # `blend` may come from `from .impl import *`


def test_a_file_named_alone_still_sees_its_python_neighbours_on_disk(tmp_path):
    _project(tmp_path)
    found = {key for key in _scan(tmp_path, paths=["pkg/model.py"]) if key[2] == "PC505"}
    assert found == {("pkg/model.py", line, "PC505") for line in (10, 11, 15, 19)}


def test_without_the_file_on_disk_nothing_beside_it_is_assumed(tmp_path):
    from portcheck.knowledge import load
    from portcheck.static.engine import analyse_text

    # the same file as a project's (`from . import _C` beside no `_C.py`), but given as text: nothing is assumed
    result = analyse_text("from . import _C\n\ndef f(x):\n    return _C.op(x)\n", "pkg/model.py", "trn2", "native",
                          load().applicable("trn2", "native"))
    assert [f.code for f in result.findings] == []


def test_a_kernel_only_the_backward_pass_calls_is_info_on_an_inference_chip(tmp_path):
    _tree(tmp_path, {"ops.py": """\
        import torch

        class Fused(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return torch.ops.my_kernels.fused_forward(x)

            @staticmethod
            def backward(ctx, grad):
                return torch.ops.my_kernels.fused_backward(grad)

        class Model(torch.nn.Module):
            def forward(self, x):
                return Fused.apply(x)

        def unused(x):
            return torch.ops.my_kernels.fused_forward(x)
        """})
    for chip, stack, backward in (("trn2", "native", Severity.ERROR), ("inf2", "xla", Severity.INFO)):
        found = {key[1]: severity for key, severity in _scan(tmp_path, chip, stack).items() if key[2] == "PC505"}
        # no forward reaches `unused`: info (a public op matters where a model calls it)
        assert found == {6: Severity.ERROR, 10: backward, 17: Severity.INFO}, chip
