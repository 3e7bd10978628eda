"""`python -P -m portcheck.server.child`: the server's analysis process (see analyst.py). It reads a document's
text and answers with what the static pass finds in it, as `portcheck scan` would (scan's cache included); it
runs none of the text. The server kills it when the text goes stale, and starts another."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, cast

from portcheck.findings import FileJob
from portcheck.server.analyst import receive, send


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """Each (job, cache directory) read is analysed and its FileResult written back, until the server closes the
    pipe (the server's own end: this process ends with it)."""
    from portcheck.cache import Cache
    from portcheck.static.scan import analysed_files

    caches: dict[Path, Cache] = {}
    while True:
        try:
            request = receive(requests)
        except EOFError:
            return
        job, directory = cast(tuple[FileJob, Path | None], request)  # the pair Analyst.analyse sends
        cache = caches.setdefault(directory, Cache(directory)) if directory is not None else None
        send(answers, analysed_files([job], 1, cache)[0])


def main() -> None:
    # the answers go on a copy of stdout; stdout itself becomes stderr (the server's log), so that nothing a
    # library prints can land among them
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import portcheck.static.engine  # noqa: F401  # the engine and the rules loaded before the first text

    serve(sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
