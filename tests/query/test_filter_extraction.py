"""Automatic filter extraction: the deterministic extractor, the LLM one behind the same
protocol, and the preference (applied, filled, dropped — never wider than the caller's set)."""

from __future__ import annotations

import json
import re

import pytest

from ragspine_tools.query_command import main as query_main
from ragspine_core.errors import ConfigError
from ragspine_query.filter_extraction import (FilterExtractor, FilterPreference, LLMFilterExtractor, RuleFilterExtractor,
                                              make_filter_extractor)
from ragspine_query.filters import Predicate
from ragspine_core.glossary import Glossary
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_core.llm import OpenAICompatibleProvider
from tests.conftest import REPO_ROOT
from tests.query.qi_library import shared_sample

from tests.query.rerank.llm_server import LocalChatServer

GLOSSARY = Glossary.load(REPO_ROOT / "data" / "glossary.toml")
PERIODS = ("2023", "2024", "2024Q1", "2024Q2", "2024Q3", "2024Q4", "2025H1")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


def preds(query: str, **kw) -> dict[str, tuple[str, object, float]]:
    ex = RuleFilterExtractor(GLOSSARY, period_values=kw.pop("periods", PERIODS)).extract(query)
    return {p.predicate.field: (p.predicate.op, p.predicate.value, p.confidence) for p in ex.predicates}


@pytest.mark.parametrize("query, period", [
    ("Acme China revenue in 2024Q3", "2024Q3"), ("revenue Q3 2024", "2024Q3"), ("revenue 3Q24", "2024Q3"),
    ("the third quarter of 2024", "2024Q3"), ("2024年第三季度营收", "2024Q3"), ("2024年三季度收入", "2024Q3"),
    ("2024 Q2 margin", "2024Q2"), ("first half of 2025", "2025H1"), ("2025年上半年", "2025H1"), ("H1 2025 profit", "2025H1"),
    ("the fourth quarter 2024", "2024Q4"),
])
def test_periods_in_both_languages(query, period):
    op, value, conf = preds(query)["period"]
    assert (op, value) == ("eq", period) and conf >= 0.8


def test_entities_by_any_name_in_either_language_and_not_competitors():
    assert preds("Acme China revenue")["entity"][:2] == ("eq", "ACME_CN")
    assert preds("艾克美中国的营收")["entity"][:2] == ("eq", "ACME_CN")
    assert preds("ACME_US gross margin")["entity"][:2] == ("eq", "ACME_US")
    assert preds("Acme US and Acme Europe margins")["entity"][:2] == ("in", ("ACME_EU", "ACME_US"))
    assert "entity" not in preds("Globex market share")  # a competitor: the gate's business, not a filter
    # "Acme China" is the entity, not the geography China; a bare "China" is the geography
    assert "geography" not in preds("Acme China revenue")
    assert preds("revenue in China")["geography"][:2] == ("eq", "CN") and preds("欧洲的需求")["geography"][:2] == ("eq", "EU")


def test_years_and_dates_map_to_held_periods_with_lower_confidence():
    op, value, conf = preds("Acme US revenue in 2024")["period"]
    assert op == "in" and value == ("2024", "2024Q1", "2024Q2", "2024Q3", "2024Q4") and conf == 0.5
    assert preds("FY2023 results")["period"][:2] == ("eq", "2023")
    assert preds("what happened on 2024-10-28")["period"] == ("in", ("2024", "2024Q4"), 0.7)  # applied (>= 0.7)
    assert preds("2024年10月28日发生了什么")["period"] == ("in", ("2024", "2024Q4"), 0.7)
    assert preds("截至2024年12月31日的订单")["valid_as_of"][:2] == ("lte", "2024-12-31")
    assert preds("risks as of 2024-06-30")["valid_as_of"][:2] == ("lte", "2024-06-30")
    assert preds("changes since 2025-01-01")["valid_as_of"][:2] == ("gte", "2025-01-01")
    assert preds("why did margins fall") == {}


