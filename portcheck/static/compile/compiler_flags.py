"""neuronx-cc flags written in code, in `NEURON_CC_FLAGS` or a trace call's `compiler_args=`, checked against
rules/compiler.toml as `advise` checks its own plans (PC723)."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.knowledge import FlagProblem, load_compiler, load_hardware
from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.syntax import keyword, positional, string_value


@rule
class CompilerFlagProblem(Rule):
    """## What it does
    Reads the neuronx-cc flags a file writes, in `NEURON_CC_FLAGS` (`os.environ[...] = `, `+=`,
    `os.environ.setdefault`, `os.environ.update`, `os.putenv`) and in `compiler_args=` of `torch_neuronx.trace`,
    `torch_neuronx.bucket_model_trace` and `parallel_model_trace` (a string or a list of strings, also through a
    name bound once), and checks each against rules/compiler.toml: a flag it does not know, a value the flag does
    not take (`--auto-cast matmul`, `--model-type transformer-O2`), a flag documented for other chips
    (`--lnc 2` on Inf2 or Trn1), a flag newer than the stack's last SDK release (`--native-int64` on the xla
    stack), and `--target` naming an older chip than Trn2. Spellings `--flag=value`, `--flag value`, `-O2` and
    `--lnc` are understood. Parts known only at run time (`f"--lnc={lnc}"`, `str(level)`) are not judged.

    ## Example
    ```python
    os.environ["NEURON_CC_FLAGS"] = "--model-type=transformer-O2 --lnc 2"
    ```

    ## Use instead
    ```python
    os.environ["NEURON_CC_FLAGS"] = "--model-type=transformer"   # and --lnc only on trn2
    ```

    ## Fix safety
    No automatic fix: which value was meant is the author's choice.
    """

    code = "PC723"
    message = ""
    TARGET = ("inf2", "xla")
    INVALID = (
        "import os\nos.environ['NEURON_CC_FLAGS'] = '--model-type=transformer-O2'",
        "import os\nos.environ['NEURON_CC_FLAGS'] = '--lnc 2'",
        "import os\nos.environ.setdefault('NEURON_CC_FLAGS', '--auto-cast matmul')",
        "import torch_neuronx\nm = torch_neuronx.trace(model, x, compiler_args=['--optlevel', '4'])",
        "import torch_neuronx\nARGS = '-O2 --enable-fast-loding-neuron-binaries'\n"
        "m = torch_neuronx.trace(model, x, compiler_args=ARGS)",
        "import os\nos.environ['NEURON_CC_FLAGS'] = os.environ.get('NEURON_CC_FLAGS', '') + ' --native-int64=enabled'",
    )
    VALID = (
        "import os\nos.environ['NEURON_CC_FLAGS'] = '--model-type=transformer --auto-cast=none -O2'",
        "import os\nos.environ['NEURON_CC_FLAGS'] = '--cache_dir=/tmp/cache --retry_failed_compilation'",
        "import torch_neuronx\nm = torch_neuronx.trace(model, x, compiler_args=['--auto-cast', 'none', '--lnc', '1'])",
        "import os\nos.environ['NEURON_CC_FLAGS'] = f'--lnc={lnc} --optlevel {level}'",
        "import torch_neuronx\nm = torch_neuronx.trace(model, x, compiler_args=['--optlevel', str(level)])",
        "flags = {}\nflags['NEURON_CC_FLAGS'] = '--made-up'",
        "import os\nflags = os.environ.get('NEURON_CC_FLAGS', '--made-up')",
    )


TOKENS = ("NEURON_CC_FLAGS", "compiler_args")

_VARIABLE = "NEURON_CC_FLAGS"
_ENV_SETTERS = frozenset({"os.putenv", "os.environ.setdefault"})
_TRACES = frozenset({"torch_neuronx.trace", "torch_neuronx.bucket_model_trace", "torch_neuronx.xla_impl.trace.trace",
                     "neuronx_distributed.trace.parallel_model_trace",
                     "neuronx_distributed.trace.trace.parallel_model_trace"})
_HOLE = "\x00"  # stands for a part of the text known only at run time
_GLUED = re.compile(r"^(-O)(\d+)$")
_WORD = re.compile(r"""(?:'[^']*'|"[^"]*"|\S)+""")  # a shell word: quotes keep their spaces
# Chips whose NEFF runs on a Trn2 only with NEURON_RT_ALLOW_LEGACY_NEFF
# (SDK:neuron-runtime/guides/configuration-guide.rst)
_OLDER_THAN_TRN2 = frozenset({"inf2", "trn1", "trn1n"})

Piece = tuple[str, cst.CSTNode]  # text (with holes) and where it is written


def _pieces(ctx: Context, node: cst.BaseExpression, depth: int = 0) -> list[Piece]:
    """The text of a flags value, literal parts with holes for the rest, each with the node that writes it."""
    text = string_value(node)
    if text is not None:
        return [(text, node)]
    if isinstance(node, cst.FormattedString):
        parts = [p.value if isinstance(p, cst.FormattedStringText) else _HOLE for p in node.parts]
        return [("".join(parts), node)]
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return _pieces(ctx, node.left, depth) + _pieces(ctx, node.right, depth)
    if isinstance(node, (cst.List, cst.Tuple)):
        # each element is one argument: keep them apart
        return [piece for element in node.elements
                for piece in [*_pieces(ctx, element.value, depth), (" ", element.value)]]
    bound = ctx.constant(node) if depth < 2 else None
    if bound is not None:
        return _pieces(ctx, bound[1], depth + 1)
    return [(_HOLE, node)]


