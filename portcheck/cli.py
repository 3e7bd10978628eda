"""The command line: arguments -> options, one call into the application layer (commands.py), the result
rendered, and the exit code from one function."""

from __future__ import annotations

import argparse
import difflib
import io
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from portcheck import __version__
from portcheck.advise.model import KINDS
from portcheck.atomic import write_text
from portcheck.commands import LinesFor, source_lines
from portcheck.config import (
    FORMATS,
    ConfigError,
    Layer,
    Settings,
    check_selector,
    find_config,
    read_config,
    resolve,
)
from portcheck.errors import UserError
from portcheck.escape import printable
from portcheck.findings import ScanResult, Severity

if TYPE_CHECKING:
    from portcheck.dynamic.request import TraceRequest
    from portcheck.static.scan import Fixing


EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


class _Parser(argparse.ArgumentParser):
    """A usage error is one line, as every other error is (argparse prints its whole usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="portcheck",
        description="Find what breaks when a PyTorch model moves from NVIDIA GPUs to AWS Trainium2 / Inferentia2.",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    scan = commands.add_parser("scan", help="statically check Python source for Neuron porting problems")
    scan.add_argument("paths", nargs="*", metavar="PATH", help="files or directories ('-' reads stdin); default: .")
    scan.add_argument("--target", choices=("trn2", "inf2", "trn1"), help="chip to port to (default trn2)")
    scan.add_argument("--stack", choices=("native", "xla"), help="PyTorch stack (default: trn2 native, else xla)")
    _sdk_argument(scan)
    scan.add_argument("--format", choices=FORMATS, help="output format (default concise)")
    scan.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    scan.add_argument("--statistics", action="store_true", help="counts by code and category instead of findings")
    scan.add_argument("--select", type=_codes, metavar="CODES", help="only these codes / prefixes (PC1) / names")
    scan.add_argument("--extend-select", type=_codes, default=[], metavar="CODES", help="add to the selection")
    scan.add_argument("--ignore", type=_codes, default=[], metavar="CODES", help="drop from the selection")
    scan.add_argument("--config", metavar="FILE", help="use this portcheck.toml / pyproject.toml")
    scan.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    scan.add_argument("--exclude", type=_codes, metavar="GLOBS", help="replace the default excludes")
    scan.add_argument("--extend-exclude", type=_codes, default=[], metavar="GLOBS", help="exclude these too")
    scan.add_argument("--tests", choices=("exclude", "include"), default=None,
                      help="scan test files found in folders (test_*.py, *_test.py, conftest.py, tests/): "
                           "exclude (default) or include")
    scan.add_argument("--force-exclude", action=argparse.BooleanOptionalAction, default=None,
                      help="apply excludes to paths given explicitly too (as pre-commit passes them)")
    scan.add_argument("--respect-gitignore", action=argparse.BooleanOptionalAction, default=None,
                      help="skip files git ignores (default on)")
    scan.add_argument("--stdin-filename", metavar="PATH", help="the name to report for '-' (stdin)")
    scan.add_argument("--fail-level", choices=("error", "warning", "info"),
                      help="lowest severity that makes the exit code 1 (default info)")
    scan.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    scan.add_argument("--jobs", "-j", type=int, metavar="N", help="processes to analyse files with (default: cores)")
    scan.add_argument("--no-cache", action="store_true", help="neither read nor write the results cache")
    scan.add_argument("--max-file-size", type=float, metavar="MB",
                      help="report larger files instead of analysing them (default 32)")
    scan.add_argument("--cache-dir", metavar="DIR",
                      help="keep the results cache in DIR (default: $PORTCHECK_CACHE_DIR, else .portcheck_cache)")
    scan.add_argument("--baseline", metavar="FILE", help="report only findings this baseline file does not hold")
    scan.add_argument("--write-baseline", metavar="FILE",
                      help="record the current findings in FILE (for --baseline) and exit 0")
    scan.add_argument("--fix", action="store_true", help="apply safe fixes to the files")
    scan.add_argument("--unsafe-fixes", action="store_true",
                      help="with --fix / --diff, also apply fixes that change numerics, structure or behaviour")
    scan.add_argument("--diff", action="store_true",
                      help="print the unified diff --fix would apply, write nothing (exit 1 if not empty)")
    scan.add_argument("--fix-only", action="store_true", help="apply fixes and report only what was fixed")
    scan.add_argument("--show-fixes", action="store_true", help="list each fix applied")

    trace = commands.add_parser(
        "trace", help="build the model, capture its ATen graph and check it against Neuron (needs torch)")
    _model_arguments(trace)
    trace.add_argument("--no-shapes", action="store_true", help="skip the dynamic batch / sequence export")
    trace.add_argument("--no-static", action="store_true",
                       help="report graph evidence only, without the static pass over the model's files")
    trace.add_argument("--neuron-analyze", action="store_true",
                       help="also run torch_neuronx.analyze (a Neuron host with torch-neuronx only)")
    trace.add_argument("--format", choices=FORMATS, help="output format (default concise)")
    _target_and_selection(trace)
    trace.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE")
    trace.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")

    advise = commands.add_parser(
        "advise", help="the compile plan: memory per core, tensor parallelism, instance, neuronx-cc flags, buckets")
    _model_arguments(advise)
    numbers = advise.add_argument_group("a model given as numbers (alone, or overriding what the trace found)")
    numbers.add_argument("--params", type=_count, metavar="N", help="parameter count, e.g. 7e9 or 6738415616")
    for name, what in (("--layers", "transformer layers"), ("--hidden", "hidden size"),
                       ("--heads", "attention heads"), ("--kv-heads", "key/value heads (GQA; default: --heads)"),
                       ("--head-dim", "head dimension (default: hidden / heads)"),
                       ("--intermediate", "MLP intermediate size (default: 4 × hidden)"),
                       ("--max-positions", "longest sequence the model takes")):
        numbers.add_argument(name, type=_positive, metavar="N", help=what)
    numbers.add_argument("--kind", choices=KINDS, help="decoder (default with --layers/--heads), encoder, "
                                                       "encoder-decoder, vision or other")
    advise.add_argument("--target", choices=("trn2", "inf2", "trn1"), help="chip (default trn2)")
    advise.add_argument("--stack", choices=("native", "xla"), help="PyTorch stack (default: the chip's)")
    _sdk_argument(advise)
    advise.add_argument("--task", choices=("inference", "training"), default="inference")
    advise.add_argument("--batch", type=_positive, default=1, metavar="N", help="batch size (default 1)")
    advise.add_argument("--seq-len", type=_positive, metavar="N",
                        help="longest sequence to serve (default: the model's limit, at most 4096)")
    advise.add_argument("--dtype", choices=("bf16", "fp16", "fp32", "fp8"), default="bf16",
                        help="weights' dtype on the device (default bf16)")
    advise.add_argument("--tp", type=_positive, metavar="N", help="check this tensor-parallel degree")
    advise.add_argument("--dp", type=_positive, default=1, metavar="N",
                        help="model copies on the instance, each with --batch sequences (default 1)")
    advise.add_argument("--attention-dp", type=_positive, default=1, metavar="N",
                        help="attention data parallelism inside the tensor-parallel group (trn2, decoders)")
    advise.add_argument("--context-batch", type=_positive, default=1, metavar="N",
                        help="sequences a decoder's context encoding runs at once (default 1, as vLLM Neuron)")
    advise.add_argument("--kv-cache-dtype", choices=("bf16", "fp16", "fp32", "fp8"),
                        help="the KV cache's dtype (default: the activations', bf16 for --dtype fp8)")
    advise.add_argument("--lnc", type=int, choices=(1, 2), help="trn2 logical core size (default 2)")
    advise.add_argument("--prefer", choices=("accuracy", "speed"), default="accuracy",
                        help="accuracy: no compiler auto-cast (default); speed: matmult auto-cast, -O3")
    advise.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    advise.add_argument("--output", "-o", metavar="FILE", help="write the plan to FILE")
    advise.add_argument("--emit-script", metavar="FILE",
                        help="write a bring-up script that compiles and times the model with the plan (needs a "
                             "model; without torch-neuronx it runs the model eagerly on the CPU: a dry run)")
    advise.add_argument("--compile-only", action="store_true",
                        help="the script only compiles, on a host without Neuron devices where the serving path "
                             "allows it (with --emit-script)")
    cost = advise.add_argument_group("cost (USD; on-demand prices from rules/prices.toml unless given)")
    cost.add_argument("--price-per-hour", type=_amount, metavar="USD",
                      help="the plan's instance's price per hour (overrides the data and the config's prices table)")
    cost.add_argument("--tokens-per-second", type=_amount, metavar="N",
                      help="the throughput you measured for the whole plan: prints the cost per million tokens")
    cost.add_argument("--baseline-gpu", metavar="INSTANCE", help="compare tokens per dollar with this GPU instance")
    cost.add_argument("--baseline-tokens-per-second", type=_amount, metavar="N",
                      help="the throughput you measured on --baseline-gpu")
    cost.add_argument("--baseline-price-per-hour", type=_amount, metavar="USD",
                      help="--baseline-gpu's price per hour (default: from the data or the config's prices table)")
    advise.add_argument("--config", metavar="FILE", help="use this portcheck.toml / pyproject.toml")
    advise.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    advise.add_argument("--fail-level", choices=("error", "warning", "info"))
    advise.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    advise.set_defaults(select=None, extend_select=[], ignore=[])

    review = commands.add_parser(
        "review", help="findings on the lines a change adds or modifies (git diff), as a pull-request review")
    review.add_argument("--base", required=True, metavar="REF", help="the branch or commit the change is against")
    review.add_argument("--head", metavar="REF", help="the change's commit (default: the working tree)")
    review.add_argument("--format", choices=(*FORMATS, "github-review", "markdown"),
                        help="concise (default), github-review (GitHub's create-a-review body), markdown, or any "
                             "scan format")
    review.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE")
    review.add_argument("--post", action="store_true",
                        help="post the review to the pull request (GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_API_URL)")
    review.add_argument("--pr", type=_positive, metavar="N",
                        help="pull request number for --post (default: from GITHUB_EVENT_PATH)")
    _target_and_selection(review)
    review.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")

    report = commands.add_parser(
        "report", help="one page for a team deciding and tracking a port: every target side by side (HTML or markdown)")
    report.add_argument("paths", nargs="*", metavar="PATH", help="files or directories; default: .")
    report.add_argument("--target", action="append", choices=("trn2", "inf2", "trn1"), dest="targets",
                        help="a target to report (repeat it for several; default: trn2 and inf2)")
    _sdk_argument(report)
    report.add_argument("--format", choices=("html", "markdown"), default="html",
                        help="html (default: one self-contained file) or markdown (a PR comment, a step summary)")
    report.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    report.add_argument("--baseline", metavar="FILE",
                        help="also show what is new since this baseline (scan --write-baseline) and what was fixed")
    report.add_argument("--model", action="append", dest="models", type=lambda spec: ("model", spec), default=[],
                        metavar="SPEC", help="also trace this model and plan it for each target, as trace and "
                                             "advise do (path/to/file.py:build or package.module:build; repeatable)")
    report.add_argument("--hf-config", action="append", dest="models", type=lambda spec: ("hf", spec),
                        metavar="DIR_OR_JSON", help="also trace and plan a transformers model built from this local "
                                                    "config.json (repeatable)")
    report.add_argument("--device", choices=("auto", "cpu", "meta"), default="auto",
                        help="build the models on the meta device (no weights in memory); auto: when they would "
                             "not fit")
    report.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                        help="stop a model's process after this long (default 300)")
    for name, what in (("--select", "only these codes"), ("--extend-select", "add to the selection"),
                       ("--ignore", "drop from the selection")):
        report.add_argument(name, type=_codes, default=None if name == "--select" else [], metavar="CODES", help=what)
    report.add_argument("--exclude", type=_codes, metavar="GLOBS", help="replace the default excludes")
    report.add_argument("--extend-exclude", type=_codes, default=[], metavar="GLOBS", help="exclude these too")
    report.add_argument("--respect-gitignore", action=argparse.BooleanOptionalAction, default=None,
                        help="skip files .gitignore ignores (default: yes)")
    report.add_argument("--config", metavar="FILE", help="use this portcheck.toml / pyproject.toml")
    report.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    report.add_argument("--no-cache", action="store_true", help="neither read nor write the results cache")
    report.add_argument("--jobs", "-j", type=int, metavar="N", help="processes to analyse files with")

    commands.add_parser("sdk", help="list the Neuron SDK releases portcheck's data knows and what changed in each")
    rules = commands.add_parser("rules", help="list every rule")
    rules.add_argument("--format", choices=("table", "json"), default="table")
    rule = commands.add_parser("rule", help="show one rule's documentation")
    rule.add_argument("code", help="a rule code (PC101) or name (cuda-tensor-placement)")
    return parser


def _version() -> str:
    from portcheck.knowledge import load_releases

    return f"portcheck {__version__} (Neuron SDK data to {next(reversed(load_releases()))})"


def _sdk_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sdk", metavar="X.Y",
                        help="Neuron SDK release whose facts apply (default: the newest portcheck knows; "
                             "`portcheck sdk` lists them)")


def _count(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 7e9, not {text!r}") from None
    if not value >= 1 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
    if value > COUNT_LIMIT:  # 1.7e308 parameters overflowed the arithmetic
        raise argparse.ArgumentTypeError(f"expected a number up to {COUNT_LIMIT:.0e}, not {text!r}")
    return int(value)


COUNT_LIMIT = 1e15


def _amount(text: str) -> float:
    """A positive, finite number: a price or a throughput."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, not {text!r}")
    return value


