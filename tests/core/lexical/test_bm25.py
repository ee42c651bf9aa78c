"""Tier 1: Okapi BM25 scores, top-k selection and parameters.

Parity is checked against two independent implementations on a random mixed
English/Chinese corpus: ``rank_bm25.BM25Okapi`` with Lucene's non-negative IDF, and
``bm25s`` with ``method="lucene"``.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine_core.errors import ConfigError
from ragspine_core.lexical.bm25 import BM25Index, BM25Params, build_bm25_arrays, idf, top_k_rows
from ragspine_core.text.tokenize import tokenize

K1, B = 1.5, 0.75
REL_TOL = 1e-4
WORDS = (
    "acme revenue margin decline growth europe china inverter price war order backlog "
    "suzhou plant upgrade channel destocking quarter guidance dividend 2024 q3 q4 h1"
).split()
CJK = list("营收下滑毛利率季度价格战订单延后苏州工厂渠道去库存数据出境第五条")


def random_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 40)):
        if rng.random() < 0.35:
            parts.append("".join(rng.choice(CJK) for _ in range(rng.randint(1, 4))))
        else:
            parts.append(rng.choice(WORDS))
    return " ".join(parts)


@pytest.fixture(scope="module")
def corpus() -> list[list[str]]:
    rng = random.Random(20240930)
    docs = [tokenize(random_text(rng)) for _ in range(400)]
    docs[17] = []  # an empty row must score 0 and still count towards N and avgdl
    return docs


@pytest.fixture(scope="module")
def queries() -> list[list[str]]:
    rng = random.Random(7)
    out = [tokenize(random_text(rng))[:8] for _ in range(40)]
    out += [["acme"], ["营收"], ["营", "营收", "收"], ["margin", "margin", "decline"], ["nosuchword"]]
    return [q for q in out if q]


@pytest.fixture(scope="module")
def index(corpus) -> BM25Index:
    return BM25Index(build_bm25_arrays(corpus, BM25Params(K1, B)))


def assert_close(ours: np.ndarray, ref: np.ndarray) -> None:
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, rtol=REL_TOL, atol=1e-6)


def test_scores_match_rank_bm25_with_lucene_idf_on_every_row(index, corpus, queries):
    rank_bm25 = pytest.importorskip("rank_bm25")

    class LuceneIdfOkapi(rank_bm25.BM25Okapi):
        """BM25Okapi with Lucene's idf: log(1 + (N - df + 0.5) / (df + 0.5))."""

        def _calc_idf(self, nd):
            for word, df in nd.items():
                self.idf[word] = math.log(1.0 + (self.corpus_size - df + 0.5) / (df + 0.5))

    ref = LuceneIdfOkapi(corpus, k1=K1, b=B)
    for q in queries:
        assert_close(index.score_rows_dense(q), ref.get_scores(q))


def test_scores_match_bm25s_lucene_on_every_row(index, corpus, queries):
    bm25s = pytest.importorskip("bm25s")
    ref = bm25s.BM25(k1=K1, b=B, method="lucene")
    ref.index(corpus, show_progress=False)
    for q in queries:
        known = [t for t in dict.fromkeys(q)]  # bm25s scores each distinct query token once
        # Lucene >= 8 drops the constant (k1 + 1) numerator factor; it changes no ranking.
        assert_close(index.score_rows_dense(known), (K1 + 1.0) * ref.get_scores(known))


def test_sparse_scoring_paths_agree_with_dense_reference(index, queries):
    for q in queries:
        dense = index.score_rows_dense(q)
        rows, scores = index.score_terms(index.term_ids(q))
        assert np.all(np.diff(rows) > 0), "rows must come back ascending and unique"
        expected_rows = np.flatnonzero(dense)
        np.testing.assert_array_equal(rows, expected_rows)
        np.testing.assert_allclose(scores, dense[rows], rtol=1e-6)


def test_search_returns_top_k_of_reference_scores(index, queries):
    for q in queries:
        dense = index.score_rows_dense(q).astype(np.float32)
        rows, scores = index.search(q, k=10)
        hit = np.flatnonzero(dense)
        expected = sorted(hit.tolist(), key=lambda r: (-dense[r], r))[:10]
        assert rows.tolist() == expected
        np.testing.assert_allclose(scores, dense[expected], rtol=1e-6)


def test_search_honours_allowed_mask(index):
    allowed = np.zeros(index.n_rows, dtype=bool)
    allowed[::3] = True
    rows, _ = index.search(["acme", "营收"], k=50, allowed=allowed)
    assert rows.size and all(r % 3 == 0 for r in rows.tolist())


def test_query_token_repetition_counts(index):
    once = index.score_rows_dense(["margin"])
    twice = index.score_rows_dense(["margin", "margin"])
    np.testing.assert_allclose(twice, 2 * once, rtol=1e-6)


def test_unknown_tokens_score_nothing(index):
    rows, scores = index.search(["zzzz-not-in-vocab"], k=5)
    assert rows.size == 0 and scores.size == 0
    assert not index.score_rows_dense(["zzzz"]).any()


def test_empty_row_scores_zero_and_counts_in_statistics(index, corpus):
    assert index.n_rows == len(corpus)
    assert index.score_rows_dense(["acme"])[17] == 0.0
    assert index.avgdl == pytest.approx(sum(map(len, corpus)) / len(corpus))


def test_idf_is_lucene_non_negative():
    df = np.array([1, 50, 99, 100])
    expected = [math.log(1 + (100 - d + 0.5) / (d + 0.5)) for d in df]
    np.testing.assert_allclose(idf(df, 100), expected)
    assert (idf(df, 100) > 0).all()


