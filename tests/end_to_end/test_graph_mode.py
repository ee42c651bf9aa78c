"""``--mode graph`` on the sample library (built by the real Dagster assets): the query CLI,
``--explain`` (seed entities, what only the graph found) and the missing-artifact error."""

from __future__ import annotations

import json

import pytest

from tests.conftest import RESTRICTED_MARKERS

pytestmark = pytest.mark.slow


def test_manifest_lists_the_relation_graph(built_sample):
    manifest = json.loads((built_sample / "current" / "manifest.json").read_text())
    assert manifest["artifact_sets"]["relation_graph"] == {"path": "relation_graph", "asset": "relation_graph"}
    assert "relation_graph" in manifest["code_versions"]


def test_query_cli_graph_mode_explains_seeds_and_what_only_the_graph_found(built_sample, capsys):
    from ragspine_tools.query_command import main

    assert main(["query", str(built_sample), "Which subsidiary of Acme Group localised its battery supply chain?",
                 "--mode", "graph", "--top-k", "5", "--explain", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results"] and all(r["sensitivity"] != "RESTRICTED" for r in out["results"])
    rows = out["explain"]
    graph = [r for r in rows if r["stage"] == "channel" and r["name"] == "graph"]
    assert graph and graph[0]["chunk_id"] is not None and "Acme Group (" in graph[0]["detail"]
    assert any(r["stage"] == "only_in" and r["name"] == "graph" for r in rows)
    blob = json.dumps(out)
    for marker in RESTRICTED_MARKERS.values():
        assert marker not in blob


def test_graph_mode_needs_the_graph_artifact(built_sample, tmp_path):
    import shutil

    from ragspine_query import HybridRetriever, RetrievalConfig, open_library
    from ragspine_core.errors import IndexNotFoundError

    snap = tmp_path / "snap"
    shutil.copytree((built_sample / "current").resolve(), snap)
    manifest = json.loads((snap / "manifest.json").read_text())
    del manifest["artifact_sets"]["relation_graph"]
    from ragspine_core.integrity import content_snapshot_id

    manifest["snapshot_id"] = content_snapshot_id(manifest)  # a consistent manifest, only without the graph
    (snap / "manifest.json").write_text(json.dumps(manifest))
    with open_library(snap) as lib:
        with pytest.raises(IndexNotFoundError, match="materialize the relation_graph asset"):
            HybridRetriever(lib, embedding_backend=None, config=RetrievalConfig(mode="graph"))


def test_graph_mode_fuses_with_the_graph_channels_rrf_k_unless_the_config_sets_one(built_sample):
    from ragspine_query import HybridRetriever, RetrievalConfig, open_library
    from ragspine_core.errors import ConfigError
    from ragspine_query.graph import GraphChannelConfig

    query = "Which subsidiary of Acme Group localised its battery supply chain?"

    def fuse_detail(config):
        with open_library(built_sample / "current") as lib:
            res = HybridRetriever(lib, embedding_backend=None, config=config).search(query, top_k=5, explain=True)
            return [s for s in res.explain.stages if s.stage == "fuse"][0].detail

    assert fuse_detail(RetrievalConfig(mode="graph")).startswith("k=20 ")  # GraphChannelConfig.fusion_rrf_k
    assert fuse_detail(RetrievalConfig(mode="graph", rrf_k=40)).startswith("k=40 ")  # the config's own k wins
    assert fuse_detail(RetrievalConfig(mode="graph", graph=GraphChannelConfig(fusion_rrf_k=None))).startswith("k=60 ")
    for bad in ({"fusion_rrf_k": -1}, {"chunk_degree_power": -0.5}, {"type_weights": (("about", -1.0),)}):
        with pytest.raises(ConfigError):
            GraphChannelConfig(**bad)