def _arguments(pieces: list[Piece]) -> list[tuple[str | None, cst.CSTNode]]:
    """One flag or value per item (`--lnc=2` split, `-O2` split), None for a part with a hole in it, each with the
    node that writes its first character."""
    out: list[tuple[str | None, cst.CSTNode]] = []
    joined, owners = "", []
    for text, node in pieces:
        joined += text
        owners += [node] * len(text)
    for match in _WORD.finditer(joined):
        word, owner = match.group().replace("'", "").replace('"', ""), owners[match.start()]
        glued = _GLUED.match(word)
        name_part = word.split("=", 1)[0] if word.startswith("-") else word
        if _HOLE in name_part:
            out.append((None, owner))
        elif glued:
            out += [(glued.group(1), owner), (glued.group(2), owner)]
        elif word.startswith("-") and "=" in word:
            name, value = word.split("=", 1)
            out += [(name, owner), (None if _HOLE in value else value, owner)]
        else:
            out.append((word, owner))
    return out


def _message(ctx: Context, problem: FlagProblem, where: str) -> str | None:
    flag = problem.flag
    glue = "" if problem.spelling == "-O" else " "
    shown = problem.spelling if problem.value is None else f"{problem.spelling}{glue}{problem.value}"
    if problem.kind == "unknown":
        return (f"`{problem.spelling}` in {where} is not among the neuronx-cc options portcheck's data lists (the "
                "compiler reference and the framework's NEURON_CC_FLAGS options); check its spelling")
    assert flag is not None
    if problem.kind == "value":
        given = f"`{shown}`" if problem.value is not None else f"`{problem.spelling}` without a value"
        return f"{given} in {where}: `{flag.name}` takes {', '.join(flag.values)}"
    if problem.kind == "target":
        hardware = load_hardware().chips.get(ctx.chip)
        if flag.name == "--logical-nc-config" and (problem.value is None or (
                hardware is not None and problem.value in map(str, hardware.lnc))):
            return None  # LNC 1 is what an Inf2 or Trn1 core is; a value known only at run time may be 1
        return (f"`{shown}` in {where} is documented for {', '.join(flag.targets)} only, not {ctx.chip}"
                + (" (an LNC of 2 on trn1 fails with NCC_EARG001)" if flag.name == "--logical-nc-config" else ""))
    return f"`{shown}` in {where}: `{flag.name}` needs Neuron {flag.since}, and the {ctx.stack} stack stops at " \
        f"{load_compiler().newest_sdk.get(ctx.stack)}"


def _check_flags(ctx: Context, value: cst.BaseExpression, where: str) -> None:
    arguments = _arguments(_pieces(ctx, value))
    words = [word for word, _ in arguments]
    reported: set[int] = set()
    for problem in load_compiler().problems(words, ctx.chip, ctx.stack):
        message = _message(ctx, problem, where) if problem.index not in reported else None
        if message is not None:
            reported.add(problem.index)
            ctx.report(CompilerFlagProblem, arguments[problem.index][1], message)
    for index, word in enumerate(words[:-1]):
        target = words[index + 1]
        if word == "--target" and ctx.chip == "trn2" and target in _OLDER_THAN_TRN2:
            ctx.report(CompilerFlagProblem, arguments[index][1], f"`--target {target}` in {where} builds for an older "
                       "NeuronCore than Trn2's: the runtime loads such a NEFF on Trn2 only with "
                       "NEURON_RT_ALLOW_LEGACY_NEFF and without a guarantee; use `--target trn2`")


@check(cst.Assign, cst.AugAssign, rules=(CompilerFlagProblem,), tokens=TOKENS)
def check_flags_assignment(node: cst.Assign | cst.AugAssign, ctx: Context) -> None:
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    for target in targets:
        if isinstance(target, cst.Subscript) and ctx.qualname(target.value) == "os.environ" and \
                len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index) and \
                string_value(target.slice[0].slice.value) == _VARIABLE:
            _check_flags(ctx, node.value, _VARIABLE)
            return


@check(cst.Call, rules=(CompilerFlagProblem,), tokens=TOKENS)
def check_flags_call(node: cst.Call, ctx: Context) -> None:
    qualname = ctx.qualname(node.func)
    if qualname in _ENV_SETTERS:
        name, value = positional(node, 0), positional(node, 1)
        if name is not None and value is not None and string_value(name.value) == _VARIABLE:
            _check_flags(ctx, value.value, _VARIABLE)
    elif qualname == "os.environ.update":
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == _VARIABLE:
                _check_flags(ctx, arg.value, _VARIABLE)
            elif isinstance(arg.value, cst.Dict):
                for element in arg.value.elements:
                    if isinstance(element, cst.DictElement) and string_value(element.key) == _VARIABLE:
                        _check_flags(ctx, element.value, _VARIABLE)
    elif qualname in _TRACES:
        given = keyword(node, "compiler_args")
        if given is not None:
            _check_flags(ctx, given.value, "compiler_args")
