"""A real distributed run: two library partitions through dagster-celery, two worker processes.

What this starts, for real: ``redis-server`` on loopback (the Celery broker and result
backend), two ``dagster-celery worker start`` processes (``--pool solo``: each worker
executes its steps in its own process), and one ``dagster job execute`` per library with
``RAGSPINE_EXECUTOR=celery``, so every step of both runs is a Celery task executed by a
worker. The same input is then ingested in-process (``ragspine ingest``'s path) into a
second data root, and the published snapshots must be byte-identical (run metadata aside).

Why Celery and not dagster-dask: dagster-dask 0.29.x submits the run record as a task
argument, and dask.distributed walks NamedTuples, which Dagster's partitioned-run records
refuse (``Iteration is not allowed on @record KeyRangesPartitionsSubset``): every
partitioned run fails before its first step (tried with distributed 2024.8 - 2026.8).

Budget: about 60 s on two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

dg = pytest.importorskip("dagster", reason="needs the 'pipeline' extra")
pytest.importorskip("dagster_celery", reason="needs dagster-celery (the 'celery' extra; .ci/run installs it)")
pytest.importorskip("redis", reason="needs the redis client (the 'celery' extra)")
psutil = pytest.importorskip("psutil", reason="needs psutil (the 'dev' extra)")

from ragspine_assets.partitions import LIBRARIES_PARTITION  # noqa: E402
from ragspine_core import schema  # noqa: E402
from tests.assets.ops.helpers import make_dagster_home  # noqa: E402
from tests.conftest import PYTHON, REPO_ROOT, ingest, python_env  # noqa: E402

from tests.ops.services import (VENV_BIN, spawn, start_celery_workers, start_redis, stop_group, tail,  # noqa: E402
                       write_celery_run_config)

pytestmark = pytest.mark.slow

SAMPLE = REPO_ROOT / "data" / "raw" / "sample"
LIBRARIES = {
    "finance": ["reports/acme-cn-2024q2-earnings.md", "investor-faq.md", "press-releases.jsonl"],
    "policies": ["policies/acme-anti-bribery-policy.md", "policies/acme-data-security-measures.md"],
}
WORKER_READY_S = 90
RUN_TIMEOUT_S = 180
#: run metadata that legitimately differs between two runs of the same input
RUN_COLUMNS = ("run_id", "ingested_at")


def make_data_root(root: Path) -> Path:
    for lib, files in LIBRARIES.items():
        for rel in files:
            dst = root / "raw" / lib / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(SAMPLE / rel, dst)
    shutil.copy2(REPO_ROOT / "data" / "glossary.toml", root / "glossary.toml")
    return root


def snapshot_digest(snapshot: Path) -> dict[str, object]:
    """Every file's bytes; chunks.sqlite as rows without run metadata; manifest without run fields."""
    out: dict[str, object] = {}
    for path in sorted(p for p in snapshot.rglob("*") if p.is_file()):
        rel = path.relative_to(snapshot).as_posix()
        if rel == schema.MANIFEST_FILE:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            out[rel] = {k: v for k, v in manifest.items() if k not in ("created_at", "run_id", "artifacts")}
        elif rel == schema.SNAPSHOT_CHUNKS_FILE:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
                rows = {}
                for table in tables:
                    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] not in RUN_COLUMNS]
                    rows[table] = conn.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY 1, 2").fetchall()
            out[rel] = rows
        else:
            out[rel] = path.read_bytes()
    return out


def test_two_partitions_on_celery_workers_publish_what_in_process_publishes(tmp_path: Path) -> None:
    work = tmp_path / "celery"
    work.mkdir()
    data = make_data_root(tmp_path / "distributed")
    home = make_dagster_home()
    procs: list[subprocess.Popen] = []
    try:
        # the instance schema exists before any worker opens it (two workers creating a fresh
        # SQLite instance at once race on its migrations)
        instance = dg.DagsterInstance.local_temp(str(home))
        instance.add_dynamic_partitions(LIBRARIES_PARTITION, sorted(LIBRARIES))
        instance.dispose()

        redis = start_redis(work)
        procs.append(redis.proc)
        run_config = write_celery_run_config(work / "run_config.yaml", redis)
        env = python_env(DAGSTER_HOME=str(home), RAGSPINE_DATA_ROOT=str(data), RAGSPINE_EMBEDDING="deterministic",
                         RAGSPINE_EXECUTOR="celery", PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        workers = start_celery_workers(work, run_config, env, procs, cwd=REPO_ROOT, timeout=WORKER_READY_S)

        runs = {}
        for lib in LIBRARIES:
            log = work / f"run-{lib}.log"
            runs[lib] = (spawn([PYTHON, "-m", "dagster", "job", "execute", "-m", "ragspine_assets.definitions",
                                "-j", "ingest_job", "-c", str(run_config),
                                "--tags", json.dumps({"dagster/partition": lib})], log=log, env=env, cwd=REPO_ROOT), log)
            procs.append(runs[lib][0])
        deadline = time.monotonic() + RUN_TIMEOUT_S
        for lib, (proc, log) in runs.items():
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"the {lib} run did not finish in {RUN_TIMEOUT_S} s:\n{tail(log)}\n"
                            f"worker w1:\n{tail(workers['w1'][1])}")
            assert proc.returncode == 0, f"{lib} run exited {proc.returncode}:\n{tail(log)}"

        # every step ran as a Celery task in a worker process, and both workers did work
        worker_task_pids = {c.pid for proc, _ in workers.values() for c in psutil.Process(proc.pid).children(recursive=True)}
        instance = dg.DagsterInstance.local_temp(str(home))
        worker_pids: set[int] = set()
        for lib, (proc, _) in runs.items():
            found = [r for r in instance.get_runs() if r.tags.get("dagster/partition") == lib]
            assert len(found) == 1 and found[0].is_success, found
            events = instance.all_logs(found[0].run_id)
            step_pids = {e.dagster_event.pid for e in events if e.is_dagster_event and e.dagster_event.is_step_success}
            assert step_pids and proc.pid not in step_pids, (lib, step_pids)
            assert step_pids <= worker_task_pids, f"{lib}: steps ran in {step_pids}, not in the workers {worker_task_pids}"
            worker_pids |= step_pids
        instance.dispose()
        assert len(worker_pids) >= 2, f"all steps ran in one process {worker_pids}: the second worker did nothing"
    finally:
        for proc in reversed(procs):
            stop_group(proc)
        shutil.rmtree(home, ignore_errors=True)

    # the same input, in-process
    local = make_data_root(tmp_path / "in_process")
    for lib in LIBRARIES:
        ingest(local / "raw" / lib, embedding="deterministic")
    for lib in LIBRARIES:
        a = (data / "artifacts" / lib / schema.CURRENT_POINTER).resolve()
        b = (local / "artifacts" / lib / schema.CURRENT_POINTER).resolve()
        assert a.name == b.name, f"{lib}: snapshot ids differ ({a.name} distributed vs {b.name} in-process)"
        da, db = snapshot_digest(a), snapshot_digest(b)
        assert sorted(da) == sorted(db)
        assert any(k.startswith(schema.EMBEDDINGS_DIR + "/") for k in da), "no vectors were published"
        for rel in da:
            assert da[rel] == db[rel], f"{lib}: {rel} differs between the celery run and the in-process run"
