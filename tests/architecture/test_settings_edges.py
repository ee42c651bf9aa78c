"""The environment is read at the edges only (docs/architecture.md, "Settings").

The library floors (``ragspine_core``, ``ragspine_index``, ``ragspine_query``) take a
:class:`~ragspine_core.settings.Settings` from their caller; the edges read it once with
``Settings.from_env()``: the ``ragspine`` CLI and the serve app (``ragspine_tools``), the
Dagster code location (``ragspine_assets``), and the public Python entry points listed in
:data:`ALLOWED`. This test parses every module of the floors and fails when a read of the
environment (``os.environ``, ``os.getenv``, ``environ.get``, a ``from_env(...)`` call or
definition) appears outside them, or more often than listed.
"""

from __future__ import annotations

import ast

from tests.conftest import REPO_ROOT

FLOORS = ("ragspine_core", "ragspine_index", "ragspine_query")

#: module -> (most reads allowed, why). Lower a count when a read goes; never raise one
#: without saying here why that module is an edge.
ALLOWED: dict[str, tuple[int, str]] = {
    "ragspine_core/settings.py": (2, "the one reader: Settings.from_env (its definition and os.environ)"),
    "ragspine_index/converters/ocr.py": (1, "the tesseract child's environment (PATH, locale) plus OMP_THREAD_LIMIT, not a setting"),
    "ragspine_index/converters/legacy.py": (1, "the converter child's environment plus LC_ALL, not a setting"),
}


def environment_reads(source: str) -> list[tuple[int, str]]:
    """(line, what) of every read of the environment in a module's source."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            found.append((node.lineno, f"os.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "os" \
                and any(a.name in ("environ", "getenv", "environb") for a in node.names):
            found.append((node.lineno, "from os import environ/getenv"))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name == "from_env" or name == "getenv":
                found.append((node.lineno, f"{name}(...)"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "from_env":
            found.append((node.lineno, "def from_env"))
    return sorted(found)


def floor_reads() -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for floor in FLOORS:
        for path in sorted((REPO_ROOT / floor).rglob("*.py")):
            reads = environment_reads(path.read_text(encoding="utf-8"))
            if reads:
                out[path.relative_to(REPO_ROOT).as_posix()] = reads
    return out


def test_the_floors_read_the_environment_only_at_the_listed_edges():
    problems = []
    for module, reads in floor_reads().items():
        allowed, _why = ALLOWED.get(module, (0, ""))
        if len(reads) > allowed:
            where = ", ".join(f"line {line}: {what}" for line, what in reads)
            problems.append(f"{module} reads the environment {len(reads)} time(s), {allowed} allowed ({where})")
    assert not problems, (
        "the environment is read below the edges; take a Settings from the caller instead "
        "(or, for a new public entry point, list it in ALLOWED and docs/architecture.md):\n" + "\n".join(problems))


def test_the_scan_sees_every_kind_of_read():
    source = ("import os\nfrom os import getenv\nx = os.environ.get('A')\ny = os.getenv('B')\n"
              "z = Settings.from_env()\nw = {**os.environ}\n")
    assert environment_reads(source) == [(2, "from os import environ/getenv"), (3, "os.environ"), (4, "getenv(...)"),
                                         (4, "os.getenv"), (5, "from_env(...)"), (6, "os.environ")]


def test_every_allowed_module_exists():
    for module in ALLOWED:
        assert (REPO_ROOT / module).is_file(), f"{module} is listed in ALLOWED but does not exist; remove it"
