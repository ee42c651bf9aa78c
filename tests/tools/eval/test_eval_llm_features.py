"""``ragspine eval --llm-features``: each LLM query feature alone against ``off``, through a
real loopback chat server; the tally of used replies and fallbacks read from the trace."""

from __future__ import annotations

import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from ragspine_query.pipeline.explain import StageTrace
from ragspine_tools.llm_features import classify, parse_features
from ragspine_tools.evaluate import _llm_provider_factory, evaluate_dataset
from tests.end_to_end.test_eval_tiny import write_dataset
from tests.query.rerank.llm_server import LocalChatServer, reverse_ranking


def test_feature_names_are_checked_and_the_choices_named():
    assert parse_features("off, hyde,off,listwise") == ["off", "hyde", "listwise"]
    with pytest.raises(ConfigError, match=r"unknown feature\(s\) \['hyd'\].*choose from off, hyde"):
        parse_features("off,hyd")
    with pytest.raises(ConfigError, match="none given"):
        parse_features(" , ")


def test_a_feature_without_a_provider_names_the_variables():
    with pytest.raises(ConfigError, match="RAGSPINE_LLM_BASE_URL"):
        _llm_provider_factory(Settings.from_env({}), ["off", "hyde"])
    assert _llm_provider_factory(Settings.from_env({}), ["off"])("off") is None  # off needs none


@pytest.mark.parametrize(("feature", "stage", "expected"), [
    ("hyde", StageTrace("transform", "hyde", 0.1, detail="q (hyde: dense probe of 80 chars; lexical keeps the query)"), "used"),
    ("hyde", StageTrace("transform", "hyde", 0.1, detail="q (hyde: the LLM answered in another language: plain query)"), "fallback"),
    ("step_back", StageTrace("transform", "step_back", 0.1, detail="q | general (step_back: LLM)"), "used"),
    ("step_back", StageTrace("transform", "step_back", 0.1, detail="q (step_back: deterministic (empty LLM reply))"), "fallback"),
    ("decompose", StageTrace("transform", "decompose", 0.1, detail="q (decompose: deterministic (x): 2 sub-questions)"), "fallback"),
    ("filters", StageTrace("extract", "filters:llm", 0.1), "used"),
    ("filters", StageTrace("extract", "filters:llm→rules", 0.1), "fallback"),
    ("grader", StageTrace("grade", "crag:1", 0.1, detail="correct (confidence 0.90, 3 kept, LLM grader)"), "used"),
    ("grader", StageTrace("grade", "crag:1", 0.1, detail="ambiguous (…, rules; LLM grader: no grade in the answer)"), "fallback"),
    ("grader", StageTrace("grade", "crag:1", 0.1, detail="ambiguous (confidence 0.5, 2 kept, rules)"), None),
    ("listwise", StageTrace("rerank", "listwise", 0.1, detail="listwise: judge ordered all 10"), "used"),
    ("listwise", StageTrace("rerank", "listwise", 0.1, detail="listwise: judge ranked 3 of 10; the rest keep their fused order"), "partial"),
    ("listwise", StageTrace("rerank", "listwise", 0.1, detail="listwise: judge failed (ProviderError): fused (RRF) order kept"), "fallback"),
    ("listwise", StageTrace("rerank", "listwise", 0.1, detail="listwise: no open candidate; judge not asked"), None),
    ("hyde", StageTrace("transform", "step_back", 0.1, detail="plain query"), None),
])
def test_outcomes_are_read_from_the_notes_explain_shows(feature, stage, expected):
    assert classify(feature, stage) == expected


@pytest.mark.slow
def test_each_feature_runs_alone_against_off_with_its_tally(tmp_path, monkeypatch, capsys):
    def reply(req):  # the judge gets a full order; step-back gets Chinese for an English query (unusable)
        user = req["messages"][-1]["content"]
        return reverse_ranking(req) if "[0]" in user else "月亮和潮汐有什么关系？"

    ds = write_dataset(tmp_path / "tiny")
    with LocalChatServer("ok", reply=reply) as server:
        monkeypatch.setenv("RAGSPINE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("RAGSPINE_LLM_MODEL", "local-test")
        results = evaluate_dataset(ds, modes=("bm25",), embedding="none", out=tmp_path / "eval", quiet=True,
                                   llm_features=("off", "step_back", "listwise"),
                                   settings=Settings.from_env())  # this test is the edge: the variables above
        from ragspine_tools.cli import main

        assert main(["eval", str(ds), "--mode", "bm25", "--embedding", "none", "--out", str(tmp_path / "eval"), "--quiet",
                     "--llm-features", "off,listwise"]) == 0
    table = capsys.readouterr().out
    assert "llm listwise: 4 attempts, 4 used, 0 partial, 0 fell back (0.0%)" in table, table
    assert "ndcg@10_vs_bm25+off:" in table and table.count("  listwise\n") == 1, table
    off, step_back, listwise = results
    assert [r.label for r in results] == ["bm25+off", "bm25+step_back", "bm25+listwise"]
    assert off.metrics["llm_feature"] == "off" and "llm" not in off.metrics
    sb = step_back.metrics["llm"]
    assert (sb["attempts"], sb["used"], sb["fallback"], sb["fallback_rate"], sb["llm_calls"]) == (4, 0, 4, 1.0, 4)
    lw = listwise.metrics["llm"]
    assert (lw["attempts"], lw["used"], lw["fallback"], lw["fallback_rate"], lw["llm_calls"]) == (4, 4, 0, 0.0, 4)
    assert lw["ms_per_attempt"] > 0 and lw["model"] == "local-test"
    # the judge reversed the fused order of each query's candidates: the ranking changed
    assert listwise.run != off.run
    assert len({r.run_path for r in results}) == 3  # one run file per feature
