"""Corrective retrieval: the seed's thresholds, static and dynamic grading, the bounded loop, the LLM grader."""

from __future__ import annotations


import pytest

from ragspine_query.corrective import (CRAGConfig, CorrectiveRetrieval, LLMGrader, dynamic_crag_config, grade_hits,
                                       refine_query)
from ragspine_core.errors import ConfigError
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_core.llm import OpenAICompatibleProvider
from ragspine_core.records import Chunk, Hit
from tests.query.qi_library import shared_sample

from tests.query.rerank.llm_server import LocalChatServer


def _hit(cid: str, fused: float, **scores: float) -> Hit:
    return Hit(Chunk(cid, "lib", "d", 0, f"text {cid}", 0, 6), fused, {**scores, "fused": fused})


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


def test_static_grades_use_the_seed_thresholds_and_floor():
    cfg = CRAGConfig(dynamic=False)
    assert (cfg.high, cfg.low) == (0.65, 0.30)
    g, kept = grade_hits([_hit("a", 1, vector=0.7), _hit("b", 0.5, vector=0.05)], cfg)
    assert g.grade == "correct" and g.confidence == pytest.approx(0.7) and [h.chunk_id for h in kept] == ["a"]
    assert grade_hits([_hit("a", 1, vector=0.5)], cfg)[0].grade == "ambiguous"
    assert grade_hits([_hit("a", 1, vector=0.29)], cfg)[0].grade == "incorrect"
    assert grade_hits([_hit("a", 1, bm25=3.0)], cfg)[0].confidence == pytest.approx(0.75)  # x/(1+x)
    assert grade_hits([_hit("a", 1, vector=-0.4)], cfg)[0].confidence == 0.0  # negative cosine counts as 0
    assert grade_hits([], cfg)[0].grade == "incorrect"
    with pytest.raises(ConfigError):
        CRAGConfig(high=0.2, low=0.5)


def test_dynamic_grade_is_channel_agreement_and_a_relative_floor():
    cfg = dynamic_crag_config()
    agree = [_hit("a", 0.032, bm25=9, vector=0.9), _hit("b", 0.031, bm25=8, vector=0.8), _hit("c", 0.030, bm25=7, vector=0.7),
             _hit("d", 0.005, bm25=1, vector=0.1)]
    g, kept = grade_hits(agree, cfg)
    assert g.grade == "correct" and g.confidence == 1.0 and [h.chunk_id for h in kept] == ["a", "b", "c"]
    disagree = [_hit("a", 0.0164, bm25=9), _hit("b", 0.0163, vector=0.9), _hit("c", 0.016, bm25=8), _hit("d", 0.0159, vector=0.8),
                _hit("e", 0.015, bm25=7), _hit("f", 0.0149, vector=0.7)]
    g, _ = grade_hits(disagree, cfg)
    assert g.grade == "ambiguous" and g.confidence == pytest.approx(0.5)


def test_refine_query_keeps_content_words():
    assert refine_query("What was the gross margin of Acme China in 2024?") == "gross margin Acme China 2024"


@pytest.mark.parametrize("mode", ["dynamic", "relevance", "on"])
def test_loop_uses_correct_refuses_incorrect_and_acts_on_ambiguous(sample, mode):
    r = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(corrective=mode))
    ok = r.retrieve("Acme US gross margin 2024", top_k=5, explain=True)
    grades = [s for s in ok.explain.stages if s.stage == "grade"]
    assert ok.refusal is None and ok and grades[0].detail.startswith(("correct", "ambiguous"))
    nonsense = r.retrieve("zqxv wwpt", top_k=5, explain=True)
    assert list(nonsense) == [] and nonsense.refusal is not None and nonsense.refusal.kind == "low_confidence"
    assert "0.30" in nonsense.refusal.reason or "0.3" in nonsense.refusal.reason


class ScriptedPipeline:
    """A real sequence of results (the first ambiguous, the second agreeing) to drive the loop."""

    def __init__(self, results, tier=None):
        self.results, self.calls, self.tier = list(results), [], tier

    def run(self, query, *, filters=None, top_k=10, include_restricted=False, explain=False):
        from ragspine_query.pipeline.state import SearchResult

        self.calls.append((str(query), filters, getattr(query, "pinned", False)))
        res = SearchResult(self.results.pop(0))
        res.tier = self.tier
        return res


AMB = [_hit("a", 0.0164, bm25=9), _hit("b", 0.0163, vector=0.9), _hit("c", 0.016, bm25=8), _hit("d", 0.0159, vector=0.8)]
GOOD = [_hit("x", 0.032, bm25=9, vector=0.9), _hit("y", 0.031, bm25=8, vector=0.8), _hit("z", 0.03, bm25=7, vector=0.7)]
BAD = [_hit("n", 0.01, bm25=0.1), _hit("m", 0.009, vector=0.05)]


def test_a_callers_filter_is_kept_by_the_loop_unless_relaxed():
    p = ScriptedPipeline([AMB, GOOD])
    out = CorrectiveRetrieval(p).run("What is the margin?", filters={"entity": "ACME_CN"}, explain=True)
    # no drop-filters action: the rewrite runs under the caller's filter
    assert p.calls == [("What is the margin?", {"entity": "ACME_CN"}, False), ("margin", {"entity": "ACME_CN"}, False)]
    assert [s.name for s in out.explain.stages if s.stage == "correct"] == ["rewrite"] and out.dropped_filters == ()