def _target_and_selection(parser: argparse.ArgumentParser) -> None:
    """The target, rule selection and configuration options `trace` and `review` share."""
    parser.add_argument("--target", choices=("trn2", "inf2", "trn1"), help="chip (default trn2)")
    parser.add_argument("--stack", choices=("native", "xla"), help="PyTorch stack")
    _sdk_argument(parser)
    parser.add_argument("--select", type=_codes, metavar="CODES", help="only these codes")
    parser.add_argument("--extend-select", type=_codes, default=[], metavar="CODES")
    parser.add_argument("--ignore", type=_codes, default=[], metavar="CODES")
    parser.add_argument("--config", metavar="FILE", help="use this portcheck.toml / pyproject.toml")
    parser.add_argument("--fail-level", choices=("error", "warning", "info"))
    parser.add_argument("--isolated", action="store_true", help="ignore every configuration file")


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    """How `trace` and `advise` name a model and run its code."""
    parser.add_argument("model", nargs="?", default="", metavar="MODEL",
                       help="path/to/file.py:build or package.module:build; the callable returns a model, or "
                            "(model, example_inputs) with a tuple of positional or a dict of keyword inputs")
    parser.add_argument("--hf-config", metavar="DIR_OR_JSON",
                       help="build a transformers model with random weights from a local config.json (no hub)")
    parser.add_argument("--hf-option", action="append", default=[], metavar="KEY=VALUE",
                       help="keyword for the transformers model, e.g. attn_implementation=eager (repeatable)")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=DTYPE[D0,D1,...]",
                       help="an example input to make up, e.g. input_ids=int64[1,128] (repeatable)")
    parser.add_argument("--dynamic", action="append", default=[], metavar="NAME:AXIS",
                       help="an input axis whose size varies, e.g. input_ids:1 (default: found from the inputs)")
    parser.add_argument("--device", choices=("auto", "cpu", "meta"), default="auto",
                       help="build on the meta device (no weights in memory); auto: when they would not fit")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                       help="stop the model's process after this long (default 300)")
    parser.add_argument("--memory-limit", metavar="SIZE",
                       help="cap the model's process memory, e.g. 8G (default: 3/4 of the machine)")


