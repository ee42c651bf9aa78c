"""The agent seam returns snippets as frozen records (#24, #39): attributes, ``to_dict()``
for the JSON edges with the very bytes the snippet dicts had, key access deprecated."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest

from ragspine_core.records import Chunk, Hit, Snippet, hits_to_frame, to_snippet
from ragspine_query.agent_api import build_narrative_retriever, result_assessment


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    from tests.query.qi_library import shared_sample

    return build_narrative_retriever(shared_sample(tmp_path_factory), reranker=None)


@pytest.fixture(scope="module")
def snippets(retriever):
    return retriever.retrieve("Acme China revenue", top_k=5)


def _chunk(**kw) -> Chunk:
    base = dict(chunk_id="c" * 64, library_id="sample", doc_id="d1", ordinal=0, text="Revenue fell 6.1% — 收入下降。", start=0, end=27,
                title="Q3", source_locator="reports/q3.pdf#page=4", entity="ACME", sensitivity="INTERNAL", heading="Revenue",
                extra=(("author", "IR"),))
    base.update(kw)
    return Chunk(**base)  # type: ignore[arg-type]


def test_snippets_are_frozen_records_with_every_field_as_an_attribute(snippets):
    assert snippets and all(type(s) is Snippet for s in snippets)
    for s in snippets:
        plain = s.to_dict()
        assert type(plain) is dict and list(plain)[:3] == ["text", "doc_id", "title"]
        assert (s.text, s.chunk_id, s.locator, s.library_id, s.sensitivity, dict(s.scores)) == (
            plain["text"], plain["chunk_id"], plain["locator"], plain["library_id"], plain["sensitivity"], plain["scores"])
        assert s.sensitivity != "RESTRICTED" and list(s.span) == plain["span"] and s.tier == plain["tier"]
        assert s.via is None and "via" not in plain  # an absent optional field reads as None
    s = snippets[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.text = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.scores["fused"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        json.dumps(s)  # the JSON edges write to_dict()


def test_the_json_bytes_are_those_of_the_snippet_dicts(retriever, snippets):
    """What `ragspine query --json` and serve print: byte for byte what they printed when a
    snippet was a dict (to_snippet's dict plus the result's assessment)."""
    results = retriever.index.search("Acme China revenue", top_k=5, include_restricted=False)
    assessment = result_assessment(snippets)
    before = [{**to_snippet(h), **assessment} for h in results if not h.chunk.is_restricted][:5]
    after = [s.to_dict() for s in snippets]
    for indent in (None, 2):
        assert json.dumps(after, ensure_ascii=False, indent=indent) == json.dumps(before, ensure_ascii=False, indent=indent)


def test_every_optional_field_round_trips_in_order():
    hit = Hit(_chunk(parent_text="the whole section"), 0.5, {"bm25": 2.0, "vector": 0.3, "fused": 0.5, "tree": 0.1}, via="node:3")
    raw = to_snippet(hit)
    assert {"location", "page", "prompt_text", "via"} <= set(raw)
    raw = {**raw, "tier": "direct", "confidence": {"grade": "high", "score": 0.9}, "needs_refinement": False}
    s = Snippet.from_dict(raw)
    assert s.present == ("location", "page", "prompt_text", "via", "tier", "confidence", "needs_refinement")
    assert s.page == 4 and s.via == "node:3" and s.confidence is not None and s.confidence["grade"] == "high"
    assert json.dumps(s.to_dict(), ensure_ascii=False) == json.dumps(raw, ensure_ascii=False)
    assert Snippet.from_dict(s.to_dict()) == s
    bare = Snippet.from_dict(to_snippet(Hit(_chunk(source_locator="notes.md"), 0.5, {"fused": 0.5})))
    assert bare.present == () and bare.location is None and bare.page is None
    added = bare.with_fields(tier="semantic", confidence=None, needs_refinement=None)
    assert list(added.to_dict())[-3:] == ["tier", "confidence", "needs_refinement"] and added.to_dict()["confidence"] is None
    assert "tier" not in bare.to_dict()  # with_fields made a copy


def test_bad_snippet_dicts_and_restricted_chunks_are_refused():
    raw = to_snippet(Hit(_chunk(), 0.5, {"fused": 0.5}))
    with pytest.raises(ValueError, match=r"missing \['text'\]"):
        Snippet.from_dict({k: v for k, v in raw.items() if k != "text"})
    with pytest.raises(ValueError, match=r"unknown \['colour'\]"):
        Snippet.from_dict({**raw, "colour": "red"})
    with pytest.raises(ValueError, match="RESTRICTED"):
        Snippet.from_dict({**raw, "sensitivity": "restricted"})


def test_key_access_still_reads_but_warns(snippets):
    s = snippets[0]
    with pytest.warns(DeprecationWarning, match=r"snippet\.text"):
        assert s["text"] == s.text
    with pytest.warns(DeprecationWarning, match=r"snippet\.via"):
        assert s.get("via") is None


def test_a_frame_of_snippets_reads_them_without_warnings(snippets):
    pytest.importorskip("pandas")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        frame = hits_to_frame(snippets)
    assert list(frame["chunk_id"]) == [s.chunk_id for s in snippets]
