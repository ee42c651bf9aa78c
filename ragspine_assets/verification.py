"""``snapshot_verification_sensor``: verify every library's serving snapshot on a timer,
and request a repair run when one is damaged.

Each evaluation (every :data:`VERIFY_INTERVAL_SECONDS`, default six hours) checks every
file of each library partition's ``current`` snapshot against its manifest (what
``ragspine snapshots <library> --verify`` does; files hard-linked into several
snapshots are read once). The result is recorded in the UI as an observation of the
``index_manifest`` asset for that partition (``verification``: ``ok`` or ``damaged``,
the snapshot id, files and bytes checked, the problem found). A damaged snapshot gets an
``ingest_job`` run of its library (tags ``ragspine/trigger=repair`` and
``ragspine/repair-of=<snapshot id>``): an ingest of unchanged sources rebuilds every
damaged file and publishes a verified snapshot. At most :data:`MAX_REPAIR_RUNS` repair
runs are requested per damaged snapshot; after that the tick says so (the error of the
last run names the file and the manual repair, docs/operations.md).
"""

from __future__ import annotations

import dagster as dg

from ragspine_core.errors import IndexCorruptError, IndexNotFoundError
from ragspine_core.integrity import verify_snapshot

from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_assets.resources import RagspineConfig
from ragspine_assets.runs import TAG_PARTITION, TAG_TRIGGER, in_flight_runs

VERIFY_INTERVAL_SECONDS = 6 * 3600
MAX_REPAIR_RUNS = 3
TAG_REPAIR_OF = "ragspine/repair-of"


def verify_library(ragspine: RagspineConfig, library_id: str) -> dict:
    """``{"verification": "ok" | "damaged" | "unpublished", "snapshot_id", ...}`` of one library."""
    paths = ragspine.library_paths(library_id)
    if not paths.current.is_symlink():
        return {"verification": "unpublished"}
    target = paths.current.resolve()
    sid = target.name
    try:
        stats = verify_snapshot(target, full=True)
    except (IndexCorruptError, IndexNotFoundError) as exc:
        return {"verification": "damaged", "snapshot_id": sid, "problem": " ".join(str(exc).split(";")[0].split())}
    return {"verification": "ok", "snapshot_id": sid, "files": stats["files"], "bytes_checked": stats["hashed_bytes"]}


def repair_runs(instance: dg.DagsterInstance, library_id: str, snapshot_id: str) -> int:
    """How many repair runs were already requested for this damaged snapshot."""
    return len(instance.get_run_ids(filters=dg.RunsFilter(tags={TAG_PARTITION: library_id, TAG_REPAIR_OF: snapshot_id})))


@dg.sensor(
    name="snapshot_verification_sensor",
    job_name="ingest_job",
    minimum_interval_seconds=VERIFY_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Verify every file of each library's serving snapshot (sha256 against its manifest); a damaged "
                f"one gets a repair run (an ingest), at most {MAX_REPAIR_RUNS} per snapshot.",
)
def snapshot_verification_sensor(context: dg.SensorEvaluationContext, ragspine: RagspineConfig):
    events: list[dg.AssetObservation] = []
    requests: list[dg.RunRequest] = []
    notes: list[str] = []
    for lib in sorted(context.instance.get_dynamic_partitions(LIBRARIES_PARTITION)):
        found = verify_library(ragspine, lib)
        if found["verification"] == "unpublished":
            continue
        events.append(dg.AssetObservation(asset_key="index_manifest", partition=lib, metadata=found))
        if found["verification"] != "damaged":
            continue
        sid = found["snapshot_id"]
        if in_flight_runs(context.instance, lib):
            notes.append(f"{lib}: snapshot {sid} is damaged; a run of it is in flight")
            continue
        done = repair_runs(context.instance, lib, sid)
        if done >= MAX_REPAIR_RUNS:
            notes.append(f"{lib}: snapshot {sid} is still damaged after {done} repair runs ({found['problem']}); "
                         "repair it by hand (docs/operations.md, 'Repair a damaged library')")
            continue
        requests.append(dg.RunRequest(run_key=f"{lib}:repair:{sid}:{done + 1}", partition_key=lib,
                                      tags={TAG_REPAIR_OF: sid, TAG_TRIGGER: "repair", "ragspine/library": lib}))
        notes.append(f"{lib}: snapshot {sid} is damaged ({found['problem']}); repair run {done + 1}/{MAX_REPAIR_RUNS} "
                     "requested")
    for note in notes:
        context.log.warning(note)
    ok = sum(1 for e in events if e.metadata["verification"].value == "ok")
    summary = f"{ok} of {len(events)} serving snapshot(s) verified intact" + (f"; {'; '.join(notes)}" if notes else "")
    return dg.SensorResult(run_requests=requests, asset_events=events, skip_reason=None if requests else summary)
