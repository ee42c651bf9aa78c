"""Scale-out: ingest_job under the multiprocess executor, two library partitions at once.

What this runs: two ``dagster job execute -m ragspine_assets.definitions -j ingest_job``
processes started together against one persistent local instance (``DAGSTER_HOME``), one
run per library partition. That is how runs execute for real: the daemon's run launcher
gives each run its own process (``dagster api execute_run``), and an operator runs the
CLI. Each run uses the definitions' multiprocess executor, so every step runs in its own
process (forked from a forkserver that has imported Dagster and this code location) and
hands outputs over through the filesystem IO manager (``docs/operations.md`` shows the
daemon path).

Why not two ``execute_job`` calls in threads of one process: Dagster is not thread-safe
there. Every run's log manager calls ``logging.config.dictConfig`` (which takes logging's
module lock and then every handler's lock) while the other run's event-log handler holds
its own lock and needs the module lock (SQLAlchemy's ``Logger.isEnabledFor`` after the
cache reset): a lock-order deadlock that hung this test about one run in three.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ragspine_index.pipeline import STEPS
from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_query.library import open_library
from tests.conftest import PYTHON, python_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "data" / "raw" / "sample"
RUN_TIMEOUT_S = 240


def make_library(raw: Path, name: str, files: list[str]) -> None:
    for rel in files:
        dst = raw / name / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SAMPLE / rel, dst)


def start_run(library: str, *, home: str, data: Path, log: Path) -> subprocess.Popen:
    """``dagster job execute`` for one partition, in its own process (and process group)."""
    env = python_env(DAGSTER_HOME=home, RAGSPINE_DATA_ROOT=str(data), RAGSPINE_EMBEDDING="none",
                     RAGSPINE_MAX_CONCURRENT="2")
    cmd = [PYTHON, "-m", "dagster", "job", "execute", "-m", "ragspine_assets.definitions", "-j", "ingest_job",
           "--tags", json.dumps({"dagster/partition": library})]
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_all(procs: dict[str, subprocess.Popen], timeout: float) -> None:
    """Wait for every process; past ``timeout``, kill the stragglers' process groups and fail."""
    deadline = time.monotonic() + timeout
    try:
        for proc in procs.values():
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        pytest.fail(f"a run did not finish within {timeout:.0f} s")


def test_two_libraries_ingest_in_parallel_under_multiprocess_executor(data_root: Path, local_instance, tmp_path: Path) -> None:
    data, instance = data_root, local_instance
    make_library(data / "raw", "finance", ["reports/acme-cn-2024q2-earnings.md", "investor-faq.md", "press-releases.jsonl"])
    make_library(data / "raw", "policies", ["policies/acme-anti-bribery-policy.md", "policies/acme-data-security-measures.md"])
    instance.add_dynamic_partitions(LIBRARIES_PARTITION, ["finance", "policies"])

    logs = {lib: tmp_path / f"{lib}.log" for lib in ("finance", "policies")}
    procs = {lib: start_run(lib, home=instance.root_directory, data=data, log=logs[lib]) for lib in logs}
    wait_all(procs, RUN_TIMEOUT_S)
    for lib, proc in procs.items():
        assert proc.returncode == 0, f"{lib} run exited {proc.returncode}:\n{logs[lib].read_text(errors='replace')[-4000:]}"

    runs = {}
    for library in ("finance", "policies"):
        found = [r for r in instance.get_runs() if r.tags.get("dagster/partition") == library]
        assert len(found) == 1, found
        run = runs[library] = found[0]
        assert run.job_name == "ingest_job" and run.is_success, run.status
        assert instance.get_run_stats(run.run_id).steps_succeeded == len(STEPS)
        # every step ran in its own process, none in the CLI process: the executor really was multiprocess
        step_pids = {e.dagster_event.pid for e in instance.all_logs(run.run_id) if e.is_dagster_event and e.dagster_event.is_step_success}
        assert len(step_pids) == len(STEPS) and procs[library].pid not in step_pids, step_pids
    # the two runs ran in different processes and overlapped in time
    run_pids = {lib: {e.dagster_event.pid for e in instance.all_logs(r.run_id)
                      if e.is_dagster_event and e.dagster_event.event_type_value == "PIPELINE_START"} for lib, r in runs.items()}
    assert run_pids["finance"] == {procs["finance"].pid} and run_pids["policies"] == {procs["policies"].pid}, run_pids
    records = [instance.get_run_record_by_id(r.run_id) for r in runs.values()]
    assert max(r.start_time for r in records) < min(r.end_time for r in records), "the two runs did not overlap"
    with open_library(data / "artifacts" / "finance") as lib:
        assert lib.library_id == "finance" and lib.n_chunks > 0
    with open_library(data / "artifacts" / "policies") as lib:
        assert lib.library_id == "policies" and lib.n_chunks > 0
