"""The default query path embeds its variants once per model, in one call, and ranks as before."""

from __future__ import annotations

import pytest

from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend
from ragspine_core.dense.query_vectors import clear_query_vectors
from ragspine_query.pipeline.stages import RetrieveStage
from tests.query.qi_library import shared_sample

QUERY = "What caused the drop in Acme Europe sales in the third quarter of 2024?"  # glossary aliases: several variants


class CountingBackend(DeterministicEmbeddingBackend):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts, *, kind="passage", batch_size=None):
        self.calls.append(list(texts))
        return super().embed(texts, kind=kind, batch_size=batch_size)


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return shared_sample(tmp_path_factory)


def _run(library, monkeypatch=None, *, prefetch: bool = True):
    from ragspine_query.agent_api import build_narrative_retriever

    if not prefetch:
        monkeypatch.setattr(RetrieveStage, "_prefetch", lambda self, variants: None)
    backend = CountingBackend()
    retriever = build_narrative_retriever([library], None, embedding_backend=backend, reranker=None, mode="hybrid")
    result = retriever.retrieve(QUERY, top_k=10, explain=True)
    return backend, result


def test_variants_are_embedded_in_one_call_per_model_and_rank_as_one_call_per_variant(library, monkeypatch):
    backend, result = _run(library)
    variants = next(s for s in result.explain.stages if s.stage == "transform").detail.split(" | ")
    assert len(variants) > 1
    assert len(backend.calls) == 1 and set(backend.calls[0]) >= {QUERY}
    assert len(backend.calls[0]) == len(set(backend.calls[0]))  # each distinct text once
    assert any(s.stage == "embed" for s in result.explain.stages)
    again = backend.calls[:]
    clear_query_vectors(backend)
    with monkeypatch.context() as m:
        plain_backend, plain = _run(library, m, prefetch=False)
    assert len(plain_backend.calls) > 1 and all(len(c) == 1 for c in plain_backend.calls)  # one text a call
    assert sorted(t for c in plain_backend.calls for t in c) == sorted(again[0])
    assert [(s.chunk_id, s.scores) for s in result] == [(s.chunk_id, s.scores) for s in plain]


def test_a_repeated_query_reuses_the_vectors_of_the_process(library):
    backend = CountingBackend()
    from ragspine_query.agent_api import build_narrative_retriever

    retriever = build_narrative_retriever([library], None, embedding_backend=backend, reranker=None, mode="hybrid")
    first = retriever.retrieve(QUERY, top_k=5)
    calls = len(backend.calls)
    second = retriever.retrieve(QUERY, top_k=5)
    assert len(backend.calls) == calls  # nothing embedded again
    assert [s.chunk_id for s in first] == [s.chunk_id for s in second]
