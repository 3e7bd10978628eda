"""The command line's arguments: every command's parser, the types that check a value as it is parsed, and the
options they make (settings, trace request, advise options) for cli.py to hand the commands (portcheck/commands/)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from portcheck import __version__
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
from portcheck.escape import OneLineParser
from portcheck.knowledge import load
from portcheck.knowledge.serving import KINDS

if TYPE_CHECKING:
    from portcheck.commands.advise import AdviseOptions
    from portcheck.dynamic.request import TraceRequest

REPORT_TARGETS = ("trn2", "inf2")  # `report` without --target: the two chips a port usually weighs


def _codes(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def parser() -> argparse.ArgumentParser:
    """Every command's arguments. The chips and stacks to choose from are the data's (rules/targets.toml)."""
    knowledge = load()
    chips, stacks = tuple(knowledge.chips), tuple(knowledge.stacks)
    parser = OneLineParser(
        prog="portcheck",
        description="Find what breaks when a PyTorch model moves from NVIDIA GPUs to AWS Trainium2 / Inferentia2.",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    scan = commands.add_parser("scan", help="statically check Python source for Neuron porting problems")
    scan.add_argument("paths", nargs="*", metavar="PATH", help="files or directories ('-' reads stdin); default: .")
    scan.add_argument("--target", choices=chips, help="chip to port to (default trn2)")
    scan.add_argument("--stack", choices=stacks, help="PyTorch stack (default: trn2 native, else xla)")
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
    scan.add_argument("--respect-gitignore", action=argparse.BooleanOptionalAction, help="skip files git ignores")
    scan.add_argument("--stdin-filename", metavar="PATH", help="the name to report for '-' (stdin)")
    scan.add_argument("--fail-level", choices=("error", "warning", "info"),
                      help="lowest severity that makes the exit code 1 (default info)")
    scan.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    scan.add_argument("--jobs", "-j", type=int, metavar="N", help="processes to analyse files with (default: cores)")
    scan.add_argument("--no-cache", action="store_true", help="neither read nor write the results cache")
    scan.add_argument("--max-file-size", type=float, metavar="MB", help="report larger files unanalysed (default 32)")
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
    scan.add_argument("--show-files", action="store_true", help="list the files a scan reads, and those it leaves out")

    trace = commands.add_parser(
        "trace", help="build the model, capture its ATen graph and check it against Neuron (needs torch)")
    _model_arguments(trace)
    trace.add_argument("--no-shapes", action="store_true", help="skip the dynamic batch / sequence export")
    trace.add_argument("--no-static", action="store_true",
                       help="report graph evidence only, without the static pass over the model's files")
    trace.add_argument("--neuron-analyze", action="store_true",
                       help="also run torch_neuronx.analyze (a Neuron host with torch-neuronx only)")
    trace.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), help="trace in this dtype (default: "
                       "the config's, else bfloat16 for a decoder LLM as NxD Inference serves it, else as built)")
    trace.add_argument("--format", choices=FORMATS, help="output format (default concise)")
    _target_and_selection(trace, chips, stacks)
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
    numbers.add_argument("--kind", choices=KINDS, help="the model's kind (default: decoder with --layers/--heads)")
    advise.add_argument("--target", metavar="CHIP[,CHIP]", help="chip (default trn2); trn2,trn3: side by side")
    advise.add_argument("--stack", choices=stacks, help="PyTorch stack (default: the chip's)")
    _sdk_argument(advise)
    advise.add_argument("--task", choices=("inference", "training"), default="inference")
    advise.add_argument("--runner", choices=("auto", "generate", "pooling"), default="auto",
                        help="vLLM's runner; pooling: an embedding model (auto: its checkpoint's files say which)")
    advise.add_argument("--batch", type=_positive, default=1, metavar="N", help="batch size (default 1)")
    advise.add_argument("--seq-len", type=_positive, metavar="N",
                        help="longest sequence to serve (default: the model's limit, at most 4096)")
    advise.add_argument("--dtype", choices=("bf16", "fp16", "fp32", "fp8", "mxfp4", "mxfp8"), default="bf16",
                        help="weights' dtype (default bf16; mxfp4/mxfp8: native on trn3, bf16 elsewhere)")
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
    _target_and_selection(review, chips, stacks)
    review.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")

    report = commands.add_parser(
        "report", help="one page for a team deciding and tracking a port: every target side by side (HTML or markdown)")
    report.add_argument("paths", nargs="*", metavar="PATH", help="files or directories; default: .")
    report.add_argument("--target", action="append", choices=chips, dest="targets",
                        help="a target to report (repeat it for several; default: trn2 and inf2)")
    _sdk_argument(report)
    report.add_argument("--format", choices=("html", "markdown"), default="html",
                        help="html (default: one self-contained file) or markdown (a PR comment, a step summary)")
    report.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    report.add_argument("--history", metavar="FILE", help="append this run's counts to FILE (JSON lines) and draw "
                        "the trend of every run it holds")
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
    rules.add_argument("--format", choices=("table", "json", "markdown"), default="table",
                       help="table (default), json, or markdown (the table in README.md)")
    rule = commands.add_parser("rule", help="show one rule's documentation")
    rule.add_argument("code", help="a rule code (PC101) or name (cuda-tensor-placement)")
    commands.add_parser("server", help="run the language server on stdio (editors; needs the `server` extra)")
    return parser


def _version() -> str:
    from portcheck.knowledge import load_releases

    return f"portcheck {__version__} (Neuron SDK data to {next(reversed(load_releases()))})"


def _sdk_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sdk", metavar="X.Y", help="Neuron SDK release whose facts apply (default: the newest "
                        "portcheck knows; `portcheck sdk` lists them)")


COUNT_LIMIT = 1e15  # 1.7e308 parameters overflowed the plan's arithmetic


def _count(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 7e9, not {text!r}") from None
    if not value >= 1 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
    if value > COUNT_LIMIT:
        raise argparse.ArgumentTypeError(f"expected a number up to {COUNT_LIMIT:.0e}, not {text!r}")
    return int(value)


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


def _target_and_selection(parser: argparse.ArgumentParser, chips: tuple[str, ...], stacks: tuple[str, ...]) -> None:
    """The target, rule selection and configuration options `trace` and `review` share."""
    parser.add_argument("--target", choices=chips, help="chip (default trn2)")
    parser.add_argument("--stack", choices=stacks, help="PyTorch stack")
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


def check_timeout(seconds: float) -> None:
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"--timeout must be more than 0, not {seconds:g}")


# The options a command line can give the configuration (config.Layer), by their argparse names.
_LAYER_KEYS = ("target", "stack", "sdk", "select", "extend_select", "ignore", "exclude", "extend_exclude",
               "force_exclude", "respect_gitignore", "tests", "fail_level", "format", "max_file_size")


def settings(args: argparse.Namespace, start: Path, cwd: Path, command: str = "scan", **given: object) -> Settings:
    """The configuration file (--config, else the nearest one above `start`, none with --isolated) under the
    command line's options: those the command has, and `given` in their place (only scan and trace pass `format`)."""
    options = {key: getattr(args, key) for key in _LAYER_KEYS if hasattr(args, key)}
    if args.command not in ("scan", "trace"):
        options.pop("format", None)
    layer = Layer(**{**options, **given})
    config_path: Path | None
    if args.config:
        config_path = Path(args.config)
        if not config_path.is_file():
            raise ConfigError(f"{args.config}: no such configuration file")
    else:
        config_path = None if args.isolated else find_config(start)
    layers = [read_config(config_path)] if config_path else []
    layers.append(layer)
    for selector in [*(layer.select or []), *layer.extend_select, *layer.ignore]:
        check_selector(selector, "command line")
    root = config_path.parent.resolve() if config_path else cwd
    return resolve(layers, root, config_path, command)


