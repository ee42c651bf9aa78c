"""The LLM seams' fallbacks and what they say, against a scripted loopback chat server (the
real-model versions are in tests/llm_local): the listwise judge's note, replies in
another language, filter values the libraries do not hold, OpenIE replies cut short,
RAPTOR summaries in the wrong language."""

from __future__ import annotations

import json

import pytest

from ragspine_core.llm import OpenAICompatibleProvider
from ragspine_query.rerank.listwise import parse_listwise_detail
from tests.query.rerank.llm_server import LocalChatServer


def provider(server) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(server.base_url, "m", timeout_s=5, max_retries=0)


@pytest.mark.parametrize("reply, order, says", [
    ("[2] > [0] > [1]", [2, 0, 1], "judge ordered all 3"),
    ("[2] > [0]", [2, 0, 1], "judge ranked 2 of 3; the rest keep their fused order"),
    ("[1] > [1] > [0] > [0]", [1, 0, 2], "judge ranked 2 of 3; the rest keep their fused order; 2 repeated id(s) ignored"),
    ("The sea is wide and deep.", [0, 1, 2], "judge answered no ranking: fused (RRF) order kept"),
    ("[7] > [0]", [0, 1, 2], "judge named a passage outside [0]..[2]: fused (RRF) order kept"),
])
def test_the_judges_reply_is_read_and_described(reply, order, says):
    assert parse_listwise_detail(reply, 3) == (order, says)


def test_the_listwise_note_reaches_explain(built_sample):
    from ragspine_query.agent_api import build_narrative_retriever
    from ragspine_query.rerank import make_reranker

    with LocalChatServer("partial") as server:
        p = provider(server)
        r = build_narrative_retriever(built_sample, p, embedding_backend=None, mode="bm25",
                                      reranker=make_reranker("listwise", provider=p), rerank_top_n=6)
        out = r.retrieve("Acme China revenue 2024", top_k=5, explain=True)
        table = out.explain.format_table(per_stage=20)
    assert "listwise: judge ranked 3 of 6; the rest keep their fused order" in table, table[:2000]
    with LocalChatServer("500") as server:
        p = provider(server)
        r = build_narrative_retriever(built_sample, p, embedding_backend=None, mode="bm25",
                                      reranker=make_reranker("listwise", provider=p), rerank_top_n=6)
        table = r.retrieve("Acme China revenue 2024", top_k=5, explain=True).explain.format_table(per_stage=20)
    assert "listwise: judge failed (ProviderError): fused (RRF) order kept" in table


def test_a_reply_in_another_language_is_not_a_variant():
    from ragspine_query.corrective import CorrectiveStage
    from ragspine_query.transforms.decompose import DecomposeTransform
    from ragspine_query.transforms.hyde import HyDETransform
    from ragspine_query.transforms.step_back import StepBackTransform

    query = "What was Acme China revenue in 2024Q3 and how did Acme US margins change?"
    with LocalChatServer("ok", reply=lambda r: "艾克美中国的收入是多少\n美国的利润率如何变化") as server:
        p = provider(server)
        sb = StepBackTransform(p)([query])
        dec = DecomposeTransform(p)([query])
        hy = HyDETransform(p)([query])
        rewritten, note = CorrectiveStage(provider=p)._rewrite(query)
    assert sb.note.startswith("step_back: deterministic (the LLM answered in another language)"), sb.note
    assert all("艾" not in v for v in sb) and len(sb) == 2
    assert dec.note.startswith("decompose: deterministic (2 LLM line(s) in another language dropped)"), dec.note
    assert hy.note == "hyde: the LLM answered in another language: plain query" and not getattr(hy[0], "channel_texts", {})
    assert "艾" not in (rewritten or "") and "content words" in note


def test_llm_filter_values_the_libraries_do_not_hold_fall_back_to_the_rules():
    from ragspine_query.filter_extraction import LLMFilterExtractor, RuleFilterExtractor

    rules = RuleFilterExtractor(period_values=["2024Q3"])
    values = {"entity": ("ACME_CN",), "period": ("2024Q3",), "geography": ("CN",)}
    with LocalChatServer("ok", reply=lambda r: 'Sure: {"entity": ["ACME_MARS"], "period": ["2031Q9"]}') as server:
        ex = LLMFilterExtractor(provider(server), rules, values=values).extract("revenue in 2024Q3")
    assert ex.extractor == "llm→rules" and ex.note == "rules (the LLM named 2 value(s) the libraries do not hold)"
    assert [p.predicate.value for p in ex.predicates] == ["2024Q3"]  # the rules' period
    with LocalChatServer("ok", reply=lambda r: '{"entity": ["ACME_CN", "ACME_MARS"]}') as server:
        ex = LLMFilterExtractor(provider(server), rules, values=values).extract("Acme China")
    assert ex.extractor == "llm" and ex.note == "LLM (1 of 2 named value(s) not held, ignored)"


def test_openie_keeps_complete_triples_of_a_cut_reply_and_counts_an_unreadable_one(tmp_path):
    from ragspine_index.graph.graph_input import GraphChunk
    from ragspine_index.graph.openie import OpenIETripleExtractor

    chunk = GraphChunk(0, "c0", "d0", "Acme China opened a plant in Suzhou.", "t", "ACME_CN", "INTERNAL")
    replies = iter(['{"triples": [["Acme China", "opened", "a plant"], ["Acme China", "loc', "no JSON at all"])
    with LocalChatServer("ok", reply=lambda r: next(replies)) as server:
        ext = OpenIETripleExtractor(provider(server), model_id="a", cache_path=tmp_path / "o.sqlite")
        assert [(t.subject, t.predicate, t.object) for t in ext.extract(chunk)] == [("Acme China", "opened", "a plant")]
        ext2 = OpenIETripleExtractor(provider(server), model_id="b", cache_path=tmp_path / "o.sqlite")
        assert ext2.extract(chunk) == []
    assert (ext.salvaged, ext.unparsed, ext2.salvaged, ext2.unparsed) == (1, 0, 0, 1)
    ext.close()
    ext2.close()


def test_a_wrong_language_summary_becomes_the_extractive_one_and_is_not_cached(tmp_path):
    from ragspine_index.raptor.summarizers import ExtractiveSummarizer, LLMSummarizer, SummaryCache

    texts = ["Acme China raised R&D spending in 2024.", "Acme US plans two new products in 2025."]
    with LocalChatServer("ok", reply=lambda r: "艾克美中国增加了研发投入。") as server:
        summ = LLMSummarizer(provider(server), model="m")
        with SummaryCache(tmp_path / "s.sqlite") as cache:
            out = cache.summarize(summ, texts)
            assert out == ExtractiveSummarizer().summarize(texts) and summ.fallbacks == 1
            cache.summarize(summ, texts)
        assert len(server.requests) == 2  # not cached: asked again
    assert json.loads(server.requests[0].raw_body)["max_tokens"] == 256  # the RAPTOR budget


def test_hydes_probe_reaches_every_part_of_an_embedding_ensemble():
    from ragspine_query.transforms.transform import ChannelQuery

    q = ChannelQuery("acme revenue", channel_texts={"vector": "a passage about revenue"})
    assert [q.for_channel(c) for c in ("bm25", "vector", "vector:e5", "vector:usem")] == [
        "acme revenue", "a passage about revenue", "a passage about revenue", "a passage about revenue"]
