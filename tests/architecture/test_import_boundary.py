"""Dependencies point one way: ``ragspine_assets -> ragspine_query``, and the query side
never needs Dagster (STYLE "The shape we want"; issue 2 "Layout")."""

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
    "ragspine_query.link",
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


def test_query_package_never_imports_dagster_or_the_build_side(repo_root):
    offenders = []
    for path in sorted((repo_root / "ragspine_query").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in ("dagster", "ragspine_assets"):
                    offenders.append(f"{path.relative_to(repo_root)}:{node.lineno} imports {name}")
    assert offenders == []


def test_query_package_is_a_regular_package_that_setuptools_finds(repo_root):
    """Without ``ragspine_query/__init__.py`` a wheel built by ``find_packages`` ships no query library."""
    setuptools = pytest.importorskip("setuptools")
    assert (repo_root / "ragspine_query" / "__init__.py").is_file()
    found = setuptools.find_packages(str(repo_root), include=["ragspine_query*", "ragspine_assets*"])
    assert {"ragspine_query", "ragspine_core.lexical", "ragspine_core.text", "ragspine_assets"} <= set(found)


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
