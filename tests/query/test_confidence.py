"""The confidence grade: computed from open rows only (a library with its RESTRICTED
documents removed gives the same value), independent of the ranking, calibrated, and
followed by needs_refinement and the corrective loop."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.assessment import CALIBRATIONS, Calibration, RelevanceGrader, calibration_for
from ragspine_query.intelligence import QueryIntelligence
from tests.conftest import REPO_ROOT
from tests.query.qi_library import shared_sample

RESTRICTED_DOCS = ("board-minutes-2024-11.md", "acme-cn-workforce-plan-2025.md", "acme-eu-distributor-review.md",
                   "acme-us-pricing-action-2025.md")
QUERIES = ("inverter Nordvolt", "inverter Zorbleck", "Nordvolt Storage acquisition enterprise value",
           "What caused the drop in Acme Europe sales in the third quarter of 2024?", "艾克美中国2025年计划裁减多少名员工？",
           "PowerFlex 7 price reduction", "xyzzy quux frobnicate", "What is the weather in Paris tomorrow?")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


@pytest.fixture(scope="module")
def without_restricted(tmp_path_factory) -> Path:
    """The sample with its four RESTRICTED documents removed, built the same way."""
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library

    dest = tmp_path_factory.mktemp("no-restricted")
    raw = dest / "raw" / "sample"
    shutil.copytree(REPO_ROOT / "data" / "raw" / "sample", raw)
    for name in RESTRICTED_DOCS:
        (raw / name).unlink()
    root = dest / "art" / "sample"
    build_library(LibraryPaths("sample", raw, root), embedding="deterministic", cache_path=dest / "cache.sqlite",
                  glossary_path=REPO_ROOT / "data" / "glossary.toml")
    return root


def test_removing_the_restricted_documents_changes_no_confidence_value(sample, without_restricted):
    from ragspine_query.library import open_library

    full, stripped = open_library(sample), open_library(without_restricted)
    assert full.restricted_mask().any() and not stripped.restricted_mask().any()
    for corrective in ("off", "relevance"):
        qi = QueryIntelligence(corrective=corrective)
        a = build_narrative_retriever(sample, reranker=None, intelligence=qi)
        b = build_narrative_retriever(without_restricted, reranker=None, intelligence=qi)
        for q in QUERIES:
            ra, rb = a.retrieve(q, top_k=5), b.retrieve(q, top_k=5)
            assert ra.confidence is not None and ra.confidence.to_dict() == rb.confidence.to_dict(), q
            assert ra.needs_refinement == rb.needs_refinement and (ra.refusal is None) == (rb.refusal is None), q
    ga, gb = RelevanceGrader(a.index.source), RelevanceGrader(b.index.source)
    for q in QUERIES:
        assert ga.features(q) == gb.features(q), q


def test_a_word_only_a_restricted_document_holds_grades_like_an_absent_word(sample):
    """No oracle on hidden text: 'Nordvolt' (RESTRICTED only) weighs what an unseen word weighs."""
    for mode in ("auto", "bm25"):
        r = build_narrative_retriever(sample, reranker=None, mode=mode, intelligence=QueryIntelligence(corrective="relevance"))
        hidden, absent = r.retrieve("inverter Nordvolt", top_k=5), r.retrieve("inverter Zorbleck", top_k=5)
        assert hidden.confidence.to_dict() == absent.confidence.to_dict()
        assert (hidden.refusal is None) == (absent.refusal is None)
        g = RelevanceGrader(r.index.source)
        lex = [{k: v for k, v in g.features(q).items() if k.startswith("lexical")} for q in ("inverter Nordvolt", "inverter Zorbleck")]
        assert lex[0] == lex[1]  # (dense features differ as any two words' do)


def test_confidence_follows_the_calibration_and_the_filters(sample):
    r = build_narrative_retriever(sample, reranker=None, mode="bm25", intelligence=QueryIntelligence(corrective="relevance"))
    nonsense = r.retrieve("xyzzy quux frobnicate", top_k=5, explain=True)
    assert nonsense.refusal is not None and nonsense.refusal.kind == "low_confidence" and nonsense.needs_refinement
    ok = r.retrieve("Acme Europe third quarter 2024 revenue decline", top_k=5, explain=True)
    assert ok.refusal is None and ok and ok.confidence.score > nonsense.confidence.score
    grade = [s.detail for s in ok.explain.stages if s.stage == "grade"][0]
    assert "calibrated relevance (lexical" in grade
    # the caller's filters bound the rows graded: a filter that matches nothing grades 0
    g = RelevanceGrader(r.index.source)
    assert g.library_scores("Acme Europe revenue", {"entity": "NO_SUCH_ENTITY"})["sample"][0] == 0.0
    assert g.library_scores("Acme Europe revenue")["sample"][0] > 0.5
    # needs_refinement is exactly "not high"
    for res in (nonsense, ok):
        assert res.needs_refinement == (res.confidence.grade != "high")


def test_calibrations_are_chosen_by_the_dense_channels():
    assert calibration_for(["vector", "vector:e5", "vector:multilingual"]).name == "minilm+e5+multilingual"
    assert calibration_for(["vector"]).name == "lexical" and calibration_for([]).name == "lexical"
    for c in CALIBRATIONS:
        assert 0.0 <= c.low <= c.high <= 1.0
    c = Calibration("t", (("lexical", 4.0),), -2.0, 0.7, 0.3)
    assert c.probability({"lexical": 0.5}) == pytest.approx(0.5) and c.probability({"lexical": 1.0}) > 0.8
