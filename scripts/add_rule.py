#!/usr/bin/env python3
"""Scaffold a new static rule for you to fill in (CONTRIBUTING.md, "Adding a rule"). The skeleton passes the suite as
it is, except the three snapshots that list every rule (`portcheck rules` and SARIF) and the rule's own
(tests/test_rule_snapshots.py), which you write and review.

    python scripts/add_rule.py --code PC399 --name my-rule --category unsupported-op --severity warning
    python scripts/add_rule.py --code PC319 --name sparse-op --category unsupported-op --severity error --module sort

writes
- portcheck/static/<package>/<module>.py: the rule class (docstring sections, message template, VALID / INVALID
  examples) and a check that flags calls of a placeholder, `todo_<name>()`; the module is new (the registry imports
  every module of the package, so its `__init__.py` stays as it is), or, with `--module NAME`, an existing module of
  the package (the class goes after its last rule class, the check at the end, the imports are merged);
- rules/catalog/<category>.toml: the rule's entry, in code order, with TODO text;
- fixtures/static/<category>/<name, - as _>.py: one line that fires and one that stays quiet.

Every TODO is yours to replace. A code or name already used (in the catalog, retired.toml or the code), a code that
is not PC + three digits or not in its category's family, an unknown category, or a file that already exists is
refused with one line and exit 2, and nothing is written. Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import json
import keyword
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

CODE = re.compile(r"^PC\d{3}$")
NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
SEVERITIES = ("error", "warning", "info")
# CONTRIBUTING.md, "Rule codes": the hundreds digit is the family; PC9 is experimental and open to every category.
FAMILIES = {
    "cuda-api": "1", "dynamic-shape": "2", "unsupported-op": "3", "dtype": "3", "custom-attention": "4",
    "cuda-library": "5", "training": "6", "distributed": "6", "host-sync": "7", "compile": "7", "memory": "8",
    "suppression": "9",
}
LINE_LENGTH = 120  # pyproject.toml [tool.ruff]


class Refused(Exception):
    """What the user asked for cannot be scaffolded: one line, exit 2, nothing written."""


@dataclass
class Plan:
    """Every file the scaffold writes, with its whole new text, worked out before anything is written."""

    writes: dict[Path, str] = field(default_factory=dict)
    created: list[Path] = field(default_factory=list)


# ---- what the repository already holds -------------------------------------------------------------------------


def categories(root: Path) -> tuple[str, ...]:
    """The values of `class Category` in portcheck/findings.py, read without importing portcheck."""
    tree = ast.parse((root / "portcheck" / "findings.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Category":
            return tuple(item.value.value for item in node.body if isinstance(item, ast.Assign)
                         and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str))
    raise Refused("portcheck/findings.py defines no Category")


def homes(root: Path) -> tuple[str, ...]:
    """The static packages `registry()` imports (portcheck/rules.py HOMES): one per category but memory."""
    return tuple(f"portcheck.static.{c.replace('-', '_')}" for c in categories(root) if c != "memory")


def catalog(root: Path) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """(code -> name, name -> code, retired codes) over every rules/catalog/*.toml."""
    codes: dict[str, str] = {}
    names: dict[str, str] = {}
    retired: set[str] = set()
    for path in sorted((root / "rules" / "catalog").glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise Refused(f"{path.relative_to(root)}: {exc}") from exc
        for entry in data.get("rule", []):
            codes[entry["code"]] = entry["name"]
            names[entry["name"]] = entry["code"]
        retired |= set(data.get("retired", {}))
    return codes, names, retired


def codes_in_code(root: Path) -> dict[str, Path]:
    """`code = "PCxxx"` class attributes anywhere under portcheck/ (a rule class without its catalog entry)."""
    found = {}
    for path in sorted((root / "portcheck").rglob("*.py")):
        for match in re.finditer(r'^\s+code = "(PC\d{3})"', path.read_text(encoding="utf-8"), re.MULTILINE):
            found[match.group(1)] = path
    return found


def chips(root: Path) -> dict[str, str]:
    """chip -> its default stack, from rules/targets.toml."""
    data = tomllib.loads((root / "rules" / "targets.toml").read_text(encoding="utf-8"))
    return {name: chip["default_stack"] for name, chip in data["chips"].items()}


# ---- Python source edits ---------------------------------------------------------------------------------------


def isort_key(name: str) -> tuple[int, str]:
    """ruff's isort order of imported names and of `__all__` (RUF022): CONSTANTS, then Classes, then the rest."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def one_statement(head: str, names: list[str], tail: str = "") -> str:
    """`head` followed by `names`, on one line when it fits, else one name a line (ruff's wrapping)."""
    line = f"{head}{', '.join(names)}{tail}"
    if len(line) <= LINE_LENGTH:
        return line
    return f"{head}(\n" + "".join(f"    {n},\n" for n in names) + ")" + tail


def replace_lines(lines: list[str], node: ast.stmt, text: str) -> None:
    """Put `text` where the statement `node` stands, keeping what follows it on its last line (a comment)."""
    start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    rest = lines[end][node.end_col_offset:] if node.end_col_offset is not None else "\n"
    lines[start:end + 1] = [text + rest]


def import_from(tree: ast.Module, module: str) -> ast.ImportFrom | None:
    """The module-level `from <module> import ...` of plain names (no aliases), if there is one."""
    for node in tree.body:
        if (isinstance(node, ast.ImportFrom) and node.module == module and not node.level
                and all(alias.asname is None for alias in node.names)):
            return node
    return None


def merge_import(text: str, module: str, wanted: list[str]) -> str:
    """`text` importing `wanted` from `module`: merged into its `from module import` line, or a new line placed in
    isort's order among the module's first-party `from portcheck...` imports."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    existing = import_from(tree, module)
    if existing is not None:
        names = sorted({alias.name for alias in existing.names} | set(wanted), key=isort_key)
        if len(names) == len(existing.names):
            return text
        replace_lines(lines, existing, one_statement(f"from {module} import ", names))
        return "".join(lines)
    new = one_statement(f"from {module} import ", sorted(wanted, key=isort_key)) + "\n"
    first_party = [n for n in tree.body if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("portcheck")]
    if not first_party:
        raise Refused(f"the module imports nothing from portcheck; add `{new.strip()}` by hand, or use a new module")
    after = next((n for n in first_party if (n.module or "") > module), None)
    if after is not None:
        lines.insert(after.lineno - 1, new)
    else:
        lines.insert(first_party[-1].end_lineno or first_party[-1].lineno, new)
    return "".join(lines)


# ---- what the scaffold writes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Names:
    code: str
    name: str  # my-rule
    category: str
    severity: str
    targets: tuple[str, ...]
    target: tuple[str, str]  # the (chip, stack) its examples are checked for

    @property
    def snake(self) -> str:
        return self.name.replace("-", "_")

    @property
    def cls(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("-"))

    @property
    def placeholder(self) -> str:
        return f"todo_{self.snake}"

    @property
    def tokens(self) -> str:
        return f"{self.snake.upper()}_TOKENS"


def rule_class(n: Names) -> str:
    target = "" if n.target == ("trn2", "native") else f"    TARGET = {n.target!r}\n".replace("'", '"')
    return f'''@rule
class {n.cls}(Rule):
    """## What it does
    TODO: what {n.code} finds, in the words a user searches for, and what it leaves quiet. (The skeleton finds
    calls of `{n.placeholder}()`, a placeholder: replace it.)

    ## Example
    ```python
    {n.placeholder}()
    ```

    ## Use instead
    ```python
    # TODO: what to write on Neuron (per stack where they differ)
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "{n.code}"
    message = "`{{shown}}`: TODO say what fails on Neuron and what to write instead"
{target}    INVALID = (
        "{n.placeholder}()",
        "import helpers\\nhelpers.{n.placeholder}(1)",
    )
    VALID = (
        "{n.placeholder} = None",
        "# {n.placeholder}()\\nnote = '{n.placeholder}()'",
    )
'''


def check_function(n: Names) -> str:
    return f'''# TODO: substrings that every file able to fire holds; the engine skips the check in other files.
{n.tokens} = ("{n.placeholder}",)


@check(cst.Call, rules=({n.cls},), tokens={n.tokens})
def check_{n.snake}(node: cst.Call, ctx: Context) -> None:
    # TODO: match by qualified name (`ctx.qualname(node.func) == "torch.fft.rfft"` sees through `import torch as th`
    # and `from torch import fft`); the placeholder matches a made-up name by its spelling.
    if call_name(node) == "{n.placeholder}":
        ctx.report({n.cls}, node, shown=ctx.source(node.func))
'''


IMPORTS = (
    ("portcheck.rules", ["Rule", "rule"]),
    ("portcheck.static.check", ["Context", "check"]),
    ("portcheck.static.syntax", ["call_name"]),
)


def new_module(n: Names) -> str:
    return f'''"""TODO: what the rules of this module find ({n.code})."""

from __future__ import annotations

import libcst as cst

from portcheck.rules import Rule, rule
from portcheck.static.check import Context, check
from portcheck.static.syntax import call_name


{rule_class(n)}

{check_function(n)}'''


def extend_module(text: str, n: Names, where: str) -> str:
    """`text` (an existing module of the package) with the rule class after its last rule class (or before its
    first top-level definition) and the check at its end."""
    tree = ast.parse(text)
    if not any(isinstance(node, ast.Import) and any(a.name == "libcst" and a.asname == "cst" for a in node.names)
               for node in tree.body):
        raise Refused(f"{where} does not `import libcst as cst`; add the rule to a new module instead")
    taken = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    taken |= {target.id for node in tree.body if isinstance(node, ast.Assign)
              for target in node.targets if isinstance(target, ast.Name)}
    for name in (n.cls, f"check_{n.snake}", n.tokens):
        if name in taken:
            raise Refused(f"{where} already defines {name}")
    for module, wanted in IMPORTS:
        text = merge_import(text, module, wanted)
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    rules = [node for node in tree.body if isinstance(node, ast.ClassDef)
             and any(isinstance(d, ast.Name) and d.id == "rule" for d in node.decorator_list)]
    if rules:
        at = rules[-1].end_lineno or rules[-1].lineno
        lines[at:at] = ["\n", "\n", rule_class(n)]
    else:  # the module's first rule: right after its imports, two blank lines either side
        imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        at = imports[-1].end_lineno or imports[-1].lineno
        rest = lines[at:]
        while rest and not rest[0].strip():
            rest.pop(0)
        lines[at:] = ["\n", "\n", rule_class(n), *(["\n", "\n", *rest] if rest else [])]
    return "".join(lines).rstrip("\n") + "\n\n\n" + check_function(n)


def catalog_entry(n: Names) -> str:
    def toml(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string

    return (
        "[[rule]]\n"
        f"code = {toml(n.code)}\n"
        f"name = {toml(n.name)}\n"
        f"category = {toml(n.category)}\n"
        f"severity = {toml(n.severity)}\n"
        f"targets = [{', '.join(toml(t) for t in n.targets)}]\n"
        'summary = "TODO: one line for `portcheck rules`: the construct it finds"\n'
        'neuron = "TODO: why it matters on Neuron, paraphrased from the source; never from memory"\n'
        'source = "TODO: where that is written, cited as the header of the file says (SDK:path.rst, owner/repo#N)"\n'
    )


def insert_entry(text: str, entry: str, code: str) -> str:
    """The catalog text with `entry` placed before the first entry of a higher code, else at the end."""
    parts = re.split(r"(?m)^(?=\[\[rule\]\]\s*$)", text)
    for i, part in enumerate(parts[1:], 1):
        match = re.search(r'(?m)^code\s*=\s*"(PC\d{3})"', part)
        if match and match.group(1) > code:
            parts.insert(i, entry + "\n")
            return "".join(parts)
    return text.rstrip("\n") + "\n\n" + entry


def fixture(n: Names, chip_stacks: dict[str, str]) -> str:
    lines = [f"# {n.code} {n.name}: TODO the cases that matter. `# expect:` lines must fire; the rest stay quiet."]
    if set(n.targets) != {"trn2", "inf2", "trn1"}:
        lines.append("# fixture-targets: " + " ".join(f"{chip}:{chip_stacks[chip]}" for chip in n.targets))
    lines += [
        "",
        f"{n.placeholder}()  # expect: {n.code}",
        f'note = "{n.placeholder}() in a string stays quiet"',
        "",
    ]
    return "\n".join(lines)


# ---- the plan ---------------------------------------------------------------------------------------------------


def plan(root: Path, args: argparse.Namespace) -> tuple[Plan, Names]:
    code, name, category = args.code, args.name, args.category
    if not CODE.match(code):
        raise Refused(f"bad code {code!r}: a code is PC and three digits (PC399)")
    if not NAME.match(name) or len(name) > 40:
        raise Refused(f"bad name {name!r}: a name is kebab-case, lowercase letters and digits, at most 40 (my-rule)")
    known = categories(root)
    if category not in known:
        raise Refused(f"unknown category {category!r}: one of {', '.join(known)}")
    if category == "memory":
        raise Refused("memory rules are reported by `portcheck advise`: add the class to portcheck/advise/rules.py "
                      "(CONTRIBUTING.md, \"Adding a trace or advise rule\")")
    family = FAMILIES.get(category)
    if family is not None and code[2] not in (family, "9"):
        raise Refused(f"{code} is outside the {category} family: its codes are PC{family}xx (or PC9xx, experimental)")
    codes, names, retired = catalog(root)
    if code in codes:
        raise Refused(f"{code} is already used by {codes[code]}")
    if code in retired:
        raise Refused(f"{code} is retired (rules/catalog/retired.toml); codes are never reused")
    in_code = codes_in_code(root)
    if code in in_code:
        raise Refused(f"{code} is already used in {in_code[code].relative_to(root)}")
    if name in names:
        raise Refused(f"the name {name} is already used by {names[name]}")
    chip_stacks = chips(root)
    targets = tuple(t.strip() for t in args.targets.split(",") if t.strip()) if args.targets else tuple(chip_stacks)
    if not targets or not set(targets) <= set(chip_stacks):
        raise Refused(f"bad --targets {args.targets!r}: chips from {', '.join(chip_stacks)}")
    first = "trn2" if "trn2" in targets else targets[0]
    n = Names(code, name, category, args.severity, targets, (first, chip_stacks[first]))

    package = category.replace("-", "_")
    package_dir = root / "portcheck" / "static" / package
    if (root / "portcheck" / "static" / f"{package}.py").exists():
        raise Refused(f"{category} still lives in portcheck/static/{package}.py, not yet a package; "
                      f"finish its move to portcheck/static/{package}/ first")
    if not (package_dir / "__init__.py").is_file():
        raise Refused(f"portcheck/static/{package}/ does not exist yet: the {category} rules have not moved into "
                      "their package")
    if f"portcheck.static.{package}" not in homes(root):
        raise Refused(f"portcheck.static.{package} is not in HOMES (portcheck/rules.py): its rules would not load")
    module = args.module or n.snake
    if not module.isidentifier() or keyword.iskeyword(module) or module.startswith("_"):
        raise Refused(f"bad module name {module!r}: a Python identifier (my_rule)")
    taken = {node.name for path in package_dir.glob("*.py")
             for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, ast.ClassDef)}
    if n.cls in taken:
        raise Refused(f"a class {n.cls} already exists in portcheck/static/{package}/")

    out = Plan()
    target = package_dir / f"{module}.py"
    relative = target.relative_to(root).as_posix()
    if target.exists():
        if not args.module:
            raise Refused(f"{relative} already exists: pass --module {module} to add the rule to it")
        text = extend_module(target.read_text(encoding="utf-8"), n, relative)
        if len(text.splitlines()) >= 400:
            raise Refused(f"{relative} would grow to {len(text.splitlines())} lines, over the 400 a static module may "
                          "have (tests/test_architecture.py); use a new module")
        out.writes[target] = text
    else:
        out.writes[target] = new_module(n)
        out.created.append(target)

    toml_path = root / "rules" / "catalog" / f"{category}.toml"
    if toml_path.exists():
        out.writes[toml_path] = insert_entry(toml_path.read_text(encoding="utf-8"), catalog_entry(n), code)
    else:
        out.writes[toml_path] = f"# {category}: TODO what the category's rules cover.\n\n" + catalog_entry(n)
        out.created.append(toml_path)

    fixture_path = root / "fixtures" / "static" / category / f"{n.snake}.py"
    if fixture_path.exists():
        raise Refused(f"{fixture_path.relative_to(root).as_posix()} already exists")
    out.writes[fixture_path] = fixture(n, chip_stacks)
    out.created.append(fixture_path)

    for path, text in out.writes.items():  # what is written must at least parse
        if path.suffix == ".py":
            ast.parse(text, str(path))
        else:
            entries = tomllib.loads(text).get("rule", [])
            if sum(1 for e in entries if e.get("code") == code) != 1:
                raise Refused(f"could not place {code} in {path.relative_to(root)}")
    return out, n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scaffold a new static rule (CONTRIBUTING.md, \"Adding a rule\").")
    parser.add_argument("--code", required=True, help="PC and three digits, in the category's family (PC399)")
    parser.add_argument("--name", required=True, help="kebab-case name (my-rule)")
    parser.add_argument("--category", required=True, help="a rule category (unsupported-op)")
    parser.add_argument("--severity", required=True, choices=SEVERITIES)
    parser.add_argument("--module", help="a module of the category's package to add the rule to (default: a new "
                        "module named after the rule)")
    parser.add_argument("--targets", help="comma-separated chips (default: every chip in rules/targets.toml)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the checkout to write into (default: the one holding this script)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        out, n = plan(root, args)
    except Refused as exc:
        print(f"add_rule: {exc}", file=sys.stderr)
        return 2
    for path, text in out.writes.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for path in out.writes:
        verb = "created" if path in out.created else "updated"
        print(f"{verb} {path.relative_to(root).as_posix()}")
    print(f"\n{n.code} {n.name} ({n.cls}) passes the rule tests as it is. Next (CONTRIBUTING.md, \"Adding a rule\"):\n"
          f"  replace every TODO and the placeholder `{n.placeholder}`, then run\n"
          f"  python -m pytest tests/test_rules.py tests/test_fixtures.py -k \"{n.code} or {n.snake}\"\n"
          f"  python -m pytest tests/test_snapshots.py --snapshot-update -k \"test_rules or sarif\"  "
          "# they list every rule; read the diff\n"
          f"  python -m pytest tests/test_rule_snapshots.py --snapshot-update -k {n.code}  # the rule's own")
    return 0


if __name__ == "__main__":
    sys.exit(main())
