"""The Dagster code location loads: assets, code versions, checks, job, resources."""

from __future__ import annotations

import pytest

dg = pytest.importorskip("dagster", reason="the code location needs the 'pipeline' extra")

from ragspine_index.chunking import CHUNKER_VERSIONS  # noqa: E402
from ragspine_assets.definitions import defs, make_resources  # noqa: E402
from ragspine_assets.resources import RagspineConfig  # noqa: E402

ASSETS = ("documents", "chunks", "index_text", "bm25_index", "chunk_embeddings", "summary_tree", "relation_graph",
          "index_manifest")
CHECKS = {
    ("documents", "documents_parse_cleanly"),
    ("chunks", "chunk_text_is_substring_of_source"),
    ("chunks", "chunk_ids_unique"),
    ("chunk_embeddings", "no_restricted_vectors"),
    ("chunk_embeddings", "vectors_finite_and_normalised"),
    ("summary_tree", "no_restricted_text_in_nodes"),
    ("relation_graph", "no_restricted_graph_labels"),
}
LINEAGE = {
    "chunks": {"documents"},
    "index_text": {"chunks"},
    "bm25_index": {"index_text", "documents"},
    "chunk_embeddings": {"index_text", "documents"},
    "summary_tree": {"index_text", "chunk_embeddings", "documents"},
    "relation_graph": {"chunks", "index_text", "documents"},
    "index_manifest": {"documents", "chunks", "index_text", "bm25_index", "chunk_embeddings", "summary_tree",
                       "relation_graph"},
}


@pytest.fixture(scope="module", autouse=True)
def live_instance():
    """Resolving Definitions reads the current instance's defs-state storage: give it a live one."""
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


@pytest.fixture(scope="module")
def asset_graph():
    return defs.resolve_asset_graph()


def test_definitions_validate_loadable():
    if not hasattr(dg.Definitions, "validate_loadable"):
        pytest.skip("this Dagster has no Definitions.validate_loadable")
    dg.Definitions.validate_loadable(defs)


def test_the_six_assets_are_defined(asset_graph):
    keys = {k.to_user_string() for k in asset_graph.get_all_asset_keys()}
    assert set(ASSETS) <= keys


@pytest.mark.parametrize("name", ASSETS)
def test_every_asset_has_a_code_version_and_is_partitioned_by_library(asset_graph, name):
    node = asset_graph.get(dg.AssetKey(name))
    assert node.code_version
    assert isinstance(node.partitions_def, dg.DynamicPartitionsDefinition)
    assert node.partitions_def.name == "libraries"


def test_chunks_code_version_carries_every_chunker_version(asset_graph):
    code_version = asset_graph.get(dg.AssetKey("chunks")).code_version
    for name, version in CHUNKER_VERSIONS.items():
        assert f"{name}@{version}" in code_version


def test_lineage_documents_to_manifest(asset_graph):
    for name, parents in LINEAGE.items():
        got = {k.to_user_string() for k in asset_graph.get(dg.AssetKey(name)).parent_keys}
        assert got == parents, name


def test_asset_checks_are_attached(asset_graph):
    found = {(k.asset_key.to_user_string(), k.name) for k in asset_graph.asset_check_keys}
    assert CHECKS <= found


def test_the_ingest_job_selects_every_asset():
    job = defs.resolve_job_def("ingest_job")
    assert job.partitions_def is not None
    selected = {k.to_user_string() for k in job.asset_layer.selected_asset_keys}
    assert set(ASSETS) <= selected


def test_sensor_and_schedule_target_the_ingest_job():
    sensor = defs.resolve_sensor_def("raw_files_sensor")
    schedule = defs.resolve_schedule_def("reingest_schedule")
    assert sensor.job_name == "ingest_job" and schedule.job_name == "ingest_job"


def test_resources_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGSPINE_DATA_ROOT", str(tmp_path))
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
    monkeypatch.setenv("RAGSPINE_KEEP_SNAPSHOTS", "3")
    cfg = make_resources()["ragspine"]
    assert isinstance(cfg, RagspineConfig)
    assert (cfg.data_root, cfg.embedding_resource().spec, cfg.keep_snapshots) == (str(tmp_path), "none", 3)
    paths = cfg.library_paths("sample")
    assert paths.raw == tmp_path / "raw" / "sample" and paths.root == tmp_path / "artifacts" / "sample"


def test_workspace_yaml_points_at_the_definitions(repo_root):
    text = (repo_root / "workspace.yaml").read_text(encoding="utf-8")
    assert "ragspine_assets.definitions" in text
