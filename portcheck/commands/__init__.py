"""The application layer: `scan`, `fix_stdin`, `trace`, `advise`, `review`, `report` and `serve` take typed options
and return typed results, one module a command. No argument parsing and no printing here (cli.py does both); the files a
command is asked to change (`--fix`) are its work, the reports it renders are cli.py's."""

from portcheck.commands.advise import AdviseOptions, AdviseOutcome, advise, advise_refusal
from portcheck.commands.report import ReportOptions, ReportOutcome, report, report_model, report_page
from portcheck.commands.review import ReviewOutcome, review
from portcheck.commands.rules import find_rule
from portcheck.commands.scan import (
    LinesFor,
    Progress,
    ScanOptions,
    ScanOutcome,
    StdinFix,
    fix_stdin,
    scan,
    source_lines,
)
from portcheck.commands.server import serve
from portcheck.commands.trace import run_model, trace
from portcheck.report.models import ModelRun, ModelTarget

__all__ = [
    "AdviseOptions", "AdviseOutcome", "LinesFor", "ModelRun", "ModelTarget", "Progress", "ReportOptions",
    "ReportOutcome", "ReviewOutcome", "ScanOptions", "ScanOutcome", "StdinFix", "advise", "advise_refusal",
    "find_rule", "fix_stdin", "report", "report_model", "report_page", "review", "run_model", "scan", "serve",
    "source_lines", "trace",
]
