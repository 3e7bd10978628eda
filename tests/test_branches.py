"""Branches a port does not take (portcheck/static/branches.py) and CUDA-gated tests
(portcheck/static/gated_tests.py): the severities the fixtures cannot show."""

import textwrap

from conftest import ROOT

from portcheck.config import resolve
from portcheck.findings import Severity
from portcheck.static.engine import analyse_text


def findings(code: str, chip: str, stack: str) -> list[tuple[int, str, Severity]]:
    enabled = resolve([], ROOT, None).enabled | {"PC713", "PC717", "PC605", "PC604", "PC719"}
    result = analyse_text(textwrap.dedent(code), "x.py", chip, stack, frozenset(enabled))
    return [(f.line, f.code, f.severity) for f in result.findings]


def test_xla_bf16_is_info_on_native_and_a_warning_on_xla():
    code = 'import os\nos.environ["XLA_USE_BF16"] = "1"\n'
    assert findings(code, "trn2", "native") == [(2, "PC717", Severity.INFO)]
    assert findings(code, "inf2", "xla") == [(2, "PC717", Severity.WARNING)]


def test_compile_not_taken_on_xla_is_info():
    code = """\
        import torch
        from torch._dynamo.utils import is_compile_supported
        f = torch.compile(g) if is_compile_supported(device) else g
    """
    assert findings(code, "inf2", "xla") == [(3, "PC713", Severity.INFO)]
    fsdp = """\
        import torch
        def _prepare_fsdp2(model, options):
            return torch.compile(model, **options)
        def prepare_model(model, options):
            return torch.compile(model, **options)
    """
    assert findings(fsdp, "inf2", "xla") == [(3, "PC713", Severity.INFO), (5, "PC713", Severity.ERROR)]


def test_ddp_device_ids_computed_at_run_time_are_info():
    code = """\
        from torch.nn.parallel import DistributedDataParallel as DDP
        ids = determine_ids()
        a = DDP(m, device_ids=ids)
        b = DDP(m, device_ids=[rank])
    """
    assert findings(code, "inf2", "xla") == [(3, "PC605", Severity.INFO), (4, "PC605", Severity.WARNING)]


def test_version_fallbacks_stay_quiet_and_the_new_side_still_fires():
    code = """\
        import torch
        import torch_xla.core.xla_model as xm
        if torch.__version__ < "2.4":
            s = torch.cuda.amp.GradScaler()
        if not _XLA_GE_2_1:
            n = xm.xrt_world_size()
        t = torch.cuda.amp.GradScaler() if _TORCH_LESS_2_4 else None
        u = torch.cuda.amp.GradScaler()
    """
    assert [(line, code) for line, code, _ in findings(code, "inf2", "xla")] == [(8, "PC602")]


def test_module_wide_cuda_gate_quiets_the_file():
    code = """\
        import pytest
        import torch
        pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA")
        def test_a():
            torch.zeros(1).cuda()
    """
    assert findings(code, "trn2", "native") == []
