"""A pre-imported Python process per test process (a "zygote") that forks a fresh process for each `portcheck`
command a test runs, instead of a fresh interpreter that imports portcheck, and for a trace torch, torch's
compiler stack and transformers, again: about 4 s of CPU a trace, some 170 times a suite.

The zygote imports them once, in the environment a trace's child process has (portcheck.dynamic.runner's
child_environment, hash seed 0 included), and then only waits for requests and forks: it stays single-threaded
and never runs portcheck or a model itself. Each request is one `python -m portcheck ARGS`: the forked process
gets the request's arguments, environment, working directory, stdin, stdout and stderr (pipes, as
subprocess.run's), runs portcheck's `__main__` as `python -m` would and exits with its status; the test sees a
process, its exit code and its output. That process's trace child is forked from it in turn (torch is imported
already) where the child's environment is the one the zygote imported torch in; otherwise it is started fresh
(runner._start_fresh), as it always is outside the tests.

Where a fork would not start as a fresh interpreter does, the process is started fresh by itself: a PYTHON* or
locale variable read at start that differs from the zygote's, a module in the working directory or on PYTHONPATH
in place of one the zygote imported, and for the trace child any other difference of environment or a memory cap
of its own (PORTCHECK_ZYGOTE_LOG=FILE says which). A test of the process itself asks for a fresh one
(conftest.run_command(fresh=True)): signals, killing and time limits, how the trace child is started and swept.

Run as a script, it is the zygote: `python -P tests/zygote.py LISTENER_FD KIND PLACES_FILE`."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a trace child has imported as the model's eager run begins, imported here once, in the order it was: for a
# model file ("plain") and for a --hf-config model ("hf"; tests/data/zygote_*.txt say which traces). No more: child.py
# records the lines that run during that run, and a module it first imports then is recorded too.
KINDS = ("plain", "hf")
# Variables a fresh interpreter reads as it starts (so a fork of the zygote would not see them changed): a
# command whose environment differs from the zygote's in one of these runs fresh. PYTHONPATH and
# PYTHONUNBUFFERED are made as the request says (sys.path and stdio), PYTHONHASHSEED is the trace child's (0).
_AT_START = ("PYTHON", "LANG", "LC_", "LANGUAGE")
_MADE_HERE = ("PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED")
# Read when portcheck runs, never at import (and pytest's name of the test under way, and the directory torch's
# compiler sets for itself once it compiles, in a test process that ran torch): a trace child's environment may
# differ from the zygote's in these.
_READ_LATER = ("NO_COLOR", "FORCE_COLOR", "PORTCHECK_CACHE_DIR", "PORTCHECK_TRACE_RUN", "PORTCHECK_TRACE_PARENT",
               "PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR")
_KEEP: list[object] = []  # the stdio objects a fork replaced, kept so that collecting them never closes fd 0-2


def _started_alike(env: dict[str, str], zygote_env: dict[str, str]) -> bool:
    def started(e: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in e.items() if k.startswith(_AT_START) and k not in _MADE_HERE}

    return started(env) == started(zygote_env)


# ---- the zygote ----------------------------------------------------------------------------------------------

_ZYGOTE_PATH: list[str] = []  # the zygote's sys.path: -P and the trace child's PYTHONPATH, as a trace child's
_ZYGOTE_ENV: dict[str, str] = {}  # its environment as it started: a trace child's, but for one run's variables
_IMPORTS_SET: dict[str, str] = {}  # what the imports put in it (torch._inductor: TORCHINDUCTOR_CACHE_DIR)
_KIND: list[str] = []


def serve(listener: socket.socket, kind: str) -> None:
    """Import, then fork a command for each request until the test process goes (its end of stdin closes)."""
    import importlib

    _KIND.append(kind)
    _ZYGOTE_ENV.update(os.environ)
    for name in (ROOT / "tests" / "data" / f"zygote_{kind}.txt").read_text().split("\n"):
        if name and not name.startswith("#"):
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    import warnings

    _ZYGOTE_PATH[:] = sys.path
    (Path(sys.argv[3])).write_text(json.dumps(_places()))
    _IMPORTS_SET.update({k: v for k, v in os.environ.items() if _ZYGOTE_ENV.get(k) != v})
    _FILTERS[:] = warnings.filters  # with what the imports added, as a child that imported them has
    _STDIO.extend((sys.stdin.errors, sys.stdout.encoding, sys.stdout.errors, sys.stderr.errors))
    gc.freeze()  # what is here now is never collected in a fork (nothing of it can close a descriptor there)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "lifeline")
    while True:
        for key, _ in selector.select():
            if key.data == "lifeline":
                if not os.read(key.fd, 1024):
                    return
            elif key.data is None:
                connection, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(connection, 1 << 22, 3)
                pid = os.fork()
                if pid == 0:
                    _command(json.loads(message), fds)
                for fd in fds:
                    os.close(fd)
                connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                selector.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, connection))
            else:
                pid, connection = key.data
                selector.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    connection.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
                connection.close()


def _places() -> dict[str, str]:
    """Where each top-level module imported here came from (its file, or "" if built in)."""
    return {name: str(getattr(module, "__file__", "") or "") for name, module in list(sys.modules.items())
            if "." not in name}


def _shadows(directories: list[str], places: dict[str, str]) -> bool:
    """Whether a module in one of these directories would be imported by a fresh interpreter that has them first
    on sys.path in place of one the zygote imported from elsewhere."""
    for directory in directories:
        with contextlib.suppress(OSError):
            for entry in os.scandir(directory):
                name = entry.name.split(".")[0]
                if name in places and not places[name].startswith(os.path.join(os.path.abspath(entry.path), "")) \
                        and places[name] != os.path.abspath(entry.path):
                    return True
    return False


def _stdio(env: dict[str, str]) -> None:
    """sys.stdin, stdout and stderr on fds 0-2 as a fresh interpreter makes them (pipes, not terminals)."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    _KEEP.extend((sys.stdin, sys.stdout, sys.stderr))
    in_errors, encoding, out_errors, err_errors = _STDIO
    sys.stdin = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding=encoding, errors=in_errors,  # noqa: UP020, SIM115
                                 newline="\n")
    for name, fd, errors in (("stdout", 1, out_errors), ("stderr", 2, err_errors)):
        stream = io.TextIOWrapper(io.open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False),  # noqa: UP020, SIM115
                                  encoding=encoding, errors=errors, newline="\n", line_buffering=name == "stderr",
                                  write_through=unbuffered)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    sys.__stdin__ = sys.stdin


