"""Adaptive tiers: the rule classifier, the channels each tier runs, and the fallback when a dependency channel is absent."""

from __future__ import annotations


import numpy as np
import pytest

from ragspine_core.errors import ConfigError
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_core.llm import OpenAICompatibleProvider
from ragspine_query.pipeline.channels import register_channel, unregister_channel
from ragspine_query.tiers import TierClassifier, classify_query, tier_channels
from tests.query.qi_library import shared_sample

from tests.query.rerank.llm_server import LocalChatServer


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


@pytest.mark.parametrize("query, tier", [
    ("ACME_CN", "direct"), ('"operating margin"', "direct"), ("2024Q3 revenue", "direct"), ("gross margin", "direct"),
    ("Why did gross margin fall in 2024?", "semantic"),
    ("Compare Acme China and Acme US revenue", "multi_hop"), ("How does pricing affect churn at Acme Energy?", "multi_hop"),
    ("Summarize the main risks across the group", "global"), ("What are the overall trends in demand?", "global"),
])
def test_rule_classifier(query, tier):
    assert classify_query(query)[0] == tier


def test_tier_channels_and_fallbacks():
    assert tier_channels("direct", {"bm25", "vector"})[1] == {"bm25"}
    tier, chans, note = tier_channels("multi_hop", {"bm25", "vector"})
    assert tier == "semantic" and chans == {"bm25", "vector"} and "'graph' channel" in note
    assert tier_channels("multi_hop", {"bm25", "vector", "graph"})[:2] == ("multi_hop", {"bm25", "vector", "graph"})
    assert tier_channels("global", {"bm25"})[0] == "semantic"
    assert tier_channels("global", {"bm25", "tree"})[:2] == ("global", {"bm25", "tree"})


def test_direct_tier_runs_bm25_only_and_multi_hop_runs_the_snapshot_relation_graph(sample):
    r = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(tiers="rules"))
    direct = r.retrieve("ACME_CN revenue", top_k=3, explain=True)
    assert {s.name for s in direct.explain.stages if s.stage == "channel"} == {"bm25"} and len(direct) == 3
    multi = r.retrieve("Compare Acme China and Acme US revenue", top_k=3, explain=True)
    note = next(s.detail for s in multi.explain.stages if s.name == "tiers")
    assert "-> multi_hop: channels bm25, graph, vector" in note, note
    assert {s.name for s in multi.explain.stages if s.stage == "channel"} == {"bm25", "vector", "graph"}
    # a query outside the multi-hop tier never runs the graph channel (it is on demand)
    semantic = r.retrieve("Why did gross margin fall in 2024?", top_k=3, explain=True)
    assert "graph" not in {s.name for s in semantic.explain.stages if s.stage == "channel"}
    plain = build_narrative_retriever(sample, reranker=None).retrieve("Compare Acme China and Acme US revenue", top_k=3,
                                                                       explain=True)
    assert "graph" not in {s.name for s in plain.explain.stages if s.stage == "channel"}


def test_multi_hop_falls_back_when_the_snapshot_has_no_graph(sample):
    from ragspine_query.pipeline import channels as channel_registry

    original = channel_registry.CHANNELS.get("graph")  # restored below
    register_channel("graph", lambda ctx: None, replace=True)
    try:
        r = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(tiers="rules"))
        multi = r.retrieve("Compare Acme China and Acme US revenue", top_k=3, explain=True)
    finally:
        register_channel("graph", original, replace=True)
    note = next(s.detail for s in multi.explain.stages if s.name == "tiers")
    assert "multi_hop" in note and "fell back to semantic" in note
    assert {s.name for s in multi.explain.stages if s.stage == "channel"} == {"bm25", "vector"}


class FirstRowsChannel:
    """A registered stand-in for a dependency channel: the lowest allowed rows (a real channel, not a mock)."""

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n

    def search(self, query, depth, allowed):
        rows = np.arange(self.n, dtype=np.int64)
        if allowed is not None:
            rows = rows[allowed]
        rows = rows[:depth]
        return rows, np.linspace(1.0, 0.5, rows.size).astype(np.float32)


def test_multi_hop_runs_the_graph_channel_when_registered(sample):
    from ragspine_query.pipeline import channels as channel_registry

    original = channel_registry.CHANNELS.get("graph")  # the relation-graph channel, when installed: restored below
    register_channel("graph", lambda ctx: FirstRowsChannel("graph", ctx.library.n_chunks), replace=True)
    try:
        r = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(tiers="rules"))
        multi = r.retrieve("Compare Acme China and Acme US revenue", top_k=3, explain=True)
        assert "graph" in {s.name for s in multi.explain.stages if s.stage == "channel"}
        sem = r.retrieve("Why did gross margin fall in 2024?", top_k=3, explain=True)
        assert "graph" not in {s.name for s in sem.explain.stages if s.stage == "channel"}  # only the multi-hop tier
    finally:
        if original is not None:
            register_channel("graph", original, replace=True)
        else:
            unregister_channel("graph")


def test_llm_classifier_and_its_fallback():
    with LocalChatServer(["ok", "500"], reply=lambda req: "global") as server:
        p = OpenAICompatibleProvider(server.base_url, "m", max_retries=0, timeout_s=5)
        c = TierClassifier(provider=p, use_llm=True)
        assert c.classify("ACME_CN") == ("global", "LLM")
        tier, reason = c.classify("ACME_CN")  # the server now fails: rules, with a note
        assert tier == "direct" and "LLM failed" in reason
    with pytest.raises(ConfigError, match="provider"):
        TierClassifier(use_llm=True)
