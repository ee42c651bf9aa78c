"""``RetrievalConfig.max_sensitivity``: a caller's ceiling in the candidate mask, before any channel ranks."""

from __future__ import annotations

import pytest

from ragspine_core.errors import ConfigError
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.library import open_library
from ragspine_query.retriever import HybridRetriever, RetrievalConfig

QUERY = "Acme revenue gross margin 2024"


def test_ceiling_masks_before_ranking_with_its_own_statistics(built_sample):
    with open_library(built_sample) as lib:
        capped = HybridRetriever(lib, embedding_backend=None, config=RetrievalConfig(mode="bm25", max_sensitivity="public"))
        plain = HybridRetriever(lib, embedding_backend=None, config=RetrievalConfig(mode="bm25"))
        got = capped.search(QUERY, top_k=10, include_restricted=True)  # an admin search keeps the ceiling too
        filtered = plain.search(QUERY, top_k=10, filters={"sensitivity": "PUBLIC"}, include_restricted=False)
        everyone = plain.search(QUERY, top_k=10, include_restricted=False)
        assert any(h.chunk.sensitivity == "INTERNAL" for h in everyone)
        assert got and all(h.chunk.sensitivity == "PUBLIC" for h in got)
        # the same candidates as a PUBLIC filter, but scored with BM25 statistics over the PUBLIC rows
        # alone (bm25_public, issue 41): a filter on the full statistics lets INTERNAL text move them
        # (the HTTP/MCP differential against a library built without its INTERNAL documents is
        # tests/tools/serve/test_ceiling_statistics.py)
        public = plain.search(QUERY, top_k=1000, filters={"sensitivity": "PUBLIC"}, include_restricted=False)
        assert {h.chunk_id for h in got} <= {h.chunk_id for h in public}
        shared = {h.chunk_id: h.score for h in filtered}
        assert any(c in shared and h.score != pytest.approx(shared[c]) for c, h in ((h.chunk_id, h) for h in got))
        # a filter widening nothing: asking INTERNAL rows under a PUBLIC ceiling finds none
        assert capped.search(QUERY, top_k=5, filters={"sensitivity": "INTERNAL"}) == []


def test_ceiling_survives_the_retry_without_filters(built_sample):
    # the caller opts in to the retry (relax_filters): the filter goes, the ceiling stays
    r = build_narrative_retriever(built_sample, mode="bm25", embedding_backend=None, reranker=None, max_sensitivity="PUBLIC",
                                  relax_filters=True)
    hits = r.retrieve(QUERY, filters={"sensitivity": "INTERNAL"}, top_k=10)
    assert hits and all(s.sensitivity == "PUBLIC" for s in hits)
    assert hits.dropped_filters  # and says it dropped the filter
    # by default a caller's filter is a constraint (issue 36): nothing INTERNAL, nothing retried
    strict = build_narrative_retriever(built_sample, mode="bm25", embedding_backend=None, reranker=None,
                                       max_sensitivity="PUBLIC")
    assert list(strict.retrieve(QUERY, filters={"sensitivity": "INTERNAL"}, top_k=10)) == []


@pytest.mark.parametrize("level", ["RESTRICTED", "SECRET", ""])
def test_ceiling_must_be_public_or_internal(level):
    with pytest.raises(ConfigError, match="max_sensitivity"):
        RetrievalConfig(max_sensitivity=level)
