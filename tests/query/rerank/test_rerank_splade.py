"""SpladeReranker on a tiny masked-LM ONNX model built here, checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.errors import ConfigError
from ragspine_query.rerank import Reranker, SpladeReranker
from rerank_fixtures import chunk_ids, make_hit
from rerank_tiny_models import VOCAB, reference_splade_score, reference_splade_vector

QUERY = "acme revenue"
PASSAGES = ["acme revenue fell", "bank", "", "credit risk rate inflation growth sales cost", "acme"]


@pytest.mark.parametrize("batch_size", [1, 2, 16])
def test_sparse_vectors_equal_log_saturated_max_pooled_logits(tiny_splade, batch_size):
    model_dir, wts = tiny_splade
    vectors = SpladeReranker(model_dir, batch_size=batch_size).encode(PASSAGES)
    assert vectors.shape == (len(PASSAGES), len(VOCAB))
    expected = np.stack([reference_splade_vector(wts, p) for p in PASSAGES])
    # padding rows would change the max for the short texts if they were not masked
    np.testing.assert_allclose(vectors, expected, rtol=1e-5, atol=1e-6)
    assert (vectors >= 0).all() and (vectors == 0).any()


def test_scores_are_query_passage_dot_products(tiny_splade):
    model_dir, wts = tiny_splade
    got = SpladeReranker(model_dir).score(QUERY, PASSAGES)
    np.testing.assert_allclose(got, [reference_splade_score(wts, QUERY, p) for p in PASSAGES], rtol=1e-5, atol=1e-6)


def test_rank_orders_by_splade_score(tiny_splade):
    model_dir, wts = tiny_splade
    reranker = SpladeReranker(model_dir)
    assert isinstance(reranker, Reranker)
    hits = [make_hit(f"h{i}", p) for i, p in enumerate(PASSAGES)]
    reranked = reranker.rank(QUERY, hits)
    expected = [reference_splade_score(wts, QUERY, p) for p in PASSAGES]
    assert chunk_ids(reranked) == [f"h{i}" for i in sorted(range(len(PASSAGES)), key=lambda i: (-expected[i], i))]
    assert [h.scores["rerank"] for h in reranked] == sorted((h.scores["rerank"] for h in reranked), reverse=True)


def test_top_n_reranks_only_the_head(tiny_splade):
    model_dir, _ = tiny_splade
    hits = [make_hit(f"h{i}", p) for i, p in enumerate(PASSAGES)]
    reranked = SpladeReranker(model_dir).rank(QUERY, hits, top_n=2)
    assert set(chunk_ids(reranked[:2])) == {"h0", "h1"}
    assert reranked[2:] == hits[2:]


def test_no_model_dir_is_a_clear_error():
    with pytest.raises(ConfigError) as info:
        SpladeReranker(None)
    message = str(info.value)
    assert "RAGSPINE_SPLADE_DIR" in message
    assert "model.onnx" in message and "tokenizer.json" in message


def test_a_sequence_classifier_is_rejected_as_splade(tiny_cross_encoder):
    # a cross-encoder outputs (batch, 1) logits, not (batch, seq, vocab)
    with pytest.raises(ConfigError, match="masked-LM"):
        SpladeReranker(tiny_cross_encoder[0]).score("acme", ["acme"])