def test_fiscal_and_relative_periods_name_their_anchor():
    from datetime import date

    assert preds("margin in Q3 FY24")["period"][:2] == ("eq", "2024Q3")
    assert preds("FY24 Q2 margin")["period"][:2] == ("eq", "2024Q2")
    ex = RuleFilterExtractor(GLOSSARY, period_values=PERIODS, anchor=date(2025, 6, 30), anchor_source="library valid_as_of")
    got = {p.predicate.field: p for p in ex.extract("艾克美中国去年第三季度的营收").predicates}
    assert (got["period"].predicate.op, got["period"].predicate.value) == ("eq", "2024Q3")
    assert "relative to 2025-06-30 (library valid_as_of)" in got["period"].describe()  # what --explain shows
    assert {p.predicate.value for p in ex.extract("the third quarter of last year").predicates} == {"2024Q3"}
    assert {p.predicate.value for p in ex.extract("去年上半年").predicates} == {"2024H1"}
    assert {p.predicate.value for p in ex.extract("sales last quarter").predicates} == {"2025Q1"}
    today = RuleFilterExtractor(GLOSSARY).extract("去年第三季度")
    assert f"relative to {date.today().isoformat()} (today)" in today.describe()


def test_an_extracted_filter_never_excludes_a_row_lacking_the_field(sample):
    import numpy as np

    from ragspine_query.filters import Predicate as P

    col = np.asarray(["ACME_CN", "ACME_US", ""])
    assert P("entity", "eq", "ACME_CN").mask(col).tolist() == [True, False, False]  # a caller's filter narrows
    assert P("entity", "eq", "ACME_CN", keep_missing=True).mask(col).tolist() == [True, False, True]
    # the contract-dispute memo (a .txt without an entity field) survives "Acme China" in rules mode
    # (strict: the result is the filtered candidate set alone)
    on = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="rules", filter_fill=False, filter_blend=False))
    for q in ("Acme China contract dispute with Dongyue Auto", "艾克美中国与东岳汽车的合同争议"):
        res = on.retrieve(q, top_k=500)
        assert res.filters.outcome == "applied" and {s.entity for s in res} == {"ACME_CN", ""}
        assert "acme-cn-contract-dispute-memo" in {s.doc_id for s in res}


def test_filter_extraction_is_off_by_default(sample):
    assert QueryIntelligence().filters == "off"
    res = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence()).retrieve("Acme China revenue in 2024Q3")
    assert res.filters is None


def test_make_filter_extractor_modes_and_protocol(sample):
    assert make_filter_extractor("off") is None
    assert isinstance(make_filter_extractor("rules", glossary=GLOSSARY), FilterExtractor)
    with pytest.raises(ConfigError, match="allowed: off, rules, llm"):
        make_filter_extractor("magic")
    with pytest.raises(ConfigError, match="LLM provider"):
        make_filter_extractor("llm", glossary=GLOSSARY)
    with pytest.raises(ConfigError, match="filter extraction mode"):
        QueryIntelligence(filters="bogus")


def test_llm_extractor_validates_values_and_falls_back_to_the_rules():
    rules = RuleFilterExtractor(GLOSSARY, period_values=PERIODS)
    values = {"entity": ("ACME_CN", "ACME_US"), "period": PERIODS, "geography": ("CN", "US")}
    replies = iter(['{"entity": ["ACME_US", "NOT_HELD"], "period": ["2024Q2"], "geography": []}', "no json here"])
    with LocalChatServer(["ok", "ok", "500"], reply=lambda req: next(replies)) as server:
        ex = LLMFilterExtractor(OpenAICompatibleProvider(server.base_url, "m", max_retries=0, timeout_s=5), rules, values=values)
        got = ex.extract("How did the American unit do in Q2?")
        assert {p.predicate for p in got.predicates} == {Predicate("entity", "eq", "ACME_US"), Predicate("period", "eq", "2024Q2")}
        assert got.extractor == "llm"
        bad = ex.extract("Acme China 2024Q3")  # no JSON: the rules' predicates, with a note
        assert bad.extractor == "llm→rules" and "no JSON" in bad.note
        assert {p.predicate.field for p in bad.predicates} == {"entity", "period"}
        failed = ex.extract("Acme China 2024Q3")  # HTTP 500
        assert failed.extractor == "llm→rules" and {p.predicate.field for p in failed.predicates} == {"entity", "period"}


