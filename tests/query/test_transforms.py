"""Transforms through the LLMProvider seam, against a real local OpenAI-compatible server
with scripted answers and faults; deterministic fallbacks; an LLM failure never fails a query."""

from __future__ import annotations

import json

import pytest

from ragspine_core.errors import ConfigError
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_core.llm import OpenAICompatibleProvider
from ragspine_query.transforms import (ChannelQuery, DecomposeTransform, HyDETransform, RagFusionTransform, StepBackTransform,
                                       abstract_query, make_transforms, parse_transform_spec, split_question)
from tests.query.qi_library import shared_sample

from tests.query.rerank.llm_server import LocalChatServer, closed_port_url

PROBE = "Acme China reported revenue growth in 2024 driven by automation controls demand in Suzhou."


def scripted(request: dict | None) -> str:
    """Answers by the system prompt: what each transform asks for."""
    system = request["messages"][0]["content"] if request else ""
    if "short, factual-sounding passage" in system:
        return PROBE
    if "alternative search queries" in system:
        return "1. Acme China sales 2024\n2. Acme CN turnover last year\n- Globex revenue 2024\n"
    if "step-back" in system:
        return "What drives Acme China revenue?"
    if "sub-questions" in system:
        return "What was Acme China revenue in 2024?\nWhat was Acme US revenue in 2024?"
    return "?"


def provider(server, **kw) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(server.base_url, "local-test", max_retries=0, timeout_s=5, **kw)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


def test_hyde_probe_feeds_only_the_dense_channel(sample):
    with LocalChatServer("ok", reply=scripted) as server:
        r = build_narrative_retriever(sample, provider(server), reranker=None, intelligence=QueryIntelligence(transforms="hyde"))
        out = r.retrieve("Acme China revenue", top_k=3, explain=True)
        sent = server.requests[0].json_body["messages"][-1]["content"]
    assert sent == "Acme China revenue" and len(out) == 3
    chans: dict[str, str] = {}
    for s in out.explain.stages:  # the first variant's channels (glossary variants follow)
        if s.stage == "channel":
            chans.setdefault(s.name, s.query)
    assert chans["vector"] == PROBE and chans["bm25"] == "Acme China revenue"
    assert any("hyde: dense probe" in s.detail for s in out.explain.stages if s.stage == "transform")


def test_rag_fusion_variants_are_fused_and_a_competitor_variant_is_refused(sample):
    with LocalChatServer("ok", reply=scripted) as server:
        # filter extraction off: with entity=ACME_CN, the English variants (own language only) have no rows to rank
        r = build_narrative_retriever(sample, provider(server), reranker=None,
                                      intelligence=QueryIntelligence(transforms="fusion", filters="off"))
        out = r.retrieve("Acme China revenue", top_k=5, explain=True)
    searched = [s.query for s in out.explain.stages if s.stage == "channel" and s.name == "bm25"]
    assert searched[-2:] == ["Acme China sales 2024", "Acme CN turnover last year"]  # the Globex variant never ran
    assert not any("Globex" in q for q in searched)
    assert any(s.stage == "gate" and "1 of" in s.detail for s in out.explain.stages)
    fuse = [s for s in out.explain.stages if s.stage == "fuse" and s.name == "rrf(variants)"]
    assert fuse and "variants" in fuse[0].detail and out.refusal is None and len(out) == 5


@pytest.mark.parametrize("behaviour", ["500", "garbage", "no_content", "400"])
def test_an_llm_failure_degrades_to_the_plain_query(sample, behaviour):
    with LocalChatServer(behaviour, reply=scripted) as server:
        qi = QueryIntelligence(transforms="hyde,fusion,step_back,decompose")
        r = build_narrative_retriever(sample, provider(server), reranker=None, intelligence=qi)
        out = r.retrieve("Acme China revenue", top_k=3, explain=True)
        assert len(server.requests) >= 4  # every transform asked, every one failed
    plain = build_narrative_retriever(sample, None, reranker=None, intelligence=QueryIntelligence()).retrieve("Acme China revenue", top_k=3)
    assert [s["chunk_id"] for s in out] == [s["chunk_id"] for s in plain]
    notes = " ".join(s.detail for s in out.explain.stages if s.stage == "transform")
    assert "hyde: LLM failed" in notes and "fusion: LLM failed" in notes


