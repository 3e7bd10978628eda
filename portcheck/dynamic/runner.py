"""Parent side: run the child process that builds and traces the model, with a time limit and a memory cap,
and turn whatever happens to it (an exception, `sys.exit`, a hang, an OOM kill, a crash) into one line."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import secrets
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Protocol

from portcheck.dynamic.outcome import TraceOutcome
from portcheck.dynamic.request import TraceRequest
from portcheck.errors import UserError
from portcheck.escape import printable
from portcheck.findings import FileTooLarge, read_bounded


class TraceError(UserError):
    """The model could not be traced: one line saying why, for the user."""


def default_memory_limit() -> int:
    """Three quarters of the machine's memory: a runaway model is stopped before the machine swaps."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 * 3 // 4
    return 16 * 2**30


def run_child(request: TraceRequest, cwd: Path, timeout: float,
              step: Callable[[str], None] | None = None) -> TraceOutcome:
    """Build and trace the model in a child process; `step` is told each step the child starts."""
    if importlib.util.find_spec("torch") is None:
        raise TraceError("portcheck trace needs torch: pip install 'portcheck[trace]'")
    env = child_environment(os.environ)
    token = secrets.token_hex(16)
    env[_RUN_VARIABLE] = token  # inherited by everything the model starts: how the sweep finds what escaped
    env[PARENT_VARIABLE] = str(os.getpid())  # the child cleans up after itself if this process dies (child.py)
    with tempfile.TemporaryDirectory(prefix="portcheck-trace-") as scratch:
        request_path, result_path = (Path(scratch) / n for n in ("request.json", "result.json"))
        request_path.write_text(request.to_json(), encoding="utf-8")
        # What the model starts and leaves behind comes back to this process (a subreaper), however it hides: a
        # clean environment (no token) and its own session (not in the group) escaped the sweep otherwise.
        spared = _children() if _subreaper(True) else None
        process = start_child(request_path, result_path, cwd, env)
        output = _Output(process)
        output.start()
        # SIGTERM (a CI runner stopping the job) ends portcheck through the same path as a timeout: the model's
        # process group is killed and the temporary directory removed.
        previous = _on_terminate()
        try:
            returncode = _wait(process, timeout, Path(scratch) / "step", step)
        except subprocess.TimeoutExpired:
            _kill(process)
            raise TraceError(f"the model did not finish building and tracing within {timeout:g} s "
                             "(--timeout); it was stopped") from None
        except BaseException:
            _kill(process)
            raise
        finally:
            _restore(previous)
            sweep(token, spared)
            _subreaper(False)
            # a grandchild in its own session may hold the pipe open for ever: wait for the output a while only
            output.join(timeout=5)
        if output.flooded:
            raise TraceError(f"the model printed more than {OUTPUT_LIMIT // 2**20} MiB; it was stopped"
                             f"{output.last_line()}")
        if result_path.is_file():
            try:  # bounded, and from a regular file: the model's process could have written anything there
                text = read_bounded(str(result_path), RESULT_LIMIT).decode("utf-8")
                return TraceOutcome.from_json(json.loads(text))
            except FileTooLarge:
                raise TraceError(f"the trace process left a result over {RESULT_LIMIT // 2**20} MiB") from None
            except RecursionError:
                raise TraceError("the trace process left an unreadable result (nested too deeply)") from None
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise TraceError(f"the trace process left an unreadable result ({printable(str(exc))[:200]})") \
                    from None
        raise TraceError(_death(returncode, request, output.last_line()))


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The child's environment, but for the two variables of one run (its token and this process's id)."""
    package_parent = str(Path(__file__).resolve().parents[2])
    env = dict(environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1",
               # one hash seed: set orders, and so the shape solver's work the probe budgets, are the same each run
               PYTHONHASHSEED=env.get("PYTHONHASHSEED", "0"),
               PYTHONPATH=os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p))
    return env


class ChildProcess(Protocol):
    """What run_child needs of the child: a subprocess.Popen, or what a host's `start_child` gives instead."""

    pid: int
    stdout: IO[bytes] | None

    def wait(self, timeout: float | None = None) -> int: ...


def _start_fresh(request_path: Path, result_path: Path, cwd: Path, env: dict[str, str]) -> ChildProcess:
    """A fresh interpreter, in its own session, reading nothing, its output (stdout and stderr) on one pipe."""
    return subprocess.Popen(
        # -P: the working directory is not put on sys.path, so a json.py, torch.py or portcheck.py there is
        # never imported in place of the real one (the model's own module is loaded by path, see load.py)
        [sys.executable, "-P", "-m", "portcheck.dynamic.child", str(request_path), str(result_path)],
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True)


# How the child is started. A host that has already imported torch the way the child would (the test suite's
# pre-imported worker processes, tests/zygote.py) may put here a function that forks it instead; it must give the
# child what _start_fresh does, and fall back to _start_fresh where it cannot.
start_child: Callable[[Path, Path, Path, dict[str, str]], ChildProcess] = _start_fresh