def test_seed_order_drop_filters_then_rewrite_then_refuse_at_most_two_actions():
    p = ScriptedPipeline([AMB, GOOD])
    out = CorrectiveRetrieval(p, relax_caller_filters=True).run("What is the margin?", filters={"entity": "ACME_CN"}, explain=True)
    assert p.calls == [("What is the margin?", {"entity": "ACME_CN"}, False), ("What is the margin?", None, False)]
    assert [h.chunk_id for h in out] == ["x", "y", "z"] and [s.name for s in out.explain.stages if s.stage == "correct"] == ["drop_filters"]
    assert out.confidence.grade == "high" and out.needs_refinement is False
    assert [(d["field"], d["value"], d["origin"]) for d in out.dropped_filters] == [("entity", "ACME_CN", "caller")]
    # still ambiguous after dropping the filters: the rewrite runs (without the filters), then the best set is used
    p = ScriptedPipeline([AMB, AMB, GOOD])
    out = CorrectiveRetrieval(p, relax_caller_filters=True).run("What is the margin?", filters={"entity": "ACME_CN"}, explain=True)
    assert [c[:2] for c in p.calls] == [("What is the margin?", {"entity": "ACME_CN"}), ("What is the margin?", None), ("margin", None)]
    assert [s.name for s in out.explain.stages if s.stage == "correct"] == ["drop_filters", "rewrite"]
    assert [h.chunk_id for h in out] == ["x", "y", "z"]
    # an incorrect grade is corrected too (it used to refuse at once), and refused only when nothing helps
    p = ScriptedPipeline([BAD, BAD, BAD])
    out = CorrectiveRetrieval(p, config=CRAGConfig(dynamic=False), relax_caller_filters=True).run("What is the margin?", filters={"entity": "X"}, explain=True)
    assert len(p.calls) == 3 and list(out) == [] and out.refusal is not None and out.refusal.kind == "low_confidence"
    assert "after drop filters, then rewrite" in out.refusal.reason and out.confidence.grade == "low" and out.needs_refinement
    p = ScriptedPipeline([BAD, GOOD])
    out = CorrectiveRetrieval(p).run("What is the margin?")
    assert p.calls[1][0] == "margin" and out.refusal is None and [h.chunk_id for h in out] == ["x", "y", "z"]
    # ambiguous, nothing better: round 1's set, flagged for refinement
    p = ScriptedPipeline([AMB, AMB])
    out = CorrectiveRetrieval(p).run("What is the margin?")
    assert p.calls[1][0] == "margin" and len(p.calls) == 2 and [h.chunk_id for h in out] == ["a", "b", "c", "d"]
    assert out.confidence.grade == "medium" and out.needs_refinement
    # nothing to drop or rewrite, but a tier restricted the channels: every channel
    p = ScriptedPipeline([AMB, GOOD], tier="direct")
    CorrectiveRetrieval(p).run("margin")
    assert p.calls[1] == ("margin", None, True)


def test_relevance_grader_drops_a_wrong_filter(sample):
    """The issue's case: irrelevant hits restricted by a wrong filter must not grade 'correct'."""
    r = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(corrective="relevance", filters="off",
                                                                                   relax_filters=True))
    res = r.retrieve("anti-bribery policy gifts to public officials", filters={"entity": "ACME_ENERGY", "topic": "earnings"},
                     top_k=5, explain=True)
    grades = [s.detail for s in res.explain.stages if s.stage == "grade"]
    assert grades[0].startswith(("ambiguous", "incorrect")), grades
    assert [s.name for s in res.explain.stages if s.stage == "correct"][0] == "drop_filters"
    assert res and res.refusal is None and any("bribery" in s["doc_id"] for s in res)
    assert {(d["field"], d["origin"]) for d in res.dropped_filters} == {("entity", "caller"), ("topic", "caller")}


def test_llm_grader_sees_no_restricted_text_and_falls_back_on_failure():
    secret = Hit(Chunk("s", "lib", "d", 0, "RESTRICTED-MARKER-ZULU board merger", 0, 10, sensitivity="RESTRICTED"), 0.9, {"vector": 0.9})
    open_hit = _hit("a", 0.5, vector=0.5)
    with LocalChatServer(["ok", "500"], reply=lambda req: "incorrect") as server:
        g = LLMGrader(OpenAICompatibleProvider(server.base_url, "m", max_retries=0, timeout_s=5))
        grade, _ = g("merger", [secret, open_hit], CRAGConfig(dynamic=False))
        assert grade.grade == "incorrect" and grade.how == "LLM grader"
        grade, _ = g("merger", [secret, open_hit], CRAGConfig(dynamic=False))
        assert grade.how.endswith("LLM failed (ProviderError): plain query")
        assert b"RESTRICTED-MARKER-ZULU" not in server.all_raw_bodies() and b"text a" in server.all_raw_bodies()
