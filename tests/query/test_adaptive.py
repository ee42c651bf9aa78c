"""Adaptive routing: multi-part questions go to decomposition, multi-hop ones to the graph
tier, a tier can be forced, and every result carries tier, confidence and needs_refinement
(Python API, --json and snippets). Also the seed's ``postprocessor=`` keyword."""

from __future__ import annotations

import json

import pytest

from ragspine_query.assessment import Confidence, RelevanceGrader, default_tier
from ragspine_tools.query_command import main as query_main
from ragspine_query.corrective import CRAGConfig
from ragspine_core.errors import ConfigError
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.postprocess import make_postprocessor
from ragspine_query.tiers import TierClassifier, classify_query
from tests.query.qi_library import shared_sample


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


@pytest.mark.parametrize("query", [
    "What was Acme China's revenue in 2024Q3? Why did Acme US margins rise?",
    "How much did the group spend on R&D in 2023, and how much of that budget went to energy storage?",
    "What is the gift limit for officials; how soon must a data breach be reported?",
])
def test_multi_part_questions_are_classified_for_decomposition(query):
    assert classify_query(query)[0] == "multi_part"


def test_comparisons_stay_multi_hop_and_forcing_wins():
    assert classify_query("Compare Acme China and Acme US revenue")[0] == "multi_hop"
    assert TierClassifier(force="direct").classify("Why did gross margin fall in 2024?") == ("direct", "forced")
    with pytest.raises(ConfigError, match="unknown tier"):
        TierClassifier(force="sideways")
    with pytest.raises(ConfigError, match="tier mode"):
        QueryIntelligence(tiers="sideways")


def test_multi_part_runs_decomposition_through_the_gate(sample):
    r = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(tiers="rules", filters="off"))
    q = "What was Acme China's revenue in the third quarter of 2024? Why did Acme US gross margin rise?"
    res = r.retrieve(q, top_k=5, explain=True)
    assert res.tier == "multi_part" and res
    note = next(s.detail for s in res.explain.stages if s.name == "tiers")
    assert "-> multi_part" in note and "sub-questions" in note
    searched = {s.query for s in res.explain.stages if s.stage == "channel"}
    assert "Why did Acme US gross margin rise?" in searched  # a sub-question was retrieved on its own
    assert any(s.name == "rrf(variants)" for s in res.explain.stages)
    # a sub-question naming a competitor is refused by the gate, the rest still runs
    mixed = r.retrieve("What did Huaxin charge for inverters? Why did Acme US gross margin rise?", top_k=3, explain=True)
    assert mixed.refusal is not None and mixed.refusal.kind == "competitor"  # the user's query names it: refused first


def test_multi_hop_goes_to_the_graph_tier_and_a_tier_can_be_forced(sample):
    r = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(tiers="rules", filters="off"))
    res = r.retrieve("Which subsidiary of Acme Group makes batteries?", top_k=3, explain=True)
    assert res.tier == "multi_hop" and "graph" in {s.name for s in res.explain.stages if s.stage == "channel"}
    forced = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(tiers="direct", filters="off"))
    res = forced.retrieve("Why did Acme China revenue fall?", top_k=3, explain=True)
    assert res.tier == "direct" and {s.name for s in res.explain.stages if s.stage == "channel"} == {"bm25"}
    assert all(s["tier"] == "direct" for s in res)


def test_every_result_carries_tier_confidence_and_needs_refinement(sample, capsys):
    r = build_narrative_retriever(sample, reranker=None)  # the defaults: no classifier, CRAG off (grading only)
    res = r.retrieve("Why did Acme China revenue fall in the third quarter of 2024?", top_k=5)
    assert res.tier == "semantic" and isinstance(res.confidence, Confidence)
    assert res.confidence.grade in ("high", "medium", "low") and 0.0 <= res.confidence.score <= 1.0
    assert res.needs_refinement == (res.confidence.grade != "high")
    for s in res:
        assert s["tier"] == "semantic" and s["confidence"] == res.confidence.to_dict()
        assert s["needs_refinement"] == res.needs_refinement
    nonsense = r.retrieve("zqxv wwpt", top_k=3)  # graded low, but CRAG is off: nothing refused or stripped
    assert nonsense.refusal is None and len(nonsense) == 3 and nonsense.confidence.grade == "low" and nonsense.needs_refinement
    assert query_main(["query", str(sample), "Why did Acme China revenue fall?", "--top-k", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out and all({"tier", "confidence", "needs_refinement"} <= set(s) for s in out)
    assert query_main(["query", str(sample), "Why did Acme China revenue fall?", "--top-k", "2", "--json", "--explain"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tier"] == "semantic" and set(doc["confidence"]) == {"grade", "score"} and isinstance(doc["needs_refinement"], bool)
    assert query_main(["query", str(sample), "Why did Acme China revenue fall?", "--top-k", "2", "--tiers", "multi_hop"]) == 0
    assert "tier=multi_hop confidence=" in capsys.readouterr().out
    # a gate refusal carries them too
    assert query_main(["query", str(sample), "Globex market share", "--json"]) == 0
    refused = json.loads(capsys.readouterr().out)
    assert refused["refusal"]["kind"] == "competitor" and refused["tier"] and refused["confidence"]["grade"] == "low"


def test_relevance_grader_uses_the_batch_normaliser_and_the_seed_thresholds(sample):
    r = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="off"))
    source = r.index.source
    grader = RelevanceGrader(source)
    hits = source.search("Acme US gross margin second quarter 2024", top_k=5, include_restricted=False)
    rel, parts = grader.hit_relevance("Acme US gross margin second quarter 2024", hits[0])
    assert set(parts) <= {"lexical", "dense"} and rel == max(parts.values()) and 0 <= rel <= 1
    grade, kept = grader("Acme US gross margin second quarter 2024", list(hits), CRAGConfig(dynamic=False))
    assert grade.grade in ("correct", "ambiguous") and grade.confidence >= 0.30
    low, _ = grader("zqxv wwpt", list(source.search("zqxv wwpt", top_k=5, include_restricted=False)), CRAGConfig(dynamic=False))
    assert low.grade == "incorrect" and low.confidence < 0.30
    assert default_tier(source) == "semantic"


def test_seed_postprocessor_keyword(sample):
    post = build_narrative_retriever(sample, reranker=None, postprocessor=make_postprocessor("mmr,lost_in_middle"))
    res = post.retrieve("battery supply chain risk", top_k=5, explain=True)
    assert {"mmr", "lost_in_middle"} <= {s.name for s in res.explain.stages if s.stage == "postprocess"}
    by_spec = build_narrative_retriever(sample, reranker=None, postprocessor="mmr")
    assert "mmr" in {s.name for s in by_spec.retrieve("battery", top_k=3, explain=True).explain.stages if s.stage == "postprocess"}

    def tag(query, hits):
        return [h.with_score(h.score, tagged=1.0) for h in hits]

    tagged = build_narrative_retriever(sample, reranker=None, postprocessor=tag).retrieve("battery", top_k=3)
    assert tagged and all(s["scores"]["tagged"] == 1.0 for s in tagged)
