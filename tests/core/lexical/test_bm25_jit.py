"""The optional compiled sparse path (numba, extra ``accel``): the blended index gives the
numpy path's bytes, the kernel is compiled off the query thread after ``JIT_AFTER``
queries, and without numba everything stays on numpy."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from ragspine_core import lexical
from ragspine_core.lexical.bm25 import BM25Index, blend_bm25_arrays, build_bm25_arrays, search_blend_index, terms_all_own

WORDS = [f"w{i}" for i in range(60)]


class NumpyOnly(BM25Index):
    JIT_AFTER = None


def _blended(seed: int):
    """A random library (1-4 chunks per document) blended at index time, twice: one
    index that answers with the kernel, one numpy only."""
    rng = np.random.default_rng(seed)
    chunk_tokens, row_doc, doc_tokens = [], [], []
    for d in range(int(rng.integers(5, 60))):
        chunks = [list(rng.choice(WORDS, size=int(rng.integers(1, 12)))) for _ in range(int(rng.integers(1, 5)))]
        doc_tokens.append(list(rng.choice(WORDS, size=int(rng.integers(0, 3)))) + [t for c in chunks for t in c])
        for c in chunks:
            chunk_tokens.append(c)
            row_doc.append(d)
    arrays, own = blend_bm25_arrays(build_bm25_arrays(chunk_tokens), build_bm25_arrays(doc_tokens),
                                    np.asarray(row_doc), 2.0)
    return BM25Index(arrays), NumpyOnly(arrays), own, rng


@pytest.mark.parametrize("seed", range(12))
def test_kernel_gives_the_numpy_blend_search_bytes(seed):
    pytest.importorskip("numba", reason="the kernel needs the accel extra")
    compiled, plain, own, rng = _blended(seed)
    assert compiled.compile_jit()
    all_own = terms_all_own(plain, own)
    checked = 0
    for _ in range(40):
        tokens = list(rng.choice(WORDS + ["unknown"], size=int(rng.integers(1, 7))))
        k = int(rng.integers(1, 30))
        allowed = rng.random(compiled.n_rows) < rng.choice([0.05, 0.5, 0.95]) if rng.random() < 0.4 else None
        hint = all_own if rng.random() < 0.5 else None
        want = search_blend_index(plain, own, tokens, k, allowed=allowed, all_own=hint)
        got = search_blend_index(compiled, own, tokens, k, allowed=allowed, all_own=hint)
        if want is None:  # a frequent term: both defer to the two-field path
            assert got is None
            continue
        checked += 1
        assert got[0].dtype == np.int64 and got[1].dtype == np.float32
        assert got[0].tolist() == want[0].tolist(), (tokens, k)
        assert got[1].tobytes() == want[1].tobytes(), (tokens, k)
        assert not compiled._zeros.any(), "the scratch must be all zero between calls"
    assert checked > 0


def test_the_kernel_is_compiled_off_the_query_thread_after_jit_after_queries():
    pytest.importorskip("numba", reason="the kernel needs the accel extra")
    index = BM25Index(build_bm25_arrays([["a", "b"], ["b", "c"], ["c", "a", "a"]] * 50))
    want = [NumpyOnly(build_bm25_arrays([["a", "b"], ["b", "c"], ["c", "a", "a"]] * 50)).search(["a", "c"], k=5)]
    for _ in range(BM25Index.JIT_AFTER - 1):
        index.search(["a", "c"], k=5)
    assert index._jit is None and not [t for t in threading.enumerate() if t.name == "ragspine-bm25-jit"]
    index.search(["a", "c"], k=5)  # the JIT_AFTER-th sparse query starts the compile
    for t in threading.enumerate():
        if t.name == "ragspine-bm25-jit":
            t.join(timeout=300)
    assert index._jit is not None
    rows, scores = index.search(["a", "c"], k=5)  # answered by the kernel
    assert rows.tolist() == want[0][0].tolist() and scores.tobytes() == want[0][1].tobytes()


def test_without_numba_the_numpy_path_answers(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba -> ImportError
    monkeypatch.delitem(sys.modules, "ragspine_core.lexical.bm25_jit", raising=False)
    monkeypatch.delattr(lexical, "bm25_jit", raising=False)  # a kernel module imported earlier
    index = BM25Index(build_bm25_arrays([["a", "b"], ["b", "c"], ["c", "a", "a"]]))
    assert index.compile_jit() is False and index._jit is None
    rows, scores = index.search(["a", "c"], k=2)
    assert rows.tolist() == [2, 0] and scores.dtype == np.float32  # rows 0 and 1 tie: the lower row first
