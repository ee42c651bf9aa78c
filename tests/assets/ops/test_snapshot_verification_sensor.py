"""Scheduled verification (issue 43): the sensor verifies every serving snapshot, records
the result as an observation of ``index_manifest`` (visible in the UI), requests a repair
run for a damaged one — at most MAX_REPAIR_RUNS per snapshot — and the repair run's
ingest publishes a verified snapshot."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from ragspine_core import schema
from ragspine_assets.resources import EmbeddingBackendResource, RagspineConfig
from ragspine_assets.verification import MAX_REPAIR_RUNS, TAG_REPAIR_OF, snapshot_verification_sensor
from tests.conftest import ingest
from tests.assets.ops.helpers import write_doc


def tick(ragspine: RagspineConfig, instance: dg.DagsterInstance) -> dg.SensorResult:
    with dg.build_sensor_context(instance=instance, resources={"ragspine": ragspine}) as context:
        result = snapshot_verification_sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def observed(instance: dg.DagsterInstance, result: dg.SensorResult) -> dict:
    [event] = result.asset_events
    assert isinstance(event, dg.AssetObservation) and event.asset_key == dg.AssetKey("index_manifest")
    return {"partition": event.partition, **{k: v.value for k, v in event.metadata.items()}}


def test_the_sensor_verifies_records_and_requests_bounded_repairs(data_root: Path, instance) -> None:
    raw = data_root / "raw" / "alpha"
    write_doc(raw / "a.md", "Alpha", "Alpha revenue grew in the north region.")
    ingest(raw, instance=instance)
    ragspine = RagspineConfig(data_root=str(data_root), embedding_backend=EmbeddingBackendResource(spec="none"))
    result = tick(ragspine, instance)
    seen = observed(instance, result)
    assert seen["partition"] == "alpha" and seen["verification"] == "ok" and seen["files"] > 5
    assert not result.run_requests and "1 of 1 serving snapshot(s) verified intact" in str(result.skip_reason)

    snap = (data_root / "artifacts" / "alpha" / "current").resolve()
    victim = snap / schema.BM25_DIR / schema.BM25_IMPACTS
    raw_bytes = bytearray(victim.read_bytes())
    raw_bytes[len(raw_bytes) // 2] ^= 0x10
    with open(victim, "r+b") as fh:
        fh.write(bytes(raw_bytes))
    result = tick(ragspine, instance)
    seen = observed(instance, result)
    assert seen["verification"] == "damaged" and "impacts.npy" in seen["problem"] and seen["snapshot_id"] == snap.name
    [req] = result.run_requests
    assert req.partition_key == "alpha" and req.tags[TAG_REPAIR_OF] == snap.name
    # the daemon would launch it: the repair run is an ingest of the unchanged sources
    summary = ingest(raw, instance=instance)
    assert summary.snapshot_id == snap.name
    after = tick(ragspine, instance)
    assert observed(instance, after)["verification"] == "ok" and not after.run_requests

    # a snapshot that stays damaged gets at most MAX_REPAIR_RUNS repair runs
    with open(victim, "r+b") as fh:
        fh.write(bytes(raw_bytes))
    job = dg.GraphDefinition(name="noop").to_job()
    for _ in range(MAX_REPAIR_RUNS):
        instance.create_run_for_job(job, status=dg.DagsterRunStatus.FAILURE,
                                    tags={"dagster/partition": "alpha", TAG_REPAIR_OF: snap.name})
    stuck = tick(ragspine, instance)
    assert not stuck.run_requests and f"still damaged after {MAX_REPAIR_RUNS} repair runs" in str(stuck.skip_reason)
    assert "docs/operations.md" in str(stuck.skip_reason)


def test_the_sensor_is_in_the_code_location() -> None:
    from ragspine_assets.definitions import defs

    sensor = defs.get_sensor_def("snapshot_verification_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING and sensor.job_name == "ingest_job"
