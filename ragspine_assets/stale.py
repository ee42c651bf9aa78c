"""``stale_upstream_sensor``: publication verifies, Dagster re-materializes.

``index_manifest`` rebuilds nothing. Before it publishes, its blocking check
``artifacts_current`` verifies every upstream artifact against the chunks being published
(:func:`ragspine_index.artifact_freshness.verify_upstream`); in a partial run (say
``documents, chunks, index_text, bm25_index, index_manifest`` after a reclassification)
the vectors, summary tree or relation graph of an earlier run are stale, so the step fails
with a message naming them, and its failure's metadata carries them
(:data:`STALE_ASSETS_KEY`). Nothing is published; the previous snapshot keeps serving.

This sensor reads that failure from the event log: for each library partition whose
latest run failed so, it requests one ``ingest_job`` run of exactly the stale assets and
``index_manifest`` (run key ``<library>:stale-upstream:<failed run id>``, so one request
per failed run; tags ``ragspine/trigger=stale-upstream`` and ``ragspine/stale-of=<run
id>``). Those are ordinary Dagster runs: they show in the UI with their materializations,
checks and logs. If such a run itself fails on stale upstream, the sensor requests no
more and says so on its tick (something rewrites the chunks under the runs; ingest the
library by hand).

``ragspine ingest`` materializes every asset in one run, so its publication never finds
stale upstream.
"""

from __future__ import annotations

import dagster as dg

from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_assets.runs import TAG_TRIGGER, in_flight_runs, latest_run

#: The key of the ``index_manifest`` failure metadata naming the stale assets ("a, b").
STALE_ASSETS_KEY = "stale_assets"
TRIGGER_STALE = "stale-upstream"
#: The run whose publication found the stale upstream.
TAG_STALE_OF = "ragspine/stale-of"
STALE_SENSOR_INTERVAL_SECONDS = 30
PUBLICATION_STEP = "index_manifest"


def stale_assets_of(instance: dg.DagsterInstance, run_id: str) -> tuple[str, ...]:
    """The upstream assets ``index_manifest`` found stale when it failed in run ``run_id``
    (from the step failure's metadata in the event log); empty when it did not fail so."""
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = record.dagster_event
        if event is None or event.step_key != PUBLICATION_STEP:
            continue
        failure = event.step_failure_data.user_failure_data
        value = failure.metadata.get(STALE_ASSETS_KEY) if failure is not None else None
        if value is not None:
            return tuple(name.strip() for name in str(value.value).split(",") if name.strip())
    return ()


def stale_upstream_request(instance: dg.DagsterInstance, library_id: str) -> tuple[dg.RunRequest | None, str]:
    """``(the run to request, a note for the tick)`` for one library: a run of exactly the
    stale assets and ``index_manifest`` when the library's latest run failed on stale
    upstream; ``(None, why not)`` or ``(None, "")`` otherwise."""
    run = latest_run(instance, library_id)
    if run is None or run.status != dg.DagsterRunStatus.FAILURE:
        return None, ""
    stale = stale_assets_of(instance, run.run_id)
    if not stale:
        return None, ""
    if run.tags.get(TAG_TRIGGER) == TRIGGER_STALE:
        return None, (f"{library_id}: run {run.run_id} re-materialized stale upstream and publication still found "
                      f"{', '.join(stale)} stale; no further run requested (ingest the library: ragspine ingest, "
                      "or materialize all its assets in the UI)")
    selection = [dg.AssetKey(name) for name in (*stale, PUBLICATION_STEP)]
    return dg.RunRequest(
        run_key=f"{library_id}:{TRIGGER_STALE}:{run.run_id}", partition_key=library_id, asset_selection=selection,
        tags={TAG_TRIGGER: TRIGGER_STALE, TAG_STALE_OF: run.run_id, "ragspine/library": library_id},
    ), f"{library_id}: run {run.run_id} found {', '.join(stale)} stale at publication; requesting a run of them and index_manifest"


@dg.sensor(
    name="stale_upstream_sensor",
    job_name="ingest_job",
    minimum_interval_seconds=STALE_SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=("When a library's publication (index_manifest) failed because upstream assets were stale for the "
                 "chunks being published, request one run of exactly those assets and index_manifest."),
)
def stale_upstream_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    requests: list[dg.RunRequest] = []
    libraries = sorted(context.instance.get_dynamic_partitions(LIBRARIES_PARTITION))
    for lib in libraries:
        if in_flight_runs(context.instance, lib):
            continue
        request, note = stale_upstream_request(context.instance, lib)
        if note:
            (context.log.info if request is not None else context.log.warning)(note)
        if request is not None:
            requests.append(request)
    return dg.SensorResult(run_requests=requests, skip_reason=None if requests else dg.SkipReason(
        f"no publication of {len(libraries)} libraries is waiting for stale upstream assets"))