def _wait(process: ChildProcess, timeout: float, steps: Path, step: Callable[[str], None] | None) -> int:
    """The child's exit status; TimeoutExpired after `timeout` seconds. Meanwhile `step` hears each new step."""
    if step is None:
        return process.wait(timeout=timeout)
    deadline, told = time.monotonic() + timeout, 0
    while True:
        try:
            return process.wait(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
        # one line a step; the model's process could write there too, or put a FIFO there (opening one for reading
        # waits for a writer): open without waiting or following a link, read a regular file only, and little
        lines = _step_lines(steps)
        for doing in lines[told:]:
            step("".join(c if c.isprintable() else "?" for c in doing[:80]))
        told = max(told, len(lines))


def _step_lines(steps: Path) -> list[str]:
    try:
        descriptor = os.open(steps, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return []
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return []
        return file.read(8192).decode(errors="replace").split("\n")[:-1][:32]


OUTPUT_LIMIT = 64 * 2**20  # what a model may print while it is built and traced
RESULT_LIMIT = 256 * 2**20  # the result file the child writes: a graph's facts, far under this
PARENT_VARIABLE = "PORTCHECK_TRACE_PARENT"


class _Output(threading.Thread):
    """Drains the child's stdout and stderr as they come, so that it never blocks on a full pipe and nothing
    lands on disk: counts the bytes, keeps the end for the error message, and stops a child that floods."""

    def __init__(self, process: ChildProcess) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.total = 0
        self.tail = b""
        self.flooded = False

    def run(self) -> None:
        stream = self.process.stdout
        assert isinstance(stream, io.BufferedReader)  # stdout=PIPE in binary mode, buffered: Popen's own type
        with stream:
            while chunk := stream.read1(65536):
                self.total += len(chunk)
                self.tail = (self.tail + chunk)[-4096:]
                if self.total > OUTPUT_LIMIT and not self.flooded:
                    self.flooded = True
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(self.process.pid, signal.SIGKILL)

    def last_line(self) -> str:
        lines = [line.strip() for line in self.tail.decode(errors="replace").splitlines() if line.strip()]
        return f"; its last output: {lines[-1][:200]}" if lines else ""


def _on_terminate() -> object:
    if threading.current_thread() is not threading.main_thread():
        return None
    def terminate(number: int, frame: object) -> None:
        raise SystemExit(128 + number)

    # SIGHUP too: a closed terminal or an ssh session that drops ends the trace the same way
    return [(number, signal.signal(number, terminate)) for number in (signal.SIGTERM, signal.SIGHUP)]


def _restore(previous: object) -> None:
    for number, handler in previous or ():  # type: ignore[attr-defined]  # what _on_terminate returned
        signal.signal(number, handler)


_RUN_VARIABLE = "PORTCHECK_TRACE_RUN"


def _subreaper(on: bool) -> bool:
    """Make this process the one orphans of its descendants are given to (Linux); whether that is so."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(36, 1 if on else 0, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _children() -> set[int]:
    """The processes whose parent is this one (from /proc)."""
    me, found = os.getpid(), set()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{entry.name}/stat", "rb") as stat_:
                if int(stat_.read(1024).rsplit(b")", 1)[1].split()[1]) == me:  # after the name: state, ppid
                    found.add(int(entry.name))
    return found


def sweep(token: str, spared: set[int] | None = None) -> int:
    """Kill every process still carrying this run's token in its environment: what the model started and left
    behind, including a process that left the group with setsid(), which killing the group does not reach; and,
    with `spared` (this process is a subreaper), every child of this process not in it: what the model started
    with a clean environment and its own session, handed back here when its parent ended. The number killed."""
    marker = f"{_RUN_VARIABLE}={token}".encode()
    killed = 0
    for _ in range(3):  # a process forking while we look: look again
        found = [pid for pid in _children() - spared] if spared is not None else []
        with contextlib.suppress(OSError):
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                try:
                    with open(f"/proc/{entry.name}/environ", "rb") as handle:
                        environment = handle.read(1 << 20)
                except OSError:  # gone, or another user's
                    continue
                if marker in environment.split(b"\0"):
                    found.append(int(entry.name))
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if spared is not None:  # reap the children killed: no zombie left behind
            for pid in _children() - spared:
                for _ in range(100):  # SIGKILL is prompt; never wait for ever on one that could not be killed
                    try:
                        if os.waitpid(pid, os.WNOHANG)[0]:
                            break
                    except OSError:  # ChildProcessError: not ours, or reaped already
                        break
                    time.sleep(0.01)
        killed += len(found)
        if not found:
            break
    return killed


def _kill(process: ChildProcess) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _death(returncode: int, request: TraceRequest, tail: str) -> str:
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        if number == signal.SIGKILL:
            cap = f"{request.memory_limit / 2**30:.1f} GiB" if request.memory_limit else "the machine's memory"
            return (f"the model's process was killed ({name}), most likely out of memory (the cap is {cap}); "
                    f"try --device meta{tail}")
        return f"the model's process crashed ({name}){tail}"
    return f"the model's process exited with status {returncode} before reporting{tail}"
