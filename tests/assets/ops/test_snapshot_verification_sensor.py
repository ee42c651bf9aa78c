"""Scheduled verification (issue 43): the sensor verifies every serving snapshot, records
the result as an observation of ``index_manifest`` (visible in the UI), requests a repair
run for a damaged one — at most MAX_REPAIR_RUNS per snapshot — and the repair run's
ingest publishes a verified snapshot."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

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


# -- under a real dagster-daemon, read back through Dagster's GraphQL API (what the UI shows) -----------
GRAPHQL = """
query {
  assetOrError(assetKey: {path: ["index_manifest"]}) {
    ... on Asset { assetObservations(partitions: ["alpha"]) {
      partition metadataEntries { label ... on TextMetadataEntry { text } } } }
  }
  runsOrError(filter: {tags: [{key: "ragspine/trigger", value: "repair"}]}) {
    ... on Runs { results { runId status tags { key value } } }
  }
  sensorOrError(sensorSelector: {repositoryLocationName: "ragspine_assets.definitions:defs",
                                 repositoryName: "__repository__", sensorName: "snapshot_verification_sensor"}) {
    __typename ... on Sensor { sensorState { status ticks(limit: 10) { status runIds } } }
  }
}
"""
DAEMON_REPAIR_S = 300  # daemon start, the sensor's first tick (at once), the repair run in a subprocess
CLI_TIMEOUT_S = 180


@pytest.mark.slow
def test_the_daemon_runs_the_verification_repairs_and_the_ui_shows_it(tmp_path: Path) -> None:
    """``dagster-daemon run`` on a SQLite instance: the verification sensor (RUNNING by
    default) ticks at once, finds the damaged serving snapshot, records ``damaged`` on
    ``index_manifest`` and launches one repair run; that run republishes a verified snapshot
    of the same id. The observation, the tick's run and the run's success are read back with
    ``dagster-graphql`` (the webserver's schema). Every wait is bounded; the daemon is
    stopped by process id."""
    import json
    import os
    import shutil
    import subprocess

    from ragspine_core.integrity import verify_snapshot
    from tests.assets.ops.helpers import make_dagster_home
    from tests.conftest import REPO_ROOT, python_env
    from tests.ops.services import VENV_BIN, spawn, stop_group, tail, wait_until

    data = tmp_path / "data"
    raw = data / "raw" / "alpha"
    write_doc(raw / "a.md", "Alpha", "Alpha revenue grew in the north region.")
    home = make_dagster_home()
    instance = dg.DagsterInstance.local_temp(str(home))
    daemon = None
    try:
        ingest(raw, instance=instance)  # published, and 'alpha' is a partition of this instance
        snap = (data / "artifacts" / "alpha" / "current").resolve()
        victim = snap / schema.BM25_DIR / schema.BM25_IMPACTS
        damaged = bytearray(victim.read_bytes())
        damaged[len(damaged) // 2] ^= 0x10
        with open(victim, "r+b") as fh:
            fh.write(bytes(damaged))
        env = python_env(DAGSTER_HOME=str(home), RAGSPINE_DATA_ROOT=str(data), RAGSPINE_EMBEDDING="none",
                         RAGSPINE_EXECUTOR="in_process", PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        log = tmp_path / "daemon.log"
        daemon = spawn([f"{VENV_BIN}/dagster-daemon", "run", "-w", str(REPO_ROOT / "workspace.yaml")], log=log, env=env,
                       cwd=REPO_ROOT)

        def repaired() -> bool:
            assert daemon is not None and daemon.poll() is None, f"dagster-daemon exited:\n{tail(log)}"
            runs = instance.get_runs(filters=dg.RunsFilter(tags={TAG_REPAIR_OF: snap.name}))
            bad = [r for r in runs if r.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)]
            assert not bad, f"repair run {bad[0].run_id} ended {bad[0].status}:\n{tail(log)}"
            return any(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)

        wait_until(repaired, DAEMON_REPAIR_S, "the daemon's repair run of 'alpha'", interval=1.0, on_timeout=lambda: tail(log))
        current = (data / "artifacts" / "alpha" / "current").resolve()
        assert current.name == snap.name  # the same content: the same snapshot id, its files rebuilt
        verify_snapshot(current, full=True)

        # what the UI shows, through the same GraphQL schema
        out = subprocess.run([f"{VENV_BIN}/dagster-graphql", "-w", str(REPO_ROOT / "workspace.yaml"), "-t", GRAPHQL],
                             env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        assert out.returncode == 0, out.stderr[-3000:]
        answer = json.JSONDecoder().raw_decode(out.stdout, out.stdout.index("{"))[0]["data"]  # logs may follow
        seen = [{e["label"]: e.get("text") for e in o["metadataEntries"]}
                for o in answer["assetOrError"]["assetObservations"]]
        assert any(s.get("verification") == "damaged" and s.get("snapshot_id") == snap.name and "impacts.npy" in (s.get("problem") or "")
                   for s in seen), seen
        [run] = answer["runsOrError"]["results"]
        assert run["status"] == "SUCCESS" and {"key": TAG_REPAIR_OF, "value": snap.name} in run["tags"], run
        assert answer["sensorOrError"]["__typename"] == "Sensor", answer["sensorOrError"]
        state = answer["sensorOrError"]["sensorState"]
        assert state["status"] == "RUNNING" and any(run["runId"] in t["runIds"] for t in state["ticks"]), state
    finally:
        if daemon is not None:
            stop_group(daemon)
        instance.dispose()
        shutil.rmtree(home, ignore_errors=True)
    assert daemon is not None and daemon.poll() is not None
