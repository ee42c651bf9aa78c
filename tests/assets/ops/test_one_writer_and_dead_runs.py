"""One writer per library, killed runs failed, failed libraries requested again.

* a second ``ragspine ingest`` of a library another process is ingesting is refused, in
  one line naming the holder;
* two ingests interleaved step by step (a file edited between them) never publish a
  snapshot mixed from two chunk-store states: the one whose state is stale is refused;
* ``raw_files_sensor`` requests no run of a library with a run in flight, and asks again
  once it has finished;
* a run left STARTED by a killed process is marked failed by the sensor's sweep, and the
  library is requested again (a bounded number of times per content).
"""

from __future__ import annotations

import io
import os
import subprocess
import textwrap
import uuid
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import dagster as dg
import pytest

from ragspine_assets.runs import TAG_RUN_HOST
from ragspine_tools.cli import main as cli_main
from ragspine_index.artifacts import LibraryPaths
from ragspine_index.locks import ConcurrentIngestError
from ragspine_index.pipeline import STEPS, run_step
from ragspine_index.step_api import StepContext
from ragspine_assets.runs import MAX_AUTOMATIC_RETRIES, fail_dead_runs, in_flight_runs
from ragspine_assets.sensors import load_cursor
from tests.conftest import PYTHON, RAGSPINE_ENV_VARS, python_env

from tests.assets.ops.helpers import write_doc
from tests.assets.ops.test_raw_files_sensor import apply_partition_requests, requested, tick

WAIT_S = 600.0  # liveness bound only


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli_main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_a_second_ingest_of_a_library_is_refused_while_one_runs(data_root: Path, tmp_path: Path, monkeypatch) -> None:
    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    raw = data_root / "raw" / "alpha"
    write_doc(raw / "a.md", "Alpha", "Alpha revenue grew.")
    stop = tmp_path / "stop"
    holder = subprocess.Popen([PYTHON, "-c", textwrap.dedent(f"""
        import time, pathlib
        from ragspine_index.artifacts import LibraryPaths
        from ragspine_index.locks import library_run_lock
        paths = LibraryPaths("alpha", pathlib.Path({str(raw)!r}), pathlib.Path({str(data_root / 'artifacts' / 'alpha')!r}))
        with library_run_lock(paths):
            print("locked", flush=True)
            while not pathlib.Path({str(stop)!r}).exists():
                time.sleep(0.05)
        """)], stdout=subprocess.PIPE, text=True, env=python_env(PYTHONPATH=os.getcwd()))
    try:
        assert holder.stdout.readline().strip() == "locked"
        rc, out, err = run_cli("ingest", str(raw), "--embedding", "none")
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert "another ingest of library 'alpha' is running" in err and f"pid {holder.pid}" in err
        assert not (data_root / "artifacts" / "alpha" / "current").exists()
    finally:
        stop.touch()
        holder.wait(timeout=WAIT_S)
    rc, out, err = run_cli("ingest", str(raw), "--embedding", "none")  # the lock died with its holder's release
    assert rc == 0, err


def test_interleaved_ingests_never_publish_a_mixed_snapshot(data_root: Path, tmp_path: Path) -> None:
    raw = data_root / "raw" / "alpha"
    for i in range(6):
        write_doc(raw / f"d{i}.md", f"Doc {i}", f"Alpha document {i} about revenue in region {i}.")
    paths = LibraryPaths("alpha", raw, data_root / "artifacts" / "alpha")

    def context(run_id: str) -> StepContext:
        return StepContext(paths=paths, cache_path=tmp_path / "cache.sqlite", run_id=run_id, embedding="none")

    def steps(ctx: StepContext, values: dict, names: set[str] | None) -> dict:
        for step in STEPS:
            if step.name not in values and (names is None or step.name in names):
                values[step.name] = run_step(step, ctx, values).value
        return values

    first = steps(context("run-1"), {}, None)["index_manifest"]  # something is serving
    write_doc(raw / "d0.md", "Doc 0", "Alpha document 0, rewritten: revenue fell in region 0.")
    run_a = steps(context("run-a"), {}, {"documents", "chunks"})  # run A has chunked state S1 ...
    write_doc(raw / "d1.md", "Doc 1", "Alpha document 1, rewritten: margins rose in region 1.")
    run_b = steps(context("run-b"), {}, {"documents", "chunks"})  # ... run B chunks state S2 meanwhile
    with pytest.raises(ConcurrentIngestError, match="changed while this run built its artifacts"):
        steps(context("run-a"), run_a, None)  # A's tree/graph/BM25 would mix S1 and S2
    assert paths.current.resolve().name == first.snapshot_id  # nothing was published
    done = steps(context("run-b"), run_b, None)["index_manifest"]  # B saw one state throughout
    assert paths.current.resolve().name == done.snapshot_id != first.snapshot_id