def test_golden_single_document_score():
    # two rows: "a a b" and "b"; avgdl = 2; score("a", row 0) by hand
    arrays = build_bm25_arrays([["a", "a", "b"], ["b"]])
    tf, dl, avgdl = 2.0, 3.0, 2.0
    w = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5)) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))
    assert BM25Index(arrays).score_rows_dense(["a"])[0] == pytest.approx(w, rel=1e-6)


def test_vocabulary_is_sorted_and_postings_ascending(index):
    assert index.tokens == sorted(index.tokens)
    for t in range(0, len(index.tokens), 7):
        s, e = int(index.indptr[t]), int(index.indptr[t + 1])
        assert np.all(np.diff(index.postings[s:e]) > 0)


def test_build_is_deterministic(corpus):
    a = build_bm25_arrays(corpus)
    b = build_bm25_arrays(corpus)
    assert a.tokens == b.tokens
    for name in ("indptr", "postings", "impacts", "max_impact"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes()


@pytest.mark.parametrize("mapped", [True, False])
def test_bm25_arrays_round_trip_through_disk_memory_mapped(tmp_path, corpus, queries, index, mapped, monkeypatch):
    """Arrays over ``integrity.COPY_AT_OPEN_MAX_FILE_BYTES`` are memory-mapped; smaller ones
    are read into memory (a file changed in place later cannot change the reader)."""
    from ragspine_core import integrity
    from ragspine_index.steps.bm25_index import write_bm25_arrays

    if mapped:
        monkeypatch.setattr(integrity, "COPY_AT_OPEN_MAX_FILE_BYTES", 0)
    write_bm25_arrays(tmp_path, build_bm25_arrays(corpus), "spec@1")
    loaded = BM25Index.load(tmp_path)
    assert isinstance(loaded.impacts, np.memmap) is mapped and isinstance(loaded.postings, np.memmap) is mapped
    for q in queries[:10]:
        a_rows, a_scores = loaded.search(q, k=20)
        b_rows, b_scores = index.search(q, k=20)
        assert a_rows.tolist() == b_rows.tolist()
        assert a_scores.tobytes() == b_scores.tobytes()


# ------------------------------------------------------------------------ top_k_rows
def test_top_k_rows_orders_by_score_then_row():
    rows = np.array([9, 4, 7, 1], dtype=np.int64)
    scores = np.array([1.0, 3.0, 3.0, 2.0], dtype=np.float32)
    out_rows, out_scores = top_k_rows(rows, scores, 4)
    assert out_rows.tolist() == [4, 7, 1, 9]
    assert out_scores.tolist() == [3.0, 3.0, 2.0, 1.0]


def test_top_k_rows_equal_scores_come_back_row_ascending():
    rows = np.array([30, 10, 20, 0], dtype=np.int64)
    out_rows, _ = top_k_rows(rows, np.ones(4, dtype=np.float32), 4)
    assert out_rows.tolist() == [0, 10, 20, 30]


def test_top_k_rows_ties_at_the_k_boundary_keep_the_smallest_rows():
    rows = np.arange(100, dtype=np.int64)[::-1].copy()  # 99 .. 0
    scores = np.full(100, 0.5, dtype=np.float32)
    scores[rows == 42] = 2.0
    out_rows, _ = top_k_rows(rows, scores, 3)
    assert out_rows.tolist() == [42, 0, 1]


def test_top_k_rows_edge_cases():
    rows = np.array([3, 1], dtype=np.int64)
    scores = np.array([1.0, 2.0], dtype=np.float32)
    assert top_k_rows(rows, scores, 0)[0].size == 0
    assert top_k_rows(rows[:0], scores[:0], 5)[0].size == 0
    assert top_k_rows(rows, scores, 10)[0].tolist() == [1, 3]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0]), min_size=0, max_size=40),
    st.integers(min_value=0, max_value=45),
    st.randoms(use_true_random=False),
)
def test_top_k_rows_matches_a_full_sort(score_list, k, rnd):
    n = len(score_list)
    rows = np.array(rnd.sample(range(1000), n), dtype=np.int64)
    scores = np.array(score_list, dtype=np.float32)
    out_rows, out_scores = top_k_rows(rows, scores, k)
    expected = sorted(zip(rows.tolist(), score_list), key=lambda rs: (-rs[1], rs[0]))[:k]
    assert out_rows.tolist() == [r for r, _ in expected]
    assert out_scores.tolist() == [s for _, s in expected]


@pytest.mark.parametrize("k", [1, 10, 999, 5000])
def test_top_k_rows_on_large_candidate_sets_with_heavy_ties(k):
    rng = np.random.default_rng(k)
    n = 120_000
    rows = rng.permutation(n * 2)[:n].astype(np.int64)
    scores = rng.integers(0, 40, size=n).astype(np.float32) / 4  # few distinct values: many ties
    out_rows, out_scores = top_k_rows(rows, scores, k)
    order = np.lexsort((rows, -scores))[:k]
    assert out_rows.tolist() == rows[order].tolist()
    assert out_scores.tolist() == scores[order].tolist()


# ------------------------------------------------------------------------ parameters
def test_default_params_are_the_spec_constants():
    assert (BM25Params().k1, BM25Params().b) == (1.5, 0.75)


@pytest.mark.parametrize(
    ("k1", "b", "named"),
    [(-0.1, 0.75, "k1"), (float("nan"), 0.75, "k1"), (float("inf"), 0.75, "k1"),
     (1.5, -0.01, "b"), (1.5, 1.01, "b"), (1.5, float("nan"), "b")],
)
def test_invalid_params_raise_config_error_naming_the_value(k1, b, named):
    with pytest.raises(ConfigError, match=rf"BM25 {named} .*got"):
        BM25Params(k1, b)


def test_boundary_params_are_accepted():
    BM25Params(0.0, 0.0)
    BM25Params(3.0, 1.0)
