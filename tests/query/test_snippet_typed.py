"""The agent seam returns typed snippets: attributes, still a dict for JSON, key access deprecated (#24)."""

from __future__ import annotations

import json
import warnings

import pytest

from ragspine_query.agent_api import build_narrative_retriever
from ragspine_core.records import Snippet, hits_to_frame


@pytest.fixture(scope="module")
def snippets(tmp_path_factory):
    from tests.query.qi_library import shared_sample

    retriever = build_narrative_retriever(shared_sample(tmp_path_factory), reranker=None)
    return retriever.retrieve("Acme China revenue", top_k=5)


def test_snippets_are_typed_and_carry_every_field_as_an_attribute(snippets):
    assert snippets and all(type(s) is Snippet for s in snippets)
    for s in snippets:
        plain = s.to_dict()
        assert type(plain) is dict and plain.keys() == s.keys()
        assert (s.text, s.chunk_id, s.locator, s.library_id, s.sensitivity, s.scores) == (
            plain["text"], plain["chunk_id"], plain["locator"], plain["library_id"], plain["sensitivity"], plain["scores"])
        assert s.sensitivity != "RESTRICTED" and s.span == plain["span"] and s.tier == plain["tier"]
        assert s.via is None and "via" not in plain  # an absent optional field reads as None


def test_a_snippet_is_still_the_same_json_and_dict_and_key_access_warns(snippets):
    s = snippets[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these reads the deprecated way
        assert json.loads(json.dumps(list(snippets), ensure_ascii=False)) == [x.to_dict() for x in snippets]
        assert dict(s) == s.to_dict() and s.chunk_id in {x.chunk_id for x in snippets}
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
