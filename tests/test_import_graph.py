"""The project's modules import each other without cycles, and along the arrows DESIGN.md draws.

Every import counts: at module level, under ``if TYPE_CHECKING:``, and
inside functions. Edges run module to module: a package's ``__init__``
re-exporting its own submodules is no edge back to them, so that
``from kerneltune.core import hookimpl`` inside a plugin does not tie the
plugin to every module of core.

Core has one door per audience: ``kerneltune.core`` for plugins (every name
of its ``__all__`` used by a plugin, an example or a documented recipe) and
``kerneltune.core.driving`` for drivers (the facade, the command and
search_params); nobody outside core reaches deeper.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

Graph = Mapping[str, Iterable[str]]


def package_roots(setup: Path) -> dict[str, str]:
    """setup.py's ``ROOTS``: import name -> folder, the mapping the install uses."""
    for node in ast.parse(setup.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ROOTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{setup} assigns no ROOTS")


def project_modules(base: Path, roots: Mapping[str, str]) -> dict[str, Path]:
    """Every module under ``roots``, by its import name."""
    modules = {}
    for name, folder in roots.items():
        top = base / folder
        for path in sorted(top.rglob("*.py")):
            parts = path.relative_to(top).with_suffix("").parts
            if "build" in parts:  # a build of triton_dist/, whose folder is its package
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((name, *parts))] = path
    return modules


