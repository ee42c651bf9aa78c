"""The ANN artifact: built above the threshold, exact-scan fallback, filters honoured exactly.

Real indexes (usearch, the ``ann`` extra), a real published snapshot of the sample library
(``build_library`` with deterministic vectors), and the real dense channel. The engine
missing is simulated in a child interpreter that blocks the import.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ragspine_query import open_library
from ragspine_core.dense.ann import (ANN_INDEX_FILE, ANN_PARAMS_FILE, AnnConfig, AnnIndex, AnnParams, build_ann_index,
                                      engine_available, search_dense)
from ragspine_core.dense.vector_store import top_k_cosine
from ragspine_core.errors import ConfigError
from tests.conftest import REPO_ROOT, SAMPLE_LIBRARY, copy_sample_data

needs_engine = pytest.mark.skipif(not engine_available("usearch"),
                                  reason="usearch is not installed (pip install 'ragspine[ann]'); the exact scan is used")


def _vectors(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, 8)) @ rng.standard_normal((8, dim)) + 0.3 * rng.standard_normal((n, dim))).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    if not engine_available("usearch"):
        pytest.skip("usearch is not installed (pip install 'ragspine[ann]')")
    vectors = _vectors(4000, 32, seed=3)
    d = tmp_path_factory.mktemp("ann")
    meta = build_ann_index(vectors, d, AnnParams(m=16, ef_construction=64, ef_search=64))
    index = AnnIndex(d)
    yield vectors, index, d, meta
    index.close()


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError, match="unknown ANN engine"):
        AnnParams(engine="annoy")
    with pytest.raises(ConfigError, match="min_vectors"):
        AnnConfig(min_vectors=-1)
    assert not AnnConfig(min_vectors=0).wants(10**9)
    assert AnnConfig(min_vectors=100).wants(100) and not AnnConfig(min_vectors=100).wants(99)


def test_without_an_index_the_dense_search_is_the_exact_scan() -> None:
    vectors = _vectors(500, 16, seed=1)
    q = vectors[7]
    mask = np.zeros(500, dtype=bool)
    mask[::3] = True
    for allowed in (None, mask):
        rows, scores = search_dense(vectors, q, 10, None, allowed)
        exact_rows, exact_scores = top_k_cosine(vectors, q, 10, rows=None if allowed is None else np.flatnonzero(allowed))
        assert rows.tolist() == exact_rows.tolist() and np.allclose(scores, exact_scores)


@needs_engine
def test_index_file_params_and_determinism(small_index, tmp_path: Path) -> None:
    vectors, index, d, meta = small_index
    assert meta == json.loads((d / ANN_PARAMS_FILE).read_text())
    assert meta["engine"] == "usearch" and meta["count"] == 4000 and meta["dim"] == 32
    again = tmp_path / "again"
    again.mkdir()
    build_ann_index(vectors, again, AnnParams(m=16, ef_construction=64, ef_search=64))
    assert (again / ANN_INDEX_FILE).read_bytes() == (d / ANN_INDEX_FILE).read_bytes(), "single-threaded builds must be byte-identical"


@needs_engine
def test_recall_and_filters_against_the_exact_scan(small_index) -> None:
    vectors, index, _, _ = small_index
    queries = _vectors(60, 32, seed=11)
    rng = np.random.default_rng(5)
    half = rng.random(4000) < 0.5
    rare = np.zeros(4000, dtype=bool)
    rare[rng.choice(4000, 25, replace=False)] = True  # 0.6% of the rows: below MIN_ANN_SHARE
    hits = 0
    for q in queries:
        exact_rows, _ = top_k_cosine(vectors, q, 10)
        rows, scores = search_dense(vectors, q, 10, index)
        hits += len(set(rows.tolist()) & set(exact_rows.tolist()))
        # scores are the exact cosines of the returned rows, best first, ties by row
        assert np.allclose(scores, vectors[rows] @ q, atol=1e-5)
        assert all((-scores[i], rows[i]) <= (-scores[i + 1], rows[i + 1]) for i in range(len(rows) - 1))
        # a filter is honoured exactly: only allowed rows, and as many as asked for
        rows_half, _ = search_dense(vectors, q, 10, index, half)
        assert len(rows_half) == 10 and half[rows_half].all()
        # a selective filter falls back to the exact scan of the allowed rows
        rows_rare, _ = search_dense(vectors, q, 10, index, rare)
        exact_rare, _ = top_k_cosine(vectors, q, 10, rows=np.flatnonzero(rare))
        assert rows_rare.tolist() == exact_rare.tolist()
    assert hits / (10 * len(queries)) >= 0.95


@needs_engine
def test_too_few_survivors_fall_back_to_exact(small_index) -> None:
    vectors, index, _, _ = small_index
    q = vectors[0]
    # allow 30% of the rows, but none of the query's 200 nearest: over-fetching finds too few
    near, _ = top_k_cosine(vectors, q, 200)
    allowed = np.random.default_rng(2).random(4000) < 0.3
    allowed[near] = False
    rows, _ = search_dense(vectors, q, 10, index, allowed)
    exact, _ = top_k_cosine(vectors, q, 10, rows=np.flatnonzero(allowed))
    assert rows.tolist() == exact.tolist()


@pytest.fixture(scope="module")
def ann_library(tmp_path_factory) -> Path:
    """The sample library built with deterministic vectors and an ANN threshold of 10."""
    if not engine_available("usearch"):
        pytest.skip("usearch is not installed (pip install 'ragspine[ann]')")
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library

    data = copy_sample_data(tmp_path_factory.mktemp("ann_lib") / "data")
    paths = LibraryPaths(SAMPLE_LIBRARY, data / "raw" / SAMPLE_LIBRARY, data / "artifacts" / SAMPLE_LIBRARY)
    build_library(paths, embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite",
                  ann=AnnConfig(min_vectors=10))
    return data / "artifacts" / SAMPLE_LIBRARY


@needs_engine
def test_pipeline_publishes_the_ann_artifact_without_restricted_rows(ann_library: Path) -> None:
    with open_library(ann_library) as lib:
        ann_dir = lib.artifact_path("ann")
        assert ann_dir is not None and (ann_dir / ANN_INDEX_FILE).is_file()
        entry = lib.manifest["embedding"]["ann"]
        assert entry["engine"] == "usearch" and entry["count"] == lib.manifest["embedding"]["count"]
        emb = lib.embeddings()
        index = AnnIndex(ann_dir)
        assert index.count == emb.vectors.shape[0]
        # labels are vector rows; a RESTRICTED chunk has no vector, so it cannot be a label
        restricted = lib.restricted_mask()
        assert restricted.any() and not restricted[np.asarray(emb.rows)].any()
        labels = set()
        for i in range(emb.vectors.shape[0]):
            keys, _ = index.search(np.asarray(emb.vectors[i]), 5)
            labels.update(keys.tolist())
        assert labels <= set(range(emb.vectors.shape[0]))


@needs_engine
def test_dense_channel_uses_the_ann_and_matches_the_exact_scan(ann_library: Path) -> None:
    from ragspine_core.dense.ann import ann_for_library
    from ragspine_core.dense.embedding import make_embedding_backend
    from ragspine_query.pipeline.channels import DenseChannel

    backend = make_embedding_backend("deterministic")
    with open_library(ann_library) as lib:
        assert ann_for_library(lib) is not None
        emb = lib.embeddings()
        channel = DenseChannel(lib, backend)
        allowed = ~lib.restricted_mask()
        allowed[::2] = False
        for query in ("quarterly earnings in China", "anti-bribery policy", "data security measures"):
            qv = np.asarray(backend.embed([query], kind="query"), dtype=np.float32)[0]
            exact_idx, _ = top_k_cosine(emb.vectors, qv, 10)
            rows, scores = channel.search(query, 10, None)
            assert rows.tolist() == np.asarray(emb.rows)[exact_idx].tolist()  # a small HNSW graph is exact
            rows_f, _ = channel.search(query, 10, allowed)
            assert len(rows_f) > 0 and allowed[rows_f].all()


def test_the_default_threshold_builds_no_ann_for_a_small_library(built_sample: Path) -> None:
    with open_library(built_sample) as lib:
        assert lib.artifact_path("ann") is None
        assert "ann" not in (lib.manifest.get("embedding") or {})


BLOCK_USEARCH = textwrap.dedent("""
    import sys, importlib.abc
    class _Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split('.')[0] == 'usearch':
                raise ImportError('usearch blocked to simulate a missing extra')
            return None
    sys.meta_path.insert(0, _Block())
