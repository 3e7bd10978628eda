"""Properties of the static pass over generated programs (issue 9), with hypothesis.

Two sources of programs: hypothesmith's, drawn from Python's grammar (odd syntax of every kind, almost never a
porting problem), and portcheck's own, assembled from the constructs the rules are about (`.cuda()`,
`torch.cuda.*`, autocast, `.item()`, `nonzero`, float64 ...) under random aliases, nesting, suppression comments,
line endings and indentation, so that findings and fixes are plentiful. For both:

- scanning never crashes: no internal error, no exception;
- every finding's and every fix's position lies inside the file;
- every fixed output parses, and fixing it again changes nothing (fix(fix(x)) == fix(x)).
"""

from __future__ import annotations

import ast

import hypothesmith
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from portcheck.findings import FileJob, FileResult
from portcheck.rules import Pass, registry
from portcheck.static.engine import analyse_text
from portcheck.static.rewrite import fix_text

ENABLED = frozenset(code for code, rule in registry().items() if Pass.STATIC in rule.passes)
TARGETS = (("trn2", "native"), ("inf2", "xla"))

IMPORTS = {
    "torch": "import torch",
    "th": "import torch as th",
}
# {T} is the torch alias in effect, {N} a fresh number.
STATEMENTS = (
    "x{N} = {T}.zeros(3).cuda()",
    "x{N} = {T}.ones(2).to('cuda')",
    "x{N} = {T}.ones(2).to(device='cuda:0', non_blocking=True)",
    "{T}.cuda.synchronize()",
    "{T}.cuda.empty_cache()  # release",
    "n{N} = {T}.cuda.device_count()",
    "{T}.cuda.manual_seed_all({N})",
    "v{N} = {T}.ones(2).sum().item()",
    "i{N} = {T}.nonzero({T}.ones(3))",
    "w{N} = {T}.where({T}.ones(3) > 0)",
    "d{N} = {T}.ones(2).double()",
    "d{N} = {T}.zeros(2, dtype={T}.float64)",
    "DEVICE{N} = 'cuda'",
    "m{N} = {T}.nn.DataParallel({T}.nn.Linear(2, 2))",
    "{T}.backends.cudnn.benchmark = True",
    "{T}.backends.cuda.matmul.allow_tf32 = True",
    "s{N} = 'x.cuda() in a string'",
    "# {T}.cuda.synchronize() in a comment",
    "print({T}.ones(2).tolist())",
    "scaler{N} = {T}.cuda.amp.GradScaler()",
    "c{N} = {T}.compile({T}.nn.Linear(2, 2), backend='inductor')",
    "a{N} = {T}.softmax({T}.ones(2, 2) @ {T}.ones(2, 2).transpose(-2, -1) / 8, dim=-1)",
    "os.environ['CUDA_VISIBLE_DEVICES'] = '0'",
    "pass",
)
BLOCKS = (
    "if {T}.cuda.is_available():",
    "for step{N} in range(3):",
    "with {T}.cuda.amp.autocast():",
    "with {T}.autocast('cuda', dtype={T}.float16):",
    "def forward(self, x):",
    "def helper{N}(x, device='cuda'):",
    "while False:",
    "try:",
)
SUFFIXES = ("", "", "", "  # noqa: PC101", "  # portcheck: ignore", "  # noqa", "  # portcheck: ignore[PC104, PC999]")


