"""The shape of the code, held by tests: where a rule lives, which layer may import which, how large a static module
may grow, and that the reports read the rule registry without loading an engine."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from portcheck.knowledge import load, rules_dir
from portcheck.rules import Pass, package_of, registry

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "portcheck"


def test_a_rule_lives_in_the_package_of_its_category():
    for code, cls in registry().items():
        category = load().rules[code].category
        if Pass.STATIC in cls.passes:
            assert cls.__module__.startswith(f"portcheck.static.{package_of(category)}."), (code, cls.__module__)
        elif cls.passes == (Pass.TRACE,):
            assert cls.__module__ == "portcheck.dynamic.rules", code
        else:
            assert cls.passes == (Pass.ADVISE,) and cls.__module__ == "portcheck.advise.rules", code


def test_catalog_files_are_named_as_the_categories():
    for path in (rules_dir() / "catalog").glob("*.toml"):
        if path.stem != "retired":
            assert {info.category for info in load().rules.values() if f"{info.category}.toml" == path.name}, path
    for info in load().rules.values():
        assert (rules_dir() / "catalog" / f"{info.category}.toml").is_file(), info.code


def test_the_command_line_only_parses_calls_and_prints():
    # cli.py: arguments -> options (portcheck/arguments.py), one call into commands, the output and the exit code.
    assert len((PACKAGE / "cli.py").read_text().splitlines()) <= 300


# The modules over 400 lines, each with why. A module not named here that grows past 400 fails the test below.
LONG_MODULES = {
    "portcheck/advise/bringup_template.py": "the script `advise --emit-script` writes: one standalone file by design "
                                           "(it imports no portcheck)",
    "portcheck/advise/plan.py": "make_plan's sizing steps, each reading the last; still to be split by step (its "
                                "values moved to advise/values.py)",
    "portcheck/dynamic/graph.py": "the one walk over the captured graph's nodes with every check it runs; still to be "
                                  "split by check",
}


def test_every_module_is_under_400_lines_or_says_why_not():
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {path: lines for path, lines in sizes.items() if lines > 400 and path not in LONG_MODULES} == {}
    assert {path for path in LONG_MODULES if sizes.get(path, 0) <= 400} == set()  # the list stays true


def test_every_static_module_is_under_400_lines():
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
             for path in (PACKAGE / "static").rglob("*.py")}
    assert {path: lines for path, lines in sizes.items() if lines >= 400} == {}


def _imports(path: Path) -> set[str]:
    """The portcheck modules a file imports: at the top, inside functions, and under `if TYPE_CHECKING:` (a type
    is a dependency too). `from portcheck.x import y` counts `portcheck.x.y` where y is a module, else `portcheck.x`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert not node.level, f"{path}: a relative import"
            for alias in node.names:
                module = f"{node.module}.{alias.name}"
                found.add(module if module in MODULE_PATHS else node.module)
    return found


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
MODULE_PATHS = set(MODULES)
GRAPH = {name: _imports(path) & MODULE_PATHS for name, path in MODULES.items()}

# The layers, top first: a module imports only from its own layer or one below it. A layer is a top-level module or
# a subpackage of portcheck; `portcheck` itself is the package's __init__ (its version).
TIERS = (
    ("__main__",),
    ("cli",),
    ("arguments",),
    ("commands",),
    ("server",),
    ("review", "baseline"),
    ("report",),
    ("advise",),
    ("dynamic",),
    ("static",),
    ("cache", "config"),
    ("atomic",),
    ("rules",),
    ("knowledge",),
    ("releases",),
    ("findings",),
    ("traced", "escape", "errors", "gitrun", "summaries"),
    ("",),
)
TIER = {layer: depth for depth, layers in enumerate(TIERS) for layer in layers}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_is_in_a_layer():
    assert {_layer(module) for module in GRAPH} - set(TIER) == set()


