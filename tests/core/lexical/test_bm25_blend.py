"""The index-time blend (chunk field + w x document field in one index) ranks exactly
like the query-time blend it replaces, on random multi-chunk documents."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.lexical.bm25 import BM25Index, blend_bm25_arrays, blend_reference, build_bm25_arrays, search_blend_index, terms_all_own

WORDS = [f"w{i}" for i in range(60)]


def _library(seed: int):
    rng = np.random.default_rng(seed)
    n_docs = int(rng.integers(5, 40))
    chunk_tokens, row_doc, doc_tokens = [], [], []
    for d in range(n_docs):
        chunks = [list(rng.choice(WORDS, size=int(rng.integers(1, 12)))) for _ in range(int(rng.integers(1, 5)))]
        title = list(rng.choice(WORDS, size=int(rng.integers(0, 3))))
        doc_tokens.append(title + [t for c in chunks for t in c])
        for c in chunks:
            chunk_tokens.append(c)
            row_doc.append(d)
    chunk = build_bm25_arrays(chunk_tokens)
    doc = build_bm25_arrays(doc_tokens)
    return chunk, doc, np.asarray(row_doc, dtype=np.int32), rng


@pytest.mark.parametrize("seed", range(40))
def test_blended_index_matches_the_two_field_reference(seed):
    chunk, doc, row_doc, rng = _library(seed)
    arrays, own = blend_bm25_arrays(chunk, doc, row_doc, 2.0)
    blend = BM25Index(arrays)
    ci, di = BM25Index(chunk), BM25Index(doc)
    checked = 0
    for _ in range(20):
        tokens = list(rng.choice(WORDS + ["unknown"], size=int(rng.integers(1, 6))))
        k = int(rng.integers(1, 15))
        allowed = rng.random(row_doc.shape[0]) < 0.7 if rng.random() < 0.3 else None
        found = search_blend_index(blend, own, tokens, k, allowed=allowed,
                                   all_own=terms_all_own(blend, own) if rng.random() < 0.5 else None)
        if found is None:  # a frequent term: the caller takes the two-field path
            continue
        checked += 1
        rows, scores = found
        ref_rows, ref_scores = blend_reference(ci, di, row_doc, tokens, k, doc_weight=2.0, allowed=allowed)
        np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-6)
        # the same rows, except where two scores tie within float32 rounding
        if not np.array_equal(rows, ref_rows):
            assert np.allclose(np.sort(scores), np.sort(ref_scores), rtol=1e-5)
        full = blend.score_rows_dense(tokens)
        dense_ref = ci.score_rows_dense(tokens) + 2.0 * di.score_rows_dense(tokens)[row_doc]
        np.testing.assert_allclose(full, dense_ref, rtol=1e-5, atol=1e-6)
    assert checked > 0


def test_the_document_field_adds_to_matching_chunks_only():
    chunk = build_bm25_arrays([["alpha"], ["beta"], ["gamma"], ["delta"], ["eps"], ["zeta"]])
    doc = build_bm25_arrays([["title", "alpha", "beta"], ["gamma", "delta"], ["eps"], ["zeta"]])
    arrays, own = blend_bm25_arrays(chunk, doc, np.asarray([0, 0, 1, 1, 2, 3]), 2.0)
    blend = BM25Index(arrays)
    # "title" is only in the document field: no chunk matches it by itself
    assert search_blend_index(blend, own, ["title"], 5)[0].tolist() == []
    rows, scores = search_blend_index(blend, own, ["alpha", "title"], 5)
    assert rows.tolist() == [0]  # row 1 (same document, no own match) is not a candidate


@pytest.mark.parametrize("seed", range(6))
def test_blend_in_small_term_blocks_writes_the_same_arrays(seed, monkeypatch):
    # the blend is computed in blocks of union terms so its memory stays bounded at a
    # million chunks; any block size must give the one-block result, byte for byte
    import ragspine_core.lexical.bm25 as bm25

    chunk, doc, row_doc, _ = _library(seed)
    whole, own = blend_bm25_arrays(chunk, doc, row_doc, 2.0)
    for block in (1, 7, 50):
        monkeypatch.setattr(bm25, "BLEND_BLOCK_POSTINGS", block)
        part, part_own = blend_bm25_arrays(chunk, doc, row_doc, 2.0)
        assert part.tokens == whole.tokens
        for name in ("indptr", "postings", "impacts", "max_impact"):
            a, b = getattr(whole, name), getattr(part, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (block, name)
        assert np.array_equal(own, part_own)


def test_build_consumes_a_generator_of_token_lists():
    rows = [["a", "b", "a"], [], ["c"], ["b", "c", "c"]]
    from_list = build_bm25_arrays(rows)
    from_gen = build_bm25_arrays(r for r in rows)
    assert from_gen.tokens == from_list.tokens == ["a", "b", "c"]
    assert from_gen.n_rows == 4 and list(from_gen.doc_lengths) == [3, 0, 1, 3]
    for name in ("indptr", "postings", "impacts", "max_impact"):
        assert np.array_equal(getattr(from_gen, name), getattr(from_list, name))
