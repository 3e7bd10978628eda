"""A decode loop's stop check (portcheck.static.dynamic_shape.stop_checks): `if <tensor test>: break` in a bounded
loop that calls the model every step is info (a per-step stop check of a host-driven decode loop is
harmless); the same test in a loop that calls no model, or as a `while` loop's only end, keeps PC208's severity."""

from __future__ import annotations

import textwrap

import pytest

from portcheck.rules import registry
from portcheck.static.engine import analyse_text

_CODES = frozenset(code for code in registry() if code.startswith("PC2") or code.startswith("PC7"))


def _severities(text: str, chip: str = "trn2", stack: str = "native") -> dict[tuple[int, str], str]:
    result = analyse_text(textwrap.dedent(text), "model.py", chip, stack, _CODES)
    return {(f.line, f.code): f.severity.name.lower() for f in result.findings}


# python-doctr's MASTER: greedy decoding up to a maximum length, stopping once every sequence has an EOS
DECODE = """\
    import torch
    from torch import nn

    class Master(nn.Module):
        def forward(self, encoded):
            ys = torch.full((2, 8), 0, dtype=torch.long, device=encoded.device)
            for i in range(7):
                out = self.decoder(ys, encoded)
                ys[:, i + 1] = out[:, i].argmax(-1)
                if (ys == 5).any(dim=-1).all():
                    break
            return ys
    """


@pytest.mark.parametrize(("chip", "stack"), [("trn2", "native"), ("inf2", "xla")])
def test_a_decode_loops_stop_check_is_info(chip: str, stack: str) -> None:
    assert _severities(DECODE, chip, stack).get((10, "PC208")) == "info"


@pytest.mark.parametrize("text", [
    # no model in the loop: an iterative computation whose exit depends on the data, inside forward
    """\
    import torch
    from torch import nn

    class Solver(nn.Module):
        def forward(self, x):
            for _ in range(10):
                x = x - 0.1 * torch.tanh(x)
                if x.abs().max() < 1e-3:
                    break
            return x
    """,
    # the loop's only end: a `while` runs as long as the data says
    """\
    import torch
    from torch import nn

    class Decode(nn.Module):
        def forward(self, ys):
            while True:
                out = self.decoder(ys)
                ys = out.argmax(-1)
                if (ys == 5).all():
                    break
            return ys
    """,
    # more than leaving: the branch also does the model's work
    """\
    import torch
    from torch import nn

    class Decode(nn.Module):
        def forward(self, ys):
            for i in range(8):
                out = self.decoder(ys)
                if (out > 0).all():
                    ys = self.head(out)
                    continue
            return ys
    """,
])
def test_other_tensor_tests_in_loops_keep_their_severity(text: str) -> None:
    found = _severities(text)
    assert [s for (_, code), s in found.items() if code == "PC208"] == ["warning"], found



def test_an_iteration_that_calls_a_function_of_its_module_is_no_decode_loop() -> None:
    """normflows' power iteration: `for _ in range(n): v = normalize(w @ u); if err < atol: break`."""
    found = _severities("""\
        import torch
        from torch import nn

        def normalize(v):
            return v / v.norm()

        class Lipschitz(nn.Module):
            def forward(self, x, u):
                for _ in range(20):
                    new = normalize(self.weight @ u)
                    if torch.norm(new - u) < 1e-3:
                        break
                    u = new
                return x @ u
        """)
    assert found.get((11, "PC208")) == "warning", found


def test_an_iteration_that_calls_a_method_of_its_class_is_no_decode_loop() -> None:
    """kornia's SIFT refinement: `for _ in range(5): if not alive.any(): break; values = self._neighbourhood(...)`;
    a loop that also calls a submodule (`self.head(...)`, parseq's decoder) still decodes."""
    found = _severities("""\
        import torch
        from torch import nn

        class Refine(nn.Module):
            def _neighbourhood(self, x):
                return x.roll(1)

            def forward(self, x, alive):
                for _ in range(5):
                    if not alive.any():
                        break
                    x = self._neighbourhood(x)
                    alive = x > 0
                return x

            def decode(self, ys):
                return ys

            def generate(self, ys):
                for i in range(8):
                    out = self.head(self.decode(ys))
                    ys = out.argmax(-1)
                    if (ys == 2).all():
                        break
                return ys
        """)
    assert found.get((10, "PC208")) == "warning", found
    assert found.get((23, "PC208")) == "info", found
