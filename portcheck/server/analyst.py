"""The process that analyses the server's documents, so that an analysis a newer text made stale stops at once:
its process is killed (nothing of it runs on to finish) and a fresh one starts for the next text. A cancel is a
`Token` the protocol's thread sets when a document changes; the analysis thread checks it between its steps, and
while a text is in the child a cancel kills the child. The child only reads the text it is sent (`child.py`);
it is started with `-P`, so nothing in the workspace is importable in it."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from portcheck.findings import FileError, FileJob, FileResult

HEADER = struct.Struct("!Q")  # each message: its length, then a pickle


class Cancelled(Exception):
    """The analysis was stopped: a newer text of its document (or its closing) made it stale."""


class Token:
    """Set once, from the protocol's thread, when the analysis it belongs to is stale; what to stop then is
    registered while a step is running (`stopping`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop: Callable[[], None] | None = None
        self._stopped = False
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            stop, self._stop = self._stop, None
            self._stopped = self._stopped or stop is not None
        if stop is not None:
            stop()

    def check(self) -> None:
        """Between two steps: raise Cancelled if the analysis is stale."""
        if self.cancelled:
            raise Cancelled

    @contextlib.contextmanager
    def stopping(self, stop: Callable[[], None]) -> Iterator[None]:
        """`stop` is what a cancel does while the block runs; if the cancel came already, `stop` runs at once.
        Leaving the block raises Cancelled if `stop` ran, whatever the block got."""
        with self._lock:
            self._stop, self._stopped = stop, False
            late = self.cancelled
        if late:
            self.cancel()
        try:
            yield
        finally:
            with self._lock:
                self._stop = None
                stopped = self._stopped
        if stopped:
            raise Cancelled


class Analyst:
    """The child process (one at a time), started ahead of the first text and again after each kill."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self.started = 0  # children started (the tests read it)

    def start(self) -> None:
        """Start the child now (it loads the engine and the rules while the editor opens its first file)."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                # the package importable from where this one came, as the trace's child has it (runner.py)
                package_parent = str(Path(__file__).resolve().parents[2])
                path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH", "")) if p)
                self._process = subprocess.Popen([sys.executable, "-P", "-m", "portcheck.server.child"],
                                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                 env={**os.environ, "PYTHONPATH": path})
                self.started += 1

    def analyse(self, job: FileJob, cache: Path | None, token: Token) -> FileResult:
        """The file's own result (scan's cache in `cache` answering where the text is what it saw); Cancelled
        when `token` is cancelled first or meanwhile."""
        token.check()  # stale already: nothing is sent
        self.start()
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        answer: object = None
        try:
            with token.stopping(lambda: self._kill(process)):
                try:
                    send(process.stdin, (job, cache))
                    answer = receive(process.stdout)
                except (OSError, EOFError, pickle.UnpicklingError, struct.error):
                    answer = None
        except Cancelled:
            self._replace(process)  # the next text's child loads while its debounce runs
            raise
        if isinstance(answer, FileResult):
            return answer
        returncode = self._replace(process)
        return FileResult(job.path, errors=(FileError(job.path, f"internal error: {_death(returncode)}"),))

    def _replace(self, process: subprocess.Popen[bytes]) -> int:
        """A child killed or dead: reaped, its pipes closed, and the next one started. Its exit status."""
        returncode = process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.start()
        return returncode

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            process.kill()

    def stop(self) -> None:
        with self._lock:
            if self._process is not None and self._process.stdin is not None:
                with contextlib.suppress(OSError):
                    self._process.stdin.close()  # the child ends at the end of its input
                self._process = None


def _death(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        with contextlib.suppress(ValueError):
            return f"the analysis process was killed by {signal.Signals(-returncode).name}"
    return f"the analysis process ended (status {returncode}) before answering"


def send(stream: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def receive(stream: IO[bytes]) -> object:
    """One message, or EOFError when the other side is gone."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError
    (size,) = HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)
