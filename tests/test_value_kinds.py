"""What the static pass reads from what values are and where they go, each with a case that fires and one that
stays quiet (or is info): numpy / pandas annotations, a probe held in a local name, a probe that only picks a
checkpoint's `map_location`, and a CUDA GradScaler next to a CUDA or a device-following autocast."""

from __future__ import annotations

import textwrap

import pytest

from portcheck.findings import Severity
from portcheck.knowledge import load
from portcheck.static.engine import analyse_text


def severities(code: str, chip: str = "trn2", stack: str = "native") -> dict[tuple[int, str], Severity]:
    result = analyse_text(textwrap.dedent(code), "m.py", chip, stack, load().applicable(chip, stack))
    assert result.errors == ()
    return {(f.line, f.code): f.severity for f in result.findings}


def test_numpy_and_pandas_annotations_make_host_values():
    found = severities("""\
        import numpy as np
        import numpy.typing as npt
        import torch

        class M(torch.nn.Module):
            def forward(self, x, labels: np.ndarray, y: npt.NDArray[np.float32]):
                a = labels[labels > 0]
                b = y[y > 0]
                return x[x > 0]
        """)
    assert (9, "PC204") in found
    assert (7, "PC204") not in found and (8, "PC204") not in found


def test_what_numpy_takes_or_returns_in_parts_is_a_host_value():
    """An argument of a numpy / scikit-learn call has to be a host value, and so are the parts of what such a
    call returns (`values, counts = np.unique(x)`); a device tensor's parts and a tensor moved to the host
    inside the argument (`np.array(x[m].cpu())`) are not."""
    found = severities("""\
        import numpy as np
        import torch

        class M(torch.nn.Module):
            def forward(self, x, emb, labels, k):
                centre = np.mean(emb[labels == k], axis=0)
                values, counts = np.unique(labels, return_counts=True)
                large = values[counts >= 2]
                q, v = self.split(x)
                kept = q[v > 0]
                moved = np.array(x[x > 0].cpu())
                return centre, large, kept, moved
        """)
    assert (6, "PC204") not in found and (8, "PC204") not in found
    assert (10, "PC204") in found and (11, "PC204") in found


def test_a_probe_held_in_a_local_name_guards_what_it_compares():
    found = severities("""\
        import torch

        def info():
            n_gpu = torch.cuda.device_count()
            if n_gpu > 0:
                print(torch.cuda.get_device_name(0))
            return torch.cuda.get_device_name(0)
        """)
    assert found[(6, "PC105")] == Severity.INFO
    assert found[(7, "PC105")] == Severity.ERROR


@pytest.mark.parametrize(("line", "severity"),
                         [(4, Severity.INFO), (5, Severity.INFO), (7, Severity.WARNING), (10, Severity.INFO)])
def test_a_probe_that_only_picks_a_map_location_is_info(line, severity):
    """Also through a name spelt as the keyword (`map_location=map_location`): the keyword is no use of it."""
    found = severities("""\
        import torch

        def load(path, model):
            state = torch.load(path, map_location="cuda" if torch.cuda.is_available() else "cpu")
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model.load_state_dict(torch.load(path, map_location=device))
            dev = "cuda" if torch.cuda.is_available() else "cpu"
            model.to(dev)
            torch.load(path, map_location=dev)
            map_location = None if torch.cuda.is_available() else torch.device("cpu")
            return torch.load(path, map_location=map_location)
        """)
    assert found[(line, "PC104")] == severity


