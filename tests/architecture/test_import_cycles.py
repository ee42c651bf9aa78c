"""The project's module-level import graph has no cycle but the allowlisted ones, and the
serving floor (``ragspine_query``) never imports the build side or Dagster at module level
(issue 24: "a test fails on any import cycle"; "query ↛ index, dagster").

The graph is built statically with :mod:`ast` from every ``.py`` file of the project
packages, so it sees what a plain ``import`` runs and needs no import to succeed:

* An edge ``a -> b`` is one ``import``/``from ... import`` statement in module ``a`` that is
  executed when ``a`` is imported: at module level, also inside a module-level ``if``,
  ``try``, ``with`` or class body. Imports inside a function (or lambda) are not counted:
  they run later, when the function is called. Imports under ``if TYPE_CHECKING:`` never
  run; they are kept in a second graph (:data:`TYPE_GRAPH`) that is also checked, so a
  type-only back reference (a chunker naming the document model of a module that imports
  the chunkers) is a cycle too.
* ``from p import n`` points at the module ``p.n`` when that is a module of the project,
  else at ``p`` (its ``__init__``); ``import p.q`` points at ``p.q``. Parent packages'
  ``__init__`` modules are not added (the convention of grimp/import-linter).

A third graph (:func:`build_all_imports_graph`) counts every import statement of the
project, function-level ones included (issue 39: a lazy import must not hide a cycle);
it must have no cycle at all. A lazy import of an optional *dependency* (numba, onnx,
fastapi…) is not an edge of these graphs, which hold the project's own modules only.

A cycle is a strongly connected component of more than one module (or a module importing
itself). Each one still in the code is listed in :data:`ALLOWED_CYCLES` with the reason it
is there; the list can only shrink: a new cycle, or one that grows, fails with a path
through it and the file and line of every import on that path; an entry that no longer
matches any cycle fails too, so it is removed when the cycle is broken.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The project's import packages.
PACKAGES = ("ragspine_core", "ragspine_index", "ragspine_assets", "ragspine_query", "ragspine_tools")
#: Top-level packages the serving floor must not import at module level (and ``dagster_*``).
SERVING_FORBIDDEN = ("ragspine_assets", "ragspine_index", "ragspine_tools", "dagster")

#: Cycles that remain today, each a set of modules (one strongly connected component). A
#: cycle found in the code must be a subset of one entry. Break one, then delete its entry.
ALLOWED_CYCLES: dict[str, frozenset[str]] = {
    # empty: the parsing <-> chunking knot and converters <-> converters.files are broken
    # (issue 24); agent_api.py (was link.py) <-> retriever.py is tied only by function-level imports, which
    # this graph does not count. An entry is {"why it is still there": frozenset(modules)}.
}


@dataclass
class Graph:
    """Modules and their import edges, each edge with the places that make it."""

    root: Path
    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def add(self, source: str, target: str, lineno: int) -> None:
        self.edges.setdefault(source, {}).setdefault(target, []).append(lineno)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_level_imports(tree: ast.Module) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """``(run, type_only)``: the import statements executed when the module is imported,
    and those under ``if TYPE_CHECKING:``; function bodies are skipped."""
    run: list[ast.stmt] = []
    type_only: list[ast.stmt] = []

    def visit(body: list[ast.stmt], out: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue  # runs when called, not when imported
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.body, type_only)
                visit(node.orelse, out)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, out)
            else:
                for name in ("body", "orelse", "finalbody"):
                    visit(getattr(node, name, None) or [], out)
                for handler in getattr(node, "handlers", None) or []:
                    visit(handler.body, out)
                for case in getattr(node, "cases", None) or []:
                    visit(case.body, out)

    visit(tree.body, run)
    return run, type_only


def _resolve(node: ast.stmt, importer: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    """The project modules one import statement points at."""
    targets: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                targets.append(name)
        return targets
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = importer.split(".") if is_package else importer.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    for alias in node.names:
        candidate = f"{prefix}.{alias.name}"
        if candidate in modules:
            targets.append(candidate)
        elif prefix in modules:
            targets.append(prefix)
    return targets


def build_graphs(root: Path = REPO_ROOT, packages: tuple[str, ...] = PACKAGES) -> tuple[Graph, Graph]:
    """``(runtime graph, runtime + TYPE_CHECKING graph)`` of ``packages`` under ``root``."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            modules[module_name(path, root)] = path
    run_graph, type_graph = Graph(root, dict(modules)), Graph(root, dict(modules))
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        run, type_only = module_level_imports(tree)
        is_package = path.name == "__init__.py"
        for node in run:
            for target in _resolve(node, name, is_package, modules):
                run_graph.add(name, target, node.lineno)
                type_graph.add(name, target, node.lineno)
        for node in type_only:
            for target in _resolve(node, name, is_package, modules):
                type_graph.add(name, target, node.lineno)
    return run_graph, type_graph


