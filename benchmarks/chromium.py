"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``): open a local page,
collect what its console says, measure how long it takes to load, read its DOM and take screenshots.

Standard library only (no websockets, no browser driver), for tests/test_report_browser.py and
benchmarks/report_speed.py. One browser process serves several pages. Nothing is fetched from the network: the
pages are local files, and the browser is started with its background networking off."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    return None


class BrowserError(Exception):
    pass


@dataclass
class Opened:
    seconds: float  # from navigating to the load event
    console: list[str] = field(default_factory=list)  # errors and warnings the page caused, one line each


class Chromium:
    """A headless Chromium; use as a context manager. `timeout` bounds each wait for an answer: a guard against a
    browser that hangs, generous because a loaded 2-core machine running the suite's two workers has taken more than
    30 s to start one."""

    def __init__(self, binary: str, width: int = 1280, height: int = 1600, timeout: float = 90.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="portcheck-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def descriptors() -> None:  # in the browser's process: it reads commands on fd 3 and answers on fd 4
            reading, writing = os.dup(to_browser_r), os.dup(from_browser_w)  # neither is 3 or 4 any more
            for fd, wanted in ((reading, 3), (writing, 4)):
                os.dup2(fd, wanted)
                os.set_inheritable(wanted, True)

        arguments = [binary, "--headless", "--remote-debugging-pipe", f"--user-data-dir={self._profile}",
                     "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                     "--disable-background-networking", "--disable-sync", "--disable-component-update",
                     "--hide-scrollbars", f"--window-size={width},{height}", "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            arguments.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self._process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, preexec_fn=descriptors, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next = 0
        self._events: list[dict[str, Any]] = []
        self._session = ""

    def __enter__(self) -> Chromium:
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
            self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                      session=False)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    # ---- the protocol ----

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply)

    def _read(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError(f"Chromium did not answer within {self.timeout:g} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium closed the pipe (did it start?)")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def _wait_for(self, method: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e["method"] == method for e in self._events):
            event = self._read(deadline)
            if "method" in event:
                self._events.append(event)

    # ---- what the tests and the benchmark ask ----

    def open(self, path: Path) -> Opened:
        """Load a local file; the time to its load event and what its console said."""
        self._events.clear()
        started = time.perf_counter()
        self.call("Page.navigate", {"url": path.resolve().as_uri()})
        self._wait_for("Page.loadEventFired")
        seconds = time.perf_counter() - started
        self.evaluate("0")  # let the events the load raised arrive
        return Opened(seconds, self._console())

    def _console(self) -> list[str]:
        said = []
        for event in self._events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                said.append(f"console.{params['type']}: " + " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                said.append(f"exception: {params.get('exceptionDetails', {}).get('text', '')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                entry = params["entry"]
                said.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
        return said

    def evaluate(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression[:60]}: {reply['exceptionDetails'].get('text')}")
        return reply["result"].get("value")

    def screenshot(self, x: float, y: float, width: float, height: float) -> Image:
        """A region of the page (page coordinates, CSS pixels), as decoded pixels."""
        reply = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": x, "y": y, "width": max(width, 1), "height": max(height, 1), "scale": 1}})
        return decode_png(base64.b64decode(reply["data"]))


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    pixels: list[tuple[int, int, int]]  # row by row

    def colours(self) -> dict[tuple[int, int, int], int]:
        counts: dict[tuple[int, int, int], int] = {}
        for pixel in self.pixels:
            counts[pixel] = counts.get(pixel, 0) + 1
        return counts

    def share_near(self, colour: str, tolerance: int = 12) -> float:
        """The fraction of the pixels within `tolerance` of `colour` ("#RRGGBB") on every channel."""
        want = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
        near = sum(n for pixel, n in self.colours().items()
                   if all(abs(a - b) <= tolerance for a, b in zip(pixel, want, strict=True)))
        return near / max(len(self.pixels), 1)


def decode_png(data: bytes) -> Image:
    """An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes) as RGB pixels."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise BrowserError("not a PNG")
    at, chunks, header = 8, [], b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        at += 12 + length
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour_type not in (2, 6) or interlace:
        raise BrowserError(f"PNG of depth {depth}, colour type {colour_type}, interlace {interlace}: not read here")
    channels = 4 if colour_type == 6 else 3
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    previous = bytearray(stride)
    pixels: list[tuple[int, int, int]] = []
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                guess = left + up - corner
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        pixels.extend(tuple(line[i:i + 3]) for i in range(0, stride, channels))  # type: ignore[misc]
        previous = line
    return Image(width, height, pixels)