def _fresh_process(fds: tuple[int, int, int], cwd: str, env: dict[str, str]) -> None:
    """This fork as a process started afresh: fds 0-2 and no other, default signals, cwd, environment, no exit
    functions of the zygote's."""
    import atexit

    gc.freeze()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    atexit._clear()
    _stdio(env)


def _exit_status(exc: SystemExit) -> int:
    """What the interpreter exits with for this SystemExit (printing a message that is not a number)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _command(request: dict, fds: list[int]) -> None:
    """The forked process: `python -m portcheck ARGS` in the request's place; never returns."""
    status = 1
    try:
        env = request["env"]
        _fresh_process((fds[0], fds[1], fds[2]), request["cwd"], env)
        own = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        base = [p for p in _ZYGOTE_PATH if p not in _ZYGOTE_ENV.get("PYTHONPATH", "").split(os.pathsep)]
        sys.path[:] = [os.getcwd(), *own, *base]  # `python -m`: the working directory first
        from portcheck.dynamic import runner

        runner.start_child = _trace_child
        import runpy

        sys.argv = ["-m", *request["args"]]
        try:
            runpy.run_module("portcheck", run_name="__main__", alter_sys=True)
            status = 0
        except SystemExit as exc:
            status = _exit_status(exc)
        except BaseException:
            import traceback

            traceback.print_exc()
            status = 1
        status = _finish(status)
    finally:
        os._exit(status)


def _finish(status: int) -> int:
    """As the interpreter ends: wait for the threads that are not daemons, run the exit functions, flush."""
    import atexit
    import threading

    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            status = 120 if status == 0 else status
    return status


# ---- the trace child, forked from a command ------------------------------------------------------------------