def build_all_imports_graph(root: Path = REPO_ROOT, packages: tuple[str, ...] = PACKAGES) -> Graph:
    """Every project import of ``packages``, wherever it stands: module level, under
    ``TYPE_CHECKING`` and inside functions."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            modules[module_name(path, root)] = path
    graph = Graph(root, dict(modules))
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _resolve(node, name, is_package, modules):
                    graph.add(name, target, node.lineno)
    return graph


def cycles(graph: Graph) -> list[frozenset[str]]:
    """Strongly connected components with a cycle (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.edges.get(node, {}):
                    found.append(frozenset(component))
    return sorted(found, key=lambda c: sorted(c))


def cycle_path(graph: Graph, component: frozenset[str]) -> list[str]:
    """One shortest cycle through the component's first module (breadth-first)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph.edges.get(node, {})):
                if child not in component:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in parents:
                    parents[child] = node
                    nxt.append(child)
        frontier = nxt
    return [start]


def describe(graph: Graph, component: frozenset[str]) -> str:
    path = cycle_path(graph, component)
    lines = [f"import cycle of {len(component)} module(s): " + " -> ".join(path)]
    for source, target in zip(path, path[1:]):
        where = graph.modules[source].relative_to(graph.root).as_posix()
        at = ", ".join(str(n) for n in sorted(set(graph.edges[source][target])))
        lines.append(f"    {where}:{at} imports {target}")
    lines.append("  members: " + ", ".join(sorted(component)))
    return "\n".join(lines)


def unexpected_cycles(graph: Graph, allowlist: dict[str, frozenset[str]] | None = None) -> tuple[list[str], list[str]]:
    """``(descriptions of cycles not allowed, allowlist entries that match no cycle)``."""
    allowlist = ALLOWED_CYCLES if allowlist is None else allowlist
    found = cycles(graph)
    bad = [describe(graph, c) for c in found if not any(c <= allowed for allowed in allowlist.values())]
    stale = [name for name, allowed in allowlist.items() if not any(c <= allowed for c in found)]
    return bad, stale


@pytest.fixture(scope="module")
def graphs() -> tuple[Graph, Graph]:
    return build_graphs()


def test_no_import_cycle_with_function_level_imports_counted():
    """0 cycles once lazy (function-level) project imports count too (issue 39)."""
    graph = build_all_imports_graph()
    found = cycles(graph)
    if found:
        pytest.fail("import cycles through function-level imports (move what belongs elsewhere; a lazy import "
                    "does not break a cycle):\n" + "\n".join(describe(graph, c) for c in found), pytrace=False)


def test_the_graph_sees_the_project(graphs):
    run_graph, _ = graphs
    assert "ragspine_query.retriever" in run_graph.modules
    assert "ragspine_index.source_documents.parse_library" in run_graph.modules
    assert "ragspine_core.records" in run_graph.edges["ragspine_index.chunking.build"]


@pytest.mark.parametrize("which", ["runtime", "with TYPE_CHECKING imports"])
def test_no_import_cycle_beyond_the_allowlist(graphs, which):
    graph = graphs[0] if which == "runtime" else graphs[1]
    bad, stale = unexpected_cycles(graph)
    message = []
    if bad:
        message.append("module-level import cycles (break them; see ALLOWED_CYCLES in this file):\n"
                       + "\n".join(bad))
    if stale:
        message.append("ALLOWED_CYCLES entries that match no cycle any more (delete them; the list only "
                       "shrinks): " + ", ".join(stale))
    if message:
        pytest.fail("\n\n".join(message), pytrace=False)


def serving_floor_offenders(graph: Graph) -> list[str]:
    """``file:line imports name`` for each module-level import (``TYPE_CHECKING`` ones
    included) of ``ragspine_assets`` or Dagster in ``ragspine_query``."""
    offenders = []
    for name, path in sorted(graph.modules.items()):
        if name.split(".")[0] != "ragspine_query":
            continue
        run, type_only = module_level_imports(ast.parse(path.read_text(encoding="utf-8")))
        for node in run + type_only:
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            else:
                imported = [node.module or ""] if not node.level else []
            for target in imported:
                top = target.split(".")[0]
                if top in SERVING_FORBIDDEN or top.startswith("dagster_"):
                    offenders.append(f"{path.relative_to(graph.root).as_posix()}:{node.lineno} imports {target}")
    return offenders


def test_serving_floor_never_imports_the_build_side_or_dagster(graphs):
    """``ragspine_query`` at module level imports neither ``ragspine_assets`` nor Dagster;
    ``tests/architecture/test_import_boundary.py`` also checks function bodies and a real import with
    Dagster blocked."""
    offenders = serving_floor_offenders(graphs[0])
    if offenders:
        pytest.fail("the serving floor imports the build side or Dagster:\n" + "\n".join(offenders), pytrace=False)


# ------------------------------------------------------------------ the checker itself


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_finds_a_cycle_and_ignores_function_level_imports(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from .b import x\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import y\nx = 1\n",
        "pkg/c.py": "try:\n    from pkg import a\nexcept ImportError:\n    pass\n"
                    "def late():\n    from . import d\n",
        "pkg/d.py": "import pkg.c\n",
    })
    run_graph, type_graph = build_graphs(tmp_path, ("pkg",))
    assert run_graph.edges["pkg.a"] == {"pkg.b": [1]}
    assert "pkg.b" not in run_graph.edges  # the TYPE_CHECKING import is only in the second graph
    assert run_graph.edges["pkg.c"] == {"pkg.a": [2]}  # the function-level import of d is not counted
    assert cycles(run_graph) == []
    assert cycles(type_graph) == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]
    text = describe(type_graph, cycles(type_graph)[0])
    assert "pkg.a -> pkg.b -> pkg.c -> pkg.a" in text
    assert "pkg/b.py:3 imports pkg.c" in text
    # counted with function-level imports, c -> d -> c is a cycle too
    assert frozenset({"pkg.c", "pkg.d"}) <= next(c for c in cycles(build_all_imports_graph(tmp_path, ("pkg",)))
                                                if "pkg.d" in c)


def test_the_allowlist_only_shrinks(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",
        "pkg/b.py": "from . import a\n",
    })
    graph, _ = build_graphs(tmp_path, ("pkg",))
    pair = frozenset({"pkg.a", "pkg.b"})
    assert unexpected_cycles(graph, {"a <-> b": pair}) == ([], [])
    # a cycle larger than its entry fails, and so does an entry that matches no cycle
    bad, stale = unexpected_cycles(graph, {"a alone": frozenset({"pkg.a"}), "gone": frozenset({"pkg.x", "pkg.y"})})
    assert len(bad) == 1 and "pkg.a -> pkg.b -> pkg.a" in bad[0] and "pkg/a.py:1 imports pkg.b" in bad[0]
    assert stale == ["a alone", "gone"]


def test_the_serving_floor_check_names_the_offending_import(tmp_path):
    _write(tmp_path, {
        "ragspine_query/__init__.py": "",
        "ragspine_query/ok.py": "def late():\n    import dagster\n",
        "ragspine_query/bad.py": "import os\ntry:\n    from ragspine_index import parsing\nexcept ImportError:\n"
                                 "    pass\nimport dagster_celery\n",
    })
    graph, _ = build_graphs(tmp_path, ("ragspine_query",))
    assert serving_floor_offenders(graph) == ["ragspine_query/bad.py:3 imports ragspine_index",
                                              "ragspine_query/bad.py:6 imports dagster_celery"]
