"""The competitor gate: refused before retrieval, with a structured reason; every variant checked."""

from __future__ import annotations

import json

import pytest

from ragspine_core.gate import CompetitorGate, Refusal
from ragspine_core.glossary import Glossary
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.pipeline.runner import QueryPipeline
from ragspine_query.transforms.transform import ChannelQuery, Variants
from tests.conftest import REPO_ROOT
from tests.query.qi_library import shared_sample

GLOSSARY = Glossary.load(REPO_ROOT / "data" / "glossary.toml")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


def test_gate_matches_every_competitor_name_whole_words_width_and_case_folded():
    gate = CompetitorGate(GLOSSARY)
    assert gate.competitors_in("Globex market share") == ("GLOBEX",)
    assert gate.competitors_in("ＧＬＯＢＥＸ   corp pricing") == ("GLOBEX",)  # full width, case, spaces
    assert gate.competitors_in("华信科技 2024 收入") == ("HUAXIN",)  # CJK: substring
    assert gate.competitors_in("initech and globex vs acme") == ("GLOBEX", "INITECH")
    assert gate.competitors_in("Globexian widgets") == ()  # whole words only in spaced scripts
    assert gate.competitors_in("Acme China revenue") == ()
    r = gate.check("What is Globex market share?")
    assert isinstance(r, Refusal) and r.kind == "competitor" and r.entities == ("GLOBEX",) and "GLOBEX" in r.reason
    # a HyDE probe carries text for the dense channel: that text is checked too
    assert gate.check(ChannelQuery("pricing outlook", channel_texts={"vector": "Globex cut prices"})).entities == ("GLOBEX",)


def test_globex_market_share_is_refused_before_retrieval(sample):
    r = build_narrative_retriever(sample, embedding_backend=None, reranker=None)
    out = r.retrieve("Globex market share", top_k=5, explain=True)
    assert out.refusal is not None and out.refusal.kind == "competitor" and out.refusal.entities == ("GLOBEX",)
    assert list(out) == []
    stages = [s.stage for s in out.explain.stages]
    assert stages[0] == "gate" and "channel" not in stages and "mask" not in stages  # nothing was searched
    # an ordinary query passes the gate and retrieves
    ok = r.retrieve("Acme China revenue 2024", top_k=3, explain=True)
    assert ok.refusal is None and len(ok) == 3 and next(s for s in ok.explain.stages if s.stage == "gate").detail == "passed"
    # the gate can be turned off (admin use): then Globex documents come back
    off = build_narrative_retriever(sample, embedding_backend=None, reranker=None, intelligence=QueryIntelligence(gate=False))
    assert any(s["entity"] == "GLOBEX" for s in off.retrieve("Globex market share", top_k=5))


def test_generated_variants_naming_a_competitor_are_dropped_before_retrieval(sample):
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever

    seen: list[str] = []

    class Recording(HybridRetriever):
        def search(self, query, **kw):
            seen.append(str(query))
            return super().search(query, **kw)

    def inject(variants):
        return Variants([*variants, "Globex pricing moves", "Acme US pricing"], "test: one competitor variant")

    with open_library(sample) as lib:
        p = QueryPipeline(Recording(lib, embedding_backend=None), transforms=[("inject", inject)], gate=CompetitorGate(GLOSSARY),
                          use_registered=False)
        res = p.run("Acme pricing", top_k=3, explain=True)
    assert res.refusal is None and len(res) == 3
    assert seen == ["Acme pricing", "Acme US pricing"]
    assert any(s.stage == "gate" and s.detail == "1 of 3 variants refused" for s in res.explain.stages)


def test_cli_prints_the_refusal_as_json(sample, capsys):
    from ragspine_tools.query_command import main

    assert main(["query", str(sample), "Globex market share", "--mode", "bm25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results"] == [] and out["refusal"]["kind"] == "competitor" and out["refusal"]["entities"] == ["GLOBEX"]
    assert main(["query", str(sample), "Globex market share", "--mode", "bm25", "--no-gate", "--top-k", "2"]) == 0
    assert "refused" not in capsys.readouterr().out


def test_notebook_api_selects_stages_on_the_retriever(sample):
    from ragspine_query import HybridRetriever, PipelineSpec, QueryIntelligence, RetrievalConfig, build_pipeline, open_library

    with open_library(sample) as lib:
        r = HybridRetriever(lib, config=RetrievalConfig(mode="bm25", decay_half_life_days=365, decay_reference="2025-12-31"))
        p = build_pipeline(r, PipelineSpec(intelligence=QueryIntelligence(postprocessor="mmr:0.5", tiers="rules"), multi_query=False), glossary=GLOSSARY)
        refused = p.run("Initech pricing", top_k=3)
        assert refused.refusal.entities == ("INITECH",) and list(refused) == []
        res = p.run("Acme US gross margin", top_k=3, explain=True)
        kinds = [(s.stage, s.name) for s in res.explain.stages]
        assert ("postprocess", "mmr") in kinds and ("transform", "tiers") in kinds and len(res) == 3
        assert ("fuse", "rrf(channels)+time-decay") in kinds
