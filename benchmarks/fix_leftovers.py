"""`fix_check.py --ecosystem`: portcheck's fixes over every project of the ecosystem benchmark, a project per run.

For each project and target, the extracted sources are copied to a temporary directory and scanned (JSON), fixed
with ``--fix --unsafe-fixes``, scanned again, and fixed a second time. A changed file passes when it compiles, no
finding with a fix is left, the diff touches only lines of fixed findings (plus imports added or removed), the
second pass changed nothing, and the fixes left no leftovers (see ``leftovers``). Test files are included
(``--tests include``): fixes must also refuse inside CUDA-gated tests. Standard library only.
"""

from __future__ import annotations

import ast
import difflib
import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecosystem import load_projects

Run = Callable[..., subprocess.CompletedProcess]
# Calls whose result is the point: as a statement of their own (a tensor's `.to(...)`), the result is thrown away.
_RESULT_METHODS = frozenset({"to", "float", "bfloat16", "half", "double", "cpu", "contiguous", "type"})
# `module.to(...)` moves a module in place: its result may be dropped. Receivers named like modules are skipped.
_MODULE_LIKE = re.compile(r"self|model|module|net|ema|layer|encoder|decoder", re.IGNORECASE)


def _bodies(tree: ast.AST) -> list[list[ast.stmt]]:
    found = []
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                found.append(block)
    return found


def _unused_imports(tree: ast.Module) -> set[str]:
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                if name != "*":
                    bound[name] = ast.unparse(node)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {c.value for c in ast.walk(tree) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return {f"{name} ({statement})" for name, statement in bound.items() if name not in used}


def _shapes(tree: ast.Module, changed: set[int]) -> Counter[str]:
    """Leftover shapes in a tree, by kind: `if True:`, `if ...: pass`, a statement equal to the one before it,
    and (on changed lines) a result-returning call used as a statement."""
    counts: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            if isinstance(node.test, ast.Constant) and node.test.value is True:
                counts["`if True:`"] += 1
            if all(isinstance(s, ast.Pass) for s in node.body) and not node.orelse:
                counts[f"empty `if {ast.unparse(node.test)}: pass`"] += 1
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node.lineno in changed
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr in _RESULT_METHODS
                and not _MODULE_LIKE.search(ast.unparse(node.value.func.value))):
            counts[f"result thrown away: `{ast.unparse(node)}`"] += 1
    for block in _bodies(tree):
        for first, second in itertools.pairwise(block):
            if not isinstance(first, ast.Pass) and ast.dump(first) == ast.dump(second):
                counts[f"repeated statement: `{ast.unparse(second)[:60]}`"] += 1
    return counts


def leftovers(before: str, after: str, changed: set[int]) -> list[str]:
    """What the fix left behind in `after` that `before` did not have."""
    try:
        old, new = ast.parse(before), ast.parse(after)
    except SyntaxError:
        return []
    found = [kind for kind, n in (_shapes(new, changed) - _shapes(old, set())).items() for _ in range(n)]
    found += [f"import made unused: {name}" for name in sorted(_unused_imports(new) - _unused_imports(old))]
    return found


def _scan(run: Run, folder: Path, chip: str, stack: str, work: Path) -> dict[str, list[dict[str, Any]]]:
    done = run("--format", "json", "--exit-zero", "--no-cache", "--tests", "include", "--no-respect-gitignore",
               "--target", chip, "--stack", stack, folder.name, cwd=work)
    if done.returncode != 0:
        raise SystemExit(f"fix_check: portcheck failed on {folder}: {done.stderr.strip()[-500:]}")
    by_path: dict[str, list[dict[str, Any]]] = {}
    for finding in json.loads(done.stdout)["findings"]:
        by_path.setdefault(finding["path"], []).append(finding)
    return by_path


def _fix(run: Run, folder: Path, chip: str, stack: str, work: Path) -> None:
    run("--fix", "--unsafe-fixes", "--exit-zero", "--no-cache", "--tests", "include", "--no-respect-gitignore",
        "--target", chip, "--stack", stack, folder.name, cwd=work)


def _texts(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder.parent).as_posix(): p.read_text(encoding="utf-8", errors="surrogateescape")
            for p in sorted(folder.rglob("*.py"))}


