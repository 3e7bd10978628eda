"""Environments that cannot work, read from requirements*.txt, pyproject.toml and environment.yml: the XLA and the
native torch-neuronx together (PC724), a torch or torch-neuronx the target's stack does not run (PC725)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from portcheck.findings import FileError, FileResult, Finding, Severity
from portcheck.knowledge import load, load_environments
from portcheck.rules import Rule, rule
from portcheck.static.manifests import Manifest, Requirement, read
from portcheck.static.suppression import parse_comment
from portcheck.static.suppression.unused import apply_line_suppressions, file_result


@rule
class MixedTorchNeuronxStacks(Rule):
    """## What it does
    In a requirements file, a pyproject.toml dependency list (the base list with each extra, and each dependency
    group) or an environment.yml, finds the XLA stack's packages (`torch-xla`, or `torch-neuronx` pinned to an XLA
    build such as `2.9.0.2.*`) together with TorchNeuron's (`torch-neuronx` pinned to `2.13.*` or `2.14.*`). An
    unpinned `torch-neuronx` says no stack and stays quiet, and so do alternatives kept in separate extras.

    ## Example
    ```text
    torch-neuronx==2.14.*
    torch-xla==2.9.0
    ```

    ## Use instead
    ```text
    torch==2.14.*
    torch-neuronx==2.14.*      # TorchNeuron native (Trn2); no torch-xla
    ```

    ## Fix safety
    No automatic fix: which stack to keep is the project's choice.
    """

    code = "PC724"
    message = ""
    EXAMPLE_FILE = "requirements.txt"
    INVALID = (
        "torch-neuronx==2.14.3.*\ntorch-xla==2.9.0\n",
        "torch_neuronx==2.9.0.2.15.32035\ntorch-neuronx==2.13.*\n",
    )
    VALID = (
        "torch-neuronx==2.14.*\ntorch==2.14.*\n",
        "torch-neuronx\ntorch-xla\n",
        "# torch-xla==2.9.0\ntorch-neuronx==2.14.*\n",
    )


@rule
class StackTorchVersion(Rule):
    """## What it does
    In the same files, finds a `torch` requirement that no torch release of the target's stack satisfies
    (TorchNeuron native runs PyTorch 2.13 and 2.14; the XLA stack PyTorch 2.9), and a `torch-neuronx` pinned to
    the other stack's build (`torch-neuronx==2.9.0.2.*` for Trn2 with TorchNeuron, `torch-neuronx==2.14.*` for
    Inf2). An error where the same environment installs a Neuron package (`torch-neuronx`, `torch-xla`,
    `neuronx-*`, `libneuronxla`, `optimum-neuron`, `vllm-neuron`); info otherwise, since a project that does not
    install Neuron's packages may be ported by changing its pins. Unpinned or open ranges that include a
    supported release (`torch>=2.1`) stay quiet.

    ## Example
    ```text
    torch==2.1.2
    torch-neuronx==2.14.*
    ```

    ## Use instead
    ```text
    torch==2.14.*
    torch-neuronx==2.14.*
    ```

    ## Fix safety
    No automatic fix: a new torch pin may need other pins to move.
    """

    code = "PC725"
    message = ""
    EXAMPLE_FILE = "requirements.txt"
    INVALID = (
        "torch==2.1.2\ntorch-neuronx==2.14.*\n",
        "torch-neuronx==2.9.0.2.15.32035\n",
        "torch>=2.0,<2.10\nnumpy\n",
    )
    VALID = (
        "torch>=2.1\ntorch-neuronx==2.14.*\n",
        "torch==2.14.0\n",
        "torch\ntorch-neuronx\n",
        "torch==2.1.2  # noqa: PC725\n",
        "-r base.txt\n--extra-index-url https://pip.repos.neuron.amazonaws.com\n",
    )


_NEURON_PACKAGE = re.compile(r"^(torch-neuronx|torch-xla|neuronx-.*|libneuronxla|optimum-neuron|vllm-neuron)$")
_PINNED = re.compile(r"^(?:===?|~=)\s*v?(\d+)\.(\d+)")
_RELEASE = re.compile(r"^v?(\d+(?:\.\d+)*)")


def _release(text: str) -> tuple[int, ...] | None:
    match = _RELEASE.match(text.strip())
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def _pad(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    size = max(len(a), len(b))
    return a + (0,) * (size - len(a)), b + (0,) * (size - len(b))


def _clause_holds(version: tuple[int, ...], clause: str) -> bool:
    """One PEP 440 clause (`>=2.1`, `==2.9.*`, `~=2.13.0`) for a release; a clause it cannot read holds."""
    match = re.match(r"^(===|==|!=|~=|<=|>=|<|>)(.+)$", clause)
    target = _release(match.group(2).rstrip(".*")) if match else None
    if match is None or target is None:
        return True
    op, wildcard = match.group(1), match.group(2).endswith(".*")
    if wildcard and op in ("==", "!="):
        same = version[:len(target)] == target
        return same if op == "==" else not same
    if op == "~=":
        return _pad(version, target)[0] >= _pad(version, target)[1] and version[:len(target) - 1] == target[:-1]
    left, right = _pad(version, target)
    return {"==": left == right, "===": left == right, "!=": left != right, "<": left < right,
            "<=": left <= right, ">": left > right, ">=": left >= right}[op]


def satisfiable(spec: str, series: str) -> bool:
    """Some release of `series` ("2.13": 2.13.0 to 2.13.9) meets every clause of `spec`."""
    base = tuple(int(p) for p in series.split("."))
    clauses = [c for c in spec.replace(" ", "").split(",") if c]
    return any(all(_clause_holds((*base, patch), c) for c in clauses) for patch in range(10))


def pinned_series(spec: str) -> str | None:
    """"2.14" for `==2.14.3.*`, `~=2.14.3`, `===2.14.3.1`; None for a range or nothing."""
    match = _PINNED.match(spec) if "," not in spec else None
    return f"{match.group(1)}.{match.group(2)}" if match else None


def environments(manifest: Manifest) -> Iterator[tuple[Requirement, ...]]:
    """The sets of requirements installed together: a file's one list; pyproject's base list with each extra,
    and each dependency group."""
    by_group: dict[str, list[Requirement]] = {}
    for requirement in manifest.requirements:
        by_group.setdefault(requirement.group, []).append(requirement)
    base = by_group.pop("dependencies", []) + by_group.pop("requirements", []) + by_group.pop("pip", [])
    extras = [g for name, g in by_group.items() if name.startswith("optional-dependencies.")]
    groups = [g for name, g in by_group.items() if not name.startswith("optional-dependencies.")]
    yield tuple(base)
    for extra in extras:
        yield tuple(base + extra)
    yield from (tuple(g) for g in groups)


Hit = tuple[str, Requirement, str, Severity | None]


def _stack_of_pin(requirement: Requirement) -> str | None:
    series = pinned_series(requirement.spec)
    entry = load_environments().stack_of(series) if series else None
    return entry.stack if entry is not None else None


def _mixed(env: tuple[Requirement, ...]) -> Iterator[Hit]:
    xla_only = load_environments().xla_only
    seen: dict[str, Requirement] = {}
    for requirement in env:
        stack = "xla" if requirement.name in xla_only else (
            _stack_of_pin(requirement) if requirement.name == "torch-neuronx" else None)
        if stack is None:
            continue
        other = seen.get("native" if stack == "xla" else "xla")
        if other is not None:
            yield (MixedTorchNeuronxStacks.code, requirement,
                   f"`{_shown(requirement)}` ({_stack_title(stack)}) with `{_shown(other)}` (line {other.line}, "
                   f"{_stack_title('xla' if stack == 'native' else 'native')}) in one environment: the two stacks "
                   f"run different torch releases ({_torch_of('native')} for TorchNeuron, {_torch_of('xla')} for "
                   "PyTorch/XLA) and both ship as `torch-neuronx`, so pip can install only one; keep one stack",
                   None)
            return
        seen.setdefault(stack, requirement)


def _versions(env: tuple[Requirement, ...], stack: str, chip: str) -> Iterator[Hit]:
    current = load_environments().current(stack)
    series = [v for entry in current for v in entry.versions]
    neuron = any(_NEURON_PACKAGE.match(r.name) for r in env)
    for requirement in env:
        if requirement.name == "torch" and requirement.spec and series and \
                not any(satisfiable(requirement.spec, s) for s in series):
            yield (StackTorchVersion.code, requirement,
                   f"`{_shown(requirement)}`: {_stack_title(stack)} on {chip} runs PyTorch {_torch_of(stack)}, which "
                   f"this requirement excludes; pin `torch=={series[-1]}.*` (with the matching torch-neuronx)",
                   None if neuron else Severity.INFO)
        elif requirement.name == "torch-neuronx":
            pinned = _stack_of_pin(requirement)
            if pinned is not None and pinned != stack:
                yield (StackTorchVersion.code, requirement,
                       f"`{_shown(requirement)}` is the {_stack_title(pinned)} build of torch-neuronx (PyTorch "
                       f"{pinned_series(requirement.spec)}); {chip} runs {_stack_title(stack)}, "
                       f"whose torch-neuronx is built for PyTorch {_torch_of(stack)}", None)


def _shown(requirement: Requirement) -> str:
    return f"{requirement.name}{requirement.spec}"


def _stack_title(stack: str) -> str:
    return "TorchNeuron native" if stack == "native" else "PyTorch/XLA"


def _torch_of(stack: str) -> str:
    versions = [v for entry in load_environments().current(stack) for v in entry.versions]
    return " and ".join(versions) if versions else "no release"


def analyse_manifest(text: str, path: str, chip: str, stack: str, enabled: frozenset[str]) -> FileResult:
    """One dependency file's findings, with the same suppression comments as Python files."""
    manifest = read(text, path)
    if manifest.error is not None:
        return FileResult(path, errors=(FileError(path, *manifest.error),))
    hits: dict[tuple[str, int, int], Hit] = {}
    for env in environments(manifest):
        for hit in (*_mixed(env), *_versions(env, stack, chip)):
            key = (hit[0], hit[1].line, hit[1].column)  # the base list is in every extra's: one finding, the worst
            if hit[0] in enabled and (key not in hits or hits[key][3] is not None):
                hits[key] = hit
    rules = load().rules
    findings = [Finding(code=code, name=rules[code].name, category=rules[code].category,
                        severity=severity or rules[code].severity, message=message, path=path,
                        line=req.line, column=req.column, end_line=req.line, end_column=req.end_column)
                for code, req, message, severity in hits.values()]
    suppressions = [s for line, column, end, comment in manifest.comments
                    for s in parse_comment(comment, line, column, end)]
    kept, silenced = apply_line_suppressions(findings, suppressions, enabled, path)
    return file_result(path, kept, silenced, text.splitlines())