class _Forked:
    """A forked trace child as run_child uses a subprocess.Popen: pid, stdout, wait(timeout)."""

    def __init__(self, pid: int, stdout: io.BufferedReader) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            except ChildProcessError:  # reaped by the sweep already
                self.returncode = 0
                break
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                break
            assert deadline is not None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(["portcheck.dynamic.child"], timeout or 0)
            delay = min(delay * 2, remaining, 0.05)
            time.sleep(delay)
        return self.returncode


def _trace_child(request_path: Path, result_path: Path, cwd: Path, env: dict[str, str]):
    """runner.start_child in a forked command: fork the child where that is what a fresh interpreter would be."""
    import threading

    from portcheck.dynamic import runner
    from portcheck.dynamic.request import TraceRequest

    request = TraceRequest.from_json(request_path.read_text(encoding="utf-8"))
    # a variable the imports set (a test process that imported torch itself has them) is as the child's imports set it
    mine = {k: v for k, v in env.items() if k not in (*_READ_LATER, "PYTHONPATH") and _IMPORTS_SET.get(k) != v}
    zygote = {k: v for k, v in _ZYGOTE_ENV.items() if k not in (*_READ_LATER, "PYTHONPATH")}
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    before = [p for p in _ZYGOTE_ENV.get("PYTHONPATH", "").split(os.pathsep) if p]
    if (mine != zygote or not set(before) <= set(path) or _shadows([p for p in path if p not in before], _places())
            or threading.active_count() != 1 or (_KIND == ["hf"] and not request.hf_config)
            or request.memory_limit not in (0, runner.default_memory_limit())):
        _log(f"trace child started fresh: {sorted(k for k in {*mine, *zygote} if mine.get(k) != zygote.get(k))} "
             f"differ, threads {threading.active_count()}, zygote {_KIND}, {request.hf_config or request.model}")
        return runner._start_fresh(request_path, result_path, cwd, env)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDONLY)
            _fresh_process((null, write, write), str(cwd), env)
            os.environ.update(_IMPORTS_SET)  # as the child's own imports would have
            # -P and PYTHONPATH first, as the child's own sys.path
            sys.path[:] = [*path, *(p for p in _ZYGOTE_PATH if p not in before)]
            import warnings

            warnings.filters[:] = _FILTERS
            warnings._filters_mutated()  # type: ignore[attr-defined]
            from portcheck.dynamic import child

            sys.argv = [child.__file__, str(request_path), str(result_path)]
            status = child.main()
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            import traceback

            with contextlib.suppress(BaseException):
                traceback.print_exc()
        finally:
            os._exit(status)
    os.close(write)
    return _Forked(pid, open(read, "rb"))  # run_child's reader closes it


def _log(line: str) -> None:
    """Why a fork was not made, to the file PORTCHECK_ZYGOTE_LOG names (where a suite's time goes)."""
    if where := (_ZYGOTE_ENV or os.environ).get("PORTCHECK_ZYGOTE_LOG"):
        with open(where, "a", encoding="utf-8") as log:
            log.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '')}: {line}\n")


_FILTERS: list = []  # the warning filters of the zygote once it imported: a trace child's when it starts
_STDIO: list = []  # the zygote's stdin errors, stdio encoding, stdout and stderr errors: a fresh interpreter's


# ---- the client: a test process's end -------------------------------------------------------------------------


