"""What one file tells the project's call graph about itself (its functions, classes, re-exports, guarded
regions, imports and calls): the data `portcheck.static.semantic.summary` reads from a file and the cache keeps
with the file's findings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Function:
    name: str  # "Net.forward", "helper", "outer.inner"
    line: int
    end_line: int
    roles: tuple[str, ...]
    calls: tuple[tuple[str, str], ...]  # (what is called or passed on, the guard it sits under or "")
    returns: tuple[str, ...]  # the calls whose value it returns: a probe when one of them is
    host_refs: tuple[str, ...] = ()  # functions it hands to the data pipeline (`collate_fn=f`)
    params: tuple[str, ...] = ()  # its positional parameters as a call fills them (a method's `self` left out)
    # (what is called, how many positional arguments, the keywords, the host values among them: `#i` / a keyword)
    # per call it makes; -1 where a `*args` or `**kwargs` hides what is passed, or the function is handed on
    passes: tuple[tuple[str, int, tuple[str, ...], tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Summary:
    functions: tuple[Function, ...] = ()
    classes: tuple[tuple[str, tuple[str, ...]], ...] = ()  # class name -> its bases, resolved
    exports: tuple[tuple[str, str], ...] = ()  # a name imported at module level -> what it names
    regions: tuple[tuple[int, int, str], ...] = ()  # (line, end_line, guard) of guarded blocks
    # (module, optional, guard, function) for every import statement: the module named, relative ones with their
    # dots; whether the import runs only where an optional dependency is there (`if is_x_available():`, `except
    # ImportError`); the guard around it as Function.calls records one; the function it sits in ("" at module level)
    imports: tuple[tuple[str, bool, str, str], ...] = ()
    passes: tuple[tuple[str, int, tuple[str, ...], tuple[str, ...]], ...] = ()  # module-level code's (Function.passes)
    probes: tuple[str, ...] = ()  # module-level names bound once to a test that holds only with CUDA (`HAS_CUDA = ...`)
    required: tuple[str, ...] = ()  # what the module's top level imports with no optional-dependency test around it
    # the attributes the file reads off the names it imports (`loss_func = rnnt.multiblank_loss` names
    # `multiblank_loss`), and "*module" for a module it looks names up in (`getattr(losses, name)`)
    mentions: tuple[str, ...] = ()
    # (class, attribute, what builds it) for `self.attr = Builder(...)` in a method (semantic.attributes)
    attributes: tuple[tuple[str, str, str], ...] = ()

    def plain(self) -> list[object]:
        """As JSON values, for the cache."""
        return [[[f.name, f.line, f.end_line, list(f.roles), [list(c) for c in f.calls], list(f.returns),
                  list(f.host_refs), list(f.params), [[t, n, list(k), list(h)] for t, n, k, h in f.passes]]
                 for f in self.functions],
                [[n, list(b)] for n, b in self.classes], [list(e) for e in self.exports],
                [list(r) for r in self.regions], [list(i) for i in self.imports],
                [[t, n, list(k), list(h)] for t, n, k, h in self.passes], list(self.probes), list(self.required),
                list(self.mentions), [list(a) for a in self.attributes]]

    @classmethod
    def from_plain(cls, plain: Any) -> Summary:
        """The summary a cache entry holds (JSON, so `Any`); anything malformed raises (TypeError, ValueError), a
        cache miss."""
        functions, classes, exports, regions, imports, passes, probes, required, mentions, attributes = plain
        return cls(
            tuple(Function(str(n), int(a), int(b), tuple(map(str, roles)), tuple((str(t), str(g)) for t, g in calls),
                           tuple(map(str, rets)), tuple(map(str, refs)), tuple(map(str, params)),
                           tuple((str(t), int(c), tuple(map(str, k)), tuple(map(str, h))) for t, c, k, h in passes))
                  for n, a, b, roles, calls, rets, refs, params, passes in functions),
            tuple((str(n), tuple(map(str, b))) for n, b in classes),
            tuple((str(a), str(b)) for a, b in exports),
            tuple((int(a), int(b), str(g)) for a, b, g in regions),
            tuple((str(m), bool(o), str(g), str(f)) for m, o, g, f in imports),
            tuple((str(t), int(c), tuple(map(str, k)), tuple(map(str, h))) for t, c, k, h in passes),
            tuple(map(str, probes)), tuple(map(str, required)), tuple(map(str, mentions)),
            tuple((str(c), str(a), str(r)) for c, a, r in attributes))


# Finding.requires of a size a function of another file (or a method) returns (`torch.split(x, sizes(t))`): kept
# where the call graph finds that every function the name may be reads its parameter's data into Python
# (portcheck.static.semantic.summary.READS). A second line, where present, is what the finding then requires as well
# ("forward", "step", ELSEWHERE).
READS_OF = "reads:"
# The same on a stack without PyTorch/XLA: a helper that passes an XLA tensor through and reads any other
# (summary.READS_OFF_XLA) reads what it is handed there.
READS_OFF_XLA_OF = "reads-off-xla:"
# Finding.requires of an index a function of the project returns (`x[pad_mask(lengths)]`): kept where every function
# the name may be returns a boolean mask (portcheck.static.semantic.masks.MASK).
MASK_OF = "mask:"
READS_PREFIXES = (READS_OF, READS_OFF_XLA_OF, MASK_OF)
# Finding.requires of a parameter a function grows by concatenation and hands back (`tokens = torch.cat([tokens,
# next_tokens], -1)`, `return tokens, completed`): kept where a decode loop of the project rebinds what it passes to
# what the function returns and feeds it on (portcheck.static.semantic.grows.REGROWS).
FED_BACK = "fed-back"


def reads_of(stack: str) -> str:
    """The Finding.requires prefix of a read through a helper on `stack`."""
    return READS_OF if stack == "xla" else READS_OFF_XLA_OF


# Finding.requires of a reading across the functions of one file (a default one function hands on to the one that
# uses it): kept wherever the call graph is built. A file analysed in groups of statements (chunks) cannot see it.
SAME_FILE = "same-file"

# Finding.requires of a candidate kept, as info, only where no forward and no training step reaches its function
# and the call graph does not place it host-side, in set-up or on a path Neuron never runs: the other candidates of
# the same construct ("forward", "device", "step") speak where the device step does reach it.
ELSEWHERE = "elsewhere"

# Finding.requires of a call through a name imported from the project's own package (`from . import _C`,
# `_C.fused_op(x)`), "compiled:MODULE|NAME" (MODULE relative or absolute as written, NAME what it imports, "" for
# `import pkg.ext as e`): kept where the scanned tree and the disk hold no Python source for it, a compiled
# extension (portcheck.static.semantic.compiled).
COMPILED_OF = "compiled:"

__all__ = ["COMPILED_OF", "ELSEWHERE", "FED_BACK", "MASK_OF", "READS_OF", "READS_OFF_XLA_OF", "READS_PREFIXES",
           "SAME_FILE", "Function", "Summary", "reads_of"]
