"""Dependencies point one way (docs/architecture.md, the floors): the serving floor
(``ragspine_query``) and the shared core (``ragspine_core``) never import the build side,
the tools or Dagster, and the query side works where Dagster is not installed. The whole
rule is also an import-linter contract (``[tool.importlinter]`` in pyproject.toml, run by
``lint-imports`` in ``.ci/run`` and by :func:`test_the_import_contract_is_kept`)."""

from __future__ import annotations

import ast
import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import PYTHON, RESTRICTED_MARKERS, python_env

QUERY_MODULES = (
    "ragspine_query",
    "ragspine_core.schema",
    "ragspine_core.records",
    "ragspine_core.errors",
    "ragspine_core.text.tokenize",
    "ragspine_core.lexical.bm25",
    "ragspine_query.fusion",
    "ragspine_query.filters",
    "ragspine_query.library",
    "ragspine_core.chunk_rows",
    "ragspine_core.glossary",
    "ragspine_query.retriever",
    "ragspine_query.agent_api",
    "ragspine_tools.query_command",
)

#: Makes every ``dagster*`` import fail, as on a machine without the ``pipeline`` extra.
BLOCK_DAGSTER = textwrap.dedent(
    """
    import sys
    from importlib.abc import MetaPathFinder

    class _NoDagster(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "dagster" or name.startswith(("dagster.", "dagster_")):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
            return None

    sys.meta_path.insert(0, _NoDagster())
    """
)


def run_python(code: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-c", code], cwd=cwd, capture_output=True, text=True, encoding="utf-8",
                          timeout=timeout, env=python_env(DAGSTER_HOME=str(cwd / "dagster_home")))


def test_importing_the_query_package_does_not_import_dagster(tmp_path):
    code = "import importlib, sys\n"
    code += "".join(f"importlib.import_module({m!r})\n" for m in QUERY_MODULES + ("ragspine_tools.cli",))
    code += "print(sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.')))\n"
    proc = run_python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


#: top-level packages each floor must not import, anywhere (also inside functions)
FORBIDDEN = {
    "ragspine_query": ("dagster", "ragspine_assets", "ragspine_index", "ragspine_tools"),
    "ragspine_core": ("dagster", "ragspine_assets", "ragspine_index", "ragspine_tools", "ragspine_query"),
    "ragspine_index": ("dagster", "ragspine_assets", "ragspine_tools", "ragspine_query"),
}


@pytest.mark.parametrize("floor", sorted(FORBIDDEN))
def test_floor_never_imports_what_sits_above_it(repo_root, floor):
    offenders = []
    for path in sorted((repo_root / floor).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in FORBIDDEN[floor] or name.startswith("dagster_"):
                    offenders.append(f"{path.relative_to(repo_root)}:{node.lineno} imports {name}")
    assert offenders == []


def test_every_floor_is_a_regular_package_that_setuptools_finds(repo_root):
    """Without an ``__init__.py`` a wheel built by ``find_packages`` ships no such package."""
    setuptools = pytest.importorskip("setuptools")
    tomllib = pytest.importorskip("tomllib")
    include = tomllib.loads((repo_root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    found = set(setuptools.find_packages(str(repo_root), include=include))
    assert {"ragspine_core", "ragspine_core.lexical", "ragspine_core.text", "ragspine_core.dense", "ragspine_index",
            "ragspine_index.steps", "ragspine_assets", "ragspine_assets.assets", "ragspine_query", "ragspine_tools",
            "ragspine_tools.eval"} <= found


def test_the_import_contract_is_kept(repo_root):
    """``lint-imports`` (import-linter) checks ``[tool.importlinter]``: tools -> dagster -> index ->
    core, tools -> query -> core, and index and query never meet (function-level imports count)."""
    pytest.importorskip("importlinter")
    import shutil
    exe = shutil.which("lint-imports") or str(Path(PYTHON).parent / "lint-imports")
    proc = subprocess.run([exe, "--no-cache"], cwd=repo_root, capture_output=True, text=True, timeout=300,
                          env=python_env())
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "broken" in proc.stdout and " 0 broken" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["ragspine_tools.cli", "ragspine_tools.query_command"])
def test_query_cli_works_with_dagster_unimportable(built_sample, tmp_path, entry):
    code = BLOCK_DAGSTER + textwrap.dedent(
        f"""
        try:
            import dagster
        except ImportError:
            pass
        else:
            raise SystemExit("dagster was importable despite the block")
        from {entry} import main
        rc = main(["query", {str(built_sample)!r}, "price cut PowerFlex 7", "--json", "--top-k", "20"])
        assert not any(m == "dagster" or m.startswith("dagster.") for m in sys.modules)
        raise SystemExit(rc)
        """
    )
    proc = run_python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    snippets = json.loads(proc.stdout)
    assert snippets and all(s["sensitivity"] != "RESTRICTED" for s in snippets)
    assert not any(m in proc.stdout for m in RESTRICTED_MARKERS.values())


@pytest.mark.slow
def test_ingest_without_dagster_names_the_extra(sample_data, tmp_path):
    code = BLOCK_DAGSTER + textwrap.dedent(
        f"""
        from ragspine_tools.cli import main
        raise SystemExit(main(["ingest", {str(sample_data / "raw" / "sample")!r}, "--embedding", "none"]))
        """
    )
    proc = run_python(code, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'ragspine[pipeline]'" in proc.stderr
    assert not (sample_data / "artifacts").exists()