def _color(stream: TextIO, to_file: bool) -> bool:
    if to_file or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


def _shown_diff(diff: str) -> str:
    """A diff for a terminal has the code's control characters escaped (an ESC in a string would drive the
    terminal); piped, it is the exact diff a `patch` needs."""
    if not sys.stdout.isatty():
        return diff
    return "\n".join(printable(line) for line in diff.split("\n"))


def _say_error(message: str) -> None:
    # escaped: the message may quote a model's exception or output, a config's model_type, a file name
    sys.stderr.write(f"portcheck: error: {printable(message)}\n")


def exit_code(result: ScanResult, fail_level: Severity, *, exit_zero: bool = False, fixes: str = "") -> int:
    """The one exit-code rule (ruff's): 0 with --exit-zero; else 1 when a file could not be analysed, or when
    findings at or above the fail level remain. `fixes`: "diff" (1 when there is a diff), "fix-only" (the
    remaining findings do not count)."""
    if exit_zero:
        return EXIT_OK
    if result.errors:
        return EXIT_FINDINGS
    if fixes == "diff":
        return EXIT_FINDINGS if result.diff else EXIT_OK
    if fixes == "fix-only":
        return EXIT_OK
    return EXIT_FINDINGS if any(f.severity >= fail_level for f in result.findings) else EXIT_OK


