"""Retrieval over the summary tree: collapsed and traversal, `via`, leaf citations only, themes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.source_documents.parse_library import parse_library
from ragspine_index.pipeline import build_library
from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend
from ragspine_core.errors import ConfigError, SynthesisCitationError
from ragspine_query.library import open_library
from ragspine_query.agent_api import NarrativeIndexRetriever
from ragspine_query.builder import PipelineSpec, build_pipeline
from ragspine_query.retriever import HybridRetriever, RetrievalConfig
from ragspine_query.tree import TreeConfig, TreeRetriever, global_overview, tree_snippet
from tests.conftest import REPO_ROOT, RESTRICTED_MARKERS

BARE = PipelineSpec(intelligence=None)  # the retrieval stages alone
QUERIES = ("battery supply chain risk", "gross margin Acme US 2024", "数据出境 安全评估", "data transfer to the United States")


@pytest.fixture(scope="module", params=["deterministic", "none"])
def built(request, tmp_path_factory):
    """The sample library with a tree in the chunks' embedding space, and one over BM25 only (hashed-lexical)."""
    root = tmp_path_factory.mktemp(f"tree-{request.param}")
    raw = root / "raw" / "sample"
    shutil.copytree(REPO_ROOT / "data" / "raw" / "sample", raw)
    paths = LibraryPaths("sample", raw, root / "art" / "sample")
    build_library(paths, embedding=request.param, cache_path=root / "cache" / "e.sqlite")
    lib = open_library(paths.root)
    backend = DeterministicEmbeddingBackend(64) if request.param == "deterministic" else None
    bodies = {d.doc_id: d.body for d in parse_library(raw).documents}
    yield {"lib": lib, "backend": backend, "bodies": bodies, "kind": request.param}
    lib.close()


def _assert_leaf_citation(snippet: dict, bodies: dict[str, str]) -> None:
    start, end = snippet["span"]
    assert bodies[snippet["doc_id"]][start:end] == snippet["text"], "a citation is a source span of a leaf chunk"
    assert snippet["sensitivity"] != "RESTRICTED"


@pytest.mark.parametrize("mode", ["collapsed", "traversal"])
def test_tree_search_answers_with_leaf_source_spans_and_records_via(built, mode):
    lib, bodies = built["lib"], built["bodies"]
    tree = lib.summary_tree()
    assert tree is not None and tree.n_nodes > 0
    assert tree.vector_kind.startswith("embedding:" if built["kind"] == "deterministic" else "lexical:")
    retriever = TreeRetriever(lib, config=mode, embedding_backend=built["backend"])
    node_ids = set(tree.node_ids)
    via_seen = 0
    for q in QUERIES:
        hits = retriever.search(q, top_k=8)
        assert hits, q
        rows = [lib.chunk_ids().index(h.hit.chunk_id) for h in hits]
        assert len(set(rows)) == len(rows)
        for h in hits:
            assert h.via == "" or h.via in node_ids
            if h.via:  # a node hit is answered with leaves that node covers
                i = tree.node_ids.index(h.via)
                assert lib.chunk_ids().index(h.hit.chunk_id) in set(tree.leaves_of(i).tolist())
                via_seen += 1
        snippets = retriever.snippets(q, top_k=8)
        for s in snippets:
            _assert_leaf_citation(s, bodies)
            assert "via" in s
        assert isinstance(snippets, list) and callable(snippets.to_frame)  # a list of results has to_frame()
    assert via_seen > 0
    if mode == "traversal":
        assert all(h.via for h in retriever.search(QUERIES[0], top_k=5))


def test_a_synthesis_is_never_citable(built):
    lib = built["lib"]
    tree = lib.summary_tree()
    with pytest.raises(SynthesisCitationError, match="synthesis"):
        tree_snippet(tree.node(0))
    themes = global_overview(lib, embedding_backend=built["backend"], top_n=3)
    assert themes and all(t.is_synthesis for t in themes)
    with pytest.raises(SynthesisCitationError):
        tree_snippet(themes[0])


