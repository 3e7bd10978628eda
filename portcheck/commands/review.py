"""`portcheck review`: the findings on the lines a change adds or modifies."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from portcheck.commands.scan import LinesFor, last_file_kept
from portcheck.config import Settings
from portcheck.findings import ScanResult

if TYPE_CHECKING:
    from portcheck.review import Change


@dataclass
class ReviewOutcome:
    result: ScanResult
    change: Change
    lines_for: LinesFor


def review(base: str, head: str | None, settings: Settings, cwd: Path) -> ReviewOutcome:
    """The findings on the lines the change from `base` to `head` (or the working tree) adds or modifies."""
    import functools

    from portcheck.review import changed_lines, lines_at_head
    from portcheck.review import review as review_change

    change = changed_lines(base, head, cwd)
    lines_for = last_file_kept(functools.partial(lines_at_head, change))
    return ReviewOutcome(review_change(change, settings), change, lines_for)