def _add_run(instance: dg.DagsterInstance, library: str, status: dg.DagsterRunStatus, **tags: str) -> dg.DagsterRun:
    run = dg.DagsterRun(job_name="ingest_job", run_id=str(uuid.uuid4()), status=status,
                        tags={"dagster/partition": library, **tags})
    instance.add_run(run)
    return run


def test_the_sensor_waits_for_a_run_in_flight(data_root: Path, ragspine, instance) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)
    run = _add_run(instance, "alpha", dg.DagsterRunStatus.STARTED)  # the requested run is running
    write_doc(data_root / "raw" / "alpha" / "b.md", "Second", "More text.")  # a file copied in meanwhile
    second = tick(ragspine, instance, first.cursor)
    assert requested(second) == {}  # never a second run of the library beside the first
    assert load_cursor(second.cursor)["alpha"] == load_cursor(first.cursor)["alpha"]  # the change is kept for later
    instance.report_run_canceled(run)  # it finished
    assert in_flight_runs(instance, "alpha") == []
    third = tick(ragspine, instance, second.cursor)
    assert list(requested(third)) == ["alpha"]


def test_a_killed_run_is_failed_and_its_library_requested_again(data_root: Path, ragspine, local_instance) -> None:
    instance = local_instance
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)
    fingerprint = first.run_requests[0].tags["ragspine/fingerprint"]
    victim = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(600)"])
    run = _add_run(instance, "alpha", dg.DagsterRunStatus.STARTED, **{"ragspine/fingerprint": fingerprint})
    instance.report_engine_event(f"Started process for run (pid: {victim.pid}).", run)
    alive = tick(ragspine, instance, first.cursor)  # its worker is alive: in flight, nothing to do
    assert requested(alive) == {} and instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
    victim.kill()  # what stopping `dagster dev` with a run in flight does to its worker
    victim.wait(timeout=WAIT_S)
    after = tick(ragspine, instance, alive.cursor)  # the first tick after the "restart"
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
    assert list(requested(after)) == ["alpha"] and requested(after)["alpha"].endswith(":retry-1")
    # bounded: after MAX_AUTOMATIC_RETRIES failures of the same content it stops asking
    for _ in range(MAX_AUTOMATIC_RETRIES):
        _add_run(instance, "alpha", dg.DagsterRunStatus.FAILURE, **{"ragspine/fingerprint": fingerprint})
    assert requested(tick(ragspine, instance, after.cursor)) == {}


def test_a_live_worker_or_another_machines_run_is_never_failed(local_instance) -> None:
    run = _add_run(local_instance, "alpha", dg.DagsterRunStatus.STARTED)
    local_instance.report_engine_event(f"Started process for run (pid: {os.getpid()}).", run)
    gone = subprocess.Popen([PYTHON, "-c", "pass"])
    gone.wait(timeout=WAIT_S)
    elsewhere = _add_run(local_instance, "beta", dg.DagsterRunStatus.STARTED, **{TAG_RUN_HOST: "another-machine"})
    local_instance.report_engine_event(f"Started process for run (pid: {gone.pid}).", elsewhere)
    unknown = _add_run(local_instance, "gamma", dg.DagsterRunStatus.STARTED)  # no host recorded
    local_instance.report_engine_event(f"Started process for run (pid: {gone.pid}).", unknown)
    assert fail_dead_runs(local_instance, strict_host=True) == []  # what `ragspine ingest` does
    assert fail_dead_runs(local_instance) == [unknown.run_id]  # the sensor, beside the run workers
    for r in (run, elsewhere):
        assert local_instance.get_run_by_id(r.run_id).status == dg.DagsterRunStatus.STARTED