class Zygote:
    """The test process's zygote: started at once (it imports while the first tests run), used by `run`."""

    def __init__(self, env: dict[str, str], scratch: Path, kind: str) -> None:
        from portcheck.dynamic.runner import child_environment

        self.env = dict(env)  # the environment of the commands it is for
        self.path = str(scratch / f"zygote-{kind}.sock")
        self.places_file = scratch / f"zygote-{kind}.json"  # where its modules came from, once it imported them
        self.places: dict[str, str] = {}
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self.path)
        listener.listen(64)
        self.process = subprocess.Popen(
            [sys.executable, "-P", __file__, str(listener.fileno()), kind, str(self.places_file)],
            stdin=subprocess.PIPE, env=child_environment(env), pass_fds=(listener.fileno(),), cwd=ROOT)
        listener.close()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def equivalent(self, env: dict[str, str], cwd: Path) -> bool:
        """Whether a fork of the zygote starts as a fresh interpreter would with this environment, here: the same
        variables read at start, and no module in the working directory or on PYTHONPATH shadowing one it has."""
        if self.process.poll() is not None or not _started_alike(env, self.env):
            return False
        while not self.places:  # it has not finished importing yet: wait for it
            if self.places_file.exists():
                self.places = json.loads(self.places_file.read_text())
            elif self.process.poll() is not None:
                return False
            else:
                time.sleep(0.05)
        return not _shadows([str(cwd), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)], self.places)

    def run(self, args: list[str], *, cwd: Path, env: dict[str, str], input: str | bytes | None, text: bool,
            timeout: float | None) -> subprocess.CompletedProcess:
        """`python -m portcheck ARGS` forked from the zygote: as subprocess.run(..., capture_output=True) gives it."""
        encoding = locale.getpreferredencoding(False)
        if isinstance(input, str):
            input = input.encode(encoding)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        in_read, in_write = os.pipe() if input is not None else (os.dup(0), -1)
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            connection.connect(self.path)
            message = json.dumps({"args": args, "cwd": str(cwd), "env": env}).encode()
            socket.send_fds(connection, [message], [in_read, out_write, err_write])
        finally:
            for fd in (in_read, out_write, err_write):
                os.close(fd)
        output, status = _collect(connection, in_write, input or b"", out_read, err_read, timeout)
        command = [sys.executable, "-m", "portcheck", *args]
        if "returncode" not in status:
            raise RuntimeError(f"the zygote (pid {self.process.pid}) ended: {self.process.poll()}")
        if status.get("timed out"):
            raise subprocess.TimeoutExpired(command, timeout or 0, output[0], output[1])
        out, err = output
        if text:
            out, err = (_text(data, encoding) for data in output)
        return subprocess.CompletedProcess(command, status["returncode"], out, err)


_STARTED: dict[str, Zygote] = {}  # one of each kind a test process (tests/conftest.py, tests.conftest alike)


def started(kind: str, env: dict[str, str]) -> Zygote:
    """This test process's zygote of that kind, started for commands with this environment if there is none yet."""
    if kind not in _STARTED:
        import tempfile

        _STARTED[kind] = Zygote(env, Path(tempfile.mkdtemp(prefix="portcheck-zygote-")), kind)
    return _STARTED[kind]


def close() -> None:
    while _STARTED:
        _STARTED.popitem()[1].close()


def _text(data: bytes, encoding: str) -> str:
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")  # as subprocess's text mode


def _collect(connection: socket.socket, in_write: int, data: bytes, out_read: int, err_read: int,
             timeout: float | None) -> tuple[tuple[bytes, bytes], dict]:
    """Write stdin, read stdout and stderr to their ends and the exit status from the zygote."""
    deadline = None if timeout is None else time.monotonic() + timeout
    selector = selectors.DefaultSelector()
    chunks: dict[int, list[bytes]] = {out_read: [], err_read: []}
    for fd in chunks:
        selector.register(fd, selectors.EVENT_READ, "output")
    selector.register(connection, selectors.EVENT_READ, "status")
    if in_write >= 0:
        os.set_blocking(in_write, False)
        selector.register(in_write, selectors.EVENT_WRITE, "input")
    status: dict = {}
    pid = None
    written = 0
    while selector.get_map():
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            if pid is not None and not status.get("timed out"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            status["timed out"] = True
            deadline = None
            continue
        for key, _ in selector.select(wait):
            if key.data == "output":
                chunk = os.read(key.fd, 65536)
                if chunk:
                    chunks[key.fd].append(chunk)
                else:
                    selector.unregister(key.fd)
                    os.close(key.fd)
            elif key.data == "input":
                try:
                    written += os.write(key.fd, data[written:written + 65536])
                except BrokenPipeError:
                    written = len(data)
                if written >= len(data):
                    selector.unregister(key.fd)
                    os.close(key.fd)
            else:
                message = connection.recv(4096)
                if not message:
                    selector.unregister(connection)
                    connection.close()
                    continue
                for line in message.splitlines():
                    answer = json.loads(line)
                    pid = answer.get("pid", pid)
                    if "returncode" in answer:
                        status["returncode"] = answer["returncode"]
    return (b"".join(chunks[out_read]), b"".join(chunks[err_read])), status


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2])  # and sys.argv[3]: where to write _places()
