"""The command line: arguments -> options (arguments.py), one call into commands/, the result, the exit code."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from portcheck import arguments
from portcheck.atomic import write_text
from portcheck.commands.scan import LinesFor, source_lines
from portcheck.config import ConfigError, common_parent
from portcheck.errors import UserError
from portcheck.escape import printable, shown_diff, standard_streams
from portcheck.findings import ScanResult, Severity
from portcheck.report.fixes import write_fix_report, write_fix_summary

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _color(stream: TextIO, to_file: bool) -> bool:
    if to_file or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


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
    from portcheck.commands.scan import ScanOptions, fix_stdin, scan, show_files

    cwd = Path.cwd()
    paths = args.paths or ["."]
    reads_stdin = paths == ["-"]
    if "-" in paths and not reads_stdin:
        raise ConfigError("'-' (stdin) cannot be combined with other paths")
    start = cwd / (args.stdin_filename or ".") if reads_stdin else common_parent(paths, cwd)
    settings = arguments.settings(args, start if start.is_dir() else start.parent, cwd)
    if args.show_files:  # the files only, nothing read
        listing, warnings = show_files(paths, settings, cwd)
        _warn(warnings)
        _write(listing, args.output)
        return EXIT_OK
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
            sys.stdout.write(shown_diff(fixed.diff, sys.stdout.isatty()) if fixing.diff else fixed.text)
        sys.stdout.flush()
        if not args.fix_only and not fixing.diff:
            _render(fixed.result, "concise", sys.stderr, color=False, lines_for=lambda _: [])
        elif fixed.result.errors:  # --diff, --fix-only: say why there is no diff
            sys.stderr.writelines(printable(f"{e.path}{f':{e.line}' if e.line else ''}: error: {e.message}") + "\n"
                                  for e in fixed.result.errors)
        write_fix_summary(fixed.result, args.show_fixes, sys.stderr)
        fixed.result.diff = fixed.diff if fixed.changed else ""
        return exit_code(fixed.result, settings.fail_level, exit_zero=args.exit_zero, fixes=fix_mode)
    from portcheck.report.trace import file_progress

    with file_progress(settings.format if not args.statistics else "concise") as progress:
        outcome = scan(ScanOptions(
            settings, cwd, tuple(paths), stdin=data, stdin_filename=args.stdin_filename, fixing=fixing,
            jobs=args.jobs, cache_dir=args.cache_dir, use_cache=not args.no_cache,
            baseline=Path(args.baseline) if args.baseline and not args.write_baseline else None, progress=progress))
    _warn(outcome.warnings)
    result = outcome.result
    if fixing is not None and (fixing.diff or args.fix_only):
        if fixing.diff:
            _write(shown_diff(result.diff, sys.stdout.isatty()), None)
        write_fix_report(result, sys.stderr if fixing.diff else sys.stdout, args.show_fixes, fixing.diff)
        return exit_code(result, settings.fail_level, exit_zero=args.exit_zero, fixes=fix_mode)
    if args.write_baseline:
        from portcheck.baseline import write_baseline

        write_baseline(Path(args.write_baseline), result.findings)
        sys.stderr.write(f"portcheck: wrote {len(result.findings)} finding(s) to the baseline {args.write_baseline}\n")
        return EXIT_OK
    _output(result, settings.format, args.output, statistics=args.statistics, lines_for=outcome.lines_for)
    if fixing is not None and not args.output and settings.format in ("concise", "full"):
        write_fix_summary(result, args.show_fixes, sys.stdout)
    return exit_code(result, settings.fail_level, exit_zero=args.exit_zero)


def _warn(warnings: list[str]) -> None:
    sys.stderr.writelines(f"portcheck: warning: {printable(warning)}\n" for warning in warnings)


def _write(text: str, output: str | None) -> None:
    """A rendered report on stdout, or written whole to `output`."""
    if output:
        write_text(Path(output), text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


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


def _trace(args: argparse.Namespace) -> int:
    from portcheck.commands.trace import run_model, trace
    from portcheck.report.trace import step_progress, write_trace_summary

    cwd = Path.cwd()
    request = arguments.trace_request(args, require_model=True)
    settings = arguments.settings(args, cwd, cwd, "trace")
    with step_progress(settings.format) as step:
        traced = run_model(request, cwd, args.timeout, args.model or args.hf_config, step)
        if step is not None:
            step("checking its ops against Neuron" + ("" if args.no_static else " and reading the code that ran"))
        result = trace(traced, settings, cwd, static=not args.no_static)
    summary = write_trace_summary if settings.format in ("concise", "full") else None
    _output(result, settings.format, args.output, lines_for=source_lines(cwd), summary=summary)
    return exit_code(result, settings.fail_level, exit_zero=args.exit_zero)


def _advise(args: argparse.Namespace) -> int:
    from portcheck.commands.advise import advise_targets, comparison, target_list
    from portcheck.report.compare import write_plans
    from portcheck.report.trace import step_progress

    every = [arguments.advise_options(args, Path.cwd(), chip) for chip in target_list(args.target)]
    with step_progress(args.format) as step:
        outcomes = advise_targets(every, step)  # `--target trn2,trn3`: one plan per target, side by side
    if outcomes[0].script is not None:
        write_text(Path(args.emit_script), outcomes[0].script, executable=True)
    buffer = io.StringIO()
    color = not args.output and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    write_plans([(o.plan, o.result) for o in outcomes], comparison(outcomes), args.format, buffer, color=color)
    _write(buffer.getvalue(), args.output)
    if args.emit_script and args.format != "json":
        sys.stderr.write(f"bring-up script: {args.emit_script}\n")
    return max(exit_code(o.result, every[0].settings.fail_level, exit_zero=args.exit_zero) for o in outcomes)


def _review(args: argparse.Namespace) -> int:
    from portcheck.commands.review import review
    from portcheck.report.review import review_body, write_review
    from portcheck.review import destination, post_review

    cwd = Path.cwd()
    settings = arguments.settings(args, cwd, cwd)
    if args.post and not args.head:
        raise ConfigError("--post needs --head: review comments must sit on a commit of the pull request")
    where = destination(args.pr) if args.post else None  # a missing token or PR fails before any work
    outcome = review(args.base, args.head, settings, cwd)
    result, change, lines_for = outcome.result, outcome.change, outcome.lines_for
    buffer = io.StringIO()
    if args.format in ("github-review", "markdown"):
        write_review(result, args.format, buffer, change, lines_for)
    else:
        _render(result, args.format or "concise", buffer, color=not args.output and _color(sys.stdout, False),
                lines_for=lines_for)
    _write(buffer.getvalue(), args.output)
    if where is not None:
        if result.findings:
            url = post_review(review_body(result, change, lines_for), where)
            sys.stderr.write(f"portcheck: posted a review with {len(result.findings)} comment(s): {url}\n")
        else:
            sys.stderr.write("portcheck: nothing on the changed lines; no review posted\n")
    return exit_code(result, settings.fail_level, exit_zero=args.exit_zero)


def _report(args: argparse.Namespace) -> int:
    from portcheck.commands.report import ReportOptions, report
    from portcheck.report.trace import file_progress, step_progress

    cwd = Path.cwd()
    paths = args.paths or ["."]
    if "-" in paths:
        raise ConfigError("report reads files, not stdin ('-')")
    start = common_parent(paths, cwd)
    chips = dict.fromkeys(args.targets or arguments.REPORT_TARGETS)
    scans = tuple(arguments.settings(args, start if start.is_dir() else start.parent, cwd, target=c) for c in chips)
    models = arguments.model_requests(args)
    model_targets = tuple(arguments.settings(args, cwd, cwd, "trace", target=chip, exclude=None, extend_exclude=[],
                                             respect_gitignore=None) for chip in chips) if models else ()
    given = [Path(name) if name else None for name in (args.baseline, args.history)]
    outcome = report(ReportOptions(scans, cwd, tuple(paths), args.format, given[0], args.jobs, not args.no_cache,
                                   models, model_targets, args.timeout, given[1]),
                     lambda what: file_progress(args.format, what), lambda: step_progress(args.format))
    _warn(outcome.warnings)
    _write(outcome.text, args.output)
    outcome.record()  # the history, once the page is out
    if args.output:
        sys.stderr.write(f"portcheck: wrote the report to {printable(args.output)}\n")
    return EXIT_OK


def _server(args: argparse.Namespace) -> int:
    from portcheck.commands.server import serve

    serve()  # until the editor says exit
    return EXIT_OK


def _rules(args: argparse.Namespace) -> int:
    """`rules`, `rule CODE` and `sdk`: the catalog, one rule's documentation, the releases the data knows."""
    from portcheck.commands.rules import find_rule
    from portcheck.report.ruledoc import rule_doc, write_releases, write_rules, write_rules_markdown

    if args.command == "rules" and args.format == "markdown":
        write_rules_markdown(sys.stdout)
    elif args.command == "rules":
        write_rules(sys.stdout, as_json=args.format == "json", rich_table=_color(sys.stdout, False))
    elif args.command == "rule":
        sys.stdout.write(rule_doc(find_rule(args.code)))
    else:
        write_releases(sys.stdout)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    standard_streams()
    parser = arguments.parser()
    given = sys.argv[1:] if argv is None else argv
    # A file named like an option (`--output=victim.py`, handed over by pre-commit) is refused, never taken as one.
    for text in given[:given.index("--")] if "--" in given else given:
        if text.startswith("-") and text != "-" and os.path.lexists(text):
            _say_error(f"{text!r} is a file here, not an option: put '--' before file names that start with '-'")
            return EXIT_ERROR
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_ERROR
    handler = {"scan": _scan, "trace": _trace, "advise": _advise, "review": _review, "rules": _rules,
               "rule": _rules, "sdk": _rules, "report": _report, "server": _server}[args.command]
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
