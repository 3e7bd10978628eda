"""What `portcheck/static/rewrite.py` tidies after fixes: only the leftovers the fixes made."""

import textwrap

from portcheck.static.rewrite import drop_imports_made_unused, tidy_leftovers


def dedent(text: str) -> str:
    return textwrap.dedent(text)


def test_an_if_left_holding_pass_goes_unless_it_was_there_or_has_a_comment():
    before = dedent("""\
        def f(flag, other):
            if other:
                pass
            if flag:
                torch.backends.cudnn.benchmark = True
            if flag > 1:
                # keep me
                torch.backends.cudnn.benchmark = False
            if flag:
                torch.cuda.empty_cache()
            return flag
    """)
    after = before.replace("torch.backends.cudnn.benchmark = True", "pass").replace(
        "torch.backends.cudnn.benchmark = False", "pass").replace("torch.cuda.empty_cache()", "pass")
    assert tidy_leftovers(before, after) == dedent("""\
        def f(flag, other):
            if other:
                pass
            if flag > 1:
                # keep me
                pass
            return flag
    """)


def test_a_block_left_with_only_the_if_keeps_a_pass_and_calls_in_the_test_keep_it():
    before = "def f(x):\n    if x.flag:\n        torch.cuda.empty_cache()\ndef g(x):\n    if h(x):\n        y()\n"
    after = before.replace("torch.cuda.empty_cache()", "pass").replace("y()", "pass")
    assert tidy_leftovers(before, after) == "def f(x):\n    pass\ndef g(x):\n    if h(x):\n        pass\n"


def test_a_repeated_idempotent_call_goes_but_other_repeats_stay():
    before = "torch.manual_seed(s)\ntorch.cuda.manual_seed_all(s)\nx += 1\nx += 1\n"
    after = "torch.manual_seed(s)\ntorch.manual_seed(s)\nx += 1\nx += 1\n"
    assert tidy_leftovers(before, after) == "torch.manual_seed(s)\nx += 1\nx += 1\n"


def test_plain_imports_made_unused_go_but_dotted_and_registering_ones_stay():
    before = "import torch\nimport torch_xla\nimport torch.distributed\ntorch.cuda.empty_cache()\ntorch_xla.x()\n"
    after = "import torch\nimport torch_xla\nimport torch.distributed\npass\n"
    assert drop_imports_made_unused(before, after) == "import torch_xla\nimport torch.distributed\npass\n"


def test_an_if_else_chain_left_holding_only_pass_goes_and_an_elif_is_never_cut_alone():
    before = dedent("""\
        def f(step, x, y):
            if step % 100 == 0:
                torch.cuda.empty_cache()
            elif step:
                torch.cuda.empty_cache()
            else: torch.cuda.empty_cache()
            if x:
                a()
            elif y:
                torch.cuda.empty_cache()
            return step
    """)
    after = before.replace("torch.cuda.empty_cache()", "pass")
    assert tidy_leftovers(before, after) == dedent("""\
        def f(step, x, y):
            if x:
                a()
            elif y:
                pass
            return step
    """)
