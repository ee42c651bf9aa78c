"""Property test: top_k_cosine equals a brute-force ranking under heavy ties and row subsets."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.dense import top_k_cosine

from tests.core.dense.helpers import integer_matrix
from tests.core.dense.helpers import reference_top_k as reference

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (extra 'dev')")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 120),
    k=st.integers(0, 130),
    chunk_size=st.integers(1, 50),
    subset=st.booleans(),
)
def test_heavy_ties_and_row_subsets_match_reference(seed, n, k, chunk_size, subset):
    rng = np.random.default_rng(seed)
    matrix = integer_matrix(rng, n, 4, levels=1)
    query = rng.integers(-1, 2, size=4).astype(np.float32)
    rows = rng.permutation(n)[: rng.integers(0, n + 1)] if subset else None
    got_rows, got_scores = top_k_cosine(matrix, query, k, rows=rows, chunk_size=chunk_size)
    want_rows, want_scores = reference(matrix, query, k, rows)
    assert got_rows.tolist() == want_rows.tolist()
    assert got_scores.tolist() == want_scores.tolist()
