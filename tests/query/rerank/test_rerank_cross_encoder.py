"""CrossEncoderReranker on a tiny ONNX cross-encoder built here, checked against numpy."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ragspine_core.errors import ConfigError
from ragspine_query.rerank import CrossEncoderReranker, Reranker
from rerank_fixtures import chunk_ids, make_hit
from rerank_tiny_models import reference_cross_encoder

QUERY = "acme revenue china"
PASSAGES = [
    "acme revenue fell in china",
    "bank loan credit risk",
    "guidance",
    "europe sales rose strong demand export market share price volume",
    "",
    "acme acme acme",
    "unknown words only here",
]


def test_scores_equal_a_numpy_recomputation_of_the_tiny_model(tiny_cross_encoder):
    model_dir, wts = tiny_cross_encoder
    reranker = CrossEncoderReranker(model_dir, batch_size=3)
    got = reranker.score(QUERY, PASSAGES)
    expected = [reference_cross_encoder(wts, QUERY, p) for p in PASSAGES]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # and the model really tells these passages apart (else ordering tests prove nothing)
    assert len({round(s, 4) for s in expected}) == len(expected)


@pytest.mark.parametrize("batch_size", [1, 2, 16])
def test_batching_and_length_sorting_do_not_change_scores(tiny_cross_encoder, batch_size):
    model_dir, wts = tiny_cross_encoder
    got = CrossEncoderReranker(model_dir, batch_size=batch_size).score(QUERY, PASSAGES)
    np.testing.assert_allclose(got, [reference_cross_encoder(wts, QUERY, p) for p in PASSAGES], rtol=1e-5, atol=1e-5)


def test_query_and_passage_use_token_type_ids(tiny_cross_encoder):
    # swapping the roles changes the token types, so a pair-aware model scores differently
    model_dir, wts = tiny_cross_encoder
    reranker = CrossEncoderReranker(model_dir)
    forward = reranker.score("acme revenue china", ["bank"])[0]
    swapped = reranker.score("bank", ["acme revenue china"])[0]
    assert forward == pytest.approx(reference_cross_encoder(wts, "acme revenue china", "bank"), abs=1e-5)
    assert abs(forward - swapped) > 1e-3


def test_long_passages_are_truncated_on_the_passage_side_only(tiny_cross_encoder):
    model_dir, wts = tiny_cross_encoder
    reranker = CrossEncoderReranker(model_dir, max_length=10)
    passage = "bank loan credit risk rate inflation growth sales cost supply chain outlook"
    got = reranker.score("acme revenue china", [passage])[0]
    assert got == pytest.approx(reference_cross_encoder(wts, "acme revenue china", passage, max_length=10), abs=1e-5)
    # equal lengths: trimming both sides (longest_first) would give another score
    query = "acme revenue china europe bank loan"
    passage = "credit risk rate inflation growth sales"
    got = reranker.score(query, [passage])[0]
    assert got == pytest.approx(reference_cross_encoder(wts, query, passage, max_length=10), abs=1e-5)


def test_a_query_too_long_for_the_limit_still_scores(tiny_cross_encoder):
    model_dir, _ = tiny_cross_encoder
    reranker = CrossEncoderReranker(model_dir, max_length=8)
    scores = reranker.score("acme revenue china europe bank loan credit risk", ["profit margin quarter"])
    assert np.isfinite(scores).all()


def test_rank_orders_by_score_and_records_the_rerank_channel(tiny_cross_encoder):
    model_dir, wts = tiny_cross_encoder
    reranker = CrossEncoderReranker(model_dir)
    assert isinstance(reranker, Reranker)
    hits = [make_hit(f"h{i}", p, score=1.0 - i / 10) for i, p in enumerate(PASSAGES)]
    reranked = reranker.rank(QUERY, hits)
    expected_scores = [reference_cross_encoder(wts, QUERY, p) for p in PASSAGES]
    expected_order = [f"h{i}" for i in sorted(range(len(PASSAGES)), key=lambda i: -expected_scores[i])]
    assert chunk_ids(reranked) == expected_order
    for hit in reranked:
        i = int(hit.chunk_id[1:])
        assert hit.score == pytest.approx(expected_scores[i], abs=1e-5)
        assert hit.scores["rerank"] == hit.score
        assert hit.scores["bm25"] == 1.0 and hit.scores["fused"] == pytest.approx(1.0 - i / 10)


def test_equal_scores_keep_the_previous_order(tiny_cross_encoder):
    model_dir, _ = tiny_cross_encoder
    hits = [make_hit(f"h{i}", "acme revenue") for i in range(5)]
    assert chunk_ids(CrossEncoderReranker(model_dir).rank("acme", hits)) == ["h0", "h1", "h2", "h3", "h4"]


def test_model_under_onnx_subfolder_is_found(tiny_cross_encoder, tmp_path):
    model_dir, _ = tiny_cross_encoder
    (tmp_path / "onnx").mkdir()
    shutil.copy(model_dir / "model.onnx", tmp_path / "onnx" / "model.onnx")
    shutil.copy(model_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    assert CrossEncoderReranker(tmp_path).score("acme", ["acme revenue"]).shape == (1,)


def test_no_model_dir_names_the_env_var_and_files():
    with pytest.raises(ConfigError) as info:
        CrossEncoderReranker(None)
    message = str(info.value)
    assert "RAGSPINE_CROSS_ENCODER_DIR" in message
    assert "model.onnx" in message and "tokenizer.json" in message


def test_missing_directory_is_reported(tmp_path):
    with pytest.raises(ConfigError) as info:
        CrossEncoderReranker(tmp_path / "nowhere")
    assert "does not exist" in str(info.value)
    assert "RAGSPINE_CROSS_ENCODER_DIR" in str(info.value)


def test_missing_tokenizer_says_where_to_put_it(tiny_cross_encoder, tmp_path):
    model_dir, _ = tiny_cross_encoder
    shutil.copy(model_dir / "model.onnx", tmp_path / "model.onnx")
    with pytest.raises(ConfigError) as info:
        CrossEncoderReranker(tmp_path)
    message = str(info.value)
    assert str(tmp_path / "tokenizer.json") in message
    assert "ONNX graph" not in message


def test_missing_model_says_where_to_put_it(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError) as info:
        CrossEncoderReranker(tmp_path)
    assert str(tmp_path / "model.onnx") in str(info.value)


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"max_length": 2}])
def test_invalid_arguments_raise_config_error(tiny_cross_encoder, kwargs):
    with pytest.raises(ConfigError):
        CrossEncoderReranker(tiny_cross_encoder[0], **kwargs)
