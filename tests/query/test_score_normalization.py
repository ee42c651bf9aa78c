"""The Cortex rules: score normalisation as the seed's NormalizeAgentScores, time-decayed RRF, query normalisation."""

from __future__ import annotations

import math
from datetime import date

import numpy as np
import pytest

from ragspine_core.text.normalize import normalize_query
from ragspine_query.fusion import time_decayed
from ragspine_query.score_normalization import AgentScore, normalize_score, normalize_scores
from ragspine_core.errors import ConfigError, ScoreError
from ragspine_query.fusion import time_decay_weight, weighted_rrf
from ragspine_query.retriever import RetrievalConfig


def test_bounded_signals_clamp_and_lexical_maps_x_over_one_plus_x():
    assert normalize_score("dense", 0.42) == 0.42 and normalize_score("dense", 1.7) == 1.0
    for s in ("maxsim", "ppr", "summary"):
        assert normalize_score(s, 3.0) == 1.0
    assert normalize_score("lexical", 0.0) == 0.0
    assert normalize_score("lexical", 3.0) == pytest.approx(0.75)
    assert normalize_score("lexical", 1e308) == pytest.approx(1.0)  # overflow-safe form
    assert 0.0 < normalize_score("lexical", 1e-300) < 1e-299


@pytest.mark.parametrize("bad", [None, -0.1, math.nan, math.inf, -math.inf])
def test_missing_negative_and_non_finite_scores_are_rejected(bad):
    with pytest.raises(ScoreError):
        normalize_score("lexical", bad)
    with pytest.raises(ScoreError):  # one bad score rejects the whole batch
        normalize_scores([AgentScore("dense", 0.5, "chunk", "a"), AgentScore("dense", bad, "chunk", "b")])
    with pytest.raises(ScoreError, match="unknown score signal"):
        normalize_score("bm25", 1.0)


def test_normalize_scores_orders_by_score_then_kind_then_handle_stably():
    out = normalize_scores([AgentScore("lexical", 1.0, "doc", "z"), AgentScore("dense", 0.5, "chunk", "b"),
                            AgentScore("dense", 0.9, "chunk", "a"), AgentScore("ppr", 0.5, "chunk", "a")])
    assert [(s.source_kind, s.public_handle, s.normalized) for s in out] == [
        ("chunk", "a", 0.9), ("chunk", "a", 0.5), ("chunk", "b", 0.5), ("doc", "z", 0.5)]


def test_time_decayed_rrf_halves_per_half_life_and_resorts():
    rows, fused = weighted_rrf([np.array([0, 1, 2], np.int64)])
    dates = np.array(["2024-01-01", "2025-01-01", ""], dtype=str)  # row 2 undated: weight 1
    r, s = time_decayed(rows, fused, dates, half_life_days=366, reference="2025-01-01")
    assert r.tolist() == [1, 2, 0]
    assert s[r.tolist().index(0)] == pytest.approx(fused[0] * 0.5)
    assert time_decayed(rows, fused, dates, half_life_days=0)[0].tolist() == [0, 1, 2]  # off
    with pytest.raises(ConfigError):
        RetrievalConfig(decay_half_life_days=-1)
    with pytest.raises(ConfigError):
        RetrievalConfig(decay_half_life_days=30, decay_reference="yesterday")


def test_time_decay_is_off_by_default_and_reorders_when_on(tmp_path_factory):
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever
    from tests.query.qi_library import shared_sample

    assert RetrievalConfig().decay_half_life_days == 0
    root = shared_sample(tmp_path_factory)
    with open_library(root) as lib:
        plain = HybridRetriever(lib, config=RetrievalConfig(mode="bm25")).search("Acme revenue", top_k=20)
        decayed = HybridRetriever(lib, config=RetrievalConfig(mode="bm25", decay_half_life_days=90, decay_reference="2025-12-31")
                                  ).search("Acme revenue", top_k=20, explain=True)
        assert [h.chunk_id for h in plain] != [h.chunk_id for h in decayed]
        ranks = {h.chunk_id: i for i, h in enumerate(HybridRetriever(lib, config=RetrievalConfig(mode="bm25")).search(
            "Acme revenue", top_k=100, explain=True), start=1)}
        for h in decayed:  # every score is exactly the RRF score times the decay weight of its date
            w = time_decay_weight(h.chunk.valid_as_of, half_life_days=90, today=date(2025, 12, 31))
            assert h.score == pytest.approx(w / (60 + ranks[h.chunk_id]))
        assert [h.score for h in decayed] == sorted((h.score for h in decayed), reverse=True)
        assert any(s.name == "rrf(channels)+time-decay" for s in decayed.explain.stages)


def test_normalize_query_folds_width_case_and_whitespace():
    assert normalize_query("  ＡＣＭＥ\tChina\u3000 Revenue  ") == "acme china revenue"
    assert normalize_query("Acme  China", casefold=False) == "Acme China"
