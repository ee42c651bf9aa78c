"""The offline feature-hash embedding backend."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.dense import DeterministicEmbeddingBackend
from ragspine_core.errors import ConfigError

from tests.core.dense.helpers import run_python


def test_model_id_and_shape_follow_dim():
    backend = DeterministicEmbeddingBackend(dim=128)
    assert backend.model_id == "deterministic-hash-v1-d128"
    out = backend.embed(["alpha beta", "gamma"])
    assert out.shape == (2, 128) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    assert DeterministicEmbeddingBackend().model_id == "deterministic-hash-v1-d64"


def test_similar_texts_score_higher_than_unrelated_ones():
    backend = DeterministicEmbeddingBackend()
    a, b, c = backend.embed(
        [
            "quarterly revenue of acme fell in europe",
            "acme revenue fell in the european quarter",
            "the cat sat quietly on a warm windowsill",
        ]
    )
    assert float(a @ b) > 0.5
    assert float(a @ b) > float(a @ c) + 0.3


def test_chinese_text_shares_character_features():
    backend = DeterministicEmbeddingBackend()
    a, b, c = backend.embed(["营收下滑", "营收大幅下滑", "天气很好"])
    assert float(a @ b) > float(a @ c)


def test_empty_text_embeds_to_the_zero_vector():
    out = DeterministicEmbeddingBackend().embed(["", "   ", "x"])
    assert not out[:2].any()
    assert np.linalg.norm(out[2]) == pytest.approx(1.0)


def test_vectors_are_identical_across_processes():
    # Python's hash() is salted per process; the backend must not depend on it.
    code = (
        "from ragspine_core.dense import DeterministicEmbeddingBackend\n"
        "print(DeterministicEmbeddingBackend().embed(['acme revenue 营收'])[0].tobytes().hex())\n"
    )
    outputs = {run_python(code, PYTHONHASHSEED=seed) for seed in ("1", "2")}
    here = DeterministicEmbeddingBackend().embed(["acme revenue 营收"])[0].tobytes().hex()
    assert outputs == {here}


def test_kind_and_batch_size_do_not_change_vectors():
    backend = DeterministicEmbeddingBackend()
    texts = ["one two", "three four five"]
    np.testing.assert_array_equal(backend.embed(texts), backend.embed(texts, kind="query", batch_size=1))


def test_too_small_dim_is_refused():
    with pytest.raises(ConfigError, match=">= 8"):
        DeterministicEmbeddingBackend(dim=4)


def test_a_text_whose_signed_counts_cancel_still_gets_a_unit_vector():
    # "synthetic" and "document" share bucket 23 at dim 64 with opposite signs, and so do
    # "4384" and "b" in bucket 37: the signed counts cancel in every bucket. This chunk of the
    # 40k synthetic library embedded to the zero vector and the build's check refused it.
    backend = DeterministicEmbeddingBackend()
    text = "Synthetic document 4384\nb"
    assert {backend._bucket(t)[0] for t in ("synthetic", "document")} == {23}
    vec = backend.embed([text, "Synthetic document 8112\ngd", "alpha beta"])
    np.testing.assert_allclose(np.linalg.norm(vec, axis=1), 1.0, rtol=1e-6)
    # the rows that did not cancel keep their signed vector (the model id stays v1)
    signed = backend._embed_items(["alpha beta"], "passage", 1)[0]
    np.testing.assert_allclose(vec[2], signed / np.linalg.norm(signed), rtol=1e-6)
    # the same text as a query gets the same vector (the fallback is a function of the text)
    np.testing.assert_allclose(backend.embed([text], kind="query")[0], vec[0], rtol=1e-6)
