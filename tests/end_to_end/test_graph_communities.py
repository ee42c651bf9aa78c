"""Communities of the sample's relation graph (issue 26): Louvain with a fixed seed, one
extractive summary each quoted from (and citing exactly) its member chunks; the global
tier's ``community`` channel and ``ragspine query --global``; tree themes cite exactly the
leaves their summary quotes."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from ragspine_core.graph import artifact as ga
from ragspine_query.graph.communities import CommunityChannel, community_themes
from ragspine_query.library import open_library


@pytest.fixture(scope="module")
def lib(built_sample):
    with open_library(built_sample) as library:
        yield library


def test_communities_are_in_the_artifact_with_grounded_summaries(lib):
    d = lib.artifact_path("relation_graph")
    params = json.loads((d / ga.PARAMS_FILE).read_text(encoding="utf-8"))
    assert params["communities"]["built"] and params["communities"]["algorithm"] == "louvain"
    com = pq.read_table(d / ga.COMMUNITIES_FILE).to_pydict()
    assert len(com["community_id"]) >= 3
    text = {r["chunk_id"]: (r["text"], r["sensitivity"]) for r in lib.execute_read("SELECT chunk_id, text, sensitivity FROM narrative_chunk")}
    seen_entities: set[int] = set()
    for i in range(len(com["community_id"])):
        assert com["size"][i] >= 3 and not seen_entities & set(com["entity_nodes"][i])  # a partition
        seen_entities |= set(com["entity_nodes"][i])
        assert com["summary"][i] == " ".join(com["quotes"][i]) and com["quotes"][i]
        assert set(com["citations"][i]) <= set(com["member_chunks"][i])
        for cid, quote in zip(com["citations"][i], com["quotes"][i]):
            body, sensitivity = text[cid]
            assert quote in body and sensitivity.strip().upper() != "RESTRICTED"


def test_community_themes_and_channel(lib):
    themes = community_themes(lib, "Acme Energy battery storage Nevada")
    assert themes and "Acme Energy" in themes[0].title
    for t in themes:
        assert {c["chunk_id"] for c in t.citations} and all(c["sensitivity"] != "RESTRICTED" for c in t.citations)
    assert community_themes(lib)  # no query: the largest communities
    ch = CommunityChannel(lib)
    rows, scores = ch.search("Acme Energy battery storage Nevada", 10, None)
    assert rows.size and (scores[:-1] >= scores[1:]).all()
    assert not lib.restricted_mask()[rows].any()
    assert ch.search("zzzz qqqq", 10, None)[0].size == 0


def test_global_tier_runs_the_community_channel(built_sample):
    from ragspine_query.agent_api import build_narrative_retriever
    from ragspine_core.settings import Settings
    import dataclasses

    settings = dataclasses.replace(Settings.from_env(), query_tiers="rules")
    r = build_narrative_retriever([str(built_sample)], None, settings=settings)
    res = r.retrieve("Give me an overview of the main themes of Acme Energy battery storage", top_k=5, explain=True)
    assert res and "community" in json.dumps(res.explain.to_rows(), ensure_ascii=False)


def test_query_global_cli_shows_themes_with_citations(built_sample, capsys):
    from ragspine_tools.query_command import main

    assert main(["query", str(built_sample), "Acme Energy battery storage", "--global", "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "[community 1]" in out and "cites " in out
    assert main(["query", str(built_sample), "Acme Energy battery storage", "--global", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["communities"] and all(t["citations"] for t in data["communities"])
    from ragspine_query.tree.tree_channel import _QUOTE_END

    for t in data["tree_themes"]:  # a tree theme cites exactly the leaves its (extractive) summary quotes
        sents = [x.strip() for x in _QUOTE_END.split(t["summary"]) if x and len(x.strip()) >= 8]
        assert t["citations"]
        for c in t["citations"]:
            assert any(x in c["text"] for x in sents), c["chunk_id"]
