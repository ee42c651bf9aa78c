"""``reingest_schedule``: periodic re-ingestion of every known library partition.

The sensor reacts to file changes; the schedule is the safety net (changes made while the
sensor was off, a new embedding model behind ``auto``, a chunker change you want rolled
out overnight). Re-ingesting unchanged content is cheap: only changed documents are
re-chunked, vectors come from the cache, and an identical snapshot is not re-published.
"""

from __future__ import annotations

import dagster as dg

from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_assets.resources import RagspineConfig

DEFAULT_REINGEST_CRON = "0 3 * * *"


def build_reingest_schedule(cron_schedule: str = DEFAULT_REINGEST_CRON, *, timezone: str = "UTC") -> dg.ScheduleDefinition:
    """The re-ingestion schedule on ``cron_schedule`` (the cron string is read by definitions.py).

    Each tick requests one ``ingest_job`` run per library partition whose folder still
    exists, with run key ``<library>@<scheduled time>`` so a re-evaluated tick never
    launches a second run for the same slot.
    """

    @dg.schedule(
        name="reingest_schedule",
        cron_schedule=cron_schedule,
        execution_timezone=timezone,
        job_name="ingest_job",
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Re-ingest every library partition on '{cron_schedule}' ({timezone}).",
    )
    def reingest_schedule(context: dg.ScheduleEvaluationContext, ragspine: RagspineConfig):
        libraries = sorted(context.instance.get_dynamic_partitions(LIBRARIES_PARTITION))
        on_disk = set(ragspine.libraries_on_disk())
        missing = [lib for lib in libraries if lib not in on_disk]
        if missing:
            context.log.info(f"not re-ingesting {missing}: their folders are gone from {ragspine.raw_dir()}")
        present = [lib for lib in libraries if lib in on_disk]
        if not present:
            return dg.SkipReason(f"no library partition has a folder under {ragspine.raw_dir()}")
        slot = context.scheduled_execution_time.isoformat() if context.scheduled_execution_time else "manual"
        return [
            dg.RunRequest(run_key=f"{lib}@{slot}", partition_key=lib, tags={"ragspine/library": lib, "ragspine/trigger": "schedule"})
            for lib in present
        ]

    return reingest_schedule
