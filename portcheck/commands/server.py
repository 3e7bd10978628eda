"""`portcheck server`: the language server, when its extra is installed."""

from __future__ import annotations

import importlib.util

from portcheck.errors import UserError


def serve() -> None:
    """Run the language server on stdio; without pygls, one line saying how to install it."""
    if importlib.util.find_spec("pygls") is None or importlib.util.find_spec("lsprotocol") is None:
        raise UserError("the language server needs pygls and lsprotocol: pip install 'portcheck[server]'")
    from portcheck.server import serve as run

    run()