def _emptied_ifs(lines: list[str], start: int, stop: int, allowed: set[int]) -> set[int]:
    """Lines (1-based) of the `if` headers in a deleted run `lines[start:stop]` whose whole statement went with
    them: an `if` without `else` whose test calls nothing, and whose body lines were all fixed findings' lines.
    The fixes remove an `if ...: pass` they leave behind; that is a tidy-up, not a stray change."""
    text = textwrap.dedent("\n".join(lines[start:stop]))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    headers: set[int] = set()
    for stmt in tree.body:
        if not isinstance(stmt, ast.If) or stmt.orelse or any(
                isinstance(n, (ast.Call, ast.Await, ast.NamedExpr)) for n in ast.walk(stmt.test)):
            return set()
        body_start = stmt.body[0].lineno
        if not all(start + line in allowed for line in range(body_start, (stmt.end_lineno or body_start) + 1)
                   if lines[start + line - 1].strip() and not lines[start + line - 1].strip().startswith("#")):
            return set()
        headers.update(start + line for line in range(stmt.lineno, body_start))
    return headers


def stray_lines(before: str, after: str, allowed: set[int]) -> tuple[list[int], set[int]]:
    """Lines (1-based, of `before`) the fixes changed that are not a fixed finding's line (`allowed`), an import
    they added or made unused, or the header of an `if` they emptied; and the changed lines of `after`."""
    stray, changed = [], set()
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(j1 + 1, j2 + 1))
        if tag in ("replace", "delete"):
            tidied = _emptied_ifs(matcher.a, i1, i2, allowed) if tag == "delete" else set()
            stray += [i + 1 for i in range(i1, i2) if i + 1 not in allowed and i + 1 not in tidied
                      and not (tag == "delete" and matcher.a[i].startswith(("from ", "import ")))]
        if tag == "insert":
            added = matcher.b[j1:j2]
            if not all(line.startswith(("import ", "from ")) for line in added) and i1 + 1 not in allowed:
                stray.append(i1 + 1)
    return stray, changed


def check_project(folder: Path, chip: str, stack: str, run: Run,
                  allowed_lines: Callable[[list[dict[str, Any]]], set[int]]) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        copy = work / folder.name
        shutil.copytree(folder, copy)
        before_texts = _texts(copy)
        before = _scan(run, copy, chip, stack, work)
        _fix(run, copy, chip, stack, work)
        after_texts = _texts(copy)
        after = _scan(run, copy, chip, stack, work)
        _fix(run, copy, chip, stack, work)
        again_texts = _texts(copy)
    rows = []
    for path, old in before_texts.items():
        new = after_texts[path]
        if new == old:
            continue
        try:
            compile(new, path, "exec", dont_inherit=True)
            compiles = True
        except SyntaxError:
            compiles = False
        stray, changed = stray_lines(old, new, allowed_lines(before.get(path, [])))
        left = after.get(path, [])
        rows.append({
            "file": path, "target": f"{chip}:{stack}", "before": len(before.get(path, [])),
            "fixable": sum(1 for f in before.get(path, []) if f["fix"] is not None),
            "fixed": len(before.get(path, [])) - len(left), "remaining": len(left), "compiles": compiles,
            "only_fixed_lines": not stray, "stray_lines": stray[:10],
            "remaining_fixable": [f"{f['line']}:{f['code']}" for f in left if f["fix"] is not None],
            "idempotent": again_texts[path] == new,
            "leftovers": leftovers(old, new, changed),
        })
    return rows


def check_ecosystem(cache_dir: Path, targets: list[str], json_out: str | None, run: Run,
                    allowed_lines: Callable[[list[dict[str, Any]]], set[int]]) -> int:
    root = cache_dir.expanduser().resolve()
    rows: list[dict[str, Any]] = []
    for project in load_projects():
        folder = next((f for f in (root / "ecosystem" / project.folder, root / project.folder) if f.is_dir()), None)
        if folder is None:
            print(f"fix_check: {project.folder} is not extracted under {root}; run benchmarks/ecosystem.py first",
                  file=sys.stderr)
            return 2
        for target in targets:
            chip, _, stack = target.partition(":")
            rows += check_project(folder, chip, stack, run, allowed_lines)
    bad = [r for r in rows if not (r["compiles"] and r["only_fixed_lines"] and not r["remaining_fixable"]
                                   and r["idempotent"] and not r["leftovers"])]
    print(f"{len(rows)} fixed files (rows) over {len(targets)} targets; {len(bad)} with a problem")
    for r in bad:
        problems = ([] if r["compiles"] else ["does not compile"]) + (
            [] if r["only_fixed_lines"] else [f"stray lines {r['stray_lines']}"]) + (
            [f"fixable findings left {r['remaining_fixable'][:5]}"] if r["remaining_fixable"] else []) + (
            [] if r["idempotent"] else ["a second fix pass changes it"]) + r["leftovers"]
        print(f"  {r['file']} [{r['target']}]: " + "; ".join(problems))
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 1 if bad else 0


__all__ = ["check_ecosystem", "check_project", "leftovers"]