def test_global_entry_point_starts_from_the_top_level_and_cites_leaves(built):
    lib, bodies = built["lib"], built["bodies"]
    tree = lib.summary_tree()
    themes = global_overview(lib, "what are the main risks discussed across the library", top_n=4,
                             embedding_backend=built["backend"])
    assert 1 <= len(themes) <= 4
    top = set(tree.nodes_at(tree.top_level).tolist())
    for t in themes:
        i = tree.node_ids.index(t.node_id)
        assert i in top and t.level == tree.top_level
        assert t.citations and all(c["via"] == t.node_id for c in t.citations)
        for c in t.citations:
            _assert_leaf_citation(c, bodies)
        assert not any(m in t.summary for m in RESTRICTED_MARKERS.values())
    assert [t.score for t in themes] == sorted((t.score for t in themes), reverse=True)


def test_tree_channel_is_fused_and_explained_and_honours_filters(built):
    lib = built["lib"]
    cfg = RetrievalConfig(mode="hybrid" if built["backend"] else "bm25", tree="collapsed")
    retriever = HybridRetriever(lib, embedding_backend=built["backend"], config=cfg)
    assert "tree" in [c.name for c in retriever.channels]
    res = retriever.search(QUERIES[0], top_k=5, include_restricted=False, explain=True)
    stages = [s for s in res.explain.stages if s.stage == "channel" and s.name == "tree"]
    assert stages and "collapsed" in stages[0].detail and "via" in stages[0].detail
    off = HybridRetriever(lib, embedding_backend=built["backend"], config=RetrievalConfig(mode=cfg.mode))
    # tree off: the channel exists only on demand (the global tier) and plain queries never run it
    assert "tree" not in [c.name for c in off.channels if not getattr(c, "on_demand", False)]
    plain = off.search(QUERIES[0], top_k=5, include_restricted=False, explain=True)
    assert "tree" not in {s.name for s in plain.explain.stages if s.stage == "channel"}
    # a metadata filter holds on the tree channel too: only allowed leaves answer a node hit
    filters = {"language": {"eq": "zh"}}
    allowed = retriever.allowed_mask(filters, include_restricted=False)
    tree_channel = next(c for c in retriever.channels if c.name == "tree")
    rows, _ = tree_channel.search(QUERIES[2], 50, allowed)
    assert rows.size and allowed[rows].all()
    snippets = NarrativeIndexRetriever(build_pipeline(retriever, BARE, glossary=None)).retrieve(QUERIES[2], filters=filters, top_k=5)
    assert snippets and all(s["language"] == "zh" for s in snippets)


def test_tree_config_is_validated_and_a_library_without_a_tree_is_skipped(built, tmp_path):
    with pytest.raises(ConfigError, match="collapsed"):
        TreeConfig(mode="sideways")
    with pytest.raises(ConfigError):
        RetrievalConfig(tree="upside-down")
    assert RetrievalConfig().tree.mode == "off"
    # a snapshot whose manifest lists no tree: the tree channel is simply absent
    lib = built["lib"]
    snap = tmp_path / "snap"
    shutil.copytree(lib.snapshot_dir, snap)
    manifest = json.loads((snap / "manifest.json").read_text())
    manifest["artifact_sets"].pop("summary_tree")
    (snap / "manifest.json").write_text(json.dumps(manifest))
    from ragspine_query.library import Library

    bare = Library(snap, manifest)
    try:
        assert bare.summary_tree() is None
        r = HybridRetriever(bare, embedding_backend=built["backend"], config=RetrievalConfig(tree="traversal"))
        assert "tree" not in [c.name for c in r.channels]
    finally:
        bare.close()


def test_tree_channel_ranking_is_deterministic(built):
    lib = built["lib"]
    a = TreeRetriever(lib, config="collapsed", embedding_backend=built["backend"])
    b = TreeRetriever(lib, config="collapsed", embedding_backend=built["backend"])
    for q in QUERIES:
        ra = [(h.hit.chunk_id, h.via) for h in a.search(q, top_k=10)]
        assert ra == [(h.hit.chunk_id, h.via) for h in b.search(q, top_k=10)]
        assert np.all(np.diff([h.hit.score for h in a.search(q, top_k=10)]) <= 1e-6)