def _ids(res):
    return [(s["doc_id"], s["entity"], s["period"]) for s in res]


def test_preference_applies_fills_and_drops_but_never_widens(sample):
    on = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="rules", filter_blend=False))
    off = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="off"))
    q = "Acme China revenue in 2024Q3"
    res = on.retrieve(q, top_k=8, explain=True)
    assert res.filters.outcome in ("applied", "filled")
    # the preferred rows (matching, or lacking the field: an extracted filter keeps those) come first
    matching = [s for s in res if s["entity"] in ("ACME_CN", "") and s["period"] in ("2024Q3", "")]
    assert matching and res[: len(matching)] == matching
    extract = [s for s in res.explain.stages if s.stage == "extract"]
    assert extract and "entity=ACME_CN" in extract[0].detail and "period=2024Q3" in extract[0].detail
    # the off pipeline ranks the Q3 report lower: extraction changes the order, not the candidate set
    assert _ids(res) != _ids(off.retrieve(q, top_k=8))
    # a period no library holds empties the filtered set: the predicates are dropped
    # (rows without a period pass an extracted period, so a caller's topic holding only dated rows is used)
    unheld = on.retrieve("Acme China revenue in 2031Q1", top_k=5)
    assert unheld and all(s.period == "" for s in unheld[: len(unheld) if unheld.filters.outcome == "applied" else 0])
    earn = {"topic": "earnings"}
    dropped = on.retrieve("Acme China revenue in 2031Q1", filters=earn, top_k=5, explain=True)
    assert dropped.filters.outcome == "dropped" and len(dropped) == 5
    assert _ids(dropped) == _ids(off.retrieve("Acme China revenue in 2031Q1", filters=earn, top_k=5))
    assert any(s.name == "dropped" for s in dropped.explain.stages)
    # with the caller's own filter, nothing outside it ever comes back (extracted or dropped)
    for text in (q, "Acme China revenue in 2031Q1", "Acme US revenue in 2024Q2"):
        got = on.retrieve(text, filters={"topic": "earnings"}, top_k=10)
        assert got and all(s["topic"] == "earnings" for s in got)
        baseline = {s["chunk_id"] for s in off.retrieve(text, filters={"topic": "earnings"}, top_k=500)}
        assert {s["chunk_id"] for s in got} <= baseline