def _scan(args: argparse.Namespace) -> int:
    from portcheck.commands import ScanOptions, fix_stdin, scan

    cwd = Path.cwd()
    paths = args.paths or ["."]
    reads_stdin = paths == ["-"]
    if "-" in paths and not reads_stdin:
        raise ConfigError("'-' (stdin) cannot be combined with other paths")
    start = cwd / (args.stdin_filename or ".") if reads_stdin else _common_parent(paths, cwd)
    settings = _settings(args, start if start.is_dir() else start.parent, cwd, Layer(
        target=args.target, stack=args.stack, sdk=args.sdk, select=args.select, extend_select=args.extend_select,
        ignore=args.ignore, exclude=args.exclude, extend_exclude=args.extend_exclude,
        force_exclude=args.force_exclude, respect_gitignore=args.respect_gitignore, tests=args.tests,
        fail_level=args.fail_level, format=args.format, max_file_size=args.max_file_size,
    ))
    fixing = None
    if args.fix or args.fix_only or args.diff:
        from portcheck.static.scan import Fixing

        fixing = Fixing(write=not args.diff, unsafe=args.unsafe_fixes, diff=args.diff)
    fix_mode = "diff" if args.diff else "fix-only" if args.fix_only else ""
    if reads_stdin and sys.stdin is None:
        raise ConfigError("'-' reads stdin, but stdin is closed")
    data = sys.stdin.buffer.read() if reads_stdin else None
    if data is not None and fixing is not None:
        fixed = fix_stdin(data, args.stdin_filename, settings, cwd, fixing)
        if fixed.untouched is not None and not fixing.diff:
            sys.stdout.flush()
            sys.stdout.buffer.write(fixed.untouched)
        else:
            sys.stdout.write(_shown_diff(fixed.diff) if fixing.diff else fixed.text)
        sys.stdout.flush()
        if not args.fix_only and not fixing.diff:
            _render(fixed.result, "concise", sys.stderr, color=False, lines_for=lambda _: [])
        elif fixed.result.errors:  # --diff, --fix-only: say why there is no diff
            for e in fixed.result.errors:
                sys.stderr.write(printable(f"{e.path}{f':{e.line}' if e.line else ''}: error: {e.message}") + "\n")
        _fix_summary(fixed.result, args.show_fixes, sys.stderr)
        fixed.result.diff = fixed.diff if fixed.changed else ""
        return exit_code(fixed.result, settings.fail_level, exit_zero=args.exit_zero, fixes=fix_mode)
    from portcheck.report.trace import file_progress

    with file_progress(settings.format if not args.statistics else "concise") as progress:
        outcome = scan(ScanOptions(
            settings, cwd, tuple(paths), stdin=data, stdin_filename=args.stdin_filename, fixing=fixing,
            jobs=args.jobs, cache_dir=args.cache_dir, use_cache=not args.no_cache,
            baseline=Path(args.baseline) if args.baseline and not args.write_baseline else None, progress=progress))
    for warning in outcome.warnings:
        sys.stderr.write(f"portcheck: warning: {printable(warning)}\n")
    result = outcome.result
    if fixing is not None and (fixing.diff or args.fix_only):
        return _report_fixes(result, args, fixing, settings.fail_level, fix_mode)
    if args.write_baseline:
        from portcheck.baseline import write_baseline

        write_baseline(Path(args.write_baseline), result.findings)
        sys.stderr.write(f"portcheck: wrote {len(result.findings)} finding(s) to the baseline {args.write_baseline}\n")
        return EXIT_OK
    _output(result, settings.format, args.output, statistics=args.statistics, lines_for=outcome.lines_for)
    if fixing is not None and not args.output and settings.format in ("concise", "full"):
        _fix_summary(result, args.show_fixes, sys.stdout)
    return exit_code(result, settings.fail_level, exit_zero=args.exit_zero)


