"""Frequent-term queries on the index-time blend take the blended index's dense
strategies (dense columns, MaxScore pruning, own-text masks) and rank exactly like its
sparse path: the same rows and the same float32 score bytes."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.lexical.bm25 import BM25Index, blend_bm25_arrays, blend_reference, build_bm25_arrays, search_blend_index, terms_all_own

FREQUENT = ["the", "of", "and", "to", "in"]
RARE = [f"w{i}" for i in range(400)]


class Dense(BM25Index):
    """Dense columns and pruning from a few hundred rows on (the defaults need 4k / 32k)."""

    DENSE_MIN_ROWS = 64
    PRUNE_MIN_ROWS = 64
    JIT_AFTER = None


class SparseOnly(BM25Index):
    """Never dense: every query takes the sparse posting path (the reference here)."""

    DENSE_MIN_ROWS = 1 << 40
    JIT_AFTER = None


def _library(seed: int, *, single_chunk: bool):
    rng = np.random.default_rng(seed)
    chunk_tokens, row_doc, doc_tokens = [], [], []
    for d in range(int(rng.integers(150, 400))):
        n_chunks = 1 if single_chunk else int(rng.integers(1, 5))
        chunks = []
        for _ in range(n_chunks):
            words = list(rng.choice(RARE, size=int(rng.integers(1, 10))))
            words += [w for w, p in zip(FREQUENT, (0.95, 0.8, 0.6, 0.4, 0.3)) if rng.random() < p]
            rng.shuffle(words)
            chunks.append(words)
        title = list(rng.choice(RARE + FREQUENT, size=int(rng.integers(0, 3))))
        doc_tokens.append(title + [t for c in chunks for t in c])
        for c in chunks:
            chunk_tokens.append(c)
            row_doc.append(d)
    chunk, doc = build_bm25_arrays(chunk_tokens), build_bm25_arrays(doc_tokens)
    return chunk, doc, np.asarray(row_doc, dtype=np.int32), rng


@pytest.mark.parametrize("single_chunk", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_frequent_terms_rank_like_the_sparse_path(seed, single_chunk):
    chunk, doc, row_doc, rng = _library(seed, single_chunk=single_chunk)
    arrays, own = blend_bm25_arrays(chunk, doc, row_doc, 2.0)
    dense, sparse = Dense(arrays), SparseOnly(arrays)
    all_own = terms_all_own(sparse, own)
    ci, di = BM25Index(chunk), BM25Index(doc)
    took_dense = 0
    for _ in range(30):
        tokens = list(rng.choice(FREQUENT, size=int(rng.integers(1, 5))))
        if rng.random() < 0.5:
            tokens += list(rng.choice(RARE, size=int(rng.integers(1, 3))))
        k = int(rng.integers(1, 25))
        allowed = rng.random(row_doc.shape[0]) < rng.choice([0.1, 0.6, 0.95]) if rng.random() < 0.4 else None
        hint = all_own if rng.random() < 0.7 else None
        ids, spans = dense._lookup(tokens)
        total = sum(e - s for s, e in spans)
        took_dense += bool(total * 4 >= dense.n_rows and dense._use_dense(spans, total))
        got = search_blend_index(dense, own, tokens, k, allowed=allowed, all_own=hint)
        want = search_blend_index(sparse, own, tokens, k, allowed=allowed, all_own=hint)
        assert got is not None and want is not None
        assert got[0].dtype == np.int64 and got[1].dtype == np.float32
        assert got[0].tolist() == want[0].tolist(), (tokens, k)
        assert got[1].tobytes() == want[1].tobytes(), (tokens, k)
        # and the two-field reference agrees up to float32 rounding of the blend
        ref_rows, ref_scores = blend_reference(ci, di, row_doc, tokens, k, doc_weight=2.0, allowed=allowed)
        np.testing.assert_allclose(got[1], ref_scores, rtol=1e-5, atol=1e-6)
    assert took_dense > 10  # the frequent-term path did run
    assert dense._columns, "the frequent terms were scored through dense columns"


def test_a_row_matching_only_through_its_document_is_not_a_candidate():
    # every chunk of document 0 shares its document's frequent word, but only chunk 0
    # contains it; chunk 1 must not rank for it, whatever the dense path does
    chunk_tokens = [["the", "a"], ["b"]] + [["the", f"x{i}"] for i in range(200)]
    row_doc = [0, 0] + list(range(1, 201))
    doc_tokens = [["the", "a", "b"]] + [["the", f"x{i}"] for i in range(200)]
    arrays, own = blend_bm25_arrays(build_bm25_arrays(chunk_tokens), build_bm25_arrays(doc_tokens),
                                    np.asarray(row_doc), 2.0)
    dense = Dense(arrays)
    rows, _ = search_blend_index(dense, own, ["the", "b"], 300, all_own=terms_all_own(dense, own))
    assert 1 in rows.tolist()  # "b" is chunk 1's own word
    rows, _ = search_blend_index(dense, own, ["the"], 300, all_own=terms_all_own(dense, own))
    assert 1 not in rows.tolist() and 0 in rows.tolist() and len(rows) == 201
