"""One writer per library on every path (issue 43).

``dagster asset materialize`` bypassed the ``ragspine ingest`` lock, and in 3 of 9
unguarded races one run published the other's outputs. Every step of every path now
claims the library for its run (``locks.claim_library``): while a live run holds the
claim, ``ragspine ingest``, ``dagster asset materialize``, Dagster runs of the sensor /
schedules / backfills (they execute the same steps) and ``build_library`` are refused with
an error naming that run; a dead or finished run's claim is taken over.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import dagster as dg
import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.locks import OWNER_FILE, ConcurrentIngestError, claim_library
from ragspine_index.pipeline import build_library
from ragspine_tools.cli import main as cli_main
from tests.conftest import PYTHON, RAGSPINE_ENV_VARS, python_env
from tests.assets.ops.helpers import make_dagster_home, write_doc

WAIT_S = 300.0  # liveness bound only


@pytest.fixture
def alpha(tmp_path, monkeypatch) -> LibraryPaths:
    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    data = tmp_path / "data"
    raw = data / "raw" / "alpha"
    for i in range(3):
        write_doc(raw / f"d{i}.md", f"Doc {i}", f"Alpha document {i} about revenue in region {i}.")
    return LibraryPaths("alpha", raw, data / "artifacts" / "alpha")


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli_main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def hold_claim(paths: LibraryPaths, stop: Path) -> subprocess.Popen:
    """Another process whose run 'held-run' is writing the library until ``stop`` exists."""
    holder = subprocess.Popen([PYTHON, "-c", textwrap.dedent(f"""
        import time, pathlib
        from ragspine_index.artifacts import LibraryPaths
        from ragspine_index.locks import claim_library
        paths = LibraryPaths("alpha", pathlib.Path({str(paths.raw)!r}), pathlib.Path({str(paths.root)!r}))
        claim_library(paths, "held-run", step="chunks")
        print("claimed", flush=True)
        while not pathlib.Path({str(stop)!r}).exists():
            time.sleep(0.05)
        """)], stdout=subprocess.PIPE, text=True, env=python_env(PYTHONPATH=os.pathsep.join(sys.path)))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "claimed"
    return holder


def dagster_materialize(paths: LibraryPaths, home: Path) -> subprocess.CompletedProcess:
    env = python_env(PYTHONPATH=os.pathsep.join(sys.path), DAGSTER_HOME=str(home),
                     RAGSPINE_DATA_ROOT=str(paths.root.parent.parent), RAGSPINE_EMBEDDING="none")
    dagster = Path(sys.executable).with_name("dagster")
    return subprocess.run([str(dagster), "asset", "materialize", "-m", "ragspine_assets.definitions", "--select", "*",
                           "--partition", "alpha"], capture_output=True, text=True, timeout=WAIT_S, env=env,
                          cwd=paths.root.parent.parent.parent)


@pytest.mark.slow
def test_every_write_path_is_refused_while_another_run_writes_the_library(alpha, tmp_path, monkeypatch):
    stop = tmp_path / "stop"
    holder = hold_claim(alpha, stop)
    try:
        with pytest.raises(ConcurrentIngestError, match="being written by run held-run"):
            build_library(alpha, embedding="none", cache_path=tmp_path / "cache.sqlite")
        monkeypatch.setenv("DAGSTER_HOME", str(make_dagster_home(tmp_path / "home")))
        rc, _, err = run_cli("ingest", str(alpha.raw), "--embedding", "none")
        assert rc == 2 and "being written by run held-run" in err and f"pid {holder.pid}" in err, err
        done = dagster_materialize(alpha, tmp_path / "home")
        assert done.returncode != 0 and "being written by run held-run" in done.stdout + done.stderr
        assert not alpha.current.exists()  # nothing was published by any of them
    finally:
        stop.touch()
        holder.wait(timeout=WAIT_S)
    # the holder is gone: its claim is taken over, by each path in turn
    assert build_library(alpha, embedding="none", cache_path=tmp_path / "cache.sqlite").snapshot_id
    rc, _, err = run_cli("ingest", str(alpha.raw), "--embedding", "none")
    assert rc == 0, err
    done = dagster_materialize(alpha, tmp_path / "home")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert not (alpha.root / OWNER_FILE).exists()  # released after publication


def test_a_claim_of_a_finished_or_failed_dagster_run_is_taken_over(alpha):
    with dg.DagsterInstance.ephemeral() as instance:
        for status, taken in ((dg.DagsterRunStatus.STARTED, False), (dg.DagsterRunStatus.FAILURE, True),
                              (dg.DagsterRunStatus.SUCCESS, True)):
            run = instance.create_run_for_job(dg.GraphDefinition(name="noop").to_job(), status=status)

            def unfinished(run_id: str) -> bool | None:
                found = instance.get_run_by_id(run_id)
                return None if found is None else found.status in (dg.DagsterRunStatus.STARTED,)

            (alpha.root).mkdir(parents=True, exist_ok=True)
            (alpha.root / OWNER_FILE).write_text(json.dumps({"run_id": run.run_id, "host": "elsewhere", "pid": 1}))
            if taken:
                claim_library(alpha, "next-run", run_unfinished=unfinished)
                assert json.loads((alpha.root / OWNER_FILE).read_text())["run_id"] == "next-run"
            else:
                with pytest.raises(ConcurrentIngestError, match=run.run_id):
                    claim_library(alpha, "next-run", run_unfinished=unfinished)


def test_a_damaged_claim_file_is_no_claim(alpha):
    alpha.root.mkdir(parents=True)
    (alpha.root / OWNER_FILE).write_bytes(b"\xff\x00{not json")
    claim_library(alpha, "run-x")
    assert json.loads((alpha.root / OWNER_FILE).read_text())["run_id"] == "run-x"
