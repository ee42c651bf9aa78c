"""Lexical MaxSim (token similarity, specificity weights) and ColBERT-style MaxSim."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine_core.errors import RagspineError
from ragspine_query.rerank import (
    ColbertMaxSimReranker,
    LexicalMaxSimReranker,
    Reranker,
    embedding_maxsim,
    maxsim_score,
    token_similarity,
    token_specificity_weight,
    weighted_maxsim_score,
)
from rerank_fixtures import HashingTokenEncoder, chunk_ids, make_hit

tokens = st.text(alphabet="abcde_19营收", min_size=0, max_size=8)


# -- token_similarity ---------------------------------------------------------------------


@given(tokens, tokens)
@settings(max_examples=200, deadline=None, database=None)
def test_token_similarity_is_symmetric_and_bounded(a, b):
    s = token_similarity(a, b)
    assert 0.0 <= s <= 1.0
    assert s == token_similarity(b, a)


@given(st.text(min_size=1, max_size=12))
@settings(max_examples=100, deadline=None, database=None)
def test_identical_tokens_are_fully_similar(a):
    assert token_similarity(a, a) == 1.0


def test_token_similarity_by_hand():
    # padded trigrams of "cat": ^ca cat at$; of "cart": ^ca car art rt$ -> 2*1/(3+4)
    assert token_similarity("cat", "cart") == pytest.approx(2 / 7)
    assert token_similarity("revenue", "revenues") == pytest.approx(0.8)
    assert token_similarity("abc", "xyz") == 0.0
    assert token_similarity("", "") == 0.0
    assert token_similarity("营收", "营收") == 1.0


# -- token_specificity_weight -------------------------------------------------------------


def test_specificity_weights_follow_the_documented_rules():
    assert token_specificity_weight("the") == 0.25
    assert token_specificity_weight("的") == 0.25
    assert token_specificity_weight("x") == 0.5
    assert token_specificity_weight("loan") == 1.0
    assert token_specificity_weight("margin") == 1.25
    assert token_specificity_weight("guidance") == 1.5
    assert token_specificity_weight("2023") == 1.5
    assert token_specificity_weight("acme_cn") == 1.75  # underscore + 7 chars
    assert token_specificity_weight("acme_cn_2023") == 2.5
    assert token_specificity_weight("营收") == 1.0
    assert token_specificity_weight("") == 0.0


def test_identifiers_outweigh_stop_words():
    assert token_specificity_weight("q3_2023") > token_specificity_weight("revenue") > token_specificity_weight("of")


# -- MaxSim formulas ------------------------------------------------------------------------


def reference_maxsim(query_tokens, doc_tokens, weight):
    weights = [weight(q) for q in query_tokens]
    if not doc_tokens or sum(weights) == 0:
        return 0.0
    best = [max(token_similarity(q, d) for d in doc_tokens) for q in query_tokens]
    return sum(w * b for w, b in zip(weights, best)) / sum(weights)


@given(st.lists(tokens, max_size=6), st.lists(tokens, max_size=12))
@settings(max_examples=150, deadline=None, database=None)
def test_maxsim_matches_the_brute_force_formula(q, d):
    assert maxsim_score(q, d) == pytest.approx(reference_maxsim(q, d, lambda t: 1.0 if t else 0.0))
    assert weighted_maxsim_score(q, d) == pytest.approx(reference_maxsim(q, d, token_specificity_weight))
    assert 0.0 <= weighted_maxsim_score(q, d) <= 1.0


def test_maxsim_by_hand():
    assert maxsim_score(["acme", "revenue"], ["acme", "revenues", "fell"]) == pytest.approx((1.0 + 0.8) / 2)
    # "of" weighs 0.25, "revenue" 1.25: (0.25*0 + 1.25*1) / 1.5
    assert weighted_maxsim_score(["of", "revenue"], ["revenue"]) == pytest.approx(1.25 / 1.5)
    assert maxsim_score([], ["x"]) == 0.0
    assert maxsim_score(["x"], []) == 0.0


def test_lexical_reranker_prefers_the_passage_with_the_identifier():
    hits = [
        make_hit("generic", "the report discusses the revenue of the company"),
        make_hit("specific", "acme q3 2023 revenue fell 12 percent"),
        make_hit("none", "weather was mild"),
    ]
    reranker = LexicalMaxSimReranker()
    assert isinstance(reranker, Reranker)
    reranked = reranker.rank("acme revenue q3 2023", hits)
    assert chunk_ids(reranked) == ["specific", "generic", "none"]
    assert reranked[0].scores["rerank"] == pytest.approx(1.0)
    assert all(h.scores["bm25"] == 1.0 for h in reranked)


def test_lexical_reranker_handles_cjk_with_the_spec_tokenizer():
    hits = [make_hit("a", "成本上升"), make_hit("b", "营收下滑的原因")]
    assert chunk_ids(LexicalMaxSimReranker().rank("为什么营收下滑", hits)) == ["b", "a"]


def test_unweighted_and_custom_tokenizer_options():
    reranker = LexicalMaxSimReranker(weighted=False, tokenizer=str.split)
    assert reranker.score("ACME_CN rose", ["ACME_CN", "rose"]) == [pytest.approx(0.5), pytest.approx(0.5)]


# -- ColBERT-style MaxSim ----------------------------------------------------------------


def test_embedding_maxsim_equals_numpy_recomputation():
    rng = np.random.default_rng(3)
    q = rng.normal(size=(4, 8))
    d = rng.normal(size=(9, 8))
    expected = np.mean([max(q[i] @ d[j] for j in range(9)) for i in range(4)])
    assert embedding_maxsim(q, d) == pytest.approx(expected)
    assert embedding_maxsim(q, np.zeros((0, 8))) == 0.0
    with pytest.raises(RagspineError):
        embedding_maxsim(q, rng.normal(size=(2, 5)))


def test_colbert_reranker_scores_equal_numpy_maxsim_of_the_encoder_outputs():
    encoder = HashingTokenEncoder()
    passages = ["acme revenue fell", "bank loan risk", "acme", "", "revenue acme china growth"]
    hits = [make_hit(f"h{i}", p) for i, p in enumerate(passages)]
    reranker = ColbertMaxSimReranker(encoder)
    reranked = reranker.rank("acme revenue", hits)
    q = np.stack([encoder.vector("acme"), encoder.vector("revenue")]).astype(np.float64)
    expected = {}
    for i, p in enumerate(passages):
        if not p:
            expected[f"h{i}"] = 0.0
            continue
        d = np.stack([encoder.vector(t) for t in p.split()]).astype(np.float64)
        expected[f"h{i}"] = float((q @ d.T).max(axis=1).mean())
    for hit in reranked:
        assert hit.scores["rerank"] == pytest.approx(expected[hit.chunk_id], abs=1e-6)
    order = sorted(expected, key=lambda k: (-expected[k], int(k[1:])))
    assert chunk_ids(reranked) == order
    assert order[:2] == ["h0", "h4"] or order[:2] == ["h4", "h0"]  # both hold every query token
    assert encoder.seen[0] == "acme revenue"  # one call: query first, then passages
    assert len(encoder.seen) == 1 + len(passages)


def test_colbert_requires_an_embed_tokens_method():
    with pytest.raises(RagspineError, match="embed_tokens"):
        ColbertMaxSimReranker(object())


def test_colbert_rejects_an_encoder_returning_the_wrong_count():
    class Short(HashingTokenEncoder):
        def embed_tokens(self, texts):
            return super().embed_tokens(texts)[:-1]

    with pytest.raises(RagspineError, match="returned 2 arrays for 3 texts"):
        ColbertMaxSimReranker(Short()).rank("q", [make_hit("a", "x"), make_hit("b", "y")])
