"""One library's embedding fanned out over two Celery workers, merged byte-identical.

What this starts, for real: ``redis-server`` on loopback, two ``dagster-celery worker
start`` processes with their own node names (``w1@…``, ``w2@…``), and one ``dagster job
execute`` of ``ingest_job`` for a generated ~1,300-chunk library with
``RAGSPINE_EXECUTOR=celery`` and ``RAGSPINE_EMBEDDING_SHARDS=3``: ``chunk_embeddings`` is
the graph plan -> three ``embed_shard`` steps -> merge, every step a Celery task. Both
workers must have run at least one shard (Dagster's own "Executing steps … in celery
worker" engine events, and the worker each shard step recorded in its output metadata),
and the published snapshot — the merged ``embeddings`` artifact included — must be
byte-identical to an in-process, one-step ``ragspine ingest`` of the same input.

Budget: about 60-90 s on two cores. Skips, saying why, without redis-server or dagster-celery.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

dg = pytest.importorskip("dagster", reason="needs the 'pipeline' extra")
pytest.importorskip("dagster_celery", reason="needs dagster-celery (the 'celery' extra; .ci/run installs it)")
pytest.importorskip("redis", reason="needs the redis client (the 'celery' extra)")

from ragspine_assets.partitions import LIBRARIES_PARTITION  # noqa: E402
from ragspine_core import schema  # noqa: E402
from tests.assets.ops.helpers import make_dagster_home  # noqa: E402
from tests.assets.test_embedding_fanout import LIBRARY, embeddings_dir, folder_bytes, make_library  # noqa: E402
from tests.conftest import PYTHON, REPO_ROOT, ingest, python_env  # noqa: E402

from tests.ops.services import VENV_BIN, spawn, start_celery_workers, start_redis, stop_group, tail, write_celery_run_config  # noqa: E402
from tests.ops.test_distributed_celery import snapshot_digest  # noqa: E402

pytestmark = pytest.mark.slow

SHARDS = 3
WORKER_READY_S = 90
RUN_TIMEOUT_S = 420
SHARD_STEP = "chunk_embeddings.embed_shard["


def data_root(path: Path) -> Path:
    make_library(path)
    shutil.copy2(REPO_ROOT / "data" / "glossary.toml", path / "glossary.toml")
    return path


def shard_workers(instance: dg.DagsterInstance, run_id: str) -> tuple[dict[str, str], dict[str, str]]:
    """``({shard step: Celery worker from Dagster's engine event}, {shard step: worker the step recorded})``."""
    engine, recorded = {}, {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or not (record.step_key or "").startswith(SHARD_STEP):
            continue
        if event.event_type == dg.DagsterEventType.ENGINE_EVENT:
            worker = event.engine_event_data.metadata.get("Celery worker")
            if worker is not None:
                engine[record.step_key] = worker.value
        elif event.event_type == dg.DagsterEventType.STEP_OUTPUT:
            meta = event.step_output_data.metadata
            if "celery_worker" in meta and meta.get("texts_embedded") and meta["texts_embedded"].value:
                recorded[record.step_key] = meta["celery_worker"].value
    return engine, recorded


def test_one_library_embeds_in_shards_on_two_celery_workers(tmp_path: Path) -> None:
    work = tmp_path / "celery"
    work.mkdir()
    data = data_root(tmp_path / "distributed")
    home = make_dagster_home()
    procs: list[subprocess.Popen] = []
    try:
        instance = dg.DagsterInstance.local_temp(str(home))
        instance.add_dynamic_partitions(LIBRARIES_PARTITION, [LIBRARY])
        instance.dispose()

        redis = start_redis(work)
        procs.append(redis.proc)
        run_config = write_celery_run_config(work / "run_config.yaml", redis)
        # every worker and the run launcher share the setting: it decides the asset graph
        env = python_env(DAGSTER_HOME=str(home), RAGSPINE_DATA_ROOT=str(data), RAGSPINE_EMBEDDING="deterministic",
                         RAGSPINE_EXECUTOR="celery", RAGSPINE_EMBEDDING_SHARDS=str(SHARDS),
                         PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        workers = start_celery_workers(work, run_config, env, procs, cwd=REPO_ROOT, timeout=WORKER_READY_S)

        log = work / "run.log"
        run = spawn([PYTHON, "-m", "dagster", "job", "execute", "-m", "ragspine_assets.definitions", "-j", "ingest_job",
                     "-c", str(run_config), "--tags", json.dumps({"dagster/partition": LIBRARY})],
                    log=log, env=env, cwd=REPO_ROOT)
        procs.append(run)
        try:
            run.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run did not finish in {RUN_TIMEOUT_S} s:\n{tail(log)}\n"
                        + "\n".join(f"worker {n}:\n{tail(wlog)}" for n, (_, wlog) in workers.items()))
        assert run.returncode == 0, f"run exited {run.returncode}:\n{tail(log)}"

        instance = dg.DagsterInstance.local_temp(str(home))
        try:
            found = [r for r in instance.get_runs() if r.tags.get("dagster/partition") == LIBRARY]
            assert len(found) == 1 and found[0].is_success, found
            engine, recorded = shard_workers(instance, found[0].run_id)
        finally:
            instance.dispose()
    finally:
        for proc in reversed(procs):
            stop_group(proc)
        shutil.rmtree(home, ignore_errors=True)

    # every shard was a Celery task, and both workers did shards
    assert len(engine) == SHARDS, f"expected {SHARDS} shard steps on Celery workers, got {engine}"
    assert recorded == engine, f"shard steps recorded other workers than Celery reported: {recorded} vs {engine}"
    names = {w.split("@")[0] for w in engine.values()}
    assert names == {"w1", "w2"}, f"both workers must run shards; shards ran on {engine}"

    # the same input, in-process, one embedding step (no RAGSPINE_* variables: one shard)
    local = data_root(tmp_path / "in_process")
    ingest(local / "raw" / LIBRARY, embedding="deterministic")
    a, b = embeddings_dir(data), embeddings_dir(local)
    assert a.name == b.name and folder_bytes(a) == folder_bytes(b), "the merged embeddings differ from a serial build"
    sa = (data / "artifacts" / LIBRARY / schema.CURRENT_POINTER).resolve()
    sb = (local / "artifacts" / LIBRARY / schema.CURRENT_POINTER).resolve()
    assert sa.name == sb.name, f"snapshot ids differ ({sa.name} sharded on celery vs {sb.name} in-process)"
    da, db = snapshot_digest(sa), snapshot_digest(sb)
    assert sorted(da) == sorted(db)
    assert any(k.startswith(schema.EMBEDDINGS_DIR + "/") for k in da), "no vectors were published"
    for rel in da:
        assert da[rel] == db[rel], f"{rel} differs between the sharded celery run and the in-process run"