def test_unreachable_server_and_timeout_never_fail_a_query():
    dead = OpenAICompatibleProvider(closed_port_url(), "m", max_retries=0, timeout_s=1)
    assert HyDETransform(dead)(["q"]).note.startswith("hyde: LLM failed (ProviderError)")
    with LocalChatServer("slow", reply=scripted, slow_s=2.0) as server:
        slow = OpenAICompatibleProvider(server.base_url, "m", max_retries=0, timeout_s=0.3)
        out = RagFusionTransform(slow, n=2)(["Acme revenue"])
    assert list(out) == ["Acme revenue"] and "LLM failed" in out.note


def test_step_back_and_decomposition_with_the_llm_and_offline():
    with LocalChatServer("ok", reply=scripted) as server:
        p = provider(server)
        assert list(StepBackTransform(p)(["Acme China revenue in 2024Q3"])) == ["Acme China revenue in 2024Q3", "What drives Acme China revenue?"]
        assert list(DecomposeTransform(p)(["Compare Acme China and Acme US revenue in 2024"]))[1:] == [
            "What was Acme China revenue in 2024?", "What was Acme US revenue in 2024?"]
    assert list(StepBackTransform()(["Acme China revenue in 2024Q3"])) == ["Acme China revenue in 2024Q3", "Acme China revenue"]
    assert "skipped" in StepBackTransform()(["gross margin drivers"]).note
    assert abstract_query("What was the margin in Q3 2024?") == "What was the margin?"
    assert split_question("What is Acme revenue growth and how did the gross margin change?") == [
        "What is Acme revenue growth", "how did the gross margin change?"]
    assert split_question("research and development spending") == []
    assert "skipped" in DecomposeTransform()(["gross margin"]).note
    assert "no LLM provider" in HyDETransform(None)(["q"]).note and "no LLM provider" in RagFusionTransform(None)(["q"]).note


def test_transform_specs_and_channel_queries():
    assert parse_transform_spec("hyde, stepback ,normalize") == ("normalize", "step_back", "hyde")
    assert parse_transform_spec("none") == () and [n for n, _ in make_transforms("rag-fusion")] == ["fusion"]
    with pytest.raises(ConfigError, match="allowed: normalize"):
        parse_transform_spec("hyde,telepathy")
    q = ChannelQuery("acme", channel_texts={"vector": "probe"}, channels={"bm25", "vector"})
    assert (q.for_channel("bm25"), q.for_channel("vector"), q.for_channel("graph")) == ("acme", "probe", None)
    assert q == "acme" and json.dumps(q) == '"acme"'
    import pickle

    assert pickle.loads(pickle.dumps(q)).channel_texts == {"vector": "probe"}


#: what Gemma 3 270M (llama.cpp, 32 tokens) answered the decomposition prompt for the sample's
#: question xl-004: a line "<" that, searched, failed the whole query (issue 42's full-set run)
REAL_DECOMPOSE_REPLY = ("\n<</SYS>> In which year does Acme China plan to raise R&D spending to 6.2% of revenue? "
                        "[/INST]\n<")


def test_reply_lines_without_a_letter_or_digit_are_no_queries():
    from ragspine_query.transforms.transform import reply_lines

    assert reply_lines("---\n?\n…\n- <\nWhat did Acme China spend?\n「」", limit=5) == ["What did Acme China spend?"]
    lines = reply_lines(REAL_DECOMPOSE_REPLY, limit=6)
    assert lines and all(any(ch.isalnum() for ch in line) for line in lines)


def test_a_real_models_symbol_line_never_becomes_a_sub_question_that_fails_the_query():
    from ragspine_query.limits import check_query

    query = "In which year does Acme China plan to raise R&D spending to 6.2% of revenue?"
    with LocalChatServer("ok", reply=lambda req: REAL_DECOMPOSE_REPLY) as server:
        variants = DecomposeTransform(OpenAICompatibleProvider(server.base_url, "local-test", max_retries=0))([query])
    for v in variants:
        check_query(str(v))  # every variant is searchable
    assert str(variants[0]) == query
