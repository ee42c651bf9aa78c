"""Tier 1: chunk records, deterministic hit order and the snippet dict."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ragspine_core.records import Chunk, Hit, sort_hits, to_snippet

SNIPPET_KEYS = {"text", "doc_id", "title", "source_locator", "chunk_id", "library_id", "sensitivity", "scores"}
METADATA_KEYS = {"entity", "topic", "geography", "period", "language", "valid_as_of"}


def make_chunk(**kw) -> Chunk:
    base = dict(
        chunk_id="c" * 64, library_id="sample", doc_id="acme-eu-2024q3-earnings", ordinal=2,
        text="Revenue fell 6.1% as distributors destocked.", start=120, end=164,
        title="Acme Europe Q3 2024", source_locator="reports/acme-eu/2024q3.pdf", entity="ACME_EU",
        topic="finance", geography="EU", period="2024Q3", language="en", sensitivity="PUBLIC",
        valid_as_of="2024-10-30", heading="Revenue", extra=(("author", "IR team"),),
    )
    base.update(kw)
    return Chunk(**base)


def test_snippet_carries_text_provenance_metadata_sensitivity_and_scores():
    hit = Hit(make_chunk(), 0.032, {"bm25": 7.5, "vector": 0.81, "fused": 0.032})
    s = to_snippet(hit)
    assert SNIPPET_KEYS | METADATA_KEYS <= set(s)
    assert s["text"] == "Revenue fell 6.1% as distributors destocked."
    assert (s["doc_id"], s["title"], s["source_locator"], s["library_id"]) == (
        "acme-eu-2024q3-earnings", "Acme Europe Q3 2024", "reports/acme-eu/2024q3.pdf", "sample")
    assert s["chunk_id"] == "c" * 64
    assert (s["entity"], s["topic"], s["geography"], s["period"], s["language"], s["valid_as_of"]) == (
        "ACME_EU", "finance", "EU", "2024Q3", "en", "2024-10-30")
    assert s["sensitivity"] == "PUBLIC"
    assert s["metadata"] == {"author": "IR team"}
    assert s["scores"] == {"bm25": 7.5, "vector": 0.81, "fused": 0.032}
    assert s["locator"] == "reports/acme-eu/2024q3.pdf#chars=120-164"
    json.dumps(s)  # plain JSON-serialisable dict


def test_snippet_scores_default_missing_channels_to_zero_and_fused_to_score():
    s = to_snippet(Hit(make_chunk(), 0.5, {"bm25": 3.0}))
    assert s["scores"] == {"bm25": 3.0, "vector": 0.0, "fused": 0.5}


@pytest.mark.parametrize("sensitivity", ["RESTRICTED", "restricted", "Restricted"])
def test_snippet_refuses_restricted_chunks(sensitivity):
    hit = Hit(make_chunk(sensitivity=sensitivity, text="RESTRICTED-MARKER-ALPHA"), 1.0, {})
    with pytest.raises(ValueError, match="RESTRICTED"):
        to_snippet(hit)


def test_parent_text_is_exposed_only_as_prompt_text():
    s = to_snippet(Hit(make_chunk(parent_text="whole section"), 1.0, {}))
    assert s["prompt_text"] == "whole section"
    assert s["text"] == "Revenue fell 6.1% as distributors destocked."
    assert "prompt_text" not in to_snippet(Hit(make_chunk(), 1.0, {}))


def test_sort_hits_is_score_desc_then_chunk_id_asc():
    hits = [Hit(make_chunk(chunk_id=c), s) for c, s in [("b", 1.0), ("a", 1.0), ("c", 2.0), ("d", 0.5)]]
    assert [h.chunk_id for h in sort_hits(hits)] == ["c", "a", "b", "d"]


def test_records_are_frozen():
    chunk = make_chunk()
    with pytest.raises(dataclasses.FrozenInstanceError):
        chunk.text = "changed"  # type: ignore[misc]


def test_chunk_metadata_includes_extra_fields():
    md = make_chunk().metadata()
    assert md["doc_id"] == "acme-eu-2024q3-earnings" and md["author"] == "IR team"


def test_locator_falls_back_to_doc_id():
    assert make_chunk(source_locator="").locator == "acme-eu-2024q3-earnings#chars=120-164"
