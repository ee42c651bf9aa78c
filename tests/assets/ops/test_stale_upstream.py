"""Publication verifies, Dagster re-materializes (issue 39).

A partial run after a reclassification (``documents, chunks, index_text, bm25_index,
index_manifest``) hands publication the vectors, tree and graph of an earlier run. The
``index_manifest`` step rebuilds nothing: it fails its blocking check naming the stale
assets, publishes nothing, and ``stale_upstream_sensor`` requests a run of exactly those
and ``index_manifest``; that run, executed on the same SQLite instance, materializes them
in a run of its own (read back from the instance's event log) and publishes.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from ragspine_assets.definitions import build_definitions
from ragspine_assets.stale import STALE_ASSETS_KEY, TAG_STALE_OF, TAG_TRIGGER, TRIGGER_STALE, stale_upstream_request, stale_upstream_sensor
from ragspine_query.library import open_library
from tests.conftest import RAGSPINE_ENV_VARS, ingest

pytestmark = pytest.mark.slow

PARTIAL = ("documents", "chunks", "index_text", "bm25_index", "index_manifest")
STALE = ("chunk_embeddings", "summary_tree", "relation_graph")


def _doc(i: int, sensitivity: str = "PUBLIC") -> str:
    topics = ["canteen menu", "parking spaces", "garden benches", "printer toner", "bicycle racks", "coffee beans"]
    t = topics[i % len(topics)]
    return (f"---\nsensitivity: {sensitivity}\n---\n# Note {i}\n\nThe {t} were reviewed this week by Facilities "
            f"Office. Staff asked about the {t} again. The {t} budget stays flat next year.\n")


def tick(instance: dg.DagsterInstance) -> dg.SensorResult:
    with dg.build_sensor_context(instance=instance) as context:
        result = stale_upstream_sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def materialized(instance: dg.DagsterInstance, run_id: str) -> set[str]:
    return {r.dagster_event.asset_key.to_user_string()
            for r in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)}


def test_stale_upstream_is_rematerialized_in_its_own_run(tmp_path: Path, monkeypatch, local_instance) -> None:
    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    instance = local_instance
    data = tmp_path / "data"
    raw = data / "raw" / "lib"
    raw.mkdir(parents=True)
    for i in range(6):
        (raw / f"open{i}.md").write_text(_doc(i), encoding="utf-8")
    ingest(raw, instance=instance, embedding="deterministic")
    current = data / "artifacts" / "lib" / "current"
    first = current.resolve().name
    assert not tick(instance).run_requests, "a successful run leaves nothing to re-materialize"

    (raw / "open0.md").write_text(_doc(0, "RESTRICTED"), encoding="utf-8")  # a reclassification
    env = {"RAGSPINE_DATA_ROOT": str(data), "RAGSPINE_EMBEDDING": "deterministic", "RAGSPINE_EXECUTOR": "in_process"}
    job = build_definitions(env).resolve_job_def("ingest_job")
    partial = job.execute_in_process(instance=instance, partition_key="lib", raise_on_error=False,
                                     asset_selection=[dg.AssetKey(k) for k in PARTIAL])
    assert not partial.success
    assert materialized(instance, partial.run_id) == set(PARTIAL) - {"index_manifest"}, "publication rebuilt nothing"
    assert current.resolve().name == first, "nothing was published"
    [failure] = [e for e in partial.all_events if e.is_step_failure and e.step_key == "index_manifest"]
    message = failure.step_failure_data.user_failure_data.description or ""
    assert "artifacts_current" in message and "'lib'" in message and all(name in message for name in STALE)
    assert failure.step_failure_data.user_failure_data.metadata[STALE_ASSETS_KEY].value == ", ".join(STALE)

    [request] = tick(instance).run_requests
    assert request.partition_key == "lib"
    assert [k.to_user_string() for k in request.asset_selection] == [*STALE, "index_manifest"]
    assert request.tags[TAG_TRIGGER] == TRIGGER_STALE and request.tags[TAG_STALE_OF] == partial.run_id
    # what the daemon does with the request: a run of the job with that selection and tags
    repair = job.execute_in_process(instance=instance, partition_key=request.partition_key, tags=request.tags,
                                    asset_selection=list(request.asset_selection))
    assert repair.success and repair.run_id != partial.run_id
    assert materialized(instance, repair.run_id) == {*STALE, "index_manifest"}
    for name in (*STALE, "index_manifest"):
        latest = instance.get_latest_materialization_event(dg.AssetKey(name))
        assert latest is not None and latest.run_id == repair.run_id
    assert instance.get_run_by_id(repair.run_id).tags[TAG_STALE_OF] == partial.run_id
    assert current.resolve().name != first
    with open_library(data / "artifacts" / "lib") as lib:
        restricted = lib.restricted_mask()
        assert restricted.any(), "the reclassification is published"
        emb = lib.embeddings()
        assert emb is not None and not restricted[np.asarray(emb.rows)].any()
    assert not tick(instance).run_requests, "the latest run succeeded: nothing more is requested"

    # bounded: a run of the sensor's that again finds stale upstream is reported, not requested again
    (raw / "open1.md").write_text(_doc(1, "RESTRICTED"), encoding="utf-8")
    again = job.execute_in_process(instance=instance, partition_key="lib", raise_on_error=False,
                                   asset_selection=[dg.AssetKey(k) for k in PARTIAL],
                                   tags={TAG_TRIGGER: TRIGGER_STALE, TAG_STALE_OF: "an-earlier-run"})
    assert not again.success
    result = tick(instance)
    assert not result.run_requests and "no publication" in str(result.skip_reason)
    request_again, note = stale_upstream_request(instance, "lib")
    assert request_again is None and again.run_id in note and "no further run requested" in note