def test_no_layer_imports_one_above_it():
    upward = sorted((source, target) for source, targets in GRAPH.items() for target in targets
                    if TIER[_layer(target)] < TIER[_layer(source)])
    assert upward == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            if component:
                found.append(sorted([node, *component]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_type_only_imports_included():
    assert _cycles(GRAPH) == []


def test_the_cycle_check_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The plain values every layer may read: findings, the rule classes, Neuron's facts, what a trace found
# (portcheck/traced.py: the graph, the op inventory, the shape probe), escaping text for a medium
# (portcheck/escape.py), and the values of a plan (portcheck/advise/values.py, for types only).
VALUES = {"portcheck", "portcheck.findings", "portcheck.rules", "portcheck.knowledge", "portcheck.traced",
          "portcheck.escape", "portcheck.advise.values"}


def test_reports_depend_only_on_findings_rules_knowledge_and_trace_values():
    for module, imports in GRAPH.items():
        if _layer(module) == "report":
            outside = {name for name in imports if not name.startswith("portcheck.report")} - VALUES
            assert outside == set(), module


def test_the_trace_values_depend_on_no_other_module():
    # Every layer imports portcheck.traced: it must not bring the engines (or torch) with it.
    assert GRAPH["portcheck.traced"] == set()


ENGINES = (
    "portcheck.static.engine", "portcheck.static.scan", "portcheck.static.positions", "portcheck.static.rewrite",
    "portcheck.static.discover", "portcheck.cache", "portcheck.commands", "portcheck.arguments", "portcheck.cli",
    "portcheck.review",
    "portcheck.dynamic.graph", "portcheck.dynamic.capture", "portcheck.dynamic.child", "portcheck.dynamic.load",
    "portcheck.dynamic.runner", "portcheck.dynamic.shapes", "portcheck.dynamic.results", "portcheck.dynamic.facts",
    "portcheck.dynamic.outcome",
    "portcheck.advise.plan", "portcheck.advise.sizing", "portcheck.advise.flags", "portcheck.advise.model",
    "portcheck.advise.script", "torch",
)


def test_rule_docs_and_sarif_help_load_no_engine():
    code = (
        "import io, json, sys\n"
        "from portcheck.findings import ScanResult, Target\n"
        "from portcheck.knowledge import load\n"
        "from portcheck.report.ruledoc import rule_doc, write_rules\n"
        "from portcheck.report.sarif import write_sarif\n"
        "docs = [rule_doc(info) for info in load().rules.values()]\n"
        "write_rules(io.StringIO(), as_json=True, rich_table=False)\n"
        "write_sarif(ScanResult(Target('trn2', 'native')), io.StringIO())\n"
        "print(json.dumps([len(docs), sorted(m for m in sys.modules if m.startswith(('portcheck', 'torch')))]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    count, loaded = json.loads(done.stdout)
    assert count == len(load().rules)
    assert sorted(set(loaded) & set(ENGINES)) == []
    assert "portcheck.static.distributed.nccl" in loaded  # the rule classes themselves are what it reads


@pytest.mark.parametrize("module", ["portcheck.static.engine", "portcheck.cli"])
def test_the_check_itself_can_fail(module):
    # The engine does load the engines: the list above is not vacuous.
    done = subprocess.run([sys.executable, "-c", f"import {module}, sys; print(sorted(sys.modules))"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert set(ENGINES) & set(eval(done.stdout))


@pytest.mark.xdist_group("xdist-group-check")
def test_xdist_groups_take_effect(request):
    """Tests that share a traced model are grouped onto one worker (tests/conftest.py): under xdist's loadgroup
    scheduling a grouped test's node id carries its group, or the group was ignored (as with pytest 9.2)."""
    worker = getattr(request.config, "workerinput", None)
    if not os.environ.get("PYTEST_XDIST_WORKER") or worker is None:
        pytest.skip("only under pytest-xdist")
    argv = worker["mainargv"]  # the project's addopts ask for loadgroup; a --dist on the command line wins
    asked = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--dist"]
    asked += [a[len("--dist="):] for a in argv if a.startswith("--dist=")]
    if asked and asked[-1] != "loadgroup":
        pytest.skip("only under pytest-xdist's loadgroup scheduling")
    assert request.node.nodeid.endswith("@xdist-group-check"), request.node.nodeid


# A clone must stand alone: nothing shipped or cited may point at a file outside the repository (the notes the
# project started from sat beside it, outside; their public sources are cited instead).
# (the sibling folder by a relative path or by name; not a folder of that name deep in a path, as in espnet2)
OUTSIDE = re.compile(r"(?<![\w-])(?<!\w/)" + "shared" + r"/|/" + "work" + r"/")


def test_nothing_refers_to_a_file_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    found = []
    for name in tracked.decode().split("\0"):
        # a measurement record keeps the command line it ran, interpreter path included
        if not name or name.startswith("benchmarks/results/") or not (ROOT / name).is_file():
            continue
        text = (ROOT / name).read_bytes().decode("utf-8", "replace")
        found += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert found == []


def test_the_categories_are_written_once():
    """findings.Category is the list: the catalog's files, the code families and the static packages follow it."""
    from portcheck.findings import CATEGORIES, Category
    from portcheck.knowledge import FAMILIES
    from portcheck.rules import HOMES

    assert tuple(c.value for c in Category) == CATEGORIES
    assert {info.category for info in load().rules.values()} == set(CATEGORIES)
    assert sorted(c for family in FAMILIES.values() for c in family) == sorted(CATEGORIES)
    assert HOMES[:-2] == tuple(f"portcheck.static.{package_of(c)}" for c in CATEGORIES if c != Category.MEMORY)
    for home in HOMES[:-2]:
        assert (PACKAGE / "static" / home.rsplit(".", 1)[-1] / "__init__.py").is_file(), home
