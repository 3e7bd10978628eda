"""Errors a user can act on. Each is printed as one line (`portcheck: error: ...`) with exit code 2; anything else
that escapes a command is a bug of portcheck's."""

from __future__ import annotations


class UserError(Exception):
    """What was wrong, where, and what to do, in one line."""


class GitError(UserError):
    """git is missing, or a git command failed (`portcheck review`)."""


class PostError(UserError):
    """A review could not be posted to GitHub."""
