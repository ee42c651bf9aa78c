"""``graph`` mode = the default's fusion of its channels, then the graph channel fused in.

On the real sample library (English and Chinese documents, so the default's plan is the
mixed-language fusion), built by the real pipeline with deterministic vectors: graph mode
plans the default's channels exactly as ``auto`` does, ranks as ``auto`` when the graph
finds no seed entity, and otherwise is weighted RRF of the default's whole ranking and the
graph channel's (it cannot drop the default's channels or their language-aware fusion).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SAMPLE_LIBRARY, copy_sample_data

pytestmark = pytest.mark.slow

#: one English and one Chinese question naming entities of the sample's graph
SEEDED = ("Which subsidiary of Acme Group makes the PowerFlex 5, and where is it built?",
          "Acme China 的 AC-9 系列伺服驱动器由哪家子公司生产?")


@pytest.fixture(scope="module")
def vector_sample(tmp_path_factory) -> Path:
    """The sample library built with deterministic vectors (a dense channel next to BM25)."""
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library

    data = copy_sample_data(tmp_path_factory.mktemp("graph_fusion") / "data")
    paths = LibraryPaths(SAMPLE_LIBRARY, data / "raw" / SAMPLE_LIBRARY, data / "artifacts" / SAMPLE_LIBRARY)
    build_library(paths, embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite",
                  glossary_path=data / "glossary.toml")
    return data / "artifacts" / SAMPLE_LIBRARY / "current"


def retriever(lib, mode: str, **kw):
    from ragspine_query import HybridRetriever, RetrievalConfig
    from ragspine_core.dense.embedding import make_embedding_backend

    return HybridRetriever(lib, embedding_backend=make_embedding_backend("deterministic"), config=RetrievalConfig(mode=mode, **kw))


def rows_of(lib, hits) -> list[int]:
    ids = lib.chunk_ids()
    row = {c: i for i, c in enumerate(ids)}
    return [row[h.chunk_id] for h in hits]


def test_graph_mode_plans_the_defaults_channels_as_auto_does(vector_sample):
    from ragspine_query import open_library

    with open_library(vector_sample) as lib:
        auto, graph = retriever(lib, "auto"), retriever(lib, "graph")
        def always(r):  # the channels every query runs (the tiers' graph/tree channels are on demand)
            return {c.name for c in r.channels if not getattr(c, "on_demand", False)}

        # the default's channels are all there, the graph channel added
        assert always(auto) < always(graph) and "graph" in always(graph) - always(auto)
        for q in SEEDED:
            plan = graph.fusion_plan(q)
            assert plan is not None and plan == auto.fusion_plan(q)
            assert plan.case.startswith("mixed:") and "graph" not in dict(plan.weights)


def test_graph_mode_ranks_as_the_default_when_the_graph_has_no_seed(vector_sample):
    from ragspine_query import open_library

    query = "what were the main risks named for next year"  # no name of the graph: no seed entity
    with open_library(vector_sample) as lib:
        auto, graph = retriever(lib, "auto"), retriever(lib, "graph")
        ch = next(c for c in graph.channels if c.name == "graph")
        assert ch.entity_seeds(query) == {}
        got = graph.search(query, top_k=30, include_restricted=False)
        want = auto.search(query, top_k=30, include_restricted=False)
        assert [h.chunk_id for h in got] == [h.chunk_id for h in want] and len(got) == 30


def test_graph_mode_is_the_defaults_whole_ranking_fused_with_the_graphs(vector_sample):
    from ragspine_query import open_library
    from ragspine_query.fusion import keep_head, weighted_rrf
    from ragspine_query.graph import GraphChannelConfig

    cfg = GraphChannelConfig()
    assert cfg.stage_keep_head == 1
    with open_library(vector_sample) as lib:
        auto, graph = retriever(lib, "auto"), retriever(lib, "graph")
        ch = next(c for c in graph.channels if c.name == "graph")
        allowed = ~lib.restricted_mask()
        for q in SEEDED:
            assert ch.entity_seeds(q), q
            base = np.asarray(rows_of(lib, auto.search(q, top_k=lib.n_chunks, include_restricted=False)), dtype=np.int64)
            g_rows, _ = ch.search(q, 300, allowed)
            rrf, rrf_scores = weighted_rrf([base, g_rows], weights=[1.0, cfg.stage_weight], rrf_k=cfg.stage_rrf_k)
            want, _ = keep_head(base, rrf, rrf_scores, cfg.stage_keep_head)
            res = graph.search(q, top_k=20, include_restricted=False, explain=True)
            got = rows_of(lib, res)
            assert got == want[:20].tolist() and got[0] == int(base[0])  # the default's first stays first
            fuse = next(s for s in res.explain.stages if s.stage == "fuse").detail
            assert fuse.startswith("language-aware mixed:") and f"then rrf(default, graph) k={cfg.stage_rrf_k}" in fuse
            assert "the default's first 1 kept first" in fuse
            # the graph moved something: graph mode is not the default's ranking itself
            assert rows_of(lib, res) != base[:20].tolist()


def test_graph_mode_config_k_and_explicit_weights(vector_sample):
    from ragspine_query import open_library
    from ragspine_query.graph import GraphChannelConfig

    q = SEEDED[0]
    with open_library(vector_sample) as lib:
        def fuse_detail(**kw):
            res = retriever(lib, "graph", **kw).search(q, top_k=5, explain=True)
            return next(s for s in res.explain.stages if s.stage == "fuse").detail

        assert "then rrf(default, graph) k=40 " in fuse_detail(rrf_k=40)  # the config's own k wins
        assert "then rrf(default, graph) k=60 " in fuse_detail(graph=GraphChannelConfig(stage_rrf_k=None))
        assert "graph=0.5" in fuse_detail(graph=GraphChannelConfig(stage_weight=0.5))
        # explicit channel weights: the static fusion of every channel, no plan
        assert fuse_detail(channel_weights={"bm25": 1.0, "vector": 1.0, "graph": 2.0}).startswith("k=20 ")


def test_a_hub_entity_seeds_no_walk(vector_sample):
    """An entity named in more than ``max_seed_share`` of the chunks is no seed (explain names it)."""
    from ragspine_query import HybridRetriever, RetrievalConfig, open_library
    from ragspine_core.errors import ConfigError
    from ragspine_query.graph import GraphChannelConfig

    query = "What did Acme Group say about the PowerFlex 5?"
    with open_library(vector_sample) as lib:
        def channel(**kw):
            r = HybridRetriever(lib, embedding_backend=None, config=RetrievalConfig(mode="graph", graph=GraphChannelConfig(**kw)))
            return next(c for c in r.channels if c.name == "graph")

        def labels(ch):
            return {ch._labels[n] for n in ch.entity_seeds(query)}

        default, unlimited = channel(), channel(max_seed_share=1.0)
        assert labels(unlimited) == {"Acme Group", "PowerFlex 5"}
        assert labels(default) == {"PowerFlex 5"}
        assert "hubs not seeded (named in > 5% of chunks): Acme Group" in default.describe(query)
        # only a hub named: no seed, no ranking (graph mode then ranks as the default)
        assert default.search("What is Acme Group?", 10, None)[0].size == 0
        assert unlimited.search("What is Acme Group?", 10, None)[0].size > 0
        for bad in (0.0, 1.5, float("nan")):
            with pytest.raises(ConfigError, match="max_seed_share"):
                GraphChannelConfig(max_seed_share=bad)


def test_keep_head_puts_the_defaults_first_rows_back_with_falling_scores():
    from ragspine_query.fusion import keep_head

    base = np.asarray([7, 3, 5], dtype=np.int64)
    fused_rows = np.asarray([3, 9, 7, 5], dtype=np.int64)
    fused = np.asarray([0.5, 0.4, 0.3, 0.2])
    rows, scores = keep_head(base, fused_rows, fused, 1)
    assert rows.tolist() == [7, 3, 9, 5] and scores[0] > scores[1] == 0.5 and scores[0] == np.nextafter(0.5, 1)
    rows, scores = keep_head(base, fused_rows, fused, 2)
    assert rows.tolist() == [7, 3, 9, 5] and scores.tolist() == [np.nextafter(0.5, 1), 0.5, 0.4, 0.2]
    # a head already first keeps its own score; 0 changes nothing
    rows, scores = keep_head(np.asarray([3]), fused_rows, fused, 1)
    assert rows.tolist() == fused_rows.tolist() and scores.tolist() == fused.tolist()
    rows, scores = keep_head(base, fused_rows, fused, 0)
    assert rows is fused_rows and scores is fused