def _settings(args: argparse.Namespace, start: Path, cwd: Path, options: Layer, command: str = "scan") -> Settings:
    """The configuration file (--config, else the nearest one above `start`, none with --isolated) under the
    command line's options."""
    config_path: Path | None
    if args.config:
        config_path = Path(args.config)
        if not config_path.is_file():
            raise ConfigError(f"{args.config}: no such configuration file")
    else:
        config_path = None if args.isolated else find_config(start)
    layers = [read_config(config_path)] if config_path else []
    layers.append(options)
    for selector in [*(args.select or []), *args.extend_select, *args.ignore]:
        check_selector(selector, "command line")
    root = config_path.parent.resolve() if config_path else cwd
    return resolve(layers, root, config_path, command)


def _render(result: ScanResult, output_format: str, stream: TextIO, *, color: bool, lines_for: LinesFor,
            statistics: bool = False) -> None:
    from portcheck.report import render

    render(result, output_format, stream, color=color, statistics=statistics, lines_for=lines_for)


def _output(result: ScanResult, output_format: str, output: str | None, *, statistics: bool = False,
            lines_for: LinesFor, summary: Callable[[ScanResult, TextIO], None] | None = None) -> None:
    """The report on stdout (coloured on a terminal), or written whole to `output`."""
    if output:
        buffer = io.StringIO()
        _render(result, output_format, buffer, color=False, statistics=statistics, lines_for=lines_for)
        write_text(Path(output), buffer.getvalue())
        return
    _render(result, output_format, sys.stdout, color=_color(sys.stdout, False), statistics=statistics,
            lines_for=lines_for)
    if summary is not None:
        summary(result, sys.stdout)
    sys.stdout.flush()


def _write_fixed(result: ScanResult, stream: TextIO, verb: str = "fixed") -> None:
    """--show-fixes: one line a fix applied (or, with --diff, that would be)."""
    for f in result.fixed:
        stream.write(f"{verb} {f.path}:{f.line}:{f.column}: {f.code} {f.fix.title if f.fix else ''}\n")


def _fix_summary(result: ScanResult, show_fixes: bool, stream: TextIO) -> None:
    if show_fixes:
        _write_fixed(result, stream)
    fixable = sum(1 for f in result.findings if f.fix is not None and f.fix.applicability == "unsafe")
    line = f"{len(result.fixed)} fixed, {len(result.findings)} remaining"
    if fixable:
        line += f" ({fixable} with an unsafe fix: --unsafe-fixes)"
    stream.write(line + ".\n")


