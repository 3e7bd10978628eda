"""A CUDA probe whose only job is to refuse a CUDA-only library's path off CUDA (PC104's reading): `assert
torch.cuda.is_available(), "CUDA required for APEX optimizers"` where the code has just picked an apex optimizer, or
`elif not torch.cuda.is_available(): raise ValueError(...)` after `if not is_xformers_available(): raise ...` where
the user turned xformers' attention on. The path is the library's, which a Neuron port cannot take whatever the probe
says; the rubric counts code the code itself refuses off CUDA as harmless. A refusal with no library in view (`assert
torch.cuda.is_available(), "a GPU is required"` at the top of a training script) stops the port: it keeps its
severity."""

from __future__ import annotations

import functools

import libcst as cst

from portcheck.knowledge.libraries import libraries
from portcheck.static.ancestry import ancestors
from portcheck.static.check import Context
from portcheck.static.cuda_api.paths import NOT_CUDA, polarity
from portcheck.static.cuda_library.integrations import has_words, words
from portcheck.static.syntax import only_raises


@functools.cache
def _library_words() -> tuple[tuple[tuple[str, ...], str], ...]:
    """(the words a CUDA-only library is written with, its title), from rules/libraries.toml: the first part of each
    module it is imported as (`flash_attn`: flash, attn) and its other names (`bnb`)."""
    found: dict[tuple[str, ...], str] = {}
    for module, library in libraries().items():
        for name in (module.split(".")[0], *library.names):
            found.setdefault(tuple(words(name)), library.title)
    return tuple(found.items())


def _library_in(text: str) -> str | None:
    found = words(text)
    return next((title for named, title in _library_words() if has_words(found, named)), None)


def _refusal(ctx: Context, node: cst.CSTNode) -> cst.CSTNode | None:
    """The check that holds the probe at `node` in its test and only fails off CUDA: `assert <probe>, ...`, or
    `if not <probe>: raise ...` (an `elif` too, and with an `else` holding the CUDA path)."""
    for holder in reversed(ancestors(ctx, node)):
        if isinstance(holder, cst.Assert):
            return holder if polarity(ctx, holder.test) != NOT_CUDA else None
        if isinstance(holder, cst.If):  # `if not probe: raise ...`, an `else` after it or not
            body_raises = only_raises(holder.with_changes(orelse=None))
            return holder if body_raises and polarity(ctx, holder.test) == NOT_CUDA else None
        if isinstance(holder, (cst.BaseStatement, cst.BaseSmallStatement)):
            return None
    return None


def refused_library(ctx: Context, node: cst.CSTNode) -> str | None:
    """The CUDA-only library whose path the probe at `node` refuses off CUDA, or None: the check (its test and its
    message) or a test that leads to it (an enclosing `if`, an earlier `if` of its `elif` chain) names the library."""
    check = _refusal(ctx, node)
    if check is None:
        return None
    texts = [ctx.source(check.body) if isinstance(check, cst.If) else ctx.source(check)]
    for statement in ctx.statements:
        if isinstance(statement, cst.If):
            texts.append(ctx.source(statement.test))
    return next((title for text in texts if (title := _library_in(text)) is not None), None)


__all__ = ["refused_library"]