""")


@needs_engine
def test_without_the_extra_the_channel_scans_exactly(ann_library: Path) -> None:
    script = BLOCK_USEARCH + textwrap.dedent(f"""
        import json, numpy as np
        from ragspine_query import open_library
        from ragspine_core.dense.ann import ann_for_library, engine_available
        from ragspine_core.dense.embedding import make_embedding_backend
        from ragspine_core.dense.vector_store import top_k_cosine
        from ragspine_query.pipeline.channels import DenseChannel
        lib = open_library({str(ann_library)!r})
        backend = make_embedding_backend("deterministic")
        rows, _ = DenseChannel(lib, backend).search("anti-bribery policy", 10, None)
        emb = lib.embeddings()
        qv = np.asarray(backend.embed(["anti-bribery policy"], kind="query"), dtype=np.float32)[0]
        exact, _ = top_k_cosine(emb.vectors, qv, 10)
        print(json.dumps({{"engine": engine_available("usearch"), "ann": ann_for_library(lib) is not None,
                           "same": rows.tolist() == np.asarray(emb.rows)[exact].tolist()}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"engine": False, "ann": False, "same": True}


@needs_engine
def test_onnxruntime_imports_after_the_ann_engine_is_loaded() -> None:
    """usearch links libstdc++ statically; onnxruntime imported after it used to die with SIGSEGV.

    A process that opens a large library (the ANN index loads usearch) and then embeds a
    query with the packaged MiniLM (onnxruntime) must not crash; run in a child process so
    that a regression is a failed assertion, not a dead test run.
    """
    pytest.importorskip("onnxruntime")
    script = textwrap.dedent("""
        import numpy as np
        from ragspine_core.dense.ann import _import
        Index = _import("usearch")
        import onnxruntime
        v = np.eye(4, dtype=np.float32)
        index = Index(ndim=4, metric="ip", dtype="f32")
        index.add(np.arange(4), v)
        print(index.search(v[2], 1).keys.tolist(), onnxruntime.get_device())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert proc.returncode == 0, f"rc {proc.returncode} (-11 = SIGSEGV): {proc.stderr[-3000:]}"
    assert proc.stdout.split()[0] == "[2]"