def test_cli_tree_flag_adds_the_channel_and_explain_shows_its_node_hits(built, capsys, monkeypatch):
    from ragspine_tools.query_command import main

    for var in ("RAGSPINE_TREE", "RAGSPINE_EMBEDDING", "RAGSPINE_RETRIEVAL_MODE", "RAGSPINE_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    lib_dir = str(built["lib"].snapshot_dir)
    mode = "hybrid" if built["backend"] is not None else "bm25"
    assert main(["query", lib_dir, QUERIES[0], "--tree", "collapsed", "--mode", mode, "--explain", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    tree_rows = [r for r in out["explain"] if r["stage"] == "channel" and r["name"] == "tree"]
    assert tree_rows and "via" in tree_rows[0]["detail"]
    assert main(["query", lib_dir, QUERIES[0], "--mode", mode, "--explain", "--json"]) == 0
    assert not [r for r in json.loads(capsys.readouterr().out)["explain"] if r["name"] == "tree"]


def test_fused_hits_keep_the_tree_node_they_were_reached_through(built, capsys, monkeypatch):
    """A collapsed-tree node hit is answered by its best leaves; the fused Hit, the snippet
    dict and the CLI's --json/--explain carry the node id as ``via``; the citation stays the
    leaf's source span."""
    lib, bodies = built["lib"], built["bodies"]
    tree = lib.summary_tree()
    node_ids = set(tree.node_ids)
    mode = "hybrid" if built["backend"] else "bm25"
    retriever = HybridRetriever(lib, embedding_backend=built["backend"], config=RetrievalConfig(mode=mode, tree="collapsed"))
    channel = next(c for c in retriever.channels if c.name == "tree")
    ids = lib.chunk_ids()
    seen = 0
    for q in QUERIES:
        allowed = retriever.allowed_mask(None, include_restricted=False)
        rows, _, vias = channel.search_with_via(q, retriever.config.depth, allowed)
        expected = {}
        for r, v in zip(rows.tolist(), vias):
            expected.setdefault(ids[r], v)
        hits = retriever.search(q, top_k=10, include_restricted=False)
        for h in hits:
            assert h.via == expected.get(h.chunk_id, ""), (q, h.chunk_id)
            if h.via:
                assert h.via in node_ids
                seen += 1
        # the explain path builds the same hits and names the nodes in the fuse stage
        res = retriever.search(q, top_k=10, include_restricted=False, explain=True)
        assert [(h.chunk_id, h.via) for h in res] == [(h.chunk_id, h.via) for h in hits]
        fuse = [s for s in res.explain.stages if s.stage == "fuse"][0]
        assert ("via tree nodes" in fuse.detail) == any(h.via for h in hits)
    assert seen, "some fused hit was reached through a summary node"
    # snippets: `via` is kept, the text is still the leaf's source span
    snippets = NarrativeIndexRetriever(build_pipeline(retriever, BARE, glossary=None)).retrieve(QUERIES[0], top_k=10)
    for s in snippets:
        _assert_leaf_citation(s, bodies)
        assert s.get("via", "") == "" or s["via"] in node_ids
    # without the tree channel no hit has a via
    off = HybridRetriever(lib, embedding_backend=built["backend"], config=RetrievalConfig(mode=mode))
    assert not any(h.via for q in QUERIES for h in off.search(q, top_k=10))
    # the CLI: --json results carry via, the text output prints it
    from ragspine_tools.query_command import main

    for var in ("RAGSPINE_TREE", "RAGSPINE_EMBEDDING", "RAGSPINE_RETRIEVAL_MODE", "RAGSPINE_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    lib_dir = str(lib.snapshot_dir)
    found = []
    for q in QUERIES:
        assert main(["query", lib_dir, q, "--tree", "collapsed", "--mode", mode, "--top-k", "10", "--explain", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        found += [r["via"] for r in out["results"] if r.get("via")]
    assert found and set(found) <= node_ids
    assert main(["query", lib_dir, QUERIES[0], "--tree", "collapsed", "--mode", mode, "--top-k", "10"]) == 0
    text = capsys.readouterr().out
    assert ("via summary node n" in text) == any(s.get("via") for s in snippets)
