"""One pipeline builder (issue 39): a frozen :class:`PipelineSpec` built from settings at the
edge, and :func:`build_pipeline`, the one function that builds the stage list. ``ragspine
query``, ``build_narrative_retriever`` and a hand-built retriever give the same ranking
through it; nothing below an edge reads the environment."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.builder import PipelineSpec, build_pipeline
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.library import open_library
from ragspine_query.retriever import HybridRetriever, RetrievalConfig
from ragspine_tools.query_command import main as query_main
from tests.conftest import RAGSPINE_ENV_VARS
from tests.query.qi_library import shared_sample

REPO = Path(__file__).resolve().parents[2]
QUERY = "Why did Acme Europe revenue decline in Q3 2024?"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


def test_the_spec_is_built_from_settings_and_changed_by_field_name():
    settings = Settings(retrieval_mode="bm25", decay_half_life_days="30", tree="collapsed", query_transforms="normalize",
                        postprocessor="mmr", corrective="relevance", multi_query="off", reranker="maxsim", router="all")
    spec = PipelineSpec.from_settings(settings)
    assert (spec.mode, spec.retrieval.decay_half_life_days, spec.retrieval.tree.mode) == ("bm25", 30.0, "collapsed")
    assert spec.intelligence == QueryIntelligence.from_settings(settings)
    assert (spec.multi_query, spec.reranker, spec.router) == (False, "maxsim", "all")
    assert PipelineSpec.from_settings(Settings()) == PipelineSpec()  # the defaults are the same in both places
    changed = spec.replace(mode="hybrid", tiers="rules", max_sensitivity="PUBLIC", rerank_top_n=5)
    assert (changed.mode, changed.intelligence.tiers, changed.retrieval.max_sensitivity, changed.rerank_top_n) == (
        "hybrid", "rules", "PUBLIC", 5)
    assert changed.intelligence.corrective == "relevance" and spec.mode == "bm25"  # the rest kept; frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.multi_query = True  # type: ignore[misc]


@pytest.mark.parametrize("fields, match", [
    ({"multi_query": "maybe"}, "RAGSPINE_MULTI_QUERY='maybe' is invalid"),
    ({"decay_half_life_days": "soon"}, "RAGSPINE_DECAY_HALF_LIFE_DAYS='soon' is invalid"),
    ({"query_cache_size": "lots"}, "RAGSPINE_QUERY_CACHE='lots' is invalid"),
])
def test_a_bad_setting_is_named(fields, match):
    """A bad value never reaches the builder: Settings checks it (once, at the edge) and names
    the variable."""
    with pytest.raises(ConfigError, match=match):
        PipelineSpec.from_settings(Settings(**fields))


def test_bad_changes_are_refused_with_the_name():
    with pytest.raises(ConfigError, match="PipelineSpec has no setting colour"):
        PipelineSpec().replace(colour="blue")
    with pytest.raises(ConfigError, match="cannot set tiers: this spec runs no query-intelligence stages"):
        PipelineSpec(intelligence=None).replace(tiers="rules")
    with pytest.raises(ConfigError, match="rerank_top_n must be a whole number >= 1"):
        PipelineSpec(rerank_top_n=0)
    with pytest.raises(ConfigError, match="unknown tier mode"):
        PipelineSpec().replace(tiers="sometimes")


def test_the_stage_list_follows_the_spec(sample):
    with open_library(sample) as lib:
        r = HybridRetriever(lib, embedding_backend=None, config=RetrievalConfig(mode="bm25"))
        bare = build_pipeline(r, PipelineSpec(intelligence=None), glossary=None)
        assert bare.describe() == "retrieve → cut → restricted_strip"
        full = build_pipeline(r, PipelineSpec(reranker="maxsim").replace(filters="rules", postprocessor="mmr", tiers="rules",
                                                                         cache_size=8))
        assert full.describe() == ("extract_filters → gate → transforms → gate(variants) → retrieve → rerank → postprocess → cut"
                                   " → restricted_strip → filter_fallback → corrective (cached)")
        assert full.source is r and full.cache is not None
        # the glossary published with the library: its multi-query variants come first
        assert [n for n, _ in full.stages[2].transforms][:1] == ["glossary"]  # type: ignore[attr-defined]
        no_mq = build_pipeline(r, PipelineSpec(multi_query=False))
        assert "glossary" not in [n for s in no_mq.stages for n, _ in getattr(s, "transforms", [])]
        with pytest.raises(ConfigError, match="listwise.*needs an LLM provider"):
            build_pipeline(r, PipelineSpec(reranker="listwise"))


def test_paths_opened_libraries_and_a_retriever_rank_alike(sample):
    spec = PipelineSpec(multi_query=True).replace(mode="bm25")
    by_path = build_pipeline(sample, spec)
    assert isinstance(by_path.source, HybridRetriever) and by_path.source.active_mode == "bm25"
    with open_library(sample) as lib:
        by_lib = build_pipeline(lib, spec)
        by_hand = build_pipeline(HybridRetriever(lib, embedding_backend=None, config=spec.retrieval), spec)
        ranks = [[h.chunk_id for h in p.run(QUERY, top_k=10)] for p in (by_path, by_lib, by_hand)]
        assert ranks[0] and ranks[0] == ranks[1] == ranks[2]
    with pytest.raises(ConfigError, match="needs at least one library"):
        build_pipeline([], spec)


def test_ragspine_query_and_the_agent_seam_run_the_one_builder(sample, capsys, monkeypatch):
    for var in RAGSPINE_ENV_VARS:  # the CLI reads the environment (its edge); the others get no settings
        monkeypatch.delenv(var, raising=False)
    assert query_main(["query", str(sample), QUERY, "--json", "--top-k", "8", "--mode", "bm25", "--postprocessor", "mmr",
                       "--tiers", "rules"]) == 0
    cli = [s["chunk_id"] for s in json.loads(capsys.readouterr().out)]
    spec = PipelineSpec().replace(mode="bm25", postprocessor="mmr", tiers="rules")
    seam = [s.chunk_id for s in build_narrative_retriever(sample, spec=spec).retrieve(QUERY, top_k=8)]
    direct = [h.chunk_id for h in build_pipeline(sample, spec).run(QUERY, top_k=8) if not h.chunk.is_restricted]
    assert cli and cli == seam == direct
    # the seam's keywords are changes of the spec
    kw = build_narrative_retriever(sample, mode="bm25", postprocessor="mmr", intelligence=QueryIntelligence(tiers="rules"))
    assert [s.chunk_id for s in kw.retrieve(QUERY, top_k=8)] == cli


def test_the_environment_is_read_only_at_the_edges():
    """``Settings.from_env`` appears in the query path's modules only inside the edge functions."""
    edges = {"ragspine_tools/query_command.py": {"run_query"}, "ragspine_tools/evaluate.py": {"run_eval_cli"},
             "ragspine_query/builder.py": set(), "ragspine_query/agent_api.py": set(), "ragspine_query/retriever.py": set(),
             "ragspine_query/intelligence.py": set()}
    found: dict[str, set[str]] = {}
    for rel, allowed in edges.items():
        tree = ast.parse((REPO / rel).read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Attribute) and node.attr == "from_env":
                        found.setdefault(rel, set()).add(fn.name)
        assert found.get(rel, set()) <= allowed, f"{rel} reads the environment in {found[rel] - allowed}"
    assert found["ragspine_tools/query_command.py"] == {"run_query"}


def test_one_builder_of_the_stage_list():
    """``core_stages`` (the retrieval stages) is assembled into a pipeline's list by the builder alone,
    and the removed builders stay removed."""
    import ragspine_query
    import ragspine_query.intelligence as intelligence

    callers = set()
    for path in (REPO / "ragspine_query").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if "core_stages(" in text and "def core_stages(" not in text:
            callers.add(path.relative_to(REPO).as_posix())
    assert callers <= {"ragspine_query/builder.py", "ragspine_query/pipeline/runner.py"}, callers
    for gone in ("build_query_pipeline", "NarrativeIndex"):
        assert not hasattr(ragspine_query, gone)
    assert not hasattr(intelligence, "query_stages") and not hasattr(HybridRetriever, "pipeline")