@st.composite
def porting_programs(draw) -> str:
    alias = draw(st.sampled_from(sorted(IMPORTS)))
    indent_unit = draw(st.sampled_from(("    ", "  ", "\t")))
    counter = iter(range(10_000))
    lines = ["import os", IMPORTS[alias]]
    if draw(st.booleans()):
        lines.insert(0, '"""A generated module."""')

    def block(depth: int) -> list[str]:
        out = []
        for _ in range(draw(st.integers(1, 4))):
            if depth < 3 and draw(st.integers(0, 3)) == 0:
                header = draw(st.sampled_from(BLOCKS)).format(T=alias, N=next(counter))
                out.append(header)
                out.extend(indent_unit + line for line in block(depth + 1))
                if header == "try:":
                    out.append("except Exception:")
                    out.append(indent_unit + "pass")
            else:
                statement = draw(st.sampled_from(STATEMENTS)).format(T=alias, N=next(counter))
                out.append(statement + ("" if statement.startswith("#") else draw(st.sampled_from(SUFFIXES))))
            if draw(st.integers(0, 5)) == 0:
                out.append("")
        return out

    if draw(st.booleans()):
        lines.append(f"class Model{alias}({alias}.nn.Module):")
        lines.extend(indent_unit + line for line in block(1))
    lines.extend(block(0))
    newline = draw(st.sampled_from(("\n", "\n", "\r\n")))
    text = newline.join(lines)
    return text + (newline if draw(st.booleans()) else "")


def _inside(result: FileResult, text: str) -> None:
    lines = text.splitlines() or [""]
    for finding in (*result.findings, *result.suppressed):
        assert 1 <= finding.line <= finding.end_line <= len(lines) + 1, finding
        assert 1 <= finding.column <= len(lines[finding.line - 1]) + 1, finding
        if finding.end_line <= len(lines):
            assert 1 <= finding.end_column <= len(lines[finding.end_line - 1]) + 1, finding
        if finding.fix is not None:
            for edit in finding.fix.edits:
                assert 1 <= edit.line <= edit.end_line <= len(lines) + 1, (finding.code, edit)


def _compiles(text: str) -> bool:
    try:
        compile(text, "g.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _never_crashes(text: str) -> None:
    for chip, stack in TARGETS:
        result = analyse_text(text, "generated.py", chip, stack, ENABLED)
        assert not [e for e in result.errors if "internal error" in e.message], result.errors
        _inside(result, text)


def _fixes_settle(text: str) -> None:
    for chip, stack in TARGETS:
        job = FileJob(path="generated.py", chip=chip, stack=stack, enabled=ENABLED)
        for unsafe in (False, True):
            once = fix_text(text, job, unsafe)
            assert not [e for e in once.result.errors if "internal error" in e.message], once.result.errors
            if once.text is None or once.text == text:
                continue
            ast.parse(once.text)  # every fixed output parses
            twice = fix_text(once.text, job, unsafe)
            assert twice.text in (None, once.text), (chip, stack, unsafe, once.text, twice.text)


PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY_SETTINGS
@given(porting_programs())
def test_generated_porting_code_never_crashes_and_positions_are_inside(text):
    ast.parse(text)  # the generator writes valid Python
    _never_crashes(text)


@PROPERTY_SETTINGS
@given(porting_programs())
def test_fixes_on_generated_porting_code_parse_and_are_idempotent(text):
    _fixes_settle(text)


def test_the_generator_gives_the_rules_something_to_do():
    # A property over programs where nothing fires proves little: most generated programs have findings, and
    # a good share of them fixes.
    examples = []

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(porting_programs())
    def collect(text):
        examples.append(text)

    collect()
    results = [analyse_text(t, "g.py", "trn2", "native", ENABLED) for t in examples]
    assert sum(bool(r.findings) for r in results) >= 0.8 * len(results)
    assert sum(any(f.fix for f in r.findings) for r in results) >= 0.4 * len(results)


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(hypothesmith.from_grammar())
def test_any_program_from_pythons_grammar_never_crashes_the_scan(text):
    # hypothesmith's grammar is wider than the compiler: what does not compile must still get an answer, an error
    _never_crashes(text)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(hypothesmith.from_grammar(), porting_programs())
def test_grammar_noise_around_porting_code_keeps_fixes_sound(noise, code):
    text = noise + ("\n" if noise and not noise.endswith("\n") else "") + code
    assume(_compiles(noise) and _compiles(text))  # hypothesmith's grammar is wider than the compiler
    _never_crashes(text)
    _fixes_settle(text)