def _report_fixes(result: ScanResult, args: argparse.Namespace, fixing: Fixing, fail_level: Severity,
                  fix_mode: str) -> int:
    """--diff: the diff on stdout; --fix-only: what was fixed. Either way a summary, and no finding list."""
    if fixing.diff:
        sys.stdout.write(_shown_diff(result.diff))
        sys.stdout.flush()
        stream = sys.stderr
    else:
        stream = sys.stdout
    for e in result.errors:
        stream.write(f"{e.path}{f':{e.line}' if e.line else ''}: error: {e.message}\n")
    if args.show_fixes:
        _write_fixed(result, stream, "would fix" if fixing.diff else "fixed")
    stream.write(f"{len(result.fixed)} {'to fix' if fixing.diff else 'fixed'}, {len(result.findings)} remaining.\n")
    return exit_code(result, fail_level, exit_zero=args.exit_zero, fixes=fix_mode)


def _common_parent(paths: list[str], cwd: Path) -> Path:
    resolved = [Path(os.path.realpath(cwd / p)) for p in paths]  # a symlink loop resolves to itself, no error
    try:
        common = Path(os.path.commonpath([str(p) for p in resolved]))
    except ValueError:
        return cwd
    return common


def _size(text: str) -> int:
    """--memory-limit: a positive, finite size up to 1 PiB (0, a negative number, inf or 1e30G would remove the cap
    or overflow)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (cleaned[:-1], units[cleaned[-1]]) if cleaned and cleaned[-1] in units else (cleaned, 1)
    try:
        value = float(number) * unit
    except ValueError:
        raise ConfigError(f"--memory-limit {text!r}: expected a size such as 8G or 512M") from None
    if not 2**20 <= value <= 2**50:
        raise ConfigError(f"--memory-limit {text!r}: expected a size from 1M to 1024T, such as 8G")
    return int(value)


def _trace(args: argparse.Namespace) -> int:
    from portcheck.commands import run_model, trace
    from portcheck.report.trace import step_progress, write_trace_summary

    cwd = Path.cwd()
    request = _trace_request(args, require_model=True)
    settings = _settings(args, cwd, cwd, Layer(
        target=args.target, stack=args.stack, sdk=args.sdk, select=args.select, extend_select=args.extend_select,
        ignore=args.ignore, fail_level=args.fail_level, format=args.format), command="trace")
    with step_progress(settings.format) as step:
        traced = run_model(request, cwd, args.timeout, args.model or args.hf_config, step)
        if step is not None:
            step("checking its ops against Neuron" + ("" if args.no_static else " and reading the code that ran"))
        result = trace(traced, settings, cwd, static=not args.no_static)
    summary = write_trace_summary if settings.format in ("concise", "full") else None
    _output(result, settings.format, args.output, lines_for=source_lines(cwd), summary=summary)
    return exit_code(result, settings.fail_level, exit_zero=args.exit_zero)


def _trace_request(args: argparse.Namespace, require_model: bool) -> TraceRequest:
    """The child's request from `trace`'s or `advise`'s model arguments."""
    from portcheck.dynamic.request import DynamicAxis, InputSpec, TraceRequest
    from portcheck.dynamic.runner import default_memory_limit

    if args.model and args.hf_config:
        raise ConfigError("give a model (path/to/file.py:build or package.module:build) or --hf-config, not both")
    if require_model and not (args.model or args.hf_config):
        raise ConfigError(f"{args.command} needs a model (path/to/file.py:build or package.module:build) or "
                          "--hf-config")
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        raise ConfigError(f"--timeout must be more than 0, not {args.timeout:g}")
    options = dict(_key_value(o) for o in args.hf_option)
    return TraceRequest(
        model=args.model, hf_config=args.hf_config or "",
        inputs=tuple(InputSpec.parse(i) for i in args.input),
        dynamic=tuple(DynamicAxis.parse(d) for d in args.dynamic), device=args.device,
        memory_limit=_size(args.memory_limit) if args.memory_limit else default_memory_limit(),
        hf_options=options, neuron_analyze=getattr(args, "neuron_analyze", False),
        shapes=not getattr(args, "no_shapes", False))


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise ConfigError(f"--hf-option {text!r}: expected key=value, e.g. attn_implementation=eager")
    return key.strip(), value.strip()


