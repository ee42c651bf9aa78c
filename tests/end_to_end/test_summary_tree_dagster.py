"""The ``summary_tree`` asset in a real Dagster run: metadata, its check, publication, and the tree channel."""

from __future__ import annotations

import pytest

dg = pytest.importorskip("dagster", reason="materializing needs the 'pipeline' extra")

from ragspine_assets.assets import ALL_ASSETS  # noqa: E402
from ragspine_assets.partitions import LIBRARIES_PARTITION  # noqa: E402
from ragspine_assets.io_manager import StepOutputIOManager  # noqa: E402
from ragspine_assets.resources import EmbeddingBackendResource, RagspineConfig  # noqa: E402
from ragspine_query.library import open_library  # noqa: E402
from ragspine_query.tree import TreeRetriever  # noqa: E402
from tests.conftest import RESTRICTED_MARKERS, copy_sample_data  # noqa: E402


def test_materialize_builds_the_summary_tree_with_its_metadata_and_check(tmp_path):
    data = copy_sample_data(tmp_path / "data")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(LIBRARIES_PARTITION, ["sample"])
    result = dg.materialize(ALL_ASSETS, instance=instance, partition_key="sample",
                            resources={"ragspine": RagspineConfig(data_root=str(data), embedding_backend=EmbeddingBackendResource(spec="none")),
                                       "io_manager": StepOutputIOManager()})
    assert result.success
    mats = [m for m in result.asset_materializations_for_node("summary_tree")]
    assert len(mats) == 1
    meta = {k: v.value for k, v in mats[0].metadata.items()}
    for key in ("levels", "nodes_per_level", "mean_cluster_size", "compression_ratio", "summarizer_id",
                "llm_calls_made", "llm_calls_cached", "build_seconds", "top_level_preview"):
        assert key in meta, key
    assert meta["levels"] >= 2 and meta["summarizer_id"].startswith("extractive@")
    assert meta["llm_calls_made"] == 0 and meta["mean_cluster_size"] > 1 and meta["compression_ratio"] > 1
    assert meta["vector_kind"].startswith("lexical:")  # a BM25-only library gets a hashed-lexical tree
    assert meta["restricted_chunks_excluded"] > 0
    preview = meta["top_level_preview"]
    assert "| node |" in preview and not any(m in preview for m in RESTRICTED_MARKERS.values())
    checks = {e.asset_check_key.name: e for e in result.get_asset_check_evaluations()}
    assert checks["no_restricted_text_in_nodes"].passed

    lib = open_library(data / "artifacts" / "sample")
    try:
        assert "summary_tree" in lib.manifest["artifact_sets"]
        tree = lib.summary_tree()
        assert [int((tree.levels == lv).sum()) for lv in range(1, tree.top_level + 1)] == [
            int(x.split(": ")[1]) for x in meta["nodes_per_level"].split(", ")]
        assert not any(m in t for t in tree.texts for m in RESTRICTED_MARKERS.values())
        restricted = lib.restricted_mask()
        assert not restricted[tree.leaf_rows].any() and not restricted[tree.leaves].any()
        snippets = TreeRetriever(lib, config="collapsed").snippets("battery supply chain risk", top_k=5)
        assert snippets and all(s["chunk_id"] in lib.chunk_ids() and s["sensitivity"] != "RESTRICTED" for s in snippets)
    finally:
        lib.close()
