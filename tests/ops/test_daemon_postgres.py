"""A production-shaped instance: PostgreSQL storage and a real ``dagster-daemon``.

What this starts, for real: a PostgreSQL server on loopback (``initdb`` in a temp folder;
as root it runs as the ``postgres`` user), ``$DAGSTER_HOME/dagster.yaml`` copied from
``deploy/dagster.postgres.yaml`` (run/event/schedule storage on that server, queued run
coordinator), and ``dagster-daemon run -w workspace.yaml``. The sensor and the schedule
are switched on with the ``dagster`` CLI, exactly as docs/operations.md says, and then:

1. the sensor's first tick sees library ``seed`` and the daemon launches its run;
2. the test then drops a new folder ``data/raw/alpha/``; a later sensor tick (the sensor's
   minimum interval is 30 s) launches the run that publishes ``alpha``, and ``seed``,
   unchanged, is not launched again;
3. ``RAGSPINE_REINGEST_CRON="* * * * *"`` makes the schedule tick at the next minute: its
   runs (tag ``ragspine/trigger=schedule``) re-ingest the known libraries.

Everything is stopped by process id in ``finally``. Budget: about 90 s (two sensor ticks
30 s apart, one schedule tick at a minute boundary, runs in-process).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

dg = pytest.importorskip("dagster", reason="needs the 'pipeline' extra")
pytest.importorskip("dagster_postgres", reason="needs dagster-postgres (the 'postgres' extra; .ci/run installs it)")

from ragspine_query.library import open_library  # noqa: E402
from tests.assets.ops.helpers import make_dagster_home, write_doc  # noqa: E402
from tests.conftest import PYTHON, REPO_ROOT, python_env  # noqa: E402

from tests.ops.services import VENV_BIN, spawn, start_postgres, stop_group, stop_postgres, tail, wait_until  # noqa: E402

pytestmark = pytest.mark.slow

TEMPLATE = REPO_ROOT / "deploy" / "dagster.postgres.yaml"
WORKSPACE = REPO_ROOT / "workspace.yaml"
CLI_TIMEOUT_S = 120
SENSOR_RUN_S = 150   # first tick at once, the next >= 30 s later, plus the run
SCHEDULE_RUN_S = 150  # the next minute boundary, plus the run


def _runs(instance, **tags: str) -> list:
    return [r for r in instance.get_runs(limit=100) if all(r.tags.get(k) == v for k, v in tags.items())]


def _succeeded(instance, **tags: str) -> bool:
    runs = _runs(instance, **tags)
    failed = [r for r in runs if r.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)]
    if failed:
        pytest.fail(f"run {failed[0].run_id} ({tags}) ended {failed[0].status}")
    return any(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)


def test_daemon_sensor_and_schedule_launch_runs_on_a_postgres_instance(tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "data"
    write_doc(data / "raw" / "seed" / "intro.md", "Seed", "The seed library exists before the daemon starts.")
    logs = tmp_path / "logs"
    logs.mkdir()
    home = make_dagster_home()
    pg = start_postgres()
    procs: list[subprocess.Popen] = []
    instance = None
    try:
        shutil.copy2(TEMPLATE, home / "dagster.yaml")
        monkeypatch.setenv("DAGSTER_PG_URL", pg.sqlalchemy_url)
        instance = dg.DagsterInstance.local_temp(str(home))
        assert type(instance.run_storage).__name__ == "PostgresRunStorage", type(instance.run_storage)
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"

        env = python_env(DAGSTER_HOME=str(home), DAGSTER_PG_URL=pg.sqlalchemy_url, RAGSPINE_DATA_ROOT=str(data),
                         RAGSPINE_EMBEDDING="none", RAGSPINE_EXECUTOR="in_process",
                         RAGSPINE_REINGEST_CRON="* * * * *",
                         PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        daemon_log = logs / "daemon.log"
        daemon = spawn([f"{VENV_BIN}/dagster-daemon", "run", "-w", str(WORKSPACE)], log=daemon_log, env=env,
                       cwd=REPO_ROOT)
        procs.append(daemon)
        # switch both on, as an operator would (the definitions ship them STOPPED)
        starters = {kind: spawn([PYTHON, "-m", "dagster", kind, "start", name, "-w", str(WORKSPACE)],
                                log=logs / f"{kind}-start.log", env=env, cwd=REPO_ROOT)
                    for kind, name in (("sensor", "raw_files_sensor"), ("schedule", "reingest_schedule"))}
        procs.extend(starters.values())
        for kind, proc in starters.items():
            try:
                proc.wait(timeout=CLI_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"'dagster {kind} start' did not finish in {CLI_TIMEOUT_S} s")
            assert proc.returncode == 0, tail(logs / f"{kind}-start.log")
        daemon_tail = lambda: tail(daemon_log)  # noqa: E731

        # 1. the first sensor tick launches a run for the library that was already there
        seed = {"dagster/partition": "seed", "dagster/sensor_name": "raw_files_sensor"}
        wait_until(lambda: daemon.poll() is not None or bool(_runs(instance, **seed)), SENSOR_RUN_S,
                   "the sensor's run of 'seed'", interval=1.0, on_timeout=daemon_tail)
        assert daemon.poll() is None, f"dagster-daemon exited {daemon.returncode}:\n{daemon_tail()}"

        # 2. a new library folder, dropped while the daemon runs
        write_doc(data / "raw" / "alpha" / "guide.md", "Alpha guide", "Alpha is a library added while the daemon runs.")
        wait_until(lambda: _succeeded(instance, **{"dagster/partition": "alpha", "dagster/sensor_name": "raw_files_sensor"}),
                   SENSOR_RUN_S, "the sensor's run of the new library 'alpha'", interval=1.0, on_timeout=daemon_tail)
        with open_library(data / "artifacts" / "alpha") as lib:
            assert lib.library_id == "alpha" and lib.n_chunks >= 1
        assert "alpha" in instance.get_dynamic_partitions("libraries")
        wait_until(lambda: _succeeded(instance, **seed), SENSOR_RUN_S, "the run of 'seed' to succeed", interval=1.0)
        assert len(_runs(instance, **seed)) == 1, "the unchanged library 'seed' was launched twice"

        # 3. a schedule tick, at the next minute boundary
        wait_until(lambda: _succeeded(instance, **{"ragspine/trigger": "schedule", "dagster/schedule_name": "reingest_schedule"}),
                   SCHEDULE_RUN_S, "a run launched by the schedule's tick", interval=1.0, on_timeout=daemon_tail)
        scheduled = _runs(instance, **{"ragspine/trigger": "schedule"})
        assert {r.tags["dagster/partition"] for r in scheduled} <= {"seed", "alpha"}

        # the runs are rows of the PostgreSQL server, not of a local SQLite file
        import psycopg2

        with psycopg2.connect(pg.url) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM runs")
            assert cur.fetchone()[0] == len(instance.get_runs(limit=100)) >= 3
        assert not list(home.glob("storage/**/*.db")), "a SQLite run/event store was created next to the instance"
    finally:
        for proc in reversed(procs):
            stop_group(proc)
        if instance is not None:
            instance.dispose()
        stop_postgres(pg)
        shutil.rmtree(home, ignore_errors=True)
    assert daemon.poll() is not None