def test_a_cuda_grad_scaler_is_info_where_autocast_is_cudas_too():
    module_level = severities("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    assert module_level[(2, "PC602")] == Severity.WARNING  # it may serve any autocast of the file
    cuda = severities("""\
        import torch

        def train():
            scaler = torch.cuda.amp.GradScaler()
            with torch.cuda.amp.autocast():
                pass
        """)
    following = severities("""\
        import torch

        def train(device):
            scaler = torch.cuda.amp.GradScaler()
            with torch.autocast(device_type=device.type, dtype=torch.float16):
                pass
        """)
    assert cuda[(4, "PC602")] == Severity.INFO and cuda[(5, "PC601")] == Severity.WARNING
    assert following[(4, "PC602")] == Severity.WARNING  # fp16 follows the device and now runs unscaled


def dispatched(run) -> set[str]:
    """The ATen ops real torch dispatches while `run()` runs, each by name and by name.overload."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = f"aten::{func._schema.name.split('::')[-1]}"
            self.ops.update((name, f"{name}.{func._schema.overload_name}"))
            return func(*args, **(kwargs or {}))

    with Record() as record:
        run()
    return record.ops


def test_each_fallback_call_dispatches_the_op_the_data_names():
    """PC321's table of torch functions and their ATen ops, checked against real torch's dispatch."""
    torch = pytest.importorskip("torch")
    from portcheck.static.unsupported_op.fallback_calls import CALLS

    matrix = torch.eye(3) * 2.0
    arguments = {"torch.linalg.solve_triangular": ((matrix, matrix), {"upper": False}),
                 "torch.linalg.solve": ((matrix, matrix), {}), "torch.linalg.solve_ex": ((matrix, matrix), {}),
                 "torch.linalg.lu_solve": ((*torch.linalg.lu_factor(matrix), matrix), {}),
                 "torch.linalg.ldl_factor": ((matrix,), {}), "torch.linalg.ldl_factor_ex": ((matrix,), {}),
                 "torch.multinomial": ((matrix, 1), {}), "torch.roll": ((matrix, 1), {}),
                 "torch.cumprod": ((matrix, 0), {}), "torch.quantile": ((matrix, 0.5), {"dim": 1}),
                 "torch.nanquantile": ((matrix, 0.5), {}), "torch.searchsorted": ((matrix, matrix), {}),
                 "torch.bucketize": ((matrix, torch.tensor([0.5, 1.5])), {}),
                 "torch.binomial": ((matrix, matrix / 4), {}),
                 "torch.nn.functional.grid_sample": ((matrix.view(1, 1, 3, 3), torch.zeros(1, 2, 2, 2)),
                                                     {"align_corners": False}),
                 "torch.nn.functional.ctc_loss": ((torch.randn(5, 2, 4).log_softmax(2), torch.tensor([[1, 2], [1, 1]]),
                                                   torch.tensor([5, 5]), torch.tensor([2, 2])), {})}
    for name, op in CALLS.items():
        function = torch
        for part in name.split(".")[1:]:
            function = getattr(function, part)
        args, kwargs = arguments.get(name, ((matrix,), {}))
        ops = dispatched(lambda: function(*args, **kwargs))  # noqa: B023 (called at once)
        assert op in ops, (name, sorted(ops))


def test_a_fix_evaluated_at_import_is_unsafe():
    """`torch.device("neuron")` raises on stock torch: a default argument or a module-level device, rewritten,
    would stop the module importing on a machine without Neuron; inside a function body it waits for a call."""
    result = analyse_text(textwrap.dedent("""\
        import torch

        def f(x, device=torch.device("cuda")):
            return x.to(device)

        DEV = torch.device("cuda")

        def g(x):
            d = torch.device("cuda")
            return x.to(d)
        """), "m.py", "trn2", "native", load().applicable("trn2", "native"))
    fixes = {f.line: f.fix.applicability for f in result.findings if f.code == "PC102" and f.fix is not None}
    assert fixes == {3: "unsafe", 6: "unsafe", 9: "safe"}


def test_a_probe_that_only_guards_cuda_settings_is_info():
    """A probe whose branch only synchronises, sets cuDNN flags or CUDA's environment variables changes nothing a
    Neuron run needs; one that also picks the device does."""
    found = severities("""\
        import os
        import torch

        def setup():
            if torch.cuda.is_available():
                torch.backends.cudnn.benchmark = True
            if torch.cuda.is_available():
                os.environ["CUDA_VISIBLE_DEVICES"] = "0"
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            if torch.cuda.is_available():
                torch.backends.cudnn.benchmark = True
                device = "cuda"
            return device
        """)
    assert found[(5, "PC104")] == Severity.INFO
    assert found[(7, "PC104")] == Severity.INFO
    assert found[(9, "PC104")] == Severity.INFO
    assert found[(11, "PC104")] > Severity.INFO


def test_buffers_and_parameters_are_tensors():
    """`int(self.ptr)` reads a tensor when `ptr` is a registered buffer or a Parameter of the class; an attribute
    the class never makes a tensor is not known to be one."""
    found = severities("""\
        import torch

        class Bank(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("ptr", torch.zeros(1, dtype=torch.long))
                self.scale = torch.nn.Parameter(torch.ones(1))
                self.size = 8

            def forward(self, x):
                self.enqueue(x)
                return x * float(self.scale) + int(self.size)

            def enqueue(self, x):
                start = int(self.ptr)
                return start
        """, "inf2", "xla")
    assert found[(12, "PC701")] == Severity.WARNING
    assert found[(15, "PC701")] == Severity.WARNING
    assert len([key for key in found if key[0] == 12]) == 1  # `int(self.size)` is not a read


def test_a_branch_for_another_device_type_is_not_neuron_code():
    """`.cpu()` under a test that holds only for other device types (a list of them, a flag bound to such a
    test, `x.is_mps`) never runs for a Neuron tensor; under a test Neuron tensors can pass, it does."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x):
                x_is_mps_xpu = x.device.type in ["mps", "xpu"]
                if x_is_mps_xpu:
                    x = x.cpu()
                if x.is_mps:
                    x = x.cpu()
                if x.device.type in ("cpu", "neuron"):
                    x = x.cpu()
                return x
        """, "inf2", "xla")
    assert (7, "PC702") not in found and (9, "PC702") not in found
    assert (11, "PC702") in found


def test_a_branch_for_another_accelerator_is_not_neuron_code():
    """The body of `if torch.backends.mps.is_available():` (Apple's GPU), of `hasattr(torch, "xpu") and
    torch.xpu.is_available()` (Intel's) and of `is_torch_npu_available()` (Ascend's) never runs on a Neuron host,
    where each probe is False; its negation, and the path for everything else, do."""
    found = severities("""\
        import torch
        from accelerate.utils import is_torch_npu_available

        class M(torch.nn.Module):
            def forward(self, x, mask):
                if torch.backends.mps.is_available():
                    y = torch.roll(x, 1)
                elif hasattr(torch, "xpu") and torch.xpu.is_available():
                    y = x.nonzero()
                elif is_torch_npu_available():
                    y = x[mask]
                else:
                    y = torch.roll(x, 2)
                if not torch.backends.mps.is_available():
                    y = y[mask]
                return y
        """)
    assert [key for key in found if key[0] in (7, 9, 11)] == []
    assert (13, "PC321") in found and (15, "PC204") in found


def test_a_read_after_an_early_return_off_the_interval_is_an_interval_read():
    """`if epoch % N != 0 or batch_idx > 0: return` leaves the rest of the block to one batch every N epochs: a
    copy there is not per step; one after an early return on anything else is."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, epoch, batch_idx):
                y = x * 2
                if epoch % 10 != 0 or batch_idx > 0:
                    return y
                return y.cpu()

        class N(torch.nn.Module):
            def forward(self, x, epoch, batch_idx):
                y = x * 2
                if batch_idx > 0:
                    return y
                return y.cpu()
        """, "inf2", "xla")
    assert (8, "PC702") not in found
    assert (15, "PC702") in found


def test_transformers_is_tracing_keeps_a_branch_out_of_a_compiled_graph():
    """`not is_tracing(mask) and ...` is False while Dynamo compiles (transformers' helper asks
    `is_torchdynamo_compiling()`): on the native stack the read after it is not in the graph; torch_neuronx.trace
    sets nothing it asks, so on xla it is."""
    code = """\
        import torch
        from transformers.utils import is_tracing

        class M(torch.nn.Module):
            def forward(self, x, mask):
                if not is_tracing(mask) and (mask[:, -1] == 0).all():
                    x = x * 2
                if (mask[:, -1] == 0).all():
                    x = x * 3
                return x
        """
    native = severities(code)
    assert (6, "PC208") not in native and (8, "PC208") in native
    assert (6, "PC208") in severities(code, "inf2", "xla")


def test_a_read_after_is_compiling_or_is_left_out_of_the_compiled_graph():
    """`is_compiling() or <read>` never evaluates the read while compiling: native leaves it out; the read
    before the guard, and xla (which sets nothing the guard asks), keep it."""
    code = """\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, t):
                if torch.compiler.is_compiling() or bool((t > 0).all()):
                    x = x + 1
                if bool((t > 0).all()) or torch.compiler.is_compiling():
                    x = x + 2
                return x
        """
    native = severities(code)
    assert (5, "PC208") not in native and (7, "PC208") in native
    assert (5, "PC208") in severities(code, "inf2", "xla")


def test_no_float32_fix_for_a_clock_reading_or_a_number_float32_rounds():
    """Seconds since 1970 or a count past 2**24 need more than float32's 24 bits: narrowing them is no fix (the
    finding stays, without one); ordinary float64 data keeps its unsafe fix."""
    result = analyse_text(textwrap.dedent("""\
        import time
        import torch

        def stamp(x):
            t = torch.tensor(time.time(), dtype=torch.float64)
            now = time.perf_counter()
            u = torch.tensor(now, dtype=torch.float64)
            big = torch.tensor(123456789.0, dtype=torch.float64)
            small = torch.tensor([1.0, 2.0], dtype=torch.float64)
            return t, u, big, small
        """), "stamp.py", "trn2", "native", load().applicable("trn2", "native"))
    fixes = {f.line: f.fix for f in result.findings if f.code == "PC303"}
    assert fixes[5] is None and fixes[7] is None and fixes[8] is None
    assert fixes[9] is not None


def test_sizes_computed_from_a_shape_are_static():
    """A size computed from `.shape` (unpacked, converted to a tensor by a helper given literal options, reduced
    with `torch.prod`) is shape metadata, not tensor data; the same reduction of a tensor's values is PC209."""
    found = severities("""\
        import torch
        from helpers import to_tensor

        class M(torch.nn.Module):
            def forward(self, x):
                head, tail = x.shape[:-2], x.shape[-2:]
                n = torch.prod(to_tensor(head, int, wrap_sequence=True))
                y = x.reshape(n, 1, *tail)
                m = torch.prod(x[0])
                return y.view(m, -1)
        """)
    assert (7, "PC209") not in found and (8, "PC209") not in found
    assert (9, "PC209") in found  # it spans the read (`m = torch.prod(x[0])`) to the view it sizes


def test_a_method_whose_arguments_no_tensor_method_takes_is_another_types():
    """`dataset.unique("label")` (a Hugging Face dataset's column values) is not `Tensor.unique`: the tensor
    method takes no string and no `column=` keyword. The tensor forms still fire."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, dataset, table):
                labels = dataset.unique("label")
                rows = table.nonzero(axis=0)
                u = x.unique(sorted=True, return_counts=True)
                v = x.unique_consecutive(dim=0)
                return labels, rows, u, v
        """)
    assert (5, "PC205") not in found and (6, "PC201") not in found
    assert (7, "PC205") in found and (8, "PC205") in found


def test_a_probe_whose_value_is_only_shown_is_info():
    """Printed, logged, formatted or made a report's entry (also through a local name used only that way): the
    probe decides nothing. A test on its text, or a name also returned or used to choose, still decides."""
    found = severities("""\
        import logging
        import torch

        def info():
            print("GPUs:", torch.cuda.device_count())
            env = {"CUDA available": torch.cuda.is_available(), "torch": torch.__version__}
            logging.info(f"cuda: {torch.cuda.is_available()}")
            has = torch.cuda.is_available()
            print(f"has cuda {has}")
            return env, {"GPU Enabled": str(torch.cuda.is_available())}

        def pick():
            has = torch.cuda.is_available()
            print(has)
            device = "cuda" if has else "cpu"
            if str(torch.cuda.is_available()) == "True":
                device = "cuda"
            n = torch.cuda.device_count()
            return device, {"n": n}, n
        """)
    for line in (5, 6, 7, 8, 10):
        assert found[(line, "PC104")] == Severity.INFO, line
    for line in (13, 16, 18):
        assert found[(line, "PC104")] == Severity.WARNING, line


def test_a_value_named_as_a_mask_is_one_where_the_device_step_runs_it():
    """`x[mask]`, `x[data.train_mask]`: the name says boolean mask unless a binding makes it indices; taken at its
    word only where the call graph puts the code in the device step (a helper nothing calls is info)."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, mask, data):
                a = x[mask]
                b = x[data.train_mask]
                idx_mask = torch.arange(4)
                c = x[idx_mask]
                keep_mask = self.make(x)
                return a, b, c, x[keep_mask], helper(x, mask)

        def unused(x, mask):
            return x[mask]

        def helper(x, mask):
            return x[mask], x[mask > 0]
        """)
    assert {(5, "PC204"), (6, "PC204"), (10, "PC204"), (16, "PC204")} <= set(found)
    assert (8, "PC204") not in found and found[(13, "PC204")] == Severity.INFO  # indices; a helper nothing calls


def test_items_of_a_loop_over_host_values_are_host_values():
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, ids, attention_mask):
                out = []
                for row, mask in zip(ids.cpu(), attention_mask.cpu().bool()):
                    out.append(row[mask].tolist())
                for row, mask in zip(ids, attention_mask.bool()):
                    out.append(row[mask])
                return out
        """)
    assert (7, "PC204") not in found and (9, "PC204") in found


def test_a_probe_that_is_all_a_function_returns_is_info():
    """`def is_cuda_available(): return torch.cuda.is_available()` answers rightly on Neuron; a function that
    picks a device by the probe, or does more than return it, still decides."""
    found = severities('''\
        import torch

        def is_cuda_available() -> bool:
            """Whether CUDA is there."""
            return bool(torch.cuda.is_available())

        def num_gpus():
            return torch.cuda.device_count()

        def pick():
            return "cuda" if torch.cuda.is_available() else "cpu"

        def other(x):
            x = x + 1
            return torch.cuda.is_available()
        ''')
    assert found[(5, "PC104")] == Severity.INFO and found[(8, "PC104")] == Severity.INFO
    assert found[(11, "PC104")] == Severity.WARNING and found[(15, "PC104")] == Severity.WARNING


def test_a_module_named_like_a_data_sampler_is_model_code():
    """A class named `...Sampler` is the data pipeline's only when it is not a `torch.nn.Module` (a variational
    sampler in a model's forward runs on the device)."""
    found = severities("""\
        import torch
        from torch import nn

        class MonteSampler(nn.Module):
            def forward(self, cov, x):
                return torch.linalg.cholesky(cov), x[x > 0]

        class DataSampler:
            def draw(self, x):
                return torch.linalg.cholesky(x), x[x > 0]
        """)
    assert (6, "PC321") in found and (6, "PC204") in found
    assert (10, "PC321") not in found and (10, "PC204") not in found


def test_a_probe_that_only_picks_asynchronous_copies_is_info():
    found = severities("""\
        import torch

        def load(batch, device, data):
            non_blocking = torch.cuda.is_available()
            x = batch.to(device, non_blocking=non_blocking)
            loader = torch.utils.data.DataLoader(data, pin_memory=torch.cuda.is_available())
            use = torch.cuda.is_available()
            return x.to(device, non_blocking=use), loader, use
        """)
    assert found[(4, "PC104")] == Severity.INFO and found[(6, "PC104")] == Severity.INFO
    assert found[(7, "PC104")] == Severity.WARNING


def test_the_binding_that_reaches_a_use_decides_its_kind():
    """`iou = iou.cpu().numpy()` before the use makes `iou` a numpy array there, whatever the parameter was; a
    later move back to the device, or a loop that rebinds the name after the use, keeps the finding."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, iou, mask):
                iou = iou * (mask > 0)
                iou = iou.cpu().numpy()
                valid = iou >= 0.5
                kept = iou[valid]
                x = x.cpu()
                x = x.to("cuda")
                moved = x[x > 0]
                for _ in range(3):
                    y = mask[mask > 0]
                    mask = mask.cpu()
                x = x.cpu()
                parts = [x[x > 0] for x in self.parts]
                return kept, moved, y, parts
        """)
    assert (8, "PC204") not in found
    assert (11, "PC204") in found and (13, "PC204") in found and (16, "PC204") in found


def test_a_comparison_of_host_values_is_a_host_value():
    """`table * (table >= 0.5)` of a numpy table is a numpy value, and so is what a helper makes of it."""
    found = severities("""\
        import numpy as np
        import torch

        class M(torch.nn.Module):
            def forward(self, x, scores):
                table = np.asarray(scores)
                picked = assign(table * (table >= 0.5))
                moved = assign(x * (x >= 0.5))
                kept = picked[picked > 0]
                return kept, moved[moved > 0]
        """)
    assert (9, "PC204") not in found and (10, "PC204") in found


@pytest.mark.parametrize(("test", "quiet"), [('"cuda" in self.device', True), ('"cuda" in str(device)', True),
                                              ('"cuda" in devices', True), ('"neuron" in self.device', False)])
def test_a_device_string_naming_cuda_guards_a_cuda_only_branch(test, quiet):
    found = severities(f"""\
        import torch

        class Runner:
            def setup(self, device, devices):
                if {test}:
                    torch.cuda.set_device(0)
        """)
    assert found[(6, "PC105")] == (Severity.INFO if quiet else Severity.ERROR)


def test_the_rest_of_a_function_past_a_not_cuda_exit_is_cuda_only():
    found = severities("""\
        import torch

        def setup(device):
            if "cuda" not in device:
                return
            torch.cuda.synchronize()
        """)
    assert found[(6, "PC105")] == Severity.INFO


@pytest.mark.parametrize(("body", "severity"), [
    # decides only what the profiler records, through a name bound once: picks no device
    ("use_cuda = torch.cuda.is_available()\n    acts = [1]\n    if use_cuda:\n        acts.append(2)\n    return acts",
     Severity.INFO),
    # guards a diagnostic that places nothing
    ("if torch.cuda.is_available() and n > 1:\n        check_links(n)", Severity.INFO),
    # passed on as an option: not followed, so it stays a warning
    ("sleep = n > 0 and torch.cuda.is_available()\n    return Engine(sleep_mode=sleep)", Severity.WARNING),
    ("return 'gpu' if torch.cuda.is_available() else 'cpu'", Severity.WARNING),
    ("if torch.cuda.is_available():\n        model.cuda()", Severity.WARNING),
    ("if not torch.cuda.is_available():\n        return\n    model.cuda()", Severity.WARNING),
    ("n = torch.cuda.device_count()\n    if n == 0:\n        return [torch.device('cpu')]", Severity.WARNING),
    ("assert torch.cuda.is_available()", Severity.WARNING),
    ("if torch.cuda.is_available():\n        n = Device.CUDA\n    return n", Severity.WARNING),
    ("if torch.cuda.is_available():\n        model.append(ProfilerActivity.CUDA)", Severity.INFO),
    ("return torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []", Severity.WARNING),
    ("return Trainer(devices=torch.cuda.device_count())", Severity.WARNING),
])
def test_a_probe_that_picks_no_device_is_info(body, severity):
    """A probe whose branches, or the branches its local name decides, place nothing on a device only skips a
    CUDA extra with a working fallback: info. One that picks a device (a device string, `.cuda()`, `torch.device`,
    a device keyword), refuses to run, or whose value goes where the check cannot follow stays a warning."""
    found = severities(f"import torch\n\n\ndef f(model, n):\n    {body}\n")
    assert found[(5, "PC104")] == severity


def test_a_function_whose_every_return_is_a_python_float_is_a_measure():
    """`return float(correct), float(total)`: the function measures, its tensors are read back; a data-dependent
    shape there never reaches a compiled graph. One that also returns a tensor is model code."""
    found = severities("""\
        import torch

        def accuracy(log_probs, targets, mask):
            picked = log_probs.argmax(-1).masked_select(mask)
            return float((picked == targets.masked_select(mask)).sum()), float(mask.sum())

        def select(log_probs, mask):
            if mask is None:
                return float(log_probs.sum())
            return log_probs.masked_select(mask)
        """)
    assert (4, "PC203") not in found and (10, "PC203") in found


def test_a_negative_number_leaves_a_comparison_of_host_values_on_the_host():
    """`(labels.cpu() != -100)` compares a host tensor with a number: `-100` is a literal like `100`, so the loop
    over the host copies indexes host tensors."""
    found = severities("""\
        import torch

        def trim(ids, labels):
            ids_cpu = ids.detach().cpu()
            lengths = (labels.detach().cpu() != -100).sum(dim=1)
            device_lengths = (labels != -100).sum(dim=1)
            out = []
            for row, mask, n in zip(ids_cpu, ids_cpu > 0, lengths):
                out.append(row[mask].tolist())
            for row, mask, n in zip(ids, ids > 0, device_lengths):
                out.append(row[mask])
            return out

        class M(torch.nn.Module):
            def forward(self, ids, labels):
                return trim(ids, labels)
        """)
    assert (9, "PC204") not in found
    assert (11, "PC204") in found


def test_a_host_mask_or_a_mask_of_named_columns_indexes_on_the_host():
    """A mask that is a numpy value (`np.asarray(conf) > t`) selects on the host; a mask built from the indexed
    value's own string-named columns (`df[df["start"] < end]`) belongs to a DataFrame or a record array, which
    no tensor is. A mask of a device tensor still fires."""
    found = severities("""\
        import numpy as np
        import torch

        class Tracker(torch.nn.Module):
            def forward(self, results, table, x, end):
                scores = np.asarray(results.conf)
                boxes = self.parse(results)
                low = boxes[(scores > 0.1) & (scores < 0.5)]
                rows = table[(table["start"] < end) & (table["end"] > 0)]
                kept = x[(x > 0) & (results.conf > 0)]
                other = x[table["start"] > 0]
                return low, rows, kept, other
        """)
    assert (8, "PC204") not in found and (9, "PC204") not in found
    assert (10, "PC204") in found and (11, "PC204") in found


def test_a_branch_on_a_host_tensor_is_no_device_read():
    """A branch reads a tensor on the host: when that tensor is a CPU one (a factory with no device, a `.cpu()`
    copy) nothing leaves the device, in `forward` or in a helper it calls; a branch on a device value still
    fires."""
    found = severities("""\
        import torch

        def helper(x, rng, points):
            if torch.rand(1, generator=rng).item() < 0.5:
                x = x + 1
            host = points.detach().cpu().double()
            if torch.isfinite(host).all():
                x = x * 2
            if torch.isfinite(x).all():
                x = x * 3
            return x

        class M(torch.nn.Module):
            def forward(self, x, points):
                if torch.any(points.cpu() > 0):
                    x = x + 1
                if torch.any(x > 0):
                    x = x + 2
                return helper(x, self.rng, points)
        """)
    assert not {(4, "PC208"), (7, "PC208"), (15, "PC208")} & set(found)
    assert (9, "PC208") in found and (17, "PC208") in found


def test_a_cast_of_a_host_tensor_reads_nothing_from_the_device():
    """`int(mask.sum())` of a mask made without a device (a CPU tensor) reads the host; of a device tensor it
    waits for the device."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, n: int):
                mask = torch.ones(n, dtype=torch.bool)
                kept = int(mask.sum())
                total = int(x.sum())
                return kept, total, x * 2  # device work after it: not the result handed to the host
        """, "inf2", "xla")
    assert (6, "PC701") not in found
    assert found[(7, "PC701")] == Severity.WARNING


def test_a_cache_a_caller_passes_back_and_grows_is_a_tensor_grown_per_step():
    """Keys appended to a cache the caller passes back (a parameter defaulting to None) grow one position a
    decoding step: reported once a cache, where the keys enter attention or the values grow from the same cache;
    a skip connection concatenated once, or an optional input extended once (`embeds = torch.cat((prompts,
    embeds))`), is no cache."""
    found = severities("""\
        import torch

        class SelfAttention(torch.nn.Module):
            def forward(self, hidden, past_key_value=None):
                key_layer, value_layer = self.key(hidden), self.value(hidden)
                if past_key_value is not None:
                    key_layer = torch.cat([past_key_value[0], key_layer], dim=2)
                    value_layer = torch.cat([past_key_value[1], value_layer], dim=2)
                scores = torch.matmul(self.query(hidden), key_layer.transpose(-1, -2))
                return scores, (key_layer, value_layer)

        class Block(torch.nn.Module):
            def forward(self, hidden, layer_past=None):
                query, key, value = self.c_attn(hidden).split(64, dim=2)
                if layer_past is not None:
                    past_key, past_value = layer_past
                    key = torch.cat((past_key, key), dim=-2)
                    value = torch.cat((past_value, value), dim=-2)
                return self.attend(query, key, value), (key, value)

        class Up(torch.nn.Module):
            def forward(self, x, skip=None, embeds=None):
                if skip is not None:
                    x = torch.cat([x, skip], dim=1)
                embeds = torch.cat((self.prompts, embeds), dim=1)
                return self.conv(x) @ embeds

        class Stream(torch.nn.Module):
            def forward(self, x):
                self.cache = torch.cat([self.cache, x], dim=1)
                return self.net(self.cache)

            def reset(self, x):
                self.cache = torch.cat([self.cache, x], dim=1)
        """)
    grown = sorted(line for line, code in found if code == "PC213")
    assert grown == [7, 17, 30]


def test_an_optional_input_extended_once_is_no_cache_but_keys_reused_in_a_branch_still_are():
    """diffusers: classifier-free guidance's `prompt_embeds = torch.cat([negative_prompt_embeds, prompt_embeds])`
    (both optional inputs) and ControlNet-XS' `h = hidden_states_ctrl` then `h = torch.cat([h, skip])` extend an
    input once a call. BART's attention, whose keys are the cache itself in one branch (cross-attention reuse) and
    this call's projection appended to it in another, is a cache."""
    found = severities("""\
        import torch

        class Pipeline:
            def __call__(self, prompt, prompt_embeds=None, negative_prompt_embeds=None, guidance=True):
                prompt_embeds, negative_prompt_embeds = self.encode(prompt, prompt_embeds, negative_prompt_embeds)
                if guidance:
                    prompt_embeds = torch.cat([negative_prompt_embeds, prompt_embeds])
                return self.unet(prompt_embeds) @ prompt_embeds

        class ControlBlock(torch.nn.Module):
            def forward(self, hidden_states_base, hidden_states_ctrl=None):
                h_ctrl = hidden_states_ctrl
                h_ctrl = torch.cat([h_ctrl, self.b2c(hidden_states_base)], dim=1)
                h_ctrl = self.block(h_ctrl)
                return hidden_states_base @ h_ctrl, h_ctrl

        class BartAttention(torch.nn.Module):
            def forward(self, hidden, key_value_states=None, past_key_value=None):
                if key_value_states is not None and past_key_value is not None:
                    key_states = past_key_value[0]
                    value_states = past_key_value[1]
                elif past_key_value is not None:
                    key_states = self.k_proj(hidden)
                    value_states = self.v_proj(hidden)
                    key_states = torch.cat([past_key_value[0], key_states], dim=2)
                    value_states = torch.cat([past_key_value[1], value_states], dim=2)
                else:
                    key_states, value_states = self.k_proj(hidden), self.v_proj(hidden)
                scores = torch.matmul(self.q_proj(hidden), key_states.transpose(1, 2))
                return scores, (key_states, value_states)
        """)
    assert sorted(line for line, code in found if code == "PC213") == [25]


def test_a_slice_the_loop_counter_cuts_is_a_new_shape_per_step():
    """A decode loop that hands the model `tokens[:, :step]` (the `for` target, or a counter the loop increments)
    gives it a new length every step; a window both ends of which move (`i:i + 4`, `start:end` with `end` bound in
    the loop), an index, a fixed tail, a sample's own length looked up by the counter, a torch function's argument,
    or a string's or list's method is no such input."""
    found = severities("""\
        import torch

        def generate(model, tokens, steps):
            for step in range(1, steps):
                logits = model(tokens[:, :step])
                tokens[:, step] = logits[:, -1].argmax(-1)
            cur_len = 1
            while cur_len < steps:
                out = model(tokens[:, :cur_len])
                cur_len += 1
            for i in range(0, steps, 4):
                model(tokens[i:i + 4])
            for t in range(steps):
                model(tokens[:, t])
                torch.sum(tokens[:, :t])
                model(tokens[:, -16:])
                model(tokens[t, :lengths[t]])
                ".".join(parts[:t])
                word.extend(parts[t:])
            for start in range(0, steps, 4):
                end = min(start + 4, steps)
                model(tokens[start:end])
            return tokens
        """)
    assert sorted(line for line, code in found if code == "PC213") == [5, 9]


def test_a_settings_class_that_defaults_the_device_to_cuda_places_everything_there():
    """`device: str = "cuda"` in a class body (a dataclass of settings) is the device everything built from the
    settings goes to; a field that names no device, or defaults to the CPU, is quiet."""
    found = severities("""\
        from dataclasses import dataclass

        @dataclass
        class TrainConfig:
            device: str = "cuda"
            eval_device = "cuda:0"
            backend_name: str = "cuda"
            data_device: str = "cpu"
        """)
    assert found[(5, "PC103")] == Severity.ERROR and found[(6, "PC103")] == Severity.ERROR
    assert (7, "PC103") not in found and (8, "PC103") not in found


def test_float64_made_without_a_device_and_never_moved_stays_on_the_host():
    """A float64 tensor made without `device=` (outside a model's construction) is a CPU tensor: where its function
    neither moves it to a device, stores it nor returns it, float64 costs the NeuronCore nothing (info, no fix).
    Moved (`.to(device)`), returned, registered, or made with a device, it stays a warning."""
    found = severities("""\
        import torch

        def draw(n, g):
            w = torch.rand(n, generator=g, dtype=torch.float64)
            return (w * n).long()

        def moved(n, device):
            w = torch.zeros(n, dtype=torch.float64)
            return w.to(device)

        def returned(n):
            return torch.zeros(n, dtype=torch.float64)

        def counted(n):
            w = torch.arange(n).double()
            return int(w.sum())

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("k", torch.zeros(3, dtype=torch.float64))

            def forward(self, x):
                k = torch.tensor([1.0, 2.0], dtype=torch.float64)
                y = torch.ones(2, dtype=torch.float64, device=x.device)
                return x + k.to(x.device) + y
        """)
    assert found[(4, "PC303")] == Severity.INFO
    assert found[(15, "PC303")] == Severity.INFO
    assert found[(8, "PC303")] == Severity.WARNING
    assert found[(12, "PC303")] == Severity.WARNING
    assert found[(21, "PC303")] == Severity.WARNING
    assert found[(24, "PC303")] == Severity.WARNING
    assert found[(25, "PC303")] == Severity.WARNING


def test_a_cast_of_a_buffer_bound_as_an_offset_stays_a_host_read():
    """`ptr = int(self.ptr)` of a registered buffer, used only as the start of a fixed-length slice, makes no shape
    (PC209 has nothing to say) but still reads the device every call: PC701 keeps it. A read PC209 takes as a size
    (`n = t.sum().item()` then `x[:n]`) is PC209's alone."""
    found = severities("""\
        import torch

        class Bank(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("ptr", torch.zeros(1, dtype=torch.long))

            def forward(self, x, t):
                ptr = int(self.ptr)
                self.bank[ptr : ptr + 4] = x
                n = t.sum().item()
                return x[:n]
        """, "inf2", "xla")
    assert found[(9, "PC701")] == Severity.WARNING
    assert (11, "PC701") not in found
    assert found[(12, "PC209")] == Severity.ERROR


def test_any_and_all_along_a_dimension_make_a_boolean_mask():
    """`x[m.any(dim=1)]` selects the rows where the mask holds: as many as the data says (PC204); indexing by
    `m.argmax(dim=1)` is an index, not a mask."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, m):
                rows = x.argmax(dim=1)[m.any(dim=1)]
                some = x[torch.all(m, dim=0)]
                picked = x[m.argmax(dim=1)]
                return rows, some, picked
        """)
    assert found[(5, "PC204")] == Severity.ERROR
    assert found[(6, "PC204")] == Severity.ERROR
    assert (7, "PC204") not in found


def test_a_probe_after_a_cuda_probe_in_an_and_chain_is_asked_only_with_cuda():
    """`torch.cuda.is_available() and torch.cuda.is_bf16_supported()`: Python asks the second only where the first
    holds, so on Neuron it is never asked (info), wherever the chain stands; the first keeps its warning."""
    found = severities("""\
        import torch

        def bf16():
            support = (
                torch.cuda.is_available()
                and torch.cuda.is_bf16_supported()
            )
            return support or False
        """)
    assert found[(5, "PC104")] == Severity.WARNING
    assert found[(6, "PC104")] == Severity.INFO


def test_an_attribute_made_on_the_host_and_never_registered_stays_there():
    """`self.offset = torch.tensor(0)`: `module.to(device)` moves buffers and parameters only, so a tensor attribute
    every assignment of which makes a CPU tensor stays on the host, and reading it reads no device. A buffer, an
    attribute made with a device, or one the class also assigns a moved value, is read from the device."""
    found = severities("""\
        import torch

        class Streaming(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.offset = torch.tensor(0)
                self.weights = torch.ones(4).float()
                self.register_buffer("steps", torch.zeros(1))
                self.moved = torch.zeros(3)

            def forward(self, x):
                a = self.offset.item()
                b = self.weights.sum().item()
                c = self.steps.item()
                self.moved = self.moved.to(x.device)
                d = self.moved.sum().item()
                return x * a * b * c * d
        """, "inf2", "xla")
    assert (12, "PC701") not in found
    assert (13, "PC701") not in found
    assert found[(14, "PC701")] == Severity.WARNING
    assert found[(16, "PC701")] == Severity.WARNING


def test_a_block_that_ends_by_raising_only_words_the_error():
    """A read in an `if` block that ends in `raise`, nested tests of the error's kind included, only words the
    error (quiet); a block that can also return does work (the read counts)."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, idx):
                if idx.numel() > 4:
                    bad = int(idx[0].item())
                    if bad < -5:
                        raise RuntimeError(f"very bad {bad}")
                    raise RuntimeError(f"bad {bad}")
                if x.numel() > 3:
                    n = x.sum().item()
                    if n > 2:
                        return x
                    raise ValueError("no")
                return x
        """, "inf2", "xla")
    assert (6, "PC701") not in found
    assert found[(11, "PC701")] == Severity.WARNING


def test_a_spectrogram_transform_computes_its_fft_where_it_is_called():
    """`self.mfcc = MFCC(...)` built in `__init__` computes its STFT where `forward` calls `self.mfcc(x)`: the
    finding is there (an error), not at the construction; one the class never calls stays at its construction
    (set-up: info). A spectrogram function passed to run elsewhere (`torch.vmap(kaldi.fbank)`) computes there."""
    found = severities("""\
        import torch
        from torchaudio.transforms import MFCC
        from torchaudio.compliance import kaldi

        class XVector(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.mfcc = MFCC(16000)
                self.unused = MFCC(8000)

            def forward(self, waveform):
                feats = self.mfcc(waveform)
                fb = torch.vmap(kaldi.fbank)(waveform)
                return feats, fb
        """)
    assert (8, "PC301") not in found
    assert found[(9, "PC301")] == Severity.INFO
    assert found[(12, "PC301")] == Severity.ERROR
    assert found[(13, "PC301")] == Severity.ERROR


def test_a_spectrogram_function_bound_to_its_arguments_computes_where_it_is_passed_to_run():
    """pyannote WeSpeaker: `self._fbank = partial(kaldi.fbank, num_mel_bins=80)` in `__init__`, run by `forward` as
    `torch.vmap(self._fbank)(waveforms)`: the FFT is computed there (an error), not at the construction. One the
    class never runs stays at its construction (set-up: info); a partial of a function that computes no FFT is
    nothing."""
    found = severities("""\
        from functools import partial

        import torch
        from torchaudio.compliance import kaldi

        class Embedding(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self._fbank = partial(kaldi.fbank, num_mel_bins=80)
                self._spare = partial(torch.stft, n_fft=400)
                self._act = partial(torch.relu)

            def forward(self, waveforms):
                return self._act(torch.vmap(self._fbank)(waveforms))
        """)
    assert (9, "PC301") not in found and found[(14, "PC301")] == Severity.ERROR
    assert found[(10, "PC301")] == Severity.INFO and (11, "PC301") not in found


def test_a_size_computed_from_a_reduced_tensor_through_local_names_is_taken_from_data():
    """`padding = width - counts[i]` with `counts = (t.sum(dim=1) != 0).sum(dim=1)`: arithmetic on an element of a
    reduction is a size read from the data (PC209); arithmetic on shapes alone is not."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, target, x):
                counts = (target.sum(dim=1) != 0).sum(dim=1)
                outs = []
                for i in range(x.shape[0]):
                    padding = target.shape[2] - counts[i]
                    outs.append(torch.zeros((x.shape[1], padding)))
                n = x.shape[0] - 1
                return outs, torch.zeros(n)
        """)
    assert found[(5, "PC209")] == Severity.ERROR  # from the reduction it reads to the zeros it sizes (line 9)
    assert (10, "PC209") not in found and (11, "PC209") not in found


@pytest.mark.parametrize(("source", "fires"), [
    ("from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained('p')\n"
     "out = m.generate(ids, max_new_tokens=8)\n", True),
    ("from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained('p')\n"
     "out = m.generate(ids, max_new_tokens=8, cache_implementation='static')\n", False),
    ("from transformers import GenerationConfig\nconfig = GenerationConfig(cache_implementation=\"static\")\n"
     "out = model.generate(ids, generation_config=config)\n", False),
    ("from optimum.neuron import NeuronModelForCausalLM\nimport transformers\n"
     "out = model.generate(ids, max_new_tokens=8)\n", False),
    ("import litgpt\nout = llm.generate(prompt, max_new_tokens=8)\n", False),
    ("import transformers\nout = self.generate(ids, max_new_tokens=8)\n", False),
])
def test_transformers_generate_grows_its_default_cache_per_token(source, fires):
    """`model.generate(..., max_new_tokens=...)` of transformers decodes with a dynamic KV cache one position longer
    per token (PC213); a fixed-size cache chosen in the file, Neuron's serving libraries, another library's
    `generate` and the class's own `generate` (its loop is read where it is) stay quiet."""
    found = severities(source)
    assert ((3, "PC213") in found) is fires


def test_data_made_with_a_cpu_device_named_is_host_data():
    """A call given `device="cpu"` (a project's own factory as much as torch's) makes its result on the CPU: float64
    there costs the device nothing; the same call given the input's device makes float64 on the device."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x):
                k = make_kernel(5, 1.0, device=torch.device("cpu"), dtype=torch.float64)
                j = make_kernel(5, 1.0, device=x.device, dtype=torch.float64)
                return k, j
        """)
    assert (5, "PC303") not in found
    assert found[(6, "PC303")] == Severity.WARNING


def test_a_tensor_made_by_the_legacy_constructor_is_a_host_value():
    """`torch.Tensor([t.shape for t in tensors])` makes a CPU tensor, as `torch.tensor(...)` does without a device:
    a branch on what is computed from it reads the host."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, tensors):
                sizes = torch.Tensor([t.shape for t in tensors])
                padded = sizes.max(dim=0)[0] - sizes
                if padded.sum() == 0:
                    return torch.stack(tensors)
                stacked = torch.stack(tensors)
                if stacked.sum() == 0:
                    return stacked
                return stacked
        """)
    assert (7, "PC208") not in found
    assert found[(10, "PC208")] == Severity.WARNING


NO_TORCH = """\
    def pump(raw, buf):
        written = 0
        while written < len(buf):
            written += raw.send(buf[written:])

    def encode(s, out):
        for i in range(0, len(s), 5):
            out.append(codec(s[i : i + 5]))

    def draw(turtle, scale):
        for _ in range(4):
            turtle.backward(64.65 * scale)

    def kind(line, pos):
        return ("NL", "COMMENT")[line[pos] == "#"]
    """


@pytest.mark.parametrize("header", ["", "import torch\n"])
def test_a_file_that_never_names_torch_slices_and_steps_no_tensors(header):
    """A socket pump, a codec and a turtle slice, batch and call `backward()` in loops: without torch (or a library
    built on it) named anywhere in the file, the decode-loop, last-batch and training rules stay quiet. A Python
    tuple indexed by a truth value is no boolean mask, torch or not."""
    source = header + textwrap.dedent(NO_TORCH)
    found = severities(source, "inf2", "xla")
    shift = header.count("\n")
    fired = {(line - shift, code) for (line, code) in found if code in ("PC213", "PC214", "PC607")}
    assert fired == ({(4, "PC213"), (8, "PC214"), (12, "PC607")} if header else set())
    assert (15 + shift, "PC204") not in found


def test_float64_moved_to_the_host_straight_after_is_the_hosts():
    """`W.detach().to(torch.float64).cpu()` (peft FRoD), `x.double().numpy()`, and a name every later read of which
    moves it to the host (demucs' `references = references.double()` then `references.cpu()`): the float64 work is
    the host's, info. A float64 value that stays on the device, or is also passed on, keeps the warning."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, W, x, refs, est):
                w = W.detach().to(torch.float64).cpu()
                v = x.double().numpy()
                y = x.to(torch.float64)
                refs = refs.transpose(1, 2).double()
                est = est.transpose(1, 2).double()
                scores = score(refs.cpu()[None], est.cpu()[None])
                refs = refs.numpy()
                return w, v, y, scores, est
        """)
    assert found[(5, "PC303")] == Severity.INFO and found[(6, "PC303")] == Severity.INFO
    assert found[(7, "PC303")] == Severity.WARNING
    assert found[(8, "PC303")] == Severity.INFO and found[(9, "PC303")] == Severity.WARNING


def test_a_host_value_stays_one_through_branches_that_rebind_it():
    """kornia image_module.py: `x = x.detach().cpu()`, then `if x.dim() == 3: x = x.permute(...)`: after the `if`,
    either value is a host tensor, so its `.numpy()` copies nothing. Where a branch moves a device value in (`y =
    y.cpu()` only in one branch) or makes one (`z = proj(z.cuda())`), the copy stays reported."""
    found = severities("""\
        import torch

        class O(torch.nn.Module):
            def forward(self, x, y, z):
                x = x.detach().cpu()
                if x.dim() == 3:
                    x = x.permute(1, 2, 0)
                elif x.dim() == 4:
                    x = x.permute(0, 2, 3, 1)
                a = x.numpy()
                if y.dim() == 3:
                    y = y.cpu()
                b = y.numpy()
                z = z.cpu()
                if z.dim() == 3:
                    z = self.proj(z.to("neuron"))
                c = z.numpy()
                if x.dim() == 2:
                    w = y.cpu().sum(1)
                else:
                    w = (y.cpu() != 0).sum(1)
                return a, b, c, w.numpy(), self.head(z)
        """, chip="inf2", stack="xla")
    assert (10, "PC702") not in found and (22, "PC702") not in found  # either branch's value: a host one
    assert found[(13, "PC702")] == Severity.WARNING and found[(17, "PC702")] == Severity.WARNING


def test_a_read_in_an_assert_message_only_words_the_error():
    """`assert n > 0, f"... {q.amin().item()}"`: the message is evaluated only when the assertion fails, so its read
    costs nothing on the way that runs; a read in the assertion's test runs every time."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, q, check):
                assert x.shape[0] > 0, f"bad quality {q.amin().item()}"
                assert q.amin().item() >= 0, "negative quality"
                return x
        """, chip="inf2", stack="xla")
    assert (5, "PC701") not in found and found[(6, "PC701")] == Severity.WARNING


def test_a_comparison_with_a_tensor_is_a_branch_on_its_value():
    """`if score > 0.5:` with `score` bound to a tensor method's result, `if rand < accept_prob:`: Python asks the
    tensor for a bool. A Python number, a shape and a host value compared stay quiet."""
    found = severities("""\
        import numpy as np
        import torch

        class M(torch.nn.Module):
            def forward(self, x: torch.Tensor, n: int):
                score = x.softmax(-1).max()
                if score > 0.5:
                    x = x * 2
                if n > 3 or x.shape[0] > 2:
                    x = x + 1
                top = np.asarray(self.table).max()
                if top > 1:
                    x = x - 1
                return x

        def accept(energy, rand):
            accept_prob = (-energy).exp().clamp(max=1.0)
            return 1 if rand < accept_prob else 0
        """)
    assert found[(7, "PC208")] == Severity.WARNING
    assert (9, "PC208") not in found and (12, "PC208") not in found
    assert found[(18, "PC208")] == Severity.INFO  # a helper nothing in the scan calls


def test_a_float64_constant_made_at_import_is_info():
    """A module-level float64 table (an ODE solver's coefficients) is made on the CPU at import: it reaches a
    NeuronCore only where code moves it, and that move decides the dtype. In a function it stays a warning."""
    found = severities("""\
        import torch

        A = torch.tensor([[0.5, 0.25]], dtype=torch.float64)
        B = [torch.tensor(b, dtype=torch.float64) for b in ([1.0], [2.0])]

        def step(x):
            c = torch.tensor([0.5, 0.25], dtype=torch.float64, device=x.device)
            return x * c
        """)
    assert found[(3, "PC303")] == Severity.INFO
    assert found[(4, "PC303")] == Severity.INFO
    assert found[(7, "PC303")] == Severity.WARNING


def test_a_torch_cuda_class_only_compared_or_a_cuda_type_name_test_is_no_cuda_use():
    """`x.dtype != torch.cuda.HalfTensor` and `isinstance(t, torch.cuda.FloatTensor)` name a class and run nothing;
    under `if t.type() == "torch.cuda.HalfTensor":` only a CUDA tensor gets in. Making such a tensor elsewhere is
    still a warning."""
    found = severities("""\
        import torch

        def f(x, spect):
            if x.dtype != torch.cuda.HalfTensor:
                x = x.half()
            if spect.type() == "torch.cuda.HalfTensor":
                z = torch.cuda.HalfTensor(spect.size(0), 8)
            else:
                z = torch.cuda.FloatTensor(spect.size(0), 8)
            return x, z, isinstance(z, torch.cuda.FloatTensor)
        """)
    assert found[(4, "PC111")] == Severity.INFO
    assert found[(7, "PC111")] == Severity.INFO
    assert found[(9, "PC111")] == Severity.WARNING
    assert found[(10, "PC111")] == Severity.INFO


def test_randint_bounds_are_values_not_sizes():
    """`torch.randint(0, D - mask_length.max(), (B, n))`: the bounds are values; only the size makes a shape."""
    found = severities("""\
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, spec, lengths):
                width = torch.randint(0, 10, (2, 3), device=spec.device)
                pos = torch.randint(0, spec.shape[1] - width.max(), (2, 3), device=spec.device)
                noise = torch.randint(0, 5, (lengths.max().item(),), device=spec.device)
                return pos, noise
        """)
    assert (7, "PC209") not in found
    assert found[(8, "PC209")] == Severity.ERROR


def test_a_cast_to_float64_of_float64_data_is_quiet():
    """Under `if x.dtype is torch.float64:` the data is float64 already: `.double()` there changes nothing."""
    found = severities("""\
        import torch

        def mean_terms(terms):
            if terms.dtype is torch.float32:
                terms = terms.float()
            elif terms.dtype is torch.float64:
                terms = terms.double()
            return terms

        def widen(terms):
            if terms.dtype == torch.float32:
                terms = terms.double()
            return terms
        """)
    assert (7, "PC303") not in found
    assert found[(12, "PC303")] == Severity.WARNING


def test_a_type_test_makes_a_host_value():
    """In the body of `if sparse.issparse(X):` or `if isinstance(X, np.ndarray):` X is a host value; past those
    tests it may be a tensor."""
    found = severities("""\
        import numpy as np
        import torch
        from scipy import sparse
        from torch import nn

        def to_tensor(X, device):
            if sparse.issparse(X):
                return torch.sparse_coo_tensor(X.nonzero(), X.data, size=X.shape).to(device)
            if isinstance(X, (np.ndarray, np.generic)):
                return torch.as_tensor(X[X > 0], device=device)
            return X[X > 0]

        class M(nn.Module):
            def forward(self, X):
                return to_tensor(X, "cpu")
        """)
    assert (8, "PC201") not in found and (10, "PC204") not in found
    assert found[(11, "PC204")] == Severity.ERROR


def test_a_loop_counter_is_what_range_or_enumerate_steps_not_an_item():
    """`for b, (f, n) in enumerate(zip(feats, lens)): vocoder(f[:n])` cuts each sample by its own length, not by a
    counter that grows; `range` (also inside `tqdm` or `reversed`) and `enumerate`'s index are counters."""
    found = severities("""\
        import torch
        from torch import nn
        from tqdm import tqdm

        class Gen(nn.Module):
            def forward(self, feats, lens, tokens, steps):
                out = []
                for b, (f, n) in enumerate(zip(feats, lens)):
                    out.append(self.vocoder(f[:n]))
                for step in tqdm(range(1, steps)):
                    out.append(self.model(tokens[:, :step]))
                for i, t in enumerate(tokens):
                    out.append(self.model(tokens[:, :i]))
                return out
        """)
    assert (9, "PC213") not in found
    assert found[(11, "PC213")] == Severity.WARNING
    assert found[(13, "PC213")] == Severity.WARNING


def test_a_container_type_test_says_nothing_of_what_it_holds():
    """`elif isinstance(edge_index, tuple): edge_index[0][mask]`: a tuple may hold device tensors."""
    found = severities("""\
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, edge_index, mask):
                if isinstance(edge_index, tuple):
                    return edge_index[0][mask > 0]
                if isinstance(edge_index, (int, float)):
                    return edge_index
                return edge_index
        """)
    assert found[(7, "PC204")] == Severity.ERROR


def test_a_mask_reading_a_column_attribute_of_what_it_indexes_is_a_dataframes():
    """`df[df.ds >= start]` reads a column as an attribute, which no tensor has: a DataFrame filter on the host.
    A tensor's own attributes and methods (`x[x.data > 0]`, `x[x.abs() > 0]`) keep the finding."""
    found = severities("""\
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, df, x, start):
                a = df[df.ds >= start]
                b = x[x.data > 0]
                c = x[x.abs() > 0]
                return a, b, c
        """)
    assert (6, "PC204") not in found
    assert found[(7, "PC204")] == Severity.ERROR and found[(8, "PC204")] == Severity.ERROR


def test_a_read_only_when_the_model_is_not_training_is_an_evaluation_metric():
    """`if not self.training and self.error_calculator is not None: cer = calc(pred.cpu(), ys.cpu())`, or the `else`
    of `if self.training or calc is None:`: validation metrics, info (inference may still run them). A read outside
    them stays a warning."""
    found = severities("""\
        import torch
        from torch import nn

        class ASR(nn.Module):
            def forward(self, x, ys):
                pred = self.decoder(x)
                loss = (pred - ys).pow(2).mean()
                if not self.training and self.error_calculator is not None:
                    cer = self.error_calculator(pred.argmax(-1).cpu(), ys.cpu())
                if self.training or self.error_calculator is None:
                    wer = None
                else:
                    wer = self.error_calculator(pred.argmax(-1).cpu(), ys.cpu())
                n = pred.sum().item()
                return loss, cer, wer, n
        """, "inf2", "xla")
    assert found[(9, "PC702")] == Severity.INFO and found[(13, "PC702")] == Severity.INFO
    assert found[(14, "PC701")] == Severity.WARNING


def test_the_fallback_for_torch_1_is_never_run_on_neuron():
    """The `else` of `if x.is_cuda or is_torch_1_10_plus:` runs only on torch 1.x, which no Neuron stack runs: info.
    The fallback for an older torch 2 (`else` of `if TORCH_GE_2_4:`) may still run there and keeps its finding."""
    found = severities("""\
        import torch
        from packaging.version import Version
        from torch import nn

        is_torch_1_10_plus = Version(torch.__version__) >= Version("1.10.0")
        TORCH_GE_2_4 = Version(torch.__version__) >= Version("2.4")

        class Stft(nn.Module):
            def forward(self, x):
                if x.is_cuda or is_torch_1_10_plus:
                    out = x * 2
                else:
                    out = x.cuda()
                if TORCH_GE_2_4:
                    y = x * 2
                else:
                    y = x.cuda()
                return out, y
        """)
    assert found[(13, "PC101")] == Severity.INFO
    assert found[(17, "PC101")] == Severity.ERROR


def test_a_type_test_says_nothing_after_the_name_is_bound_again():
    """`if isinstance(x, np.ndarray): x = torch.from_numpy(x).to(device)`: after that line `x` is a tensor on the
    device, whatever the test said; before it (and on its own right-hand side) it is still the array."""
    found = severities("""\
        import numpy as np
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, x, device):
                if isinstance(x, np.ndarray):
                    kept = x[x > 0]
                    x = torch.from_numpy(x[x > 1]).to(device)
                    return x[x > 0], kept
                return x
        """)
    assert (8, "PC204") not in found and (9, "PC204") not in found
    assert found[(10, "PC204")] == Severity.ERROR


def test_the_validating_distributions_are_torchs_and_read_their_parameters():
    """PC704's table is every torch.distributions class whose constructor checks parameters, and building one from
    tensors with the default validation asks a tensor for its truth (`Tensor.__bool__`), a host read; with
    `validate_args=False` it does not."""
    torch = pytest.importorskip("torch")
    from torch.overrides import TorchFunctionMode

    from portcheck.static.host_sync.distributions import VALIDATING

    checking = set()
    for name in torch.distributions.__all__:
        cls = getattr(torch.distributions, name)
        if isinstance(cls, type) and issubclass(cls, torch.distributions.Distribution) \
                and name not in ("Distribution", "ExponentialFamily") and cls.arg_constraints:
            checking.add(name)
    assert checking == VALIDATING

    class Truths(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.count = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.count += func is torch.Tensor.__bool__
            return func(*args, **(kwargs or {}))

    assert torch.distributions.Distribution._validate_args  # the default, `__debug__`
    with Truths() as checked:
        torch.distributions.Normal(torch.zeros(3), torch.ones(3)).log_prob(torch.zeros(3))
    with Truths() as unchecked:
        torch.distributions.Normal(torch.zeros(3), torch.ones(3), validate_args=False).log_prob(torch.zeros(3))
    assert checked.count >= 2 and unchecked.count == 0


def test_a_read_under_a_verbosity_switch_is_diagnostic_output():
    """espnet's RNN decoder prints transcripts under `if self.verbose > 0 and self.char_list is not None:` in its
    training forward: the user turns that output on, like a logging interval. A read under another flag is still a
    read in the forward."""
    found = severities("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x, args):
                y = x * 2
                if self.verbose > 0 and self.char_list is not None:
                    print(y.cpu().numpy())
                if args.debug:
                    print(y.sum().item())
                if self.use_bias:
                    print(y.sum().item())
                return y
        """, "inf2", "xla")
    assert (7, "PC702") not in found and (9, "PC701") not in found
    assert (11, "PC701") in found


def test_a_name_tested_to_be_a_tensor_is_one_where_the_test_holds():
    """fairseq's wav2vec criterion: `if not is_xla_tensor(value): value = float(value)` reads the model's output to
    the host each step off XLA; `torch.is_tensor(v)` and `isinstance(v, torch.Tensor)` say the same. An untested
    name read by `float` may be a Python number: quiet."""
    text = """\
        import torch

        class Loss(torch.nn.Module):
            def forward(self, out, logs):
                value = out["ppl"]
                if not is_xla_tensor(value):
                    logs["ppl"] = float(value)
                other = out["other"]
                if torch.is_tensor(other):
                    logs["other"] = float(other)
                third = out["third"]
                if isinstance(third, torch.Tensor) and third.numel() == 1:
                    logs["third"] = int(third)
                logs["plain"] = float(out["plain"])
                return logs
        """
    found = severities(text, "trn2", "native")
    assert (7, "PC701") in found and (10, "PC701") in found and (13, "PC701") in found
    assert (14, "PC701") not in found
    on_xla = severities(text, "inf2", "xla")  # every tensor is an XLA tensor there: the branch never runs
    assert (7, "PC701") not in on_xla and (10, "PC701") in on_xla


def test_a_branch_for_a_tensor_whose_device_is_the_cpu_is_not_neuron_code():
    """fairseq's masked LM loss: `elif masked_tokens.device == torch.device("cpu"): if not masked_tokens.any():` —
    the device compared whole, not its `.type`: only a CPU tensor takes the branch. A device compared with a CUDA
    device is another device too; one compared with Neuron's is not."""
    found = severities("""\
        import torch

        class Loss(torch.nn.Module):
            def forward(self, x, m):
                if m.device == torch.device("cpu"):
                    if not m.any():
                        m = None
                elif x.device == "cuda":
                    if not m.any():
                        m = None
                if m.device == torch.device("neuron"):
                    if not m.any():
                        m = None
                return x
        """)
    assert (6, "PC208") not in found and (9, "PC208") not in found
    assert (12, "PC208") in found


def test_each_sampled_distribution_draws_with_the_op_the_data_names():
    """PC321's table of torch.distributions classes and the op their draws dispatch to, checked against real torch."""
    torch = pytest.importorskip("torch")
    from portcheck.static.unsupported_op.fallback_calls import SAMPLED

    rate = torch.rand(3) + 0.5
    made = {"Gamma": (rate, rate), "Chi2": (rate,), "StudentT": (rate,), "FisherSnedecor": (rate, rate),
            "NegativeBinomial": (rate, rate / 2), "Beta": (rate, rate), "Dirichlet": (rate,), "Poisson": (rate,),
            "Binomial": (5, rate / 2), "Categorical": (rate,), "OneHotCategorical": (rate,), "Multinomial": (3, rate)}
    assert set(made) == set(SAMPLED)
    for name, op in SAMPLED.items():
        ops = dispatched(lambda: getattr(torch.distributions, name)(*made[name]).sample())  # noqa: B023
        assert op in ops, (name, sorted(ops))


def test_an_autocast_a_with_never_enters_is_info():
    """`with autocast() and other():` enters only `other()`: no autocast region exists, on a GPU or on Neuron; the
    last operand of the `and` is entered, and stays a warning."""
    found = severities("""\
        import torch

        def step(model, ema, batch):
            with torch.cuda.amp.autocast() and ema.average_parameters():
                loss = model(batch)
            with torch.no_grad() and torch.cuda.amp.autocast():
                return loss + model(batch)
        """)
    assert found[(4, "PC601")] == Severity.INFO and found[(6, "PC601")] == Severity.WARNING


def test_a_read_only_host_code_uses_at_the_end_of_forward_is_info_on_xla():
    """A read whose value goes only to host code (logging, numpy, `any`, a list built here, the return) with no
    device work after it in `forward` is the model's result handed to the host: info on PyTorch/XLA. A read with
    device work after it, a loss read for stats and returned beside the loss, and a value fed back into the model
    keep their warning (fixtures/static/host-sync/handoff.py)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "fixtures/static/host-sync/handoff.py").read_text()
    lines = {n: line for n, line in enumerate(text.splitlines(), 1)}
    found = severities(text, "inf2", "xla")
    marked = {n: "info:" in line or ": info" in line for n, line in lines.items() if "expect:" in line}
    for number, info in marked.items():
        code = "PC702" if "PC702" in lines[number] else "PC701"
        assert found[(number, code)] == (Severity.INFO if info else Severity.WARNING), lines[number]
    assert sum(marked.values()) == 3 and len(marked) - sum(marked.values()) == 3
    native = severities(text)
    assert {native[(n, "PC702" if "PC702" in lines[n] else "PC701")] for n in marked} == {Severity.INFO}


def test_a_branch_only_training_takes_is_info_on_an_inference_chip():
    """inf2 runs the model in eval mode: what only `if self.training:` (or the `else` of `if not self.training:`)
    runs is info there, and keeps its severity on trn2 (fixtures/static/dynamic-shape/training_branch.py)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "fixtures/static/dynamic-shape/training_branch.py").read_text()
    lines = {n: line for n, line in enumerate(text.splitlines(), 1) if "expect:" in line}
    inf2, trn2 = severities(text, "inf2", "xla"), severities(text)
    for number, line in lines.items():
        assert inf2[(number, "PC204")] == (Severity.INFO if "training only" in line else Severity.ERROR), line
        assert trn2[(number, "PC204")] == Severity.ERROR, line
    assert sum("training only" in line for line in lines.values()) == 2


def test_a_packed_sequences_batch_sizes_are_a_host_tensor():
    """torch keeps a PackedSequence's `batch_sizes` on the CPU (its constructor refuses any other device): reading
    it, or sizing a tensor with it, waits for nothing on the device; its `data` is the device tensor."""
    found = severities("""\
        import torch

        class Packed(torch.nn.Module):
            def forward(self, packed):
                first = packed.batch_sizes[0].item()
                zeros = packed.data.new_zeros(packed.batch_sizes[0].item(), 4)
                n = packed.data[0].item()
                return first, zeros, n, self.head(packed.data)
        """, "inf2", "xla")
    assert [key for key in found if key[0] in (5, 6)] == []
    assert found[(7, "PC701")] == Severity.WARNING


def test_a_probe_bound_to_a_name_nothing_reads_decides_nothing():
    """`device = "cuda" if torch.cuda.is_available() else "cpu"` in a function that never reads `device` (the model
    is built on the CPU anyway) is info; the same line whose name places a tensor keeps its warning."""
    found = severities("""\
        import torch

        class Conditioner(torch.nn.Module):
            def __init__(self):
                super().__init__()
                device = "cuda" if torch.cuda.is_available() else "cpu"
                self.model = build(device="cpu")

            def to_device(self, x):
                device = "cuda" if torch.cuda.is_available() else "cpu"
                return x.to(device)
        """)
    assert found[(6, "PC104")] == Severity.INFO
    assert found[(10, "PC104")] == Severity.WARNING


def test_a_hand_written_attention_spans_its_scores_to_its_values():
    """PC401 covers the construct: from the q @ kᵀ that makes the scores, through the softmax, to the @ v that ends
    it, so a reader (or a label written on the scores) finds it where the attention begins."""
    code = textwrap.dedent("""\
        import torch

        def attend(q, k, v, mask):
            scores = q @ k.transpose(-2, -1)
            scores = scores.masked_fill(mask, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            return probs @ v

        def one_line(q, k, v):
            return torch.softmax(q @ k.mT, dim=-1) @ v
        """)
    result = analyse_text(code, "m.py", "trn2", "native", load().applicable("trn2", "native"))
    spans = [(f.line, f.column, f.end_line) for f in result.findings if f.code == "PC401"]
    assert spans == [(4, 14, 7), (10, 12, 10)]


def test_float64_set_up_work_is_info_unless_the_object_stores_it():
    """Set-up code (a constructor and the helpers only it calls) that computes a table in float64 costs the step
    nothing unless the object keeps the float64 data: `to(w, dtype=dtype)` (a project's helper, as
    `torch.as_tensor(w, dtype=...)`) converts it, a table filled in place (`A[0, :] = ...`) is followed to where it
    goes, and a helper's return value goes back to the constructor. A float64 buffer the constructor registers stays a
    warning."""
    found = severities("""\
        import torch

        def to(x, dtype=None):
            return x.to(dtype=dtype)

        class Table(torch.nn.Module):
            def __init__(self, n, device=None, dtype=None):
                super().__init__()
                self.register_buffer("w", self.narrowed(n, dtype, device))
                self.register_buffer("a", self.filled(n, 0.5, device))
                self.register_buffer("v", torch.eye(n, device=device, dtype=torch.double))
                self.register_buffer("c", to(torch.ones(n, device=device, dtype=torch.double).cumsum(0), dtype=dtype))

            @staticmethod
            def narrowed(n, dtype, device):
                w = torch.eye(n, device=device, dtype=torch.double).cumsum(0)
                return to(w, dtype=dtype)

            @staticmethod
            def filled(n, alpha, device):
                ramp = torch.arange(n, device=device, dtype=torch.double)
                A = torch.zeros((n, n), device=device, dtype=torch.double)
                A[0, :] = alpha**ramp
                return A.T

            def forward(self, x):
                return x @ self.w + x @ self.a + x @ self.v.float()
        """)
    assert found[(12, "PC303")] == found[(16, "PC303")] == Severity.INFO
    assert found[(21, "PC303")] == found[(22, "PC303")] == Severity.INFO
    assert found[(11, "PC303")] == Severity.WARNING


def test_custom_fwd_on_a_function_that_only_moves_data_is_info():
    """`custom_fwd` / `custom_bwd(device_type="cuda")` matter where the function computes what autocast recasts (a
    matmul, a softmax, a layer of the object); on one that only gathers, splits and reshapes (through a helper of the
    same file too) the device type changes nothing on Neuron."""
    found = severities("""\
        import torch
        import torch.distributed as dist

        def _gather(x, group=None):
            parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group=group))]
            dist.all_gather(parts, x.contiguous(), group=group)
            return torch.cat(parts, dim=-1)

        class Gather(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(device_type="cuda")
            def forward(ctx, x):
                return _gather(x)

            @staticmethod
            @torch.amp.custom_bwd(device_type="cuda")
            def backward(ctx, grad):
                return grad.split(grad.shape[-1] // 2, dim=-1)[0].contiguous()

        class Product(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
            def forward(ctx, x, w):
                ctx.save_for_backward(x, w)
                return _product(x, w)

            @staticmethod
            @torch.amp.custom_bwd(device_type="cuda")
            def backward(ctx, grad):
                x, w = ctx.saved_tensors
                return grad.mm(w.t()), x.t().mm(grad)

        def _product(x, w):
            return x @ w
        """)
    assert found[(11, "PC601")] == found[(16, "PC601")] == Severity.INFO
    assert found[(22, "PC601")] == found[(28, "PC601")] == Severity.WARNING


def test_a_size_read_from_data_spans_its_read_to_its_use():
    """PC209 covers the construct: from the line that reads the size out of tensor data to the call it sizes, in one
    function. A read at module level stays out of the span: it is another scope."""
    code = textwrap.dedent("""\
        from typing import Dict
        import torch

        def pool(y, inputs: Dict[str, torch.Tensor]):
            idx_m = inputs["idx_m"]
            maxm = int(idx_m[-1]) + 1
            out = scatter_add(y, idx_m, dim_size=maxm)
            return out

        def pad(x):
            n = x.sum().item()
            return torch.zeros(n)
        """)
    result = analyse_text(code, "m.py", "trn2", "native", load().applicable("trn2", "native"))
    spans = [(f.line, f.end_line) for f in result.findings if f.code == "PC209"]
    assert spans == [(6, 7), (11, 12)]


def test_masks_are_read_by_what_makes_them():
    """PC204 reads a mask made as a boolean tensor and narrowed in place, one bound to a mask or None, a part of a
    mask, a mask moved to a device; not a selection that mixes in numbers, nor indices named as a mask."""
    code = textwrap.dedent("""\
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, x, t, pad):
                ok = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
                ok &= x.sum(-1) > 0
                a = x[ok]
                m = t.ne(pad)
                if x.is_cpu:
                    m = None
                if m is not None:
                    b = x[m]
                c = x[(x > 0)[:, 0]]
                d = x[ok.to(x.device)]
                w = torch.where(x > 0, x, 0)
                e = x[w]
                mask = (x > 0).any(-1).nonzero(as_tuple=True)[0]
                f = x[mask]
                x[~ok, :] = 0
                return a, b, c, d, e, f
        """)
    result = analyse_text(code, "m.py", "trn2", "native", load().applicable("trn2", "native"))
    assert sorted((f.line, f.code) for f in result.findings if f.code in ("PC204", "PC216")) == [
        (8, "PC204"), (13, "PC204"), (14, "PC204"), (15, "PC204"), (20, "PC216")]


def test_a_local_name_shadows_a_module_the_file_imports_under_it():
    """`from pkg import loss` at the top, then `loss, _ = self.model(x)` in a function: there `loss` is the model's
    output, so `loss.item()` reads a tensor, and the call graph sees no call of the module's functions. Where no
    local binds the name, it is still the module."""
    found = severities("""\
        import torch
        from pkg import utils, loss


        class M(torch.nn.Module):
            def forward(self, x):
                out = self.net(x)
                return out.sum().item()

            def update(self, batch):
                loss, _ = self(batch)
                value = loss.data.item()
                loss.backward()
                return value

            def measure(self, x):
                return loss.item()
        """, chip="inf2", stack="xla")
    assert (8, "PC701") in found and (12, "PC701") in found
    assert (17, "PC701") not in found


def test_a_local_shadows_the_import_however_the_checks_walk_the_class():
    """A check that reads the whole class (its parameters, from `__init__`) resolves names of every method while
    the visit is in `__init__`: what it resolved there must not stand for `update`, where a local `loss` shadows
    the module the file imports under that name."""
    found = severities("""\
        import torch
        from pkg import loss


        class Trainer(torch.nn.Module):
            def __init__(self, model=None):
                super().__init__()
                if model is not None:
                    self.model = model
                self.scale = torch.nn.Parameter(torch.ones(1))

            def update(self, batch):
                loss, _ = self(batch)
                value = loss.data.item()
                loss.backward()
                return value
        """, chip="inf2", stack="xla")
    assert (14, "PC701") in found


def test_a_parameter_or_loop_variable_named_like_an_imported_module_is_not_that_module():
    """`from torch import cuda` at the top: `cuda.synchronize()` is CUDA's, but a parameter `cuda` (a flag) and a
    loop variable `cuda` are the function's own values, not torch.cuda."""
    found = severities("""\
        from torch import cuda


        def sync():
            cuda.synchronize()


        def pick(cuda):
            return "gpu" if cuda else "cpu"


        def loop(items):
            for cuda in items:
                print(cuda)
        """, chip="trn2", stack="native")
    assert (5, "PC105") in found
    assert [key for key in found if key[0] in (9, 13, 14)] == []


def test_cudas_module_as_the_default_of_a_device_module_lookup_is_info():
    """`getattr(torch, device_type, torch.cuda)` uses the module of the device the code names; torch.cuda only
    stands in for a device torch has no module for. Named with `"cuda"` itself, or passed on as a value, it is
    CUDA's module."""
    found = severities("""\
        import torch


        def empty_cache(device_type):
            getattr(torch, device_type, torch.cuda).empty_cache()


        def cuda_module():
            return getattr(torch, "cuda", torch.cuda)


        def run(fn):
            return fn(torch.cuda)
        """)
    assert found[(5, "PC111")] == Severity.INFO
    assert found[(9, "PC111")] == found[(13, "PC111")] == Severity.WARNING


def test_code_only_float64_data_runs_is_info_and_the_other_branch_keeps_its_finding():
    """normflows' invertible 1x1 convolution inverts in float64 when its weights are float64 and casts otherwise: the
    float64 side (`if W_dtype == torch.float64:`, the `else` of `!=`, an `in (torch.float64, torch.double)`, a
    conditional expression) never runs in a model ported to Neuron, which has no FP64 type; the float32 side does.
    darts' `to_dtype(dtype)` tests the dtype it is asked for, not its data's: that side makes float64."""
    found = severities("""\
        import torch


        class Conv(torch.nn.Module):
            def forward(self, z, L):
                W_dtype = self.W.dtype
                if W_dtype == torch.float64:
                    W = torch.inverse(self.W)
                else:
                    W = torch.inverse(self.W.double()).type(W_dtype)
                if self.log_S.dtype != torch.float64:
                    d = torch.roll(L, 1)
                else:
                    d = torch.linalg.det(L)
                r = torch.roll(L, 1) if L.dtype in (torch.float64, torch.double) else L
                if L.dtype == torch.float32 and L.ndim == 2:
                    r = torch.roll(r, 2)
                return z @ W, d, r

            def to_dtype(self, dtype, L):
                if dtype == torch.float64:
                    return torch.roll(L.double(), 1)
                return L
        """)
    info, warning = Severity.INFO, Severity.WARNING
    expected = {8: info, 10: warning, 12: warning, 14: info, 15: info, 17: warning}  # float64's side: info
    assert {line: found[(line, "PC321")] for line in expected} == expected
    assert found[(22, "PC303")] > Severity.INFO  # a dtype asked for, not the data's: the branch makes float64