def _advise(args: argparse.Namespace) -> int:
    from portcheck.advise.cost import CostOptions, check
    from portcheck.commands import AdviseOptions, advise, advise_refusal, run_model
    from portcheck.report.advise import write_plan
    from portcheck.report.trace import step_progress

    cwd = Path.cwd()
    numbers = {"params": args.params, "layers": args.layers, "hidden": args.hidden, "heads": args.heads,
               "kv_heads": args.kv_heads, "head_dim": args.head_dim, "intermediate": args.intermediate,
               "max_positions": args.max_positions, "kind": args.kind}
    spec = bool(args.model or args.hf_config)
    if not spec and not args.params:
        raise ConfigError("advise needs a model (path/to/file.py:build, package.module:build, --hf-config) or "
                          "its size (--params, with --layers --hidden --heads for a transformer)")
    if args.emit_script and not spec:
        raise ConfigError("--emit-script needs a model to compile (path/to/file.py:build or --hf-config), not "
                          "only numbers")
    if args.compile_only and not args.emit_script:
        raise ConfigError("--compile-only shapes the bring-up script: give --emit-script FILE too")
    request = _trace_request(args, require_model=False) if spec else None
    settings = _settings(args, cwd, cwd, Layer(target=args.target, stack=args.stack, sdk=args.sdk,
                                                     fail_level=args.fail_level),
                         command="advise")
    if refusal := advise_refusal(settings, args.task):
        raise ConfigError(refusal)  # before the model is built: the plan could not be made
    check(CostOptions(args.price_per_hour or 0.0, (), args.tokens_per_second or 0.0, args.baseline_gpu or "",
                      args.baseline_tokens_per_second or 0.0, args.baseline_price_per_hour or 0.0), args.task)
    with step_progress(args.format) as step:
        traced = run_model(request, cwd, args.timeout, args.model or args.hf_config, step) if request else None
        if step is not None:
            step(f"planning for {settings.chip}")
        outcome = advise(AdviseOptions(settings, cwd, numbers, args.task, args.batch, args.seq_len or 0, args.dtype,
                                       args.tp or 0, args.prefer, args.lnc or 0, script=bool(args.emit_script),
                                       dp=args.dp, attention_dp=args.attention_dp, context_batch=args.context_batch,
                                       kv_dtype=args.kv_cache_dtype or "", compile_only=args.compile_only,
                                       cost=CostOptions(args.price_per_hour or 0.0, settings.prices,
                                                        args.tokens_per_second or 0.0, args.baseline_gpu or "",
                                                        args.baseline_tokens_per_second or 0.0,
                                                        args.baseline_price_per_hour or 0.0)),
                         traced, request)
    if outcome.script is not None:
        write_text(Path(args.emit_script), outcome.script, executable=True)
    buffer = io.StringIO()
    color = not args.output and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    write_plan(outcome.plan, outcome.result, args.format, buffer, color=color)
    if args.output:
        write_text(Path(args.output), buffer.getvalue())
    else:
        sys.stdout.write(buffer.getvalue())
    if args.emit_script and args.format != "json":
        sys.stderr.write(f"bring-up script: {args.emit_script}\n")
    return exit_code(outcome.result, settings.fail_level, exit_zero=args.exit_zero)


def _review(args: argparse.Namespace) -> int:
    from portcheck.commands import review
    from portcheck.review import destination, post_review

    cwd = Path.cwd()
    output_format = args.format or "concise"
    settings = _settings(args, cwd, cwd, Layer(
        target=args.target, stack=args.stack, sdk=args.sdk, select=args.select, extend_select=args.extend_select,
        ignore=args.ignore, fail_level=args.fail_level))
    if args.post and not args.head:
        raise ConfigError("--post needs --head: review comments must sit on a commit of the pull request")
    where = destination(args.pr) if args.post else None  # a missing token or PR fails before any work
    outcome = review(args.base, args.head, settings, cwd)
    result, change, lines_for = outcome.result, outcome.change, outcome.lines_for

    buffer = io.StringIO()
    if output_format in ("github-review", "markdown"):
        from portcheck.report.review import write_github_review, write_markdown

        if output_format == "github-review":
            write_github_review(result, buffer, change, lines_for)
        else:
            write_markdown(result, buffer)
    else:
        _render(result, output_format, buffer, color=not args.output and _color(sys.stdout, False),
                lines_for=lines_for)
    if args.output:
        write_text(Path(args.output), buffer.getvalue())
    else:
        sys.stdout.write(buffer.getvalue())
        sys.stdout.flush()
    if where is not None:
        from portcheck.report.review import review_body

        if result.findings:
            url = post_review(review_body(result, change, lines_for), where)
            sys.stderr.write(f"portcheck: posted a review with {len(result.findings)} comment(s): {url}\n")
        else:
            sys.stderr.write("portcheck: nothing on the changed lines; no review posted\n")
    return exit_code(result, settings.fail_level, exit_zero=args.exit_zero)


