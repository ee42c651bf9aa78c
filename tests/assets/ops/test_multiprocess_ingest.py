"""Scale-out: ingest_job under the multiprocess executor, two library partitions at once.

What this runs: two ``execute_job`` calls in parallel threads against one persistent
local instance (``DagsterInstance.local_temp``), one run per library partition. Each run
uses the definitions' multiprocess executor, so every step runs in its own process
(forked from a forkserver that has imported Dagster and this code location), rebuilds
the job through ``build_reconstructable_job("ragspine_assets.definitions",
"load_ingest_job", ...)`` and hands outputs over through the filesystem IO manager.
That is what the daemon's run launcher does with a sensor or backfill run, minus the
daemon (``docs/operations.md`` shows the daemon path).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import dagster as dg
import pytest

from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_query.library import open_library

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "data" / "raw" / "sample"


def make_library(raw: Path, name: str, files: list[str]) -> None:
    for rel in files:
        dst = raw / name / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SAMPLE / rel, dst)


def test_two_libraries_ingest_in_parallel_under_multiprocess_executor(data_root: Path, local_instance) -> None:
    data, instance = data_root, local_instance
    make_library(data / "raw", "finance", ["reports/acme-cn-2024q2-earnings.md", "investor-faq.md", "press-releases.jsonl"])
    make_library(data / "raw", "policies", ["policies/acme-anti-bribery-policy.md", "policies/acme-data-security-measures.md"])
    instance.add_dynamic_partitions(LIBRARIES_PARTITION, ["finance", "policies"])
    recon = dg.build_reconstructable_job(
        "ragspine_assets.definitions", "load_ingest_job",
        reconstructable_kwargs={"RAGSPINE_DATA_ROOT": str(data), "RAGSPINE_EMBEDDING": "none", "RAGSPINE_MAX_CONCURRENT": "2"},
        reconstructor_working_directory=str(REPO),
    )
    results: dict[str, dg.JobExecutionResult] = {}
    errors: list[BaseException] = []

    def run(library: str) -> None:
        thread_instance = dg.DagsterInstance.from_ref(instance.get_ref())
        try:
            results[library] = dg.execute_job(recon, instance=thread_instance, tags={"dagster/partition": library})
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)
        finally:
            thread_instance.dispose()

    threads = [threading.Thread(target=run, args=(lib,)) for lib in ("finance", "policies")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not errors, errors
    assert all(not t.is_alive() for t in threads), "a run did not finish within 240 s"

    for library, result in results.items():
        assert result.success, f"{library} run failed"
        run = instance.get_run_by_id(result.run_id)
        assert run.tags["dagster/partition"] == library
        assert instance.get_run_stats(result.run_id).steps_succeeded == 6
        # every step ran in its own process: the executor really was multiprocess
        step_pids = {e.dagster_event.pid for e in instance.all_logs(result.run_id) if e.is_dagster_event and e.dagster_event.is_step_success}
        assert len(step_pids) == 6, step_pids
    records = [instance.get_run_record_by_id(r.run_id) for r in results.values()]
    assert max(r.start_time for r in records) < min(r.end_time for r in records), "the two runs overlapped"
    with open_library(data / "artifacts" / "finance") as lib:
        assert lib.library_id == "finance" and lib.n_chunks > 0
    with open_library(data / "artifacts" / "policies") as lib:
        assert lib.library_id == "policies" and lib.n_chunks > 0
