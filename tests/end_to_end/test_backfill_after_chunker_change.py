"""The user's workflow: "I changed the chunker → chunks and downstream are unsynced → a
backfill over all libraries rebuilds them → unchanged chunks are not re-embedded".

The chunker change is simulated the way a developer makes it: ``ParagraphChunker.version``
goes from 1 to 2 (and, for one document, its spans really change). Because
``CHUNKS_CODE_VERSION`` is computed from ``CHUNKER_VERSIONS`` when ``assets/chunks.py`` is
imported, a new code location would carry the new code version; in-process the test
rebuilds the ``chunks`` asset with it through ``AssetsDefinition.map_asset_specs``.

Staleness is read the way the UI reads it: Dagster's ``CachingStaleStatusResolver`` over
the instance and the new asset graph (there is no public API for "unsynced").
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleCauseCategory, StaleStatus
from dagster._core.loader import LoadingContextForTest

from ragspine_assets.assets import ALL_ASSETS, chunks
from ragspine_index.pipeline import CHUNKS_CODE_VERSION
from ragspine_index.chunking import CHUNKER_VERSIONS, ParagraphChunker
from ragspine_assets.definitions import ingest_job, make_resources
from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_core import schema
from ragspine_query.library import open_library

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "raw" / "sample"
LIBRARIES = {
    # "alpha" holds the one document whose chunks the new chunker version really changes
    "alpha": ["investor-faq.md", "acme-cn-hr-faq.md", "reports/acme-cn-2024q2-earnings.md", "board-minutes-2024-11.md"],
    "beta": ["policies/acme-anti-bribery-policy.md", "policies/acme-data-security-measures.md", "peer-comparison-2024.md"],
}
CHANGED_DOC = "investor-faq"
# Dagster's SQLite storage commits every event; on tmpfs those fsyncs are free (~5 ms each on disk)
FAST_TMP = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
DOWNSTREAM = ("index_text", "bm25_index", "chunk_embeddings", "index_manifest")


def stale_resolver(instance: dg.DagsterInstance, defs: dg.Definitions) -> CachingStaleStatusResolver:
    return CachingStaleStatusResolver(instance, defs.resolve_asset_graph(), LoadingContextForTest(instance))


def statuses(instance: dg.DagsterInstance, defs: dg.Definitions, library: str) -> dict[str, StaleStatus]:
    resolver = stale_resolver(instance, defs)
    return {a.key.to_user_string(): resolver.get_status(a.key, library) for a in ALL_ASSETS}


def materialize_all(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, dict[str, dict]]:
    """What a backfill over every library partition does: one ingest_job run per partition."""
    job = defs.resolve_job_def("ingest_job")
    out: dict[str, dict[str, dict]] = {}
    for library in instance.get_dynamic_partitions(LIBRARIES_PARTITION):
        result = job.execute_in_process(partition_key=library, instance=instance)
        assert result.success
        out[library] = {
            node: {k: v.value for k, v in result.asset_materializations_for_node(node)[0].metadata.items()}
            for node in ("chunks", "index_text", "bm25_index", "chunk_embeddings", "index_manifest")
        }
    return out


def definitions_with(assets: list, env: dict[str, str]) -> dg.Definitions:
    # in-process execution: the executor does not matter here, the asset graph does
    return dg.Definitions(assets=assets, jobs=[ingest_job], resources=make_resources(env))


@pytest.fixture
def workspace(tmp_path: Path):
    data = tmp_path / "data"
    for library, files in LIBRARIES.items():
        for rel in files:
            dst = data / "raw" / library / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(SAMPLE / rel, dst)
    home = Path(tempfile.mkdtemp(prefix="dagster_home-", dir=FAST_TMP))
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    instance = dg.DagsterInstance.local_temp(str(home))
    instance.add_dynamic_partitions(LIBRARIES_PARTITION, sorted(LIBRARIES))
    env = {"RAGSPINE_DATA_ROOT": str(data), "RAGSPINE_EMBEDDING": "deterministic"}
    yield data, instance, env
    instance.dispose()
    shutil.rmtree(home, ignore_errors=True)


def change_the_chunker(monkeypatch: pytest.MonkeyPatch) -> dg.AssetsDefinition:
    """Bump the paragraph chunker to version 2; only CHANGED_DOC gets different spans.

    Returns the ``chunks`` asset rebuilt with the code version a fresh import would compute.
    """
    original_chunk = ParagraphChunker.chunk

    def chunk_v2(self, doc):
        if doc.doc_id == CHANGED_DOC:
            return original_chunk(dataclasses.replace(self, max_chars=240, overlap_chars=40), doc)
        return original_chunk(self, doc)

    monkeypatch.setattr(ParagraphChunker, "version", "2")
    monkeypatch.setattr(ParagraphChunker, "chunk", chunk_v2)
    monkeypatch.setitem(CHUNKER_VERSIONS, "paragraph", "2")
    assert "paragraph@1" in CHUNKS_CODE_VERSION, CHUNKS_CODE_VERSION
    new_code_version = CHUNKS_CODE_VERSION.replace("paragraph@1", "paragraph@2")
    pipeline_module = importlib.import_module("ragspine_index.pipeline")
    monkeypatch.setitem(pipeline_module.CODE_VERSIONS, "chunks", new_code_version)
    return chunks.map_asset_specs(lambda spec: spec.replace_attributes(code_version=new_code_version))


def test_chunker_change_is_unsynced_then_backfill_rebuilds_without_reembedding(workspace, monkeypatch) -> None:
    data, instance, env = workspace
    defs_v1 = definitions_with(list(ALL_ASSETS), env)
    first = materialize_all(defs_v1, instance)
    for library in LIBRARIES:
        assert set(statuses(instance, defs_v1, library).values()) == {StaleStatus.FRESH}
        assert first[library]["chunk_embeddings"]["embedded"] > 0
    snapshots_v1 = {lib: first[lib]["index_manifest"]["snapshot_id"] for lib in LIBRARIES}
    with open_library(data / "artifacts" / "alpha") as lib:
        texts_v1 = {r[0]: r[1] for r in lib.execute_read(f"SELECT chunk_id, index_text FROM {schema.CHUNK_TABLE}")}

    # -- the developer bumps the chunker; the code location reloads -----------------------
    chunks_v2 = change_the_chunker(monkeypatch)
    assert chunks_v2.code_versions_by_key[chunks.key] != CHUNKS_CODE_VERSION
    defs_v2 = definitions_with([chunks_v2 if a is chunks else a for a in ALL_ASSETS], env)

    for library in LIBRARIES:
        status = statuses(instance, defs_v2, library)
        assert status["documents"] == StaleStatus.FRESH, "raw documents are untouched by a chunker change"
        assert status["chunks"] == StaleStatus.STALE, "the UI shows chunks as Unsynced"
        causes = stale_resolver(instance, defs_v2).get_stale_causes(chunks.key, library)
        assert [(c.category, c.reason) for c in causes] == [(StaleCauseCategory.CODE, "has a new code version")]
        # Dagster does not propagate "unsynced" through a parent that has not been re-materialized:
        # downstream turns unsynced only once chunks produces a new data version.
        assert all(status[name] == StaleStatus.FRESH for name in DOWNSTREAM), status

    # -- "Materialize unsynced" on beta: only chunks runs ----------------------------------
    before = stale_resolver(instance, defs_v2).get_current_data_version(chunks.key, "beta")
    only_chunks = dg.materialize([chunks_v2 if a is chunks else a for a in ALL_ASSETS], selection=[chunks.key],
                                 partition_key="beta", instance=instance, resources=make_resources(env))
    chunks_meta = {k: v.value for k, v in only_chunks.asset_materializations_for_node("chunks")[0].metadata.items()}
    after = stale_resolver(instance, defs_v2).get_current_data_version(chunks.key, "beta")
    status = statuses(instance, defs_v2, "beta")
    assert status["chunks"] == StaleStatus.FRESH
    # The new version gives beta's documents byte-identical spans; chunk ids do not hash the
    # chunker version, so nothing is rewritten, the data version stays and nothing cascades.
    assert chunks_meta["documents_changed"] == 0 and chunks_meta["chunks_written"] == 0
    assert chunks_meta["documents_rechunked_identical"] == len(LIBRARIES["beta"])
    assert after == before
    assert all(status[name] == StaleStatus.FRESH for name in DOWNSTREAM), status

    # -- backfill: every asset, every library partition ------------------------------------
    second = materialize_all(defs_v2, instance)

    for library in LIBRARIES:
        assert set(statuses(instance, defs_v2, library).values()) == {StaleStatus.FRESH}
        assert second[library]["chunks"]["chunker"] == "paragraph@2"
        assert second[library]["index_manifest"]["chunker"] == "paragraph@2"
        assert second[library]["index_manifest"]["snapshot_id"] != snapshots_v1[library]
    # alpha: every document is re-chunked, but only CHANGED_DOC's chunks differ, ...
    assert second["alpha"]["chunks"]["documents_changed"] == 1
    assert second["alpha"]["chunks"]["documents_rechunked_identical"] == len(LIBRARIES["alpha"]) - 1
    # ... beta's were re-chunked by the partial run above, so the backfill leaves them alone
    assert second["beta"]["chunks"]["documents_unchanged"] == len(LIBRARIES["beta"])
    assert second["beta"]["chunks"]["chunks_written"] == 0

    # beta: identical spans, so nothing is re-embedded
    beta = second["beta"]["chunk_embeddings"]
    assert beta["embedded"] == 0 and beta["reused_from_cache"] == beta["vectors"] > 0

    # alpha: only CHANGED_DOC's new texts are embedded; the other documents' vectors are reused
    with open_library(data / "artifacts" / "alpha") as lib:
        # RESTRICTED chunks are never embedded, so they are left out of the vector accounting
        rows = [(r[0], r[1]) for r in lib.execute_read(
            f"SELECT doc_id, index_text FROM {schema.CHUNK_TABLE} WHERE upper(sensitivity) != 'RESTRICTED'")]
    new_texts = {t for d, t in rows if d == CHANGED_DOC} - set(texts_v1.values())
    alpha = second["alpha"]["chunk_embeddings"]
    assert new_texts and alpha["embedded"] == len(new_texts)
    assert alpha["embedded"] + alpha["reused_from_cache"] == len({t for _, t in rows})
    # unchanged documents keep their exact text and their chunk ids
    with open_library(data / "artifacts" / "alpha") as lib:
        ids_v2 = {r[0]: r[1] for r in lib.execute_read(f"SELECT chunk_id, doc_id FROM {schema.CHUNK_TABLE}")}
    assert {t for d, t in rows if d != CHANGED_DOC} <= set(texts_v1.values())
    assert {c for c, d in ids_v2.items() if d != CHANGED_DOC} <= set(texts_v1)

    # -- a second backfill with nothing changed rewrites and re-embeds nothing ---------------
    third = materialize_all(defs_v2, instance)
    for library in LIBRARIES:
        assert third[library]["chunks"]["documents_unchanged"] == len(LIBRARIES[library])
        assert third[library]["chunks"]["chunks_written"] == 0
        assert third[library]["chunk_embeddings"]["embedded"] == 0
        assert third[library]["index_manifest"]["changed"] is False
        assert third[library]["index_manifest"]["snapshot_id"] == second[library]["index_manifest"]["snapshot_id"]
        assert published_artifacts(third[library]) == published_artifacts(second[library])


def published_artifacts(run_metadata: dict[str, dict]) -> dict[str, str | None]:
    manifest = json.loads((Path(run_metadata["index_manifest"]["snapshot_dir"]) / schema.MANIFEST_FILE).read_text("utf-8"))
    return {name: a["sha256"] for name, a in manifest["artifacts"].items()}


def test_identical_reingest_publishes_no_new_snapshot(workspace) -> None:
    _, instance, env = workspace
    job = definitions_with(list(ALL_ASSETS), env).resolve_job_def("ingest_job")
    runs = [job.execute_in_process(partition_key="beta", instance=instance) for _ in range(2)]
    assert runs[1].output_for_node("index_manifest")["changed"] is False
