"""How fixes write code: string literals in the file's own quoting, nodes rendered at the indentation they
stand at, arguments added and dropped without disturbing their neighbours, and the spelling (and the import)
of a module a replacement names. Shared by every family's fixes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import TypeVar

import libcst as cst
from libcst._nodes.internal import CodegenState  # see render()

from portcheck.static.check import Context
from portcheck.static.syntax import bound_name, dotted_name, import_statements, suites

_Element = TypeVar("_Element", cst.Arg, cst.BaseDictElement)


def literal_like(node: cst.BaseExpression, text: str) -> str | None:
    """`text` as a string literal written the way `node` is (prefix and quotes kept: `'neuron'` for `'neuronx'`);
    None when `node` is not a plain string literal or `text` does not fit in its quotes."""
    if not isinstance(node, cst.SimpleString) or "\\" in text or node.quote[0] in text:
        return None
    return f"{node.prefix}{node.quote}{text}{node.quote}"


def new_literal(text: str, near: cst.Call | None = None) -> str:
    """A new string literal for `text`, in the quotes the strings of `near` use (double quotes otherwise)."""
    for arg in near.args if near is not None else ():
        if isinstance(arg.value, cst.SimpleString):
            quote = arg.value.quote[0]
            return f"{quote}{text}{quote}"
    return f'"{text}"'


def indentation(ctx: Context, depth: int | None = None) -> list[str] | None:
    """The indentation of the statement being visited (or of `ctx.statements[depth]`), one entry per block that
    holds it; None when a block is not found."""
    tokens = []
    for outer, inner in pairwise(ctx.statements if depth is None else ctx.statements[: depth + 1]):
        if isinstance(outer, cst.If) and outer.orelse is inner:
            continue  # `elif`: on the line of its `if`
        for block in suites(outer):
            if isinstance(block, cst.IndentedBlock) and any(stmt is inner for stmt in block.body):
                tokens.append(ctx.module.default_indent if block.indent is None else block.indent)
                break
        else:
            return None
    return tokens


def render(ctx: Context, node: cst.CSTNode, indents: list[str]) -> str:
    """The code of `node` inside blocks indented by `indents`. `Module.code_for_node` renders a node as if at
    the top level, so the continuation lines of a multi-line call inside a function would lose its indentation."""
    state = CodegenState(default_indent=ctx.module.default_indent, default_newline=ctx.module.default_newline,
                         indent_tokens=list(indents))
    node._codegen(state)
    return "".join(state.tokens)


def rewritten(ctx: Context, original: cst.CSTNode, new: cst.CSTNode, indents: list[str] | None = None) -> str | None:
    """The code that replaces `original` by `new` (a `with_changes` of it) in the statement being visited, or in
    blocks indented by `indents`; None when the rendering of `original` is not found in the file as it is."""
    if indents is None:
        indents = indentation(ctx)
        if indents is None:
            return None
    before = render(ctx, original, indents)
    if ("\n" in before or "\r" in before) and before not in ctx.text:
        return None  # a multi-line node whose rendering is not what the file holds
    return render(ctx, new, indents)


def parenthesized(ctx: Context, node: cst.BaseExpression, indents: list[str]) -> str:
    """The code of `node`, in parentheses unless it is an atom that takes `.attr` as it is."""
    text = render(ctx, node, indents)
    atoms = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
    return text if isinstance(node, atoms) or node.lpar else f"({text})"


def _import_facts(module: cst.Module) -> tuple[dict[str, str], set[str], set[str]]:
    """Top-level import aliases (`import a.b as x`, `from a import b as x`: local -> module), modules imported
    plainly at the top level (`import a.b.c` makes `a`, `a.b` and `a.b.c` usable), and every module any
    import statement of the file loads."""
    aliases: dict[str, str] = {}
    top: set[str] = set()
    loaded: set[str] = set()

    for small, at_top in import_statements(module.body):
        if isinstance(small, cst.Import):
            for alias in small.names:
                name = dotted_name(alias.name)
                if name is None:
                    continue
                loaded.add(name)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    if at_top:
                        aliases[alias.asname.name.value] = name
                elif at_top:
                    parts = name.split(".")
                    top.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        elif small.module is not None and not small.relative and not isinstance(small.names, cst.ImportStar):
            module_name = dotted_name(small.module)
            for alias in small.names:
                name = dotted_name(alias.name)
                if module_name is None or name is None:
                    continue
                loaded.add(f"{module_name}.{name}")
                if at_top:
                    aliases[bound_name(alias)] = f"{module_name}.{name}"
    return aliases, top, loaded


def spelling(ctx: Context, module: str) -> tuple[str, tuple[str, ...]]:
    """How a fix writes `module` here (`xr` after a top-level `import torch_xla.runtime as xr`), and the import
    it must add for that (none when the file already imports the module where the whole file sees it)."""
    aliases, top, _ = ctx.memo("fix-imports", ctx.module, lambda: _import_facts(ctx.module))
    for local, target in aliases.items():
        if target == module and ctx.names.aliases.get(local) == module:
            return local, ()
    head = module.split(".", 1)[0]
    if module in top and ctx.names.aliases.get(head) == head:
        return module, ()
    return module, (f"import {module}",)


def imports_module(ctx: Context, module: str) -> bool:
    """Some import statement of the file loads `module` (for imports made for their side effect)."""
    _, _, loaded = ctx.memo("fix-imports", ctx.module, lambda: _import_facts(ctx.module))
    return module in loaded


def without(elements: Sequence[_Element], dropped: Iterable[cst.CSTNode]) -> list[_Element]:
    """Call arguments or dict elements without `dropped`. The new last one takes the old last one's comma, so
    a trailing comma and the line break before the closing bracket stay, but keeps the comment of its line."""
    ids = {id(node) for node in dropped}
    kept = [element for element in elements if id(element) not in ids]
    if not kept or kept[-1] is elements[-1]:
        return kept
    own, last = kept[-1].comma, elements[-1].comma
    own_line = own.whitespace_after if isinstance(own, cst.Comma) else None
    if isinstance(own_line, cst.ParenthesizedWhitespace):
        if isinstance(last, cst.Comma) and isinstance(last.whitespace_after, cst.ParenthesizedWhitespace):
            last = last.with_changes(whitespace_after=last.whitespace_after.with_changes(
                first_line=own_line.first_line))
        elif own_line.first_line.comment is not None:
            return kept  # `f(\n    a,  # note\n    b)` without `b`: a trailing comma keeps the note
    kept[-1] = kept[-1].with_changes(comma=last)
    return kept


def _separator(args: Sequence[cst.Arg]) -> cst.Comma:
    """The comma a new argument follows: the call's own line break and indentation where its arguments stand
    one per line (without the comment of that line), else `, `."""
    for arg in args[:-1]:
        if isinstance(arg.comma, cst.Comma) and isinstance(arg.comma.whitespace_after, cst.ParenthesizedWhitespace):
            return arg.comma.with_changes(
                whitespace_after=arg.comma.whitespace_after.with_changes(first_line=cst.TrailingWhitespace()))
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def with_arg(call: cst.Call, index: int, arg: cst.Arg) -> cst.Call:
    """`call` with `arg` inserted before argument `index` (at the end when `index` is past the last)."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=(arg,))
    separator = _separator(args)
    if index < len(args):
        args.insert(index, arg.with_changes(comma=separator))
    else:
        last = args[-1]
        args[-1] = last.with_changes(comma=separator)
        args.append(arg.with_changes(comma=last.comma))
    return call.with_changes(args=args)


def keyword_arg(name: str, value: str) -> cst.Arg:
    """A new `name=value` argument (`value` is code)."""
    return cst.Arg(keyword=cst.Name(name), value=cst.parse_expression(value),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))
