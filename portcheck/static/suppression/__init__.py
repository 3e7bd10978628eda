"""suppression (PC9xx): portcheck's own comments, `# noqa: PC101` and `# portcheck: ignore[PC101]`, and the rule
that reports one suppressing nothing."""

from portcheck.static.suppression.comments import Suppression, might_hold_suppression, parse_comment
from portcheck.static.suppression.unused import UnusedSuppression, apply_suppressions, file_result

__all__ = ["Suppression", "UnusedSuppression", "apply_suppressions", "file_result", "might_hold_suppression",
           "parse_comment"]
