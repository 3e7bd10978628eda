"""`portcheck server`: a language server over stdio (pygls, lsprotocol's types; the `server` extra). Findings as
diagnostics while a file is edited, each fix and a `# noqa` as code actions, every safe fix as
`source.fixAll.portcheck`, and a rule's documentation on hover; the settings are those scan would use."""

from __future__ import annotations


def serve() -> None:
    """Serve on stdin and stdout until the client says exit."""
    from portcheck.server.features import make_server

    make_server().start_io()


__all__ = ["serve"]