def test_blend_never_hides_the_unfiltered_best_hits_and_never_widens(sample):
    on = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="rules"))
    strict = build_narrative_retriever(sample, reranker=None,
                                       intelligence=QueryIntelligence(filters="rules", filter_fill=False, filter_blend=False))
    off = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="off"))
    # the Chinese contract-dispute question: the rules extract entity=ACME_CN, whose rows rank first when applied
    # strictly; the blend keeps the unfiltered ranking's own best hits in the top 10
    hid = 0
    for q in ("艾克美中国与东岳汽车的合同争议", "Acme US revenue in 2024Q2", "Acme China revenue in 2024Q3"):
        got, base, hard = on.retrieve(q, top_k=10, explain=True), off.retrieve(q, top_k=10), strict.retrieve(q, top_k=10)
        assert got.filters.outcome == "blended" and "interleaved with the unfiltered ranking" in got.filters.note
        # the note's counts are true of the answer: it counts the answer's hits, and every hit it
        # counts as lifted holds every extracted value
        counted = re.search(r"(\d+) of the (\d+) hits are not lifted", got.filters.note)
        assert counted and int(counted.group(2)) == len(got), got.filters.note
        preds = [p.predicate for p in got.filters.predicates]
        holding = sum(all(isinstance(s.get(p.field), str) and s.get(p.field) and p.matches(s[p.field]) for p in preds)
                      for s in got)
        assert holding >= len(got) - int(counted.group(1)), (q, got.filters.note, holding)
        assert {s["chunk_id"] for s in base[:3]} <= {s["chunk_id"] for s in got}
        # the bound: a hit ranked r without the filters is within the first 2r with them
        for r, s in enumerate(base[:5], start=1):
            assert s["chunk_id"] in {x["chunk_id"] for x in got[: 2 * r]}, (q, r)
        hid += not {s["chunk_id"] for s in base[:3]} <= {s["chunk_id"] for s in hard}
        # never wider than the unfiltered candidate set
        assert {s["chunk_id"] for s in got} <= {s["chunk_id"] for s in off.retrieve(q, top_k=500)}
        assert any(s.name == "blended" for s in got.explain.stages)
    assert hid  # applied strictly, the filters hide some of them: what the blend is for
    # the questions: where the unfiltered run has the contract-dispute memo or the sodium-ion answer in its
    # top 3 (two of the three in this test library; all three in the default build), extraction on keeps it there
    checked = 0
    for q, doc in (("艾克美中国与东岳汽车的合同争议", "acme-cn-contract-dispute-memo"),
                   ("Acme China contract dispute with Dongyue Auto", "acme-cn-contract-dispute-memo"),
                   ("E-Cube 261储能一体机用的是哪家工厂生产的电芯？这家工厂2024年12月又建成了什么新产线？",
                    "acme-cn-product-launch-2024")):
        top_off = [s.doc_id for s in off.retrieve(q, top_k=10)]
        top_on = [s.doc_id for s in on.retrieve(q, top_k=10)]
        checked += doc in top_off[:3]
        assert doc not in top_off[:3] or doc in top_on[:3], q
    assert checked >= 2
    with_topic = on.retrieve("Acme China revenue in 2024Q3", filters={"topic": "earnings"}, top_k=10)
    assert with_topic and all(s["topic"] == "earnings" for s in with_topic)  # the caller's filter stays a constraint


def test_rows_kept_only_for_lacking_the_field_are_not_lifted(sample):
    """mh-003 of the judged sample: entity=ACME_ENERGY and period=2024H2 are read off the
    question, and no row holds both; the filtered run then holds only rows lacking a field
    (memos, meeting notes), which the blend once ranked first. Now nothing is lifted: the
    result is the unfiltered ranking."""
    on = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="rules"))
    off = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="off"))
    q = "What revenue did Acme Energy make in the second half of 2024?"
    got, base = on.retrieve(q, top_k=10), off.retrieve(q, top_k=10)
    assert got.filters.outcome == "blended" and got.filters.note.startswith("0 of the ")
    assert {p.predicate.field for p in got.filters.predicates} == {"entity", "period"}
    assert [s["chunk_id"] for s in got] == [s["chunk_id"] for s in base]


def test_interleave_lifts_held_hits_and_bounds_every_unfiltered_rank():
    from types import SimpleNamespace as NS

    from ragspine_query.filter_extraction import interleave_rankings

    def h(cid):
        return NS(chunk_id=cid, chunk=NS(library_id="lib"))

    a, b, c, d, e = h("a"), h("b"), h("c"), h("d"), h("e")
    # held hits first in turn; each hit once; the unfiltered first hit (a, outside the filter) stays second
    assert [x.chunk_id for x in interleave_rankings([c, d], [a, b, c, e])] == ["c", "a", "d", "b", "e"]
    assert [x.chunk_id for x in interleave_rankings([], [a, b])] == ["a", "b"]  # nothing held: the unfiltered ranking
    assert [x.chunk_id for x in interleave_rankings([b, a], [a, b])] == ["b", "a"]
    # the bound, on every ordering of five hits: a hit ranked r unfiltered is within the first 2r
    import itertools

    hits = [a, b, c, d, e]
    for held in itertools.permutations(hits, 3):
        got = [x.chunk_id for x in interleave_rankings(list(held), hits)]
        assert sorted(got) == ["a", "b", "c", "d", "e"]
        for r, x in enumerate(hits, start=1):
            assert x.chunk_id in got[: 2 * r]


