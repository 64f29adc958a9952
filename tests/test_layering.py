"""The package's layers (docs/ARCHITECTURE.md): no import goes to a higher layer or across to a
sibling package of the same layer, and no module imports itself back through others. Every
import counts: at the top of a module, inside a function (a lazy import) and under
TYPE_CHECKING."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "offline_mem"
NAME = "offline_mem"

# Lowest first. A module may import its own component and any component of a lower layer.
# Components are sub-packages, or named groups of the modules directly in offline_mem/.
LAYERS: list[dict[str, tuple[str, ...]]] = [
    # value types, errors, configuration and argument checks: what every layer may use
    {"foundation": ("errors", "values", "timeutil", "config", "message_parts", "validation")},
    # the memory file, and the pinned models: neither knows the other
    {"store": ("store",), "pinned": ("pinned",)},
    # what runs models against the file: an add's extraction, a search, export and import
    {"extraction": ("extraction",), "retrieval": ("retrieval",), "transfer": ("transfer",)},
    # the public API
    {
        "api": (
            "__init__",
            "memory",
            "memory_parts",
            "async_memory",
            "testing",
        )
    },
    # its front ends
    {"mcp": ("mcp",)},
    {"server": ("server",)},  # serves the MCP tools over HTTP
    {"cli": ("cli",)},
]
MAX_TOP_LEVEL_MODULES = 12


def component_layers() -> dict[str, tuple[str, int]]:
    """First part of a module's name under offline_mem -> (component, layer)."""
    found = {}
    for layer, components in enumerate(LAYERS):
        for component, parts in components.items():
            for part in parts:
                found[part] = (component, layer)
    return found


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """offline_mem's modules by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = [NAME, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: set[str]) -> Iterator[tuple[str, int]]:
    """(imported module of offline_mem, line) for every import statement anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == NAME or alias.name.startswith(NAME + "."):
                    yield _nearest_module(alias.name, modules), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source != NAME and not source.startswith(NAME + "."):
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                yield (sub if sub in modules else _nearest_module(source, modules)), node.lineno


def _nearest_module(name: str, modules: set[str]) -> str:
    while name not in modules and "." in name:
        name = name.rpartition(".")[0]
    return name


def import_graph(package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """module -> {imported module: first line}, within offline_mem."""
    files = module_files(package)
    graph: dict[str, dict[str, int]] = {}
    for name, path in files.items():
        edges = graph.setdefault(name, {})
        for target, line in imports_of(name, path, set(files)):
            if target != name:
                edges.setdefault(target, line)
    return graph


def placement(module: str) -> tuple[str, int] | None:
    parts = module.split(".")
    return component_layers().get(parts[1] if len(parts) > 1 else "__init__")


def layer_violations(graph: dict[str, dict[str, int]]) -> list[str]:
    problems = []
    for source, targets in sorted(graph.items()):
        here = placement(source)
        for target, line in sorted(targets.items()):
            there = placement(target)
            if here is None or there is None or here[0] == there[0]:
                continue
            if there[1] >= here[1]:
                way = "up" if there[1] > here[1] else "across"
                problems.append(
                    f"{source}:{line} imports {target} ({way}: {here[0]} -> {there[0]})"
                )
    return problems


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


GRAPH = import_graph()


def test_every_module_has_a_place_in_the_layers() -> None:
    assert [m for m in GRAPH if placement(m) is None] == []


def test_no_import_goes_up_or_across() -> None:
    assert layer_violations(GRAPH) == []


def test_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def test_at_most_twelve_modules_directly_in_the_package() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_the_store_and_the_models_do_not_know_each_other() -> None:
    """The two rules the issue that made the layers names (also covered by the layers)."""
    for source, targets in GRAPH.items():
        for target in targets:
            pair = (source.split(".")[1:2], target.split(".")[1:2])
            assert pair not in ((["store"], ["pinned"]), (["pinned"], ["store"])), (source, target)


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        # a lazy import up, from the store to the public API
        ("store/bad.py", "def f():\n    from ..memory import Memory\n", "up: store -> api"),
        # across: the store reaching into the models
        ("store/bad.py", "from ..pinned import embedder\n", "across: store -> pinned"),
        # under TYPE_CHECKING, from the foundation to the store
        (
            "values.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from .store.records import MemoryRecord\n",
            "up: foundation -> store",
        ),
    ],
)
def test_the_checker_finds_a_bad_import(
    tmp_path: Path, where: str, source: str, expected: str
) -> None:
    package = tmp_path / NAME
    for path in ("__init__.py", "memory.py", "values.py", "store/__init__.py",
                 "store/db.py", "pinned/__init__.py", "pinned/embedder.py"):  # fmt: skip
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text("")
    (package / where).write_text(source)
    problems = layer_violations(import_graph(package))
    assert len(problems) == 1 and expected in problems[0], problems


def test_the_checker_finds_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / NAME
    (package / "pinned").mkdir(parents=True)
    for path in ("__init__.py", "pinned/__init__.py"):
        (package / path).write_text("")
    (package / "pinned" / "entities.py").write_text("def f():\n    from .nlp import parse\n")
    (package / "pinned" / "nlp.py").write_text("from .entities import normalize_entity\n")
    assert cycles(import_graph(package)) == [[f"{NAME}.pinned.entities", f"{NAME}.pinned.nlp"]]
