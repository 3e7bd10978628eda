"""`portcheck server`: a language server over stdio (pygls, lsprotocol's types; the `server` extra). Findings as
diagnostics while a file is edited, each fix and a `# noqa` as code actions, every safe fix as
`source.fixAll.portcheck`, and a rule's documentation on hover; the settings are those scan would use."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from portcheck.server.tracing import TraceModel


def serve(trace_model: TraceModel | None = None) -> None:
    """Serve on stdin and stdout until the client says exit; `trace_model` is the command line's trace, for the
    `portcheck.trace` command."""
    from portcheck.server.features import make_server

    make_server(trace_model).start_io()


__all__ = ["serve"]
