"""The query path's compiled kernels (numba, extra ``accel``) give the numpy code's bytes:
the dense top-k and the score/rank fusions, on random inputs full of ties, NaN and
infinities; without the kernels (``RAGSPINE_QUERY_JIT=0``, or no numba) the numpy code
answers, and a retriever ranks the same either way."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ragspine_query import fusion
from ragspine_core.dense import vector_store
from ragspine_core.runtime import kernels


@pytest.fixture(scope="module")
def jit():
    pytest.importorskip("numba", reason="the kernels need the accel extra")
    assert kernels.compile_query_kernels()
    assert kernels.kernel_state() == "ready"
    return kernels.query_kernels()


def _scores(rng, n: int) -> np.ndarray:
    """float32 scores with many exact ties, and sometimes NaN / infinities / signed zeros."""
    levels = rng.integers(2, 40)
    s = (rng.integers(0, levels, size=n) / levels).astype(np.float32) - np.float32(0.5)
    if rng.random() < 0.3:
        s[rng.random(n) < 0.05] = np.nan
    if rng.random() < 0.3:
        s[rng.random(n) < 0.05] = -np.inf
    if rng.random() < 0.2:
        s[rng.random(n) < 0.05] = np.inf
    if rng.random() < 0.3:
        s[rng.random(n) < 0.1] = np.float32(-0.0)
    return s


@pytest.mark.parametrize("seed", range(40))
def test_scores_top_k_is_the_numpy_block_top_k(jit, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    k = int(rng.integers(1, 60))
    scores = _scores(rng, n)
    ids = np.sort(rng.choice(10_000, size=n, replace=False)).astype(np.int64) if rng.random() < 0.5 else None
    if ids is not None and rng.random() < 0.5:
        rng.shuffle(ids)  # rows need not be ascending
    start = int(rng.integers(0, 1000))
    cand_rows, cand_scores = vector_store._block_top_k(scores.copy(), k, start, ids)
    threshold = np.partition(scores, n - k)[n - k] if n > k else np.float32(-np.inf)
    top_k = jit.scores_top_k if seed % 2 else jit.scores_top_k_nogil  # the same code, with or without the GIL
    rows, got, ok = top_k(scores, k, threshold, ids if ids is not None else np.zeros(0, np.int64), ids is not None, start)
    if n and not np.isfinite(scores).all():
        assert not ok  # a NaN or infinity: the caller's numpy code answers (top_k_cosine, tested below)
        return
    assert ok
    order = np.lexsort((cand_rows, -cand_scores))[:k]
    assert rows.dtype == np.int64 and got.dtype == np.float32
    assert rows.tolist() == cand_rows[order].astype(np.int64).tolist()
    assert got.tobytes() == cand_scores[order].tobytes()


@pytest.mark.parametrize("seed", range(12))
def test_top_k_cosine_with_and_without_the_kernel(jit, seed, monkeypatch):
    rng = np.random.default_rng(100 + seed)
    n, d = int(rng.integers(1, 3000)), int(rng.integers(2, 20))
    m = rng.integers(-3, 4, size=(n, d)).astype(np.float32)  # small integers: many exactly tied scores
    if rng.random() < 0.3:
        m[int(rng.integers(0, n))] = np.nan  # a corrupt row ranks last
    q = rng.integers(-2, 3, size=d).astype(np.float32)
    q[0] = 1.0
    rows = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)) if rng.random() < 0.5 else None
    k = int(rng.integers(1, 200))
    chunk = int(rng.choice([64, 500, 65536]))
    got = vector_store.top_k_cosine(m, q, k, rows=rows, chunk_size=chunk)
    monkeypatch.setattr(vector_store, "query_kernels", lambda: None)
    want = vector_store.top_k_cosine(m, q, k, rows=rows, chunk_size=chunk)
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tobytes() == want[1].tobytes()


def _rankings(rng, n_rows: int):
    out = []
    for _ in range(int(rng.integers(1, 4))):
        n = int(rng.integers(0, min(n_rows, 300) + 1))
        rows = rng.choice(n_rows, size=n, replace=False).astype(np.int64)
        scores = np.sort(_scores(rng, n))[::-1].copy() if rng.random() < 0.7 else _scores(rng, n)
        if rng.random() < 0.5:
            scores = np.nan_to_num(scores, nan=0.25, posinf=2.0, neginf=-2.0)  # the usual case: finite
        out.append((rows, scores))
    return out


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf - inf in the numpy reference
@pytest.mark.parametrize("seed", range(40))
def test_fuse_minmax_is_the_numpy_convex_fusion(jit, seed):
    rng = np.random.default_rng(200 + seed)
    rankings = _rankings(rng, int(rng.integers(1, 800)))
    weights = [float(w) for w in rng.choice([0.25, 0.5, 1.0, 1.7, 3.0], size=len(rankings))]
    depth = int(rng.choice([5, 50, 300, 1000]))
    top = [None, 1, 3, 10][seed % 4]
    got = fusion.weighted_score_fusion(rankings, weights=weights, depth=depth, top=top)
    want = fusion._weighted_score_fusion_numpy(rankings, weights=weights, depth=depth)
    assert got[0].dtype == np.int64 and got[1].dtype == np.float64
    _same_prefix(got, want, top)


def _same_prefix(got, want, top):
    """``got`` is ``want`` (numpy arrays), or, with ``top``, a prefix of it of at least ``top`` entries."""
    n = len(want[0]) if top is None else min(len(want[0]), max(top, len(got[0])))
    assert len(got[0]) == n and len(got[1]) == n
    assert np.asarray(got[0]).tolist() == np.asarray(want[0])[:n].tolist()
    assert np.asarray(got[1]).tobytes() == np.asarray(want[1])[:n].tobytes()


@pytest.mark.parametrize("seed", range(30))
def test_fuse_rrf_is_the_numpy_rank_fusion(jit, seed):
    rng = np.random.default_rng(300 + seed)
    lists = [r for r, _ in _rankings(rng, int(rng.integers(1, 500)))] + [np.zeros(0, np.int64)] * int(rng.integers(0, 2))
    weights = [float(w) for w in rng.choice([0.25, 0.5, 1.0, 2.0], size=len(lists))]
    rrf_k = float(rng.choice([0, 1, 60, 7.5]))
    got = fusion.weighted_rrf(lists, weights=weights, rrf_k=rrf_k)
    want = fusion._fuse_rows_numpy(lists, weights, rrf_k)
    _same_prefix(got, want, None)
    top = [1, 3, 10][seed % 3]
    _same_prefix(fusion.weighted_rrf(lists, weights=weights, rrf_k=rrf_k, top=top), want, top)
    generic = fusion.weighted_rrf([r.tolist() for r in lists], weights=weights, rrf_k=rrf_k)  # the dict path
    assert list(generic[0]) == got[0].tolist() and generic[1] == got[1].tolist()


def test_no_kernels_before_jit_after_calls_and_with_the_switch_off():
    """A fresh process: the first queries never import numba; RAGSPINE_QUERY_JIT=0 keeps numpy for good."""
    code = textwrap.dedent("""
        import sys
        from ragspine_core.runtime import kernels
        from ragspine_core.runtime.threads import pin_query_threads
        from ragspine_core.settings import Settings
        pin_query_threads(Settings.from_env())  # an edge's settings carry the switch in
        assert [kernels.query_kernels() for _ in range(kernels.JIT_AFTER - 1)] == [None] * (kernels.JIT_AFTER - 1)
        assert kernels.kernel_state() == "idle" and "numba" not in sys.modules
        for _ in range(3):
            assert kernels.query_kernels() is None
        print(kernels.kernel_state(), kernels.compile_query_kernels(), "numba" in sys.modules)
    """)
    env = {**os.environ, "RAGSPINE_QUERY_JIT": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["missing", "False", "False"]


def test_a_retriever_answers_the_same_bytes_with_and_without_the_kernels(jit, tmp_path, monkeypatch):
    """auto (convex fusion), hybrid (RRF) and bm25 on a small library built by the pipeline:
    hits, fused scores and per-channel scores are identical on both paths."""
    import json

    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_query import retriever as retriever_mod
    from ragspine_query.library import open_library

    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(120)]
    p = 1.0 / np.arange(1, len(words) + 1)
    raw = tmp_path / "raw" / "kern"
    raw.mkdir(parents=True)
    (raw / "_library.toml").write_text('max_chars = 8000\noverlap_chars = 0\nsummarizer = "none"\n', encoding="utf-8")
    with open(raw / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i in range(400):
            text = " ".join(rng.choice(words, size=int(rng.integers(3, 25)), p=p / p.sum()))
            f.write(json.dumps({"doc_id": f"d{i:04d}", "title": "", "text": text, "sensitivity": "INTERNAL"}) + "\n")
    from ragspine_index import machine

    monkeypatch.setattr(machine, "_current", machine.MachineSettings(ingest_workers=1))  # serial, as an edge would configure
    res = build_library(LibraryPaths("kern", raw, tmp_path / "artifacts" / "kern"), embedding="deterministic",
                        cache_path=tmp_path / "cache.sqlite", run_id="test-kernels")
    lib = open_library(res.snapshot_dir)
    queries = [" ".join(rng.choice(words, size=int(rng.integers(1, 6)))) for _ in range(80)]

    def answers():
        out = []
        for mode in ("auto", "hybrid", "bm25"):
            r = retriever_mod.HybridRetriever(lib, config=retriever_mod.RetrievalConfig(mode=mode))
            for q in queries:
                for k in (1, 10):
                    out.append([(h.chunk_id, h.score.hex(), [(n, float(v).hex()) for n, v in h.scores.items()])
                                for h in r.search(q, top_k=k)])
        return out

    try:
        with_kernels = answers()
        for module in (retriever_mod, fusion, vector_store):
            monkeypatch.setattr(module, "query_kernels", lambda: None)
        assert answers() == with_kernels
        assert any(with_kernels)
    finally:
        lib.close()