def _imported(module: str, is_package: bool, tree: ast.AST) -> Iterable[str]:
    """Every dotted name an import anywhere in ``tree`` may refer to, relative imports resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".")[: None if is_package else -1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (a name resolves to its longest module prefix)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        targets = set()
        for name in _imported(module, is_package, ast.parse(path.read_text(), str(path))):
            parts = name.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            target = ".".join(parts)
            if parts and target != module and not (is_package and target.startswith(f"{module}.")):
                targets.add(target)
        graph[module] = targets
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components that hold a cycle (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def describe(component: list[str], graph: Graph) -> str:
    inside = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in inside]
    return "{" + ", ".join(component) + "}: " + "; ".join(edges)


def example_roots(base: Path) -> dict[str, str]:
    """The example plugin packages under ``examples/*/src``: import name -> folder."""
    return {
        init.parent.name: str(init.parent.relative_to(base))
        for init in sorted(base.glob("examples/*/src/*/__init__.py"))
    }


EXAMPLES = example_roots(ROOT)
#: The triton_dist facade, a distribution of its own: import name -> folder.
FACADE = {"triton_dist": "triton_dist"}
MODULES = project_modules(ROOT, {**package_roots(ROOT / "setup.py"), **FACADE, **EXAMPLES})
GRAPH = import_graph(MODULES)

#: core's roles, lowest floor first: a module imports only from its own floor or below.
FLOORS = (
    ("kerneltune.core.errors", "kerneltune.core.values"),
    (
        "kerneltune.core.background",
        "kerneltune.core.notices",
        "kerneltune.core.verbose",
        "kerneltune.core.private_files",
        "kerneltune.core.torch_devices",
    ),
    ("kerneltune.core.plugin_system",),
    ("kerneltune.core.compiling",),
    ("kerneltune.core.search", "kerneltune.core.isolation"),
    ("kerneltune.core.machine",),
    ("kerneltune.core.drivers",),
)


#: The doors: the plugin API, and the drivers' door.
PLUGIN_DOOR = "kerneltune.core"
DRIVER_DOOR = "kerneltune.core.driving"
DOORS = (PLUGIN_DOOR, DRIVER_DOOR)
SEARCH_PARAMS = "kerneltune.plugins.triton.search_params"
#: The root package's own modules (``kerneltune``, ``kerneltune.real_triton_dist``, ...).
ROOT_MODULES = set(project_modules(ROOT, {"kerneltune": package_roots(ROOT / "setup.py")["kerneltune"]}))


def is_driver(module: str) -> bool:
    """The root package, the command, the facade and search_params: what drives the engine."""
    return module in ROOT_MODULES or within(module, "kerneltune.cli", "triton_dist", SEARCH_PARAMS)


def floor(module: str) -> int:
    """The floor of a core module (the doors are above them all)."""
    for level, roles in enumerate(FLOORS):
        if any(module == role or module.startswith(f"{role}.") for role in roles):
            return level
    if module in DOORS:
        return len(FLOORS)
    raise AssertionError(f"{module} has no floor in FLOORS: add its role there")


def within(module: str, *packages: str) -> bool:
    """Whether ``module`` is one of ``packages`` or a module inside one."""
    return any(module == package or module.startswith(f"{package}.") for package in packages)


def family(module: str) -> str:
    """``kerneltune.plugins.caches.files`` -> ``kerneltune.plugins.caches``; a top-level module is its own."""
    return ".".join(module.split(".")[:3])


def test_the_graph_covers_every_layer():
    layers = {"kerneltune.core.machine.tuning", "kerneltune.plugins.triton.adapter", "kerneltune.cli"}
    assert layers | {"triton_dist.tune", DRIVER_DOOR, f"{SEARCH_PARAMS}.run"} <= set(GRAPH)


def test_every_core_module_has_a_floor_and_the_examples_are_read():
    assert set(EXAMPLES) == {"kerneltune_example_device", "kerneltune_example_plugin"}
    for module in GRAPH:
        if module.startswith("kerneltune.core"):
            floor(module)


def test_core_imports_run_down_the_floors_only():
    upward = [
        f"{module} (floor {floor(module)}) -> {target} (floor {floor(target)})"
        for module, targets in GRAPH.items()
        if module.startswith("kerneltune.core.")
        for target in sorted(targets)
        if target.startswith("kerneltune.core") and floor(target) > floor(module)
    ]
    assert not upward, "imports running back up core's floors:\n" + "\n".join(upward)


def test_no_import_cycles():
    found = cycles(GRAPH)
    assert not found, "import cycles:\n" + "\n".join(describe(c, GRAPH) for c in found)


@pytest.mark.parametrize(
    ("importer", "allowed"),
    [
        ("kerneltune.core", lambda module, target: target.startswith("kerneltune.core")),
        (
            "kerneltune.plugins.",
            lambda module, target: (
                not target.startswith("kerneltune.plugins") or family(target) == family(module)
            ),
        ),
        ("triton_dist", lambda module, target: target.startswith(("kerneltune.core", "triton_dist"))),
        (
            "kerneltune.plugins.",
            lambda module, target: (
                within(module, SEARCH_PARAMS)
                or target == PLUGIN_DOOR
                or not within(target, "kerneltune.core")
            ),
        ),
        *[
            (
                example,
                lambda module, target: target == "kerneltune.core" or not target.startswith("kerneltune."),
            )
            for example in sorted(EXAMPLES)
        ],
    ],
    ids=[
        "core imports only core",
        "a plugin imports no other plugin family",
        "triton_dist imports only core",
        "a plugin imports core only through kerneltune.core",
        *[f"{example} imports only kerneltune.core" for example in sorted(EXAMPLES)],
    ],
)
def test_imports_follow_the_arrows(importer, allowed):
    breaking = [
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module.startswith(importer)
        for target in sorted(targets)
        if not allowed(module, target)
    ]
    assert not breaking, "imports against the arrows:\n" + "\n".join(breaking)


def test_drivers_import_core_only_through_the_two_doors():
    drivers = [module for module in GRAPH if is_driver(module)]
    side_doors = [
        f"{module} -> {target}"
        for module in drivers
        for target in sorted(GRAPH[module])
        if within(target, "kerneltune.core") and target not in DOORS
    ]
    assert {"kerneltune", "kerneltune.cli", "triton_dist.tune", f"{SEARCH_PARAMS}.run"} <= set(drivers)
    assert not side_doors, "drivers reaching past the doors:\n" + "\n".join(side_doors)


def imported_from(module: str, path: Path) -> set[str]:
    """The names ``path`` imports from ``module`` (``from module import a, b``)."""
    return {
        alias.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == module and not node.level
        for alias in node.names
    }


def documented_from_core(text: str) -> set[str]:
    """The names a page imports from ``kerneltune.core`` or names as ``kerneltune.core.<name>``."""
    named = set(re.findall(r"kerneltune\.core\.(\w+)", text))
    for listed in re.findall(r"from kerneltune\.core import (\([^)]*\)|[^\n]*)", text):
        named.update(name.strip() for name in listed.strip("()").split(","))
    return named


def test_every_name_of_the_plugin_door_is_used_and_there_are_at_most_80():
    import kerneltune.core

    plugins_and_examples = [
        path
        for module, path in MODULES.items()
        if within(module, "kerneltune.plugins", *EXAMPLES) and not within(module, SEARCH_PARAMS)
    ]
    used = set().union(*(imported_from(PLUGIN_DOOR, path) for path in plugins_and_examples))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    used |= set().union(*(documented_from_core(page.read_text()) for page in pages))
    door = kerneltune.core.__all__
    assert len(door) <= 80, f"kerneltune.core.__all__ holds {len(door)} names"
    unused = sorted(set(door) - used)
    assert not unused, (
        f"in kerneltune.core.__all__ but used by no plugin, example or documented recipe: {unused}"
    )


@pytest.mark.parametrize("door", DOORS)
def test_a_door_holds_exactly_its_all_and_the_doors_share_no_name(door):
    import importlib

    path = MODULES[door]
    bound = {
        alias.asname or alias.name
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert bound == set(importlib.import_module(door).__all__)
    plugin_door, driver_door = (set(importlib.import_module(d).__all__) for d in DOORS)
    assert not plugin_door & driver_door


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "e"}, "e": set()}, [["a", "b"], ["c", "d"]]),
        ({"a": {"a"}, "b": {"a"}}, [["a"]]),
        ({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}, []),
    ],
)
def test_cycles_finds_every_strongly_connected_component(graph, expected):
    assert cycles(graph) == expected


def test_type_only_relative_and_deferred_imports_make_edges(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.first import A\n")
    (package / "first.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.second import B\nA = 1\n"
    )
    (package / "second.py").write_text("def f():\n    from . import third\n")
    (package / "third.py").write_text("import pkg.sub.fourth\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "fourth.py").write_text("from ..first import A\n")
    graph = import_graph(project_modules(tmp_path, {"pkg": "pkg"}))
    assert graph == {
        "pkg": set(),  # its re-export of pkg.first is no edge
        "pkg.first": {"pkg.second"},
        "pkg.second": {"pkg", "pkg.third"},
        "pkg.third": {"pkg.sub.fourth"},
        "pkg.sub": set(),
        "pkg.sub.fourth": {"pkg.first"},
    }
    assert cycles(graph) == [["pkg.first", "pkg.second", "pkg.sub.fourth", "pkg.third"]]
