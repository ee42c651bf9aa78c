"""Done-when: a new folder and a new file, through the sensor, publish; a deleted file is withdrawn."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from ragspine_assets.definitions import build_definitions
from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_assets.resources import EmbeddingBackendResource, RagspineConfig
from ragspine_assets.sensors import raw_files_sensor
from ragspine_core import schema
from ragspine_query.library import open_library

from tests.assets.ops.helpers import write_doc

pytestmark = pytest.mark.slow


def run_sensor_tick(defs: dg.Definitions, instance: dg.DagsterInstance, ragspine: RagspineConfig, cursor: str | None) -> tuple[str, list[str]]:
    """Evaluate one tick and do what the daemon does: add partitions, launch the runs."""
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources={"ragspine": ragspine}) as context:
        result = raw_files_sensor(context)
    for req in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    job = defs.resolve_job_def("ingest_job")
    launched = []
    for rr in result.run_requests:
        outcome = job.execute_in_process(partition_key=rr.partition_key, tags=rr.tags, instance=instance)
        assert outcome.success
        launched.append(rr.partition_key)
    return result.cursor, launched


def doc_ids(artifacts: Path) -> set[str]:
    with open_library(artifacts) as lib:
        return {r[0] for r in lib.execute_read(f"SELECT DISTINCT doc_id FROM {schema.CHUNK_TABLE}")}


def test_sensor_runs_publish_new_library_and_withdraw_deleted_file(data_root: Path, instance) -> None:
    env = {"RAGSPINE_DATA_ROOT": str(data_root), "RAGSPINE_EMBEDDING": "none"}
    defs = build_definitions(env)
    ragspine = RagspineConfig(data_root=str(data_root), embedding_backend=EmbeddingBackendResource(spec="none"))
    alpha = data_root / "raw" / "alpha"
    write_doc(alpha / "revenue.md", "Revenue", "Alpha revenue grew 12% on strong exports.")

    cursor, launched = run_sensor_tick(defs, instance, ragspine, None)
    assert launched == ["alpha"]
    assert instance.get_dynamic_partitions(LIBRARIES_PARTITION) == ["alpha"]
    assert doc_ids(data_root / "artifacts" / "alpha") == {"revenue"}

    # a new file in the library and a brand-new library folder
    write_doc(alpha / "hiring.md", "Hiring", "Alpha plans to hire 40 engineers.")
    write_doc(data_root / "raw" / "gamma" / "note.md", "Note", "Gamma opened a plant in Ohio.")
    cursor, launched = run_sensor_tick(defs, instance, ragspine, cursor)
    assert sorted(launched) == ["alpha", "gamma"]
    assert doc_ids(data_root / "artifacts" / "alpha") == {"revenue", "hiring"}
    assert doc_ids(data_root / "artifacts" / "gamma") == {"note"}

    # deleting a file withdraws its chunks from the next published index
    (alpha / "revenue.md").unlink()
    cursor, launched = run_sensor_tick(defs, instance, ragspine, cursor)
    assert launched == ["alpha"]
    assert doc_ids(data_root / "artifacts" / "alpha") == {"hiring"}

    # nothing changed: no run
    _, launched = run_sensor_tick(defs, instance, ragspine, cursor)
    assert launched == []
