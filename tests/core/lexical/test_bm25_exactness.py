"""The fast BM25 query paths return exactly what a naive full scoring and sort returns.

Reference: ``BM25Index.score_rows_dense`` (every row, float64, query order) cast to
float32, then a plain sort by (score desc, row asc). Corpora are random with many exact
ties (duplicated rows, equal lengths), and every path is forced on: the sparse
``np.add.at`` path, the dense-column path (also under a tight column budget), the
sampled top-k floor, ``allowed`` masks of every density, memory-mapped arrays, and
several threads sharing one index.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ragspine_core.lexical import bm25 as bm25_module
from ragspine_core.lexical import topk as topk_module
from ragspine_core.lexical.bm25 import BM25Arrays, BM25Index, BM25Params, build_bm25_arrays, top_k_rows

KS = (1, 3, 10, 57)


def random_corpus(rng: np.random.Generator, n_rows: int, n_terms: int = 40) -> list[list[str]]:
    """Zipf-ish token lists; a third of the rows are verbatim copies of earlier rows."""
    vocab = [f"t{i}" for i in range(n_terms)]
    p = 1.0 / np.arange(1, n_terms + 1) ** 1.1
    p /= p.sum()
    docs: list[list[str]] = []
    for i in range(n_rows):
        if i > 3 and rng.random() < 0.33:
            docs.append(list(docs[int(rng.integers(0, i))]))
            continue
        length = int(rng.integers(0, 14))
        docs.append([vocab[j] for j in rng.choice(n_terms, size=length, p=p)])
    return docs


def random_queries(rng: np.random.Generator, n: int, n_terms: int = 40) -> list[list[str]]:
    out = [["t0"], ["t0", "t1", "t2", "t3"], ["t0", "t0", "t5"], ["nope"], ["nope", "t7"], ["t39", "t38"]]
    for _ in range(n):
        size = int(rng.integers(1, 7))
        # lean on the frequent terms (long posting lists, the dense path)
        terms = [f"t{min(int(rng.zipf(1.3)) - 1, n_terms)}" for _ in range(size)]
        out.append(terms)
    return out


def naive_search(index: BM25Index, tokens: list[str], k: int, allowed: np.ndarray | None = None):
    """Score every row, cast to float32, sort by (score desc, row asc), cut at k."""
    dense = index.score_rows_dense(tokens).astype(np.float32)
    rows = np.flatnonzero(dense > 0)
    if allowed is not None:
        rows = rows[allowed[rows]]
    ranked = sorted(rows.tolist(), key=lambda r: (-dense[r], r))[:k]
    return ranked, dense[ranked]


def assert_search_exact(index: BM25Index, tokens, ks, allowed=None) -> None:
    ks = (ks,) if isinstance(ks, int) else ks
    want_rows, want_scores = naive_search(index, tokens, max(ks), allowed)
    for k in ks:
        rows, scores = index.search(tokens, k=k, allowed=allowed)
        assert rows.dtype == np.int64 and scores.dtype == np.float32
        assert rows.tolist() == want_rows[:k], (tokens, k)
        assert scores.tobytes() == want_scores[:k].tobytes(), (tokens, k)


def assert_score_terms_exact(index: BM25Index, tokens) -> None:
    rows, scores = index.score_terms(index.term_ids(tokens))
    dense = index.score_rows_dense(tokens)
    want = np.flatnonzero(dense)
    assert rows.tolist() == want.tolist(), tokens
    assert scores.tobytes() == dense[want].astype(np.float32).tobytes(), tokens


class Compiled(BM25Index):
    """Answers every sparse query with the compiled kernel (:mod:`bm25_jit`) from the
    first query on (skipped without numba, the ``accel`` extra)."""

    def __init__(self, arrays) -> None:
        super().__init__(arrays)
        if not self.compile_jit():
            pytest.skip("numba (extra accel) is not installed: the numpy path is the one tested")


class AlwaysDense(BM25Index):
    """Every frequent term of even a tiny index goes through a dense column, and
    queries made only of such terms go through MaxScore pruning."""

    DENSE_MIN_ROWS = 0
    DENSE_DF_DIVISOR = 4
    PRUNE_MIN_ROWS = 0
    pruned = 0

    def _search_pruned(self, term_ids, cols, k, allowed=None):
        hit = super()._search_pruned(term_ids, cols, k, allowed)
        self.pruned += hit is not None
        return hit


class AggressivePruning(AlwaysDense):
    """Leaves out terms worth up to 90% of the k-th best score (many candidates)."""

    PRUNE_SLACK = 0.9


class TightBudget(AlwaysDense):
    """Room for one dense column only: the other frequent terms take the scatter path."""

    def __init__(self, arrays) -> None:
        super().__init__(arrays)
        self.DENSE_CACHE_BYTES = 4 * self.n_rows


@pytest.fixture(scope="module")
def rng() -> np.random.Generator:
    return np.random.default_rng(20240611)


@pytest.fixture(scope="module")
def small(rng) -> list[list[str]]:
    return random_corpus(rng, 400)


@pytest.fixture(scope="module")
def large(rng) -> list[list[str]]:
    # above DENSE_MIN_ROWS and the sampling threshold: the default dense path and floors
    return random_corpus(rng, 6_000, n_terms=300)


@pytest.fixture(scope="module")
def queries(rng) -> list[list[str]]:
    return random_queries(rng, 120)


@pytest.fixture(autouse=True)
def small_sample_threshold(monkeypatch):
    # the numpy paths only (Compiled compiles explicitly): no kernel mid-test
    monkeypatch.setattr(BM25Index, "JIT_AFTER", None)
    # let the sampled floors engage on the small test arrays too
    monkeypatch.setattr(topk_module, "SAMPLE_MIN", 64)
    monkeypatch.setattr(bm25_module, "SAMPLE_MIN", 64)  # BM25Index reads it too
    monkeypatch.setattr(topk_module, "_SAMPLE_STEP", 4)
    monkeypatch.setattr(topk_module, "_SAMPLE_BLOCK", 32)


@pytest.mark.parametrize("index_cls", [BM25Index, AlwaysDense, AggressivePruning, TightBudget, Compiled])
def test_search_matches_naive_sort_on_small_corpus_with_ties(index_cls, small, queries):
    index = index_cls(build_bm25_arrays(small))
    for q in queries:
        assert_search_exact(index, q, KS)
    if issubclass(index_cls, AlwaysDense) and index_cls is not TightBudget:
        assert index.pruned > 0, "MaxScore path not exercised"


@pytest.mark.parametrize("index_cls", [BM25Index, AlwaysDense, AggressivePruning, TightBudget, Compiled])
def test_search_matches_naive_sort_on_large_corpus(index_cls, large, queries):
    index = index_cls(build_bm25_arrays(large))
    assert any(index._use_dense(*index._spans(index.term_ids(q))) for q in queries), "dense path not exercised"
    for q in queries[:70]:
        assert_search_exact(index, q, (1, 10, 57))
    if isinstance(index, AlwaysDense) and index_cls is not TightBudget:
        assert index.pruned > 0, "MaxScore path not exercised"


@pytest.mark.parametrize("density", [0.0, 0.02, 0.3, 1.0])
@pytest.mark.parametrize("index_cls", [BM25Index, AlwaysDense, Compiled])
def test_search_with_allowed_mask_matches_naive_filtering(index_cls, density, small, large, queries, rng):
    for corpus in (small, large):
        index = index_cls(build_bm25_arrays(corpus))
        allowed = rng.random(index.n_rows) < density
        for q in queries[:60]:
            assert_search_exact(index, q, (1, 10), allowed)


@pytest.mark.parametrize("index_cls", [BM25Index, AlwaysDense, TightBudget])
def test_score_terms_returns_every_touched_row_with_exact_scores(index_cls, small, large, queries):
    for corpus in (small, large):
        index = index_cls(build_bm25_arrays(corpus))
        for q in queries:
            assert_score_terms_exact(index, q)


def test_memory_mapped_index_gives_the_same_bytes(tmp_path, large, queries, monkeypatch):
    from ragspine_core import integrity
    from ragspine_index.steps.bm25_index import write_bm25_arrays

    monkeypatch.setattr(integrity, "COPY_AT_OPEN_MAX_FILE_BYTES", 0)  # mapped, as a large library's arrays are

    arrays = build_bm25_arrays(large)
    write_bm25_arrays(tmp_path, arrays, "spec@1")
    mapped, in_memory = BM25Index.load(tmp_path), BM25Index(arrays)
    assert isinstance(mapped.postings, np.memmap)
    for q in queries:
        a, b = mapped.search(q, k=10), in_memory.search(q, k=10)
        assert a[0].tolist() == b[0].tolist() and a[1].tobytes() == b[1].tobytes()
        assert_search_exact(mapped, q, 10)


def test_threads_sharing_one_index_get_exact_results(large, queries):
    index = BM25Index(build_bm25_arrays(large))
    expected = [naive_search(index, q, 10) for q in queries]
    failures: list[str] = []

    def worker(offset: int) -> None:
        for i in range(len(queries)):
            j = (i + offset) % len(queries)
            rows, scores = index.search(queries[j], k=10)
            if rows.tolist() != expected[j][0] or scores.tobytes() != expected[j][1].tobytes():
                failures.append(f"query {queries[j]}")
            r2, _ = index.score_terms(index.term_ids(queries[j]))
            if r2.tolist() != np.flatnonzero(index.score_rows_dense(queries[j])).tolist():
                failures.append(f"score_terms {queries[j]}")

    threads = [threading.Thread(target=worker, args=(o * 7,)) for o in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert not index._zeros.any(), "the shared scratch must be all zero between calls"


@pytest.mark.parametrize("levels", [2, 5, 1000])
def test_top_k_rows_with_sampled_floor_matches_a_full_sort(levels, rng):
    for n in (63, 64, 65, 500, 5_000):
        rows = rng.permutation(n * 3)[:n].astype(np.int64)
        scores = rng.integers(0, levels, n).astype(np.float32) / 4
        for k in (1, 10, 100, n + 3):
            got_rows, got_scores = top_k_rows(rows, scores, k)
            want = sorted(zip(rows.tolist(), scores.tolist()), key=lambda rs: (-rs[1], rs[0]))[:k]
            assert got_rows.tolist() == [r for r, _ in want]
            assert got_scores.tolist() == [s for _, s in want]


def handmade_index(cls: type[BM25Index], n_rows: int, postings: dict[str, dict[int, float]]) -> BM25Index:
    """An index with chosen float32 impacts: ``postings[term][row] = impact``."""
    tokens = sorted(postings)
    rows = [np.array(sorted(postings[t]), dtype=np.int32) for t in tokens]
    imps = [np.array([postings[t][r] for r in sorted(postings[t])], dtype=np.float32) for t in tokens]
    arrays = BM25Arrays(
        tokens=tokens,
        indptr=np.concatenate([[0], np.cumsum([r.shape[0] for r in rows])]).astype(np.int64),
        postings=np.concatenate(rows),
        impacts=np.concatenate(imps),
        max_impact=np.array([i.max() for i in imps], dtype=np.float32),
        doc_lengths=np.ones(n_rows, dtype=np.int32),
        params=BM25Params(),
        avgdl=1.0,
    )
    return cls(arrays)


@pytest.mark.parametrize("index_cls", [BM25Index, AlwaysDense, AggressivePruning, Compiled])
def test_rows_equal_in_float32_but_not_in_float64_tie_and_the_lower_row_wins(index_cls):
    # 1.0 + 2**-25 rounds to 1.0 in float32: rows 1 and 4 tie although row 4 is larger
    # in float64. Row 4 is in the strided sample (step 4), row 1 is not: a float64 floor
    # would drop row 1, which must come first.
    tiny = 2.0**-25
    a = {r: 0.5 for r in range(64)} | {1: 1.0, 4: 1.0}
    index = handmade_index(index_cls, 64, {"a": a, "b": {4: tiny, 9: tiny}})
    for q in (["a", "b"], ["b", "a"]):
        assert_search_exact(index, q, (1, 2, 3, 10))
        assert index.search(q, k=2)[0].tolist() == [1, 4]
        assert_score_terms_exact(index, q)


@pytest.mark.parametrize("index_cls", [BM25Index, AlwaysDense, AggressivePruning])
def test_pruned_rows_that_tie_in_float32_are_not_lost(index_cls):
    # Both terms are dense, so MaxScore may leave out "b" (max 2**-25). Row 4 (sampled)
    # scores 1 + 2**-25; row 1 scores 1 - 2**-24 + 2**-25, which rounds to float32 1.0
    # as well: a tie that row 1 wins, although its partial score (without "b") is
    # below the float64 floor minus the slack.
    tiny = 2.0**-25
    a = {r: 0.5 for r in range(64)} | {1: 1.0 - 2.0**-24, 4: 1.0}
    b = {r: tiny for r in [1, 4, *range(20, 41)]}
    index = handmade_index(index_cls, 64, {"a": a, "b": b})
    for q in (["a", "b"], ["b", "a"]):
        assert_search_exact(index, q, (1, 2, 5))
        assert index.search(q, k=1)[0].tolist() == [1]


@pytest.mark.parametrize("index_cls", [BM25Index, AlwaysDense, AggressivePruning])
def test_impacts_are_summed_in_query_order(index_cls):
    # float64 addition is not associative: in the order (x, y, z, w) row 0 sums to
    # 1 + 2**-24 + 2**-52, which rounds up in float32; in the order (z, w, x, y) the two
    # 2**-53 vanish (ties to even) and 1 + 2**-24 rounds down. Every path must add in
    # query order, as score_rows_dense does.
    tiny = 2.0**-53
    filler = {r: 0.25 for r in range(1, 40)}
    index = handmade_index(
        index_cls, 40, {"x": {0: tiny}, "y": {0: tiny}, "z": {0: 1.0} | filler, "w": {0: 2.0**-24}}
    )
    first = index.search(["x", "y", "z", "w"], k=1)[1][0]
    second = index.search(["z", "w", "x", "y"], k=1)[1][0]
    assert first != second, "the corpus no longer separates the two summation orders"
    for q in (["x", "y", "z", "w"], ["z", "w", "x", "y"], ["w", "x", "z", "y"], ["z", "x", "w", "y"]):
        assert_search_exact(index, q, (1, 5))
        assert_score_terms_exact(index, q)
