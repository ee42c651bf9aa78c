"""top_k_cosine against a brute-force numpy reference (ties, row subsets, chunking, memmap)."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.dense import l2_normalize, top_k_cosine
from ragspine_core.errors import ConfigError, EmbeddingModelMismatchError

from tests.core.dense.helpers import reference_top_k as reference


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("chunk_size", [1, 7, 64, 65536])
def test_matches_reference_on_random_unit_vectors(seed, chunk_size):
    rng = np.random.default_rng(seed)
    matrix = l2_normalize(rng.standard_normal((300, 16)))
    query = l2_normalize(rng.standard_normal(16))
    rows, scores = top_k_cosine(matrix, query, 10, chunk_size=chunk_size)
    want_rows, want_scores = reference(matrix, query, 10)
    assert rows.tolist() == want_rows.tolist()
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)
    assert rows.dtype == np.int64 and scores.dtype == np.float32


@pytest.mark.parametrize("chunk_size", [1, 3, 10, 1000])
def test_ties_break_by_row_ascending_across_chunks(chunk_size):
    matrix = np.array([[0.0, 1.0]] * 3 + [[1.0, 0.0]] * 5 + [[0.0, 1.0]] * 4, dtype=np.float32)
    rows, scores = top_k_cosine(matrix, np.array([1.0, 0.0]), 4, chunk_size=chunk_size)
    assert rows.tolist() == [3, 4, 5, 6]
    assert scores.tolist() == [1.0, 1.0, 1.0, 1.0]
    rows, _ = top_k_cosine(matrix, np.array([1.0, 0.0]), 7, chunk_size=chunk_size)
    assert rows.tolist() == [3, 4, 5, 6, 7, 0, 1]


def test_row_subset_only_returns_those_rows():
    rng = np.random.default_rng(1)
    matrix = l2_normalize(rng.standard_normal((50, 8)))
    query = matrix[10]
    rows, _ = top_k_cosine(matrix, query, 5, rows=np.array([40, 3, 22, 9]))
    assert sorted(rows.tolist()) == [3, 9, 22, 40]
    rows, scores = top_k_cosine(matrix, query, 1, rows=np.array([10, 11]))
    assert rows.tolist() == [10] and scores[0] == pytest.approx(1.0, abs=1e-6)


def test_works_on_a_memory_mapped_matrix(tmp_path):
    rng = np.random.default_rng(7)
    matrix = l2_normalize(rng.standard_normal((2000, 32)))
    np.save(tmp_path / "vectors.npy", matrix)
    mapped = np.load(tmp_path / "vectors.npy", mmap_mode="r")
    query = l2_normalize(rng.standard_normal(32))
    rows, scores = top_k_cosine(mapped, query, 25, chunk_size=300)
    want_rows, want_scores = reference(matrix, query, 25)
    assert rows.tolist() == want_rows.tolist()
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)
    subset = np.arange(0, 2000, 3)
    rows, _ = top_k_cosine(mapped, query, 25, rows=subset, chunk_size=100)
    assert rows.tolist() == reference(matrix, query, 25, subset)[0].tolist()


def test_k_larger_than_candidates_and_k_zero():
    matrix = np.eye(3, dtype=np.float32)
    rows, scores = top_k_cosine(matrix, np.array([0.0, 1.0, 0.0]), 10)
    assert rows.tolist() == [1, 0, 2] and scores.tolist() == [1.0, 0.0, 0.0]
    rows, scores = top_k_cosine(matrix, np.array([0.0, 1.0, 0.0]), 0)
    assert rows.shape == (0,) and scores.shape == (0,)
    rows, _ = top_k_cosine(matrix, np.array([0.0, 1.0, 0.0]), 3, rows=np.array([], dtype=np.int64))
    assert rows.shape == (0,)


def test_nan_rows_rank_last():
    matrix = np.array([[np.nan, 0.0], [0.5, 0.0], [-1.0, 0.0]], dtype=np.float32)
    rows, _ = top_k_cosine(matrix, np.array([1.0, 0.0]), 3)
    assert rows.tolist() == [1, 2, 0]


def test_float16_and_float64_matrices_are_scored():
    matrix = np.array([[1.0, 0.0], [0.6, 0.8]], dtype=np.float16)
    rows, scores = top_k_cosine(matrix, np.array([0.6, 0.8]), 2)
    assert rows.tolist() == [1, 0] and scores.dtype == np.float32
    rows, _ = top_k_cosine(matrix.astype(np.float64), np.array([1.0, 0.0]), 1)
    assert rows.tolist() == [0]


def test_bad_arguments_are_explained():
    matrix = np.eye(4, dtype=np.float32)
    with pytest.raises(EmbeddingModelMismatchError, match="3 dimensions but the index vectors have 4"):
        top_k_cosine(matrix, np.ones(3), 1)
    with pytest.raises(ConfigError, match="NaN"):
        top_k_cosine(matrix, np.array([np.nan, 0, 0, 0]), 1)
    with pytest.raises(ConfigError, match=r"rows must lie in \[0, 4\)"):
        top_k_cosine(matrix, np.ones(4), 1, rows=np.array([0, 4]))
    with pytest.raises(ConfigError, match="k must be"):
        top_k_cosine(matrix, np.ones(4), -1)
    with pytest.raises(ConfigError, match="chunk_size"):
        top_k_cosine(matrix, np.ones(4), 1, chunk_size=0)
