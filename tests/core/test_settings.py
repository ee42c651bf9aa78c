"""The one settings table: ``Settings``, ``ENV_VARS``, ``docs/configuration.md``, and who reads the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.settings import ENV_VARS, Settings, env_vars_markdown

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "configuration.md"


def test_docs_table_is_the_generated_env_vars_table():
    text = DOC.read_text(encoding="utf-8")
    assert env_vars_markdown() in text, "docs/configuration.md is stale: paste `python -m ragspine_core.settings`"
    table_rows = [line for line in text.splitlines() if line.startswith("| `") and "_" in line.split("|")[1]]
    documented = {row.split("`")[1] for row in table_rows if row.split("`")[1].isupper()}
    assert documented == {var.name for var in ENV_VARS}


def test_every_env_var_sets_a_settings_field():
    fields = set(Settings.__dataclass_fields__)
    assert {var.field for var in ENV_VARS} == fields
    assert len({var.name for var in ENV_VARS}) == len(ENV_VARS)


def test_from_env_first_non_empty_name_wins_and_ints_are_checked():
    s = Settings.from_env({"RAGSPINE_EMBEDDING": " ", "RAGSPINE_EMBEDDING_BACKEND": "onnx", "OPENAI_API_KEY": "k",
                           "RAGSPINE_KEEP_SNAPSHOTS": "3"})
    assert (s.embedding, s.llm_api_key, s.keep_snapshots) == ("onnx", "k", 3)
    assert Settings.from_env({"RAGSPINE_LLM_API_KEY": "a", "OPENAI_API_KEY": "b"}).llm_api_key == "a"
    assert Settings.from_env({}) == Settings()
    with pytest.raises(ConfigError, match="RAGSPINE_MAX_CONCURRENT"):
        Settings.from_env({"RAGSPINE_MAX_CONCURRENT": "-2"})


def test_as_env_round_trips():
    s = Settings(reranker="maxsim", keep_snapshots=2, splade_dir="/models/splade")
    assert Settings.from_env(s.as_env()) == s


# -- nobody but settings.py reads RAGSPINE_ variables ----------------------------------------


def _string_constants(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"


def environment_reads(path: Path) -> list[str]:
    """``file:line name`` for every ``os.environ`` / ``os.getenv`` read of a RAGSpine variable."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = _string_constants(tree)
    names = {var.name for var in ENV_VARS}

    def key(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
        elif isinstance(node, ast.Name):
            value = constants.get(node.id, "")
        else:
            return None
        return value if value.startswith("RAGSPINE_") or value in names else None

    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and _is_os_environ(func.value):
                name = key(node.args[0])
            elif isinstance(func, ast.Attribute) and func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os":
                name = key(node.args[0])
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value) and isinstance(node.ctx, ast.Load):
            name = key(node.slice)
        elif isinstance(node, ast.Compare) and any(_is_os_environ(c) for c in node.comparators):
            name = key(node.left)
        if name:
            where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
            found.append(f"{where}:{node.lineno} {name}")
    return found


def test_the_scan_finds_the_read_forms(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        'import os\nX = "RAGSPINE_A"\na = os.environ.get(X)\nb = os.getenv("RAGSPINE_B")\n'
        'c = os.environ["RAGSPINE_C"]\nd = "RAGSPINE_D" in os.environ\ne = os.environ.get("HOME")\n'
    )
    assert sorted(f.split()[1] for f in environment_reads(probe)) == ["RAGSPINE_A", "RAGSPINE_B", "RAGSPINE_C", "RAGSPINE_D"]


MY_MODULES = ("ragspine_core/dense", "ragspine_query/rerank", "ragspine_core/text", "ragspine_core/net",
              "ragspine_core/runtime", "ragspine_core/llm.py")


FLOORS = ("ragspine_core", "ragspine_index", "ragspine_assets", "ragspine_query", "ragspine_tools")


def _reads(prefixes) -> list[str]:
    out = []
    scanned = 0
    for top in FLOORS:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == "ragspine_core/settings.py" or not rel.startswith(prefixes):
                continue
            scanned += 1
            out += environment_reads(path)
    assert scanned, f"no module under {prefixes} was scanned: did a package move?"
    return out


def test_query_library_infrastructure_reads_no_environment():
    assert _reads(MY_MODULES) == []


def test_only_settings_reads_ragspine_environment_variables():
    assert _reads(FLOORS) == []


# -- the factories take a Settings and then ignore the environment ------------------------------


def test_factories_take_settings_instead_of_the_environment(monkeypatch):
    from ragspine_core.dense import DeterministicEmbeddingBackend, make_embedding_backend
    from ragspine_core.llm import OpenAICompatibleProvider
    from ragspine_query.rerank import LexicalMaxSimReranker, make_reranker

    for name in ("RAGSPINE_RERANKER", "RAGSPINE_EMBEDDING", "RAGSPINE_LLM_BASE_URL", "RAGSPINE_LLM_MODEL"):
        monkeypatch.setenv(name, "bogus")
    settings = Settings(reranker="maxsim", embedding="deterministic", llm_base_url="http://127.0.0.1:9/v1",
                        llm_model="m", llm_api_key="sk-x")
    assert isinstance(make_reranker(settings=settings), LexicalMaxSimReranker)
    assert make_reranker(settings=Settings()) is None
    assert isinstance(make_embedding_backend(settings=settings), DeterministicEmbeddingBackend)
    provider = OpenAICompatibleProvider.from_settings(settings, timeout_s=3.0)
    assert (provider.url, provider.model, provider._api_key, provider.timeout_s) == (
        "http://127.0.0.1:9/v1/chat/completions", "m", "sk-x", 3.0)
    with pytest.raises(ConfigError, match="RAGSPINE_LLM_MODEL"):
        OpenAICompatibleProvider.from_settings(Settings(llm_base_url="http://x/v1"))