def test_a_row_lacking_the_field_is_kept_but_not_lifted():
    from types import SimpleNamespace as NS

    from ragspine_query.filter_extraction import holds_predicates

    def h(entity, period=""):
        return NS(chunk_id=entity, chunk=NS(library_id="lib", entity=entity, period=period))

    cn = Predicate("entity", "eq", "ACME_CN", keep_missing=True)
    q3 = Predicate("period", "in", ("2024", "2024Q3"), keep_missing=True)
    assert holds_predicates(h("ACME_CN", "2024Q3"), [cn, q3])
    assert not holds_predicates(h("ACME_CN"), [cn, q3])  # no period: passes the filter, is not lifted
    assert not holds_predicates(h(""), [cn])  # the memo without an entity
    assert not holds_predicates(h("ACME_US", "2024Q3"), [cn, q3])


def test_strict_preference_keeps_a_short_filtered_result(sample):
    strict = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="rules", filter_fill=False, filter_blend=False))
    res = strict.retrieve("Acme China revenue in 2024Q3", top_k=50)
    assert res.filters.outcome == "applied" and res
    assert all(s["entity"] in ("ACME_CN", "") and s["period"] in ("2024Q3", "") for s in res)
    assert any(s["entity"] == "ACME_CN" and s["period"] == "2024Q3" for s in res)


def test_a_failing_extractor_never_fails_or_widens_the_query(sample):
    class Broken:
        def extract(self, query):
            raise RuntimeError("boom")

    base = build_narrative_retriever(sample, reranker=None, intelligence=QueryIntelligence(filters="off"))
    pipe = FilterPreference(base.index, Broken())
    res = pipe.run("Acme China revenue", top_k=5, explain=True)
    assert len(res) == 5 and res.filters.outcome == "none"
    assert "extractor failed (RuntimeError)" in next(s.detail for s in res.explain.stages if s.stage == "extract")


def test_cli_shows_extraction_in_explain_and_json(sample, capsys):
    assert query_main(["query", str(sample), "Acme China revenue in 2024Q3", "--top-k", "3", "--explain", "--filters", "rules"]) == 0
    out = capsys.readouterr().out
    assert "filters (" in out and "entity=ACME_CN" in out and " extract " in out
    assert query_main(["query", str(sample), "Acme China revenue in 2024Q3", "--top-k", "3", "--json", "--explain",
                       "--filters", "rules"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["filters"]["outcome"] in ("applied", "blended", "filled")
    assert {(p["field"], p["value"]) for p in doc["filters"]["predicates"]} == {("entity", "ACME_CN"), ("period", "2024Q3")}
    assert query_main(["query", str(sample), "Acme China revenue in 2024Q3", "--top-k", "3", "--json", "--explain",
                       "--filters", "off"]) == 0
    assert "filters" not in json.loads(capsys.readouterr().out)


def test_a_dropped_filter_is_said_in_text_and_json(sample, capsys):
    """A caller's filter is a constraint (no silent retry); whenever any filter is dropped the output says so."""
    base = ["query", str(sample), "inverter price notice", "--filter", "sensitivity=eq:PUBLIC", "--filter", "entity=eq:HUAXIN"]
    assert query_main(base) == 0
    out = capsys.readouterr().out
    assert "(no results)" in out and "dropped" not in out and "INTERNAL" not in out
    assert query_main(base + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    # opt-in: retried without them, and said
    assert query_main(base + ["--relax-filters"]) == 0
    out = capsys.readouterr().out
    assert "filter dropped (your --filter): sensitivity=eq:PUBLIC" in out and "filter dropped (your --filter): entity=eq:HUAXIN" in out
    assert query_main(base + ["--relax-filters", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["results"] and {(d["field"], d["origin"]) for d in doc["dropped_filters"]} == {("sensitivity", "caller"), ("entity", "caller")}
    # an extracted filter that empties the caller's set is dropped, and said
    ext = ["query", str(sample), "Acme China revenue in 2031Q1", "--filter", "topic=eq:earnings", "--filters", "rules"]
    assert query_main(ext) == 0
    out = capsys.readouterr().out
    assert "filter dropped (extracted): period=eq:2031Q1" in out
    assert query_main(ext + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {(d["field"], d["origin"]) for d in doc["dropped_filters"]} >= {("period", "extracted")}
    assert all(s["topic"] == "earnings" for s in doc["results"])  # the caller's filter stays
