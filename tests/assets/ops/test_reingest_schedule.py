"""reingest_schedule: one run per known library, stable run keys per scheduled slot."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest

from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_assets.schedules import build_reingest_schedule

from tests.assets.ops.helpers import write_doc

SLOT = datetime(2025, 3, 1, 3, 0, tzinfo=timezone.utc)


@pytest.fixture
def instance(local_instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """Schedule contexts need a persistent instance (an ephemeral one has no instance ref)."""
    return local_instance


def evaluate(schedule: dg.ScheduleDefinition, instance, ragspine, when: datetime = SLOT):
    # closed as a context manager: an unclosed one tears its resources down at garbage
    # collection, resetting Dagster's process-wide defs-state storage in some later test
    with dg.build_schedule_context(instance=instance, scheduled_execution_time=when, resources={"ragspine": ragspine}) as context:
        return schedule(context)


def test_schedule_requests_every_known_library(data_root: Path, ragspine, instance) -> None:
    for lib in ("alpha", "beta"):
        write_doc(data_root / "raw" / lib / "a.md", lib.title(), f"{lib} text.")
    instance.add_dynamic_partitions(LIBRARIES_PARTITION, ["alpha", "beta"])

    requests = evaluate(build_reingest_schedule(), instance, ragspine)

    assert [r.partition_key for r in requests] == ["alpha", "beta"]
    assert [r.run_key for r in requests] == [f"alpha@{SLOT.isoformat()}", f"beta@{SLOT.isoformat()}"]
    assert all(r.tags["ragspine/trigger"] == "schedule" for r in requests)


def test_run_keys_are_stable_per_slot_and_differ_between_slots(data_root: Path, ragspine, instance) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha text.")
    instance.add_dynamic_partitions(LIBRARIES_PARTITION, ["alpha"])
    schedule = build_reingest_schedule()

    first = [r.run_key for r in evaluate(schedule, instance, ragspine)]
    retried = [r.run_key for r in evaluate(schedule, instance, ragspine)]
    next_day = [r.run_key for r in evaluate(schedule, instance, ragspine, SLOT.replace(day=2))]

    assert first == retried
    assert first != next_day


def test_partition_without_folder_is_skipped(data_root: Path, ragspine, instance) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha text.")
    instance.add_dynamic_partitions(LIBRARIES_PARTITION, ["alpha", "retired"])

    requests = evaluate(build_reingest_schedule(), instance, ragspine)

    assert [r.partition_key for r in requests] == ["alpha"]


def test_no_libraries_is_a_skip(ragspine, instance) -> None:
    result = evaluate(build_reingest_schedule(), instance, ragspine)
    assert isinstance(result, dg.SkipReason)