def _report(args: argparse.Namespace) -> int:
    from portcheck.commands import ScanOptions, report_page, scan
    from portcheck.report.trace import file_progress, step_progress

    cwd = Path.cwd()
    paths = args.paths or ["."]
    if "-" in paths:
        raise ConfigError("report reads files, not stdin ('-')")
    start = _common_parent(paths, cwd)
    results = []
    lines_for: LinesFor = lambda _: []  # noqa: E731  # replaced by the first scan's
    for chip in dict.fromkeys(args.targets or ["trn2", "inf2"]):
        settings = _settings(args, start if start.is_dir() else start.parent, cwd, Layer(
            target=chip, sdk=args.sdk, select=args.select, extend_select=args.extend_select, ignore=args.ignore,
            exclude=args.exclude, extend_exclude=args.extend_exclude, respect_gitignore=args.respect_gitignore))
        with file_progress(args.format, f"scanning for {chip}") as progress:
            outcome = scan(ScanOptions(settings, cwd, tuple(paths), jobs=args.jobs, use_cache=not args.no_cache,
                                       progress=progress))
        for warning in outcome.warnings:
            sys.stderr.write(f"portcheck: warning: {printable(warning)}\n")
        results.append(outcome.result)
        lines_for = outcome.lines_for
    models = []
    if args.models:
        from portcheck.commands import report_model
        from portcheck.dynamic.request import TraceRequest
        from portcheck.dynamic.runner import default_memory_limit

        if not math.isfinite(args.timeout) or args.timeout <= 0:
            raise ConfigError(f"--timeout must be more than 0, not {args.timeout:g}")
        targets = [_settings(args, cwd, cwd, Layer(target=chip, sdk=args.sdk, select=args.select,
                                                   extend_select=args.extend_select, ignore=args.ignore),
                             command="trace") for chip in dict.fromkeys(args.targets or ["trn2", "inf2"])]
        with step_progress(args.format) as step:
            for kind, spec in args.models:
                request = TraceRequest(model=spec if kind == "model" else "", hf_config=spec if kind == "hf" else "",
                                       device=args.device, memory_limit=default_memory_limit())
                run = report_model(request, spec, targets, cwd, args.timeout, step)
                if run.error:
                    sys.stderr.write(f"portcheck: warning: {printable(spec)}: {printable(run.error)}\n")
                models.append(run)
    text = report_page(results, paths, lines_for, Path(args.baseline) if args.baseline else None, args.format,
                       models)
    if args.output:
        write_text(Path(args.output), text)
        sys.stderr.write(f"portcheck: wrote the report to {printable(args.output)}\n")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return EXIT_OK


def _rules(args: argparse.Namespace) -> int:
    from portcheck.report.ruledoc import write_rules

    write_rules(sys.stdout, as_json=args.format == "json", rich_table=_color(sys.stdout, False))
    return EXIT_OK


def _sdk(args: argparse.Namespace) -> int:
    from portcheck.report.ruledoc import write_releases

    write_releases(sys.stdout)
    return EXIT_OK


def _rule(args: argparse.Namespace) -> int:
    from portcheck.knowledge import load
    from portcheck.report.ruledoc import rule_doc

    knowledge = load()
    wanted = args.code.strip()
    info = knowledge.rules.get(wanted.upper()) or knowledge.rule_by_name(wanted)
    if info is None:
        if wanted.upper() in knowledge.retired:
            raise ConfigError(f"{wanted.upper()} is retired: {knowledge.retired[wanted.upper()]}")
        vocabulary = [*knowledge.rules, *(r.name for r in knowledge.rules.values())]
        hint = difflib.get_close_matches(wanted, vocabulary, n=3)
        raise ConfigError(f"unknown rule '{wanted}'" + (f"; did you mean {' or '.join(hint)}?" if hint else ""))
    sys.stdout.write(rule_doc(info))
    return EXIT_OK


def _standard_streams() -> None:
    """A closed stdout or stderr (`>&-`) writes nowhere instead of failing; text that cannot be encoded (the
    undecodable bytes of a file name) is written as escapes, never an error."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115  # lives as long as sys.stdout
        elif isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    _standard_streams()
    parser = _parser()
    given = sys.argv[1:] if argv is None else argv
    # A file named like an option (`--output=victim.py`, committed and handed over by pre-commit after other files)
    # is never taken as one: a name before `--` that starts with '-' and exists here is refused.
    for text in given[:given.index("--")] if "--" in given else given:
        if text.startswith("-") and text != "-" and os.path.lexists(text):
            _say_error(f"{text!r} is a file here, not an option: put '--' before file names that start with '-'")
            return EXIT_ERROR
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_ERROR
    handler = {"scan": _scan, "trace": _trace, "advise": _advise, "review": _review, "rules": _rules,
               "rule": _rule, "sdk": _sdk, "report": _report}[args.command]
    try:
        return handler(args)
    except UserError as exc:
        _say_error(str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        _say_error("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`portcheck scan | head`): nothing left to say to it.
        sys.stderr.close()
        return EXIT_FINDINGS
    except Exception as exc:  # a bug in portcheck: one line, not a traceback (PORTCHECK_DEBUG=1 shows it)
        if os.environ.get("PORTCHECK_DEBUG"):
            raise
        _say_error(f"internal error: {type(exc).__name__}: {exc} (set PORTCHECK_DEBUG=1 for the traceback)")
        return EXIT_ERROR
