"""The README's screenshot of `portcheck server` in an editor: Neovim, running in a pseudo-terminal here, shows the
diagnostics of fixtures/examples/train_gpu.py and the code actions offered on a finding; the terminal's screen is
read with pyte (a terminal emulator in Python) and drawn to a PNG with Pillow.

Needs `nvim` (0.7 or later; Debian's `apt-get install neovim`), `pip install pyte pillow`, and portcheck with its
`server` extra in the Python that runs this script. Nothing is left behind but the PNG.

    python scripts/editor_screenshot.py                       # writes docs/editor.png
    python scripts/editor_screenshot.py --output /tmp/shot.png --line 27 --column 20
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pty
import select
import shutil
import signal
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

import pyte
from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "fixtures" / "examples" / "train_gpu.py"
COLUMNS, ROWS = 118, 34
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"

# Neovim's configuration: the server started for Python buffers, diagnostics as virtual text with their code.
INIT = """
vim.o.number = true
vim.o.signcolumn = "yes"
vim.o.termguicolors = false
vim.o.laststatus = 2
vim.o.cmdheight = 1
vim.cmd("syntax on")
vim.diagnostic.config({
  virtual_text = { format = function(d) return d.code and (d.code .. " " .. d.message) or d.message end },
  signs = true, underline = true, severity_sort = true,
})
local client
vim.api.nvim_create_autocmd("FileType", { pattern = "python", callback = function(args)
  client = client or vim.lsp.start_client({
    name = "portcheck", cmd = { PYTHON, "-m", "portcheck", "server" }, root_dir = ROOT,
    init_options = { portcheck = { target = "trn2" } },
  })
  vim.lsp.buf_attach_client(args.buf, client)
end })
"""

# The 16 colours of a dark terminal theme, by the names pyte gives them.
PALETTE = {
    "black": (30, 30, 30), "red": (224, 108, 117), "green": (152, 195, 121), "brown": (229, 192, 123),
    "blue": (97, 175, 239), "magenta": (198, 120, 221), "cyan": (86, 182, 194), "white": (200, 204, 212),
    "brightblack": (92, 99, 112), "brightred": (240, 130, 140), "brightgreen": (170, 215, 140),
    "brightbrown": (240, 210, 140), "brightblue": (120, 190, 250), "brightmagenta": (215, 145, 235),
    "brightcyan": (110, 200, 210), "brightwhite": (240, 240, 240),
}
BACKGROUND, FOREGROUND = (24, 26, 31), (200, 204, 212)


def _color(name: str, default: tuple[int, int, int]) -> tuple[int, int, int]:
    if name == "default":
        return default
    if name in PALETTE:
        return PALETTE[name]
    if len(name) == 6:  # pyte gives 256-colour and true colours as hex
        try:
            return (int(name[0:2], 16), int(name[2:4], 16), int(name[4:6], 16))
        except ValueError:
            return default
    return default


def render(screen: pyte.Screen, output: Path) -> None:
    """The screen's cells, drawn in a monospace font: each cell's character in its colours."""
    font, bold = ImageFont.truetype(FONT, 15), ImageFont.truetype(BOLD, 15)
    left, _, right, _ = font.getbbox("M")
    width, height = right - left + 1, 20
    image = Image.new("RGB", (screen.columns * width + 16, screen.lines * height + 16), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for row in range(screen.lines):
        line = screen.buffer[row]
        for column in range(screen.columns):
            cell = line[column]
            fg, bg = _color(cell.fg, FOREGROUND), _color(cell.bg, BACKGROUND)
            if cell.reverse:
                fg, bg = bg, fg
            x, y = 8 + column * width, 8 + row * height
            if bg != BACKGROUND:
                draw.rectangle((x, y, x + width - 1, y + height - 1), fill=bg)
            if cell.data.strip():
                draw.text((x, y + 2), cell.data, font=bold if cell.bold else font, fill=fg)
            if cell.underscore:
                draw.line((x, y + height - 2, x + width - 1, y + height - 2), fill=fg)
    output.parent.mkdir(parents=True, exist_ok=True)
    image.save(output, optimize=True)


class Terminal:
    """Neovim in a pseudo-terminal of COLUMNS x ROWS, its output fed to pyte."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: Neovim itself
            os.chdir(cwd)
            os.environ.update(TERM="xterm-256color", COLUMNS=str(COLUMNS), LINES=str(ROWS))
            os.execvp(argv[0], argv)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.1))
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    return
                self.stream.feed(data)

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def wait_for(self, needle: str, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.pump(0.2)
            if needle in self.text():
                return True
        return False

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def close(self) -> None:
        try:
            self.type("\x1b:qa!\r")
            self.pump(0.5)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            os.waitpid(self.pid, 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "editor.png")
    parser.add_argument("--line", type=int, default=27, help="the finding to ask code actions for (1-based)")
    parser.add_argument("--column", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the diagnostics")
    args = parser.parse_args()
    nvim = shutil.which("nvim")
    if nvim is None:
        print("editor_screenshot: nvim is not installed (Debian: apt-get install neovim)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        model = root / "train.py"
        shutil.copy(EXAMPLE, model)
        init = root / "init.lua"
        init.write_text(f"local PYTHON, ROOT = {sys.executable!r}, {str(root)!r}\n" + INIT)
        environment = {"PORTCHECK_CACHE_DIR": str(root / ".cache"), "XDG_STATE_HOME": str(root / "state"),
                       "XDG_DATA_HOME": str(root / "data"), "XDG_CONFIG_HOME": str(root / "config")}
        os.environ.update(environment)
        terminal = Terminal([nvim, "-u", str(init), "-i", "NONE", "-n", model.name], root)
        try:
            if not terminal.wait_for("PC101", args.timeout):
                print("editor_screenshot: no diagnostics appeared:\n" + terminal.text(), file=sys.stderr)
                return 1
            terminal.pump(1.0)  # the last publish drawn
            terminal.type(f":call cursor({args.line}, {args.column})\r")
            terminal.pump(0.5)
            terminal.type(":lua vim.lsp.buf.code_action()\r")
            if not terminal.wait_for("noqa", 30):
                print("editor_screenshot: no code actions appeared:\n" + terminal.text(), file=sys.stderr)
                return 1
            terminal.pump(0.5)
            render(terminal.screen, args.output)
        finally:
            terminal.close()
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