def trace_request(args: argparse.Namespace, require_model: bool) -> TraceRequest:
    """The child's request from `trace`'s or `advise`'s model arguments."""
    from portcheck.dynamic.request import DynamicAxis, InputSpec, TraceRequest, hf_option, memory_size
    from portcheck.dynamic.runner import default_memory_limit

    if args.model and args.hf_config:
        raise ConfigError("give a model (path/to/file.py:build or package.module:build) or --hf-config, not both")
    if require_model and not (args.model or args.hf_config):
        raise ConfigError(f"{args.command} needs a model (path/to/file.py:build or package.module:build) or "
                          "--hf-config")
    check_timeout(args.timeout)
    return TraceRequest(
        model=args.model, hf_config=args.hf_config or "",
        inputs=tuple(InputSpec.parse(i) for i in args.input),
        dynamic=tuple(DynamicAxis.parse(d) for d in args.dynamic), device=args.device,
        memory_limit=memory_size(args.memory_limit) if args.memory_limit else default_memory_limit(),
        hf_options=dict(hf_option(o) for o in args.hf_option), neuron_analyze=getattr(args, "neuron_analyze", False),
        shapes=not getattr(args, "no_shapes", False),
        dtype=(getattr(args, "dtype", "") or "") if args.command == "trace" else "")


def model_requests(args: argparse.Namespace) -> tuple[tuple[TraceRequest, str], ...]:
    """`report --model SPEC` / `--hf-config DIR`: each model's request, with the spec as the command line named it."""
    from portcheck.dynamic.request import TraceRequest
    from portcheck.dynamic.runner import default_memory_limit

    if args.models:
        check_timeout(args.timeout)
    return tuple((TraceRequest(model=spec if kind == "model" else "", hf_config=spec if kind == "hf" else "",
                               device=args.device, memory_limit=default_memory_limit()), spec)
                 for kind, spec in args.models)


def advise_options(args: argparse.Namespace, cwd: Path, chip: str | None) -> AdviseOptions:
    """`advise`'s options for one target (`chip`; None: the config's): the settings, the model (its request, or
    numbers alone), the plan's options with its cost options, and what to write."""
    from portcheck.advise.cost import CostOptions
    from portcheck.advise.values import AdviseOptions as PlanOptions
    from portcheck.commands.advise import AdviseOptions

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
    request = trace_request(args, require_model=False) if spec else None
    found = settings(args, cwd, cwd, "advise", target=chip)
    target = found.target
    cost = CostOptions(args.price_per_hour or 0.0, found.prices, args.tokens_per_second or 0.0,
                       args.baseline_gpu or "", args.baseline_tokens_per_second or 0.0,
                       args.baseline_price_per_hour or 0.0)
    plan = PlanOptions(target.chip, target.stack, args.task, args.batch, args.seq_len or 0, args.dtype, args.tp or 0,
                       args.prefer, args.lnc or 0, target.sdk, args.dp, args.attention_dp, args.context_batch,
                       args.kv_cache_dtype or "", args.compile_only, cost, args.runner)
    return AdviseOptions(found, cwd, plan, numbers, request, args.model or args.hf_config, args.timeout,
                         script=bool(args.emit_script))
