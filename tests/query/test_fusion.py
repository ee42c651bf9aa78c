"""Tier 1: Reciprocal Rank Fusion, k = 60, ranks from 1 (Cormack et al. 2009)."""

from __future__ import annotations

import pytest

from ragspine_query.fusion import DEFAULT_RRF_K, rrf_fuse, rrf_order


def test_default_rrf_k_is_sixty():
    assert DEFAULT_RRF_K == 60


def test_rrf_golden_values_rank_starts_at_one():
    fused = rrf_fuse([["a", "b", "c"], ["b", "a"]])
    assert fused == {
        "a": pytest.approx(1 / 61 + 1 / 62),
        "b": pytest.approx(1 / 62 + 1 / 61),
        "c": pytest.approx(1 / 63),
    }
    assert fused["c"] == 1 / 63


def test_rrf_golden_ordering_across_three_lists():
    rankings = [["d1", "d2", "d3", "d4"], ["d3", "d1"], ["d5", "d3"]]
    fused = rrf_fuse(rankings)
    # d3: 1/63 + 1/61 + 1/62 ; d1: 1/61 + 1/62 ; d5: 1/61 ; d2: 1/62 ; d4: 1/64
    assert rrf_order(fused) == ["d3", "d1", "d5", "d2", "d4"]
    assert fused["d3"] == pytest.approx(1 / 63 + 1 / 61 + 1 / 62)


def test_rrf_ties_break_by_id_ascending():
    fused = rrf_fuse([["b", "a"], ["a", "b"], ["z"], ["c"]])
    # a and b tie at 1/61 + 1/62; z and c tie at 1/61
    assert rrf_order(fused) == ["a", "b", "c", "z"]


def test_rrf_custom_k_and_depth():
    fused = rrf_fuse([["x", "y", "z"]], rrf_k=0, depth=2)
    assert fused == {"x": 1.0, "y": 0.5}


def test_rrf_rejects_negative_k():
    with pytest.raises(ValueError, match="rrf_k"):
        rrf_fuse([["a"]], rrf_k=-1)


def test_rrf_of_nothing_is_empty():
    assert rrf_fuse([]) == {}
    assert rrf_order({}) == []
