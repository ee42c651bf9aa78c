"""EmbeddingSpec: the one value the embedding configuration travels as, validated where it is built."""

from __future__ import annotations

import pytest

from ragspine_core.dense import EmbeddingSpec, OpenAIEmbeddingBackend, build_embedding_backend, make_embedding_backend
from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings


def test_a_spec_is_validated_and_canonical_where_it_is_built():
    assert EmbeddingSpec(" MiniLM ").backend == "onnx"
    assert EmbeddingSpec("").backend == "auto"
    assert EmbeddingSpec("st", model_dir=" /models/x ").model_dir == "/models/x"
    with pytest.raises(ConfigError, match=r"unknown embedding backend 'bert'; allowed: auto, none, onnx"):
        EmbeddingSpec("bert")
    with pytest.raises(ConfigError, match="embedding spec must be a string"):
        EmbeddingSpec(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="multilingual-e5 engine 'fast'"):
        EmbeddingSpec("e5", e5_engine="fast")
    with pytest.raises(ConfigError, match="must be a positive integer"):
        EmbeddingSpec("openai", dim=0)


def test_the_api_key_is_never_shown():
    spec = EmbeddingSpec("openai", openai_base_url="http://127.0.0.1:9/v1", model="m", api_key="sk-secret")
    assert "sk-secret" not in repr(spec) and "sk-secret" not in str(spec)


def test_from_settings_reads_every_embedding_field_once():
    settings = Settings.from_env({
        "RAGSPINE_EMBEDDING": "openai", "RAGSPINE_EMBEDDING_MODEL": "nomic", "RAGSPINE_EMBEDDING_DIM": "768",
        "RAGSPINE_OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-x",
        "RAGSPINE_EMBEDDING_MODEL_DIR": "/models/x", "RAGSPINE_E5_ENGINE": "ONNX",
    })
    spec = EmbeddingSpec.from_settings(settings)
    assert spec == EmbeddingSpec("openai", model_dir="/models/x", model="nomic", dim=768,
                                 openai_base_url="http://127.0.0.1:9/v1", api_key="sk-x", e5_engine="onnx")
    assert EmbeddingSpec.from_settings(settings, backend="none").backend == "none"
    with pytest.raises(ConfigError, match="RAGSPINE_EMBEDDING_DIM='big' is invalid: it must be a whole number >= 1; set it so, "
                                          "or unset it to let the backend probe the server"):
        Settings.from_env({"RAGSPINE_EMBEDDING_DIM": "big"})


def test_with_backend_keeps_the_rest_of_the_spec():
    run = EmbeddingSpec("auto", model_dir="/m", model="x", dim=8)
    lib = run.with_backend("deterministic")
    assert (lib.backend, lib.model_dir, lib.model, lib.dim) == ("deterministic", "/m", "x", 8)
    assert run.with_backend("auto") is run
    assert EmbeddingSpec.coerce("none") == EmbeddingSpec("none") and EmbeddingSpec.coerce(lib) is lib


def test_a_spec_builds_its_backend_without_reading_the_environment(monkeypatch):
    # the environment says otherwise everywhere: the spec alone decides
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
    monkeypatch.setenv("RAGSPINE_OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("RAGSPINE_EMBEDDING_MODEL", "from-env")
    monkeypatch.setenv("RAGSPINE_EMBEDDING_DIM", "not-a-number")
    spec = EmbeddingSpec("openai", model="from-spec", dim=16, openai_base_url="http://127.0.0.1:9/v1")
    for backend in (build_embedding_backend(spec), make_embedding_backend(spec)):
        assert isinstance(backend, OpenAIEmbeddingBackend)
        assert (backend.model_id, backend.dim, backend.url) == ("openai:from-spec", 16, "http://127.0.0.1:9/v1/embeddings")
    with pytest.raises(ConfigError, match="takes an EmbeddingSpec"):
        build_embedding_backend("openai")  # type: ignore[arg-type]
