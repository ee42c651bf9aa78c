"""Build-side errors say where (issue 43): library, step and file; a closed pipe is not a
"path" problem; a relative DAGSTER_HOME gets the fix that works."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine_core.errors import ConfigError, IndexCorruptError
from ragspine_core.failure import describe_unexpected, where

from tests.conftest import PYTHON, RAGSPINE_ENV_VARS, REPO_ROOT, ingest, python_env


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("located") / "data"
    raw = data / "raw" / "tiny"
    raw.mkdir(parents=True)
    for name in ("acme-cn-product-launch-2024.md", "acme-group-history-en.md"):
        shutil.copy2(REPO_ROOT / "data" / "raw" / "sample" / name, raw / name)
    ingest(raw)
    return data


def test_an_ingest_error_names_library_step_and_file(data, tmp_path):
    work = tmp_path / "data"
    subprocess.run(["cp", "-a", str(data), str(work)], check=True, timeout=60)
    store = work / "artifacts" / "tiny" / "chunk_store.sqlite"
    raw = bytearray(store.read_bytes())
    raw[:32] = bytes(b ^ 0xFF for b in raw[:32])
    store.write_bytes(bytes(raw))
    with pytest.raises(IndexCorruptError) as info:
        ingest(work / "raw" / "tiny")
    msg = str(info.value)
    assert msg.startswith("ingest of library 'tiny' stopped at step ") and f"the chunk store {store}" in msg
    assert "The previous snapshot keeps serving" in msg and "ragspine ingest" in msg
    # the failed in-process run left no claim behind: the next ingest in this process runs
    assert not (work / "artifacts" / "tiny" / ".ingest.owner").exists()
    repair = msg.split("`")[1].split(" && ragspine ingest")[0]
    subprocess.run(["bash", "-c", repair], check=True, timeout=60)
    assert ingest(work / "raw" / "tiny").snapshot_id


def test_the_failure_formatter_locates_frames_of_every_current_package():
    try:
        from ragspine_index.repair import sqlite_problem

        sqlite_problem(None)  # type: ignore[arg-type]  # a TypeError inside ragspine_index
    except TypeError as exc:
        assert where(exc).startswith("ragspine_index/repair.py:")
        assert " at ragspine_index/repair.py:" in describe_unexpected(exc)
    else:
        raise AssertionError("expected a TypeError")


def test_a_broken_pipe_is_not_described_as_a_missing_path():
    text = describe_unexpected(BrokenPipeError(32, "Broken pipe"))
    assert "broken pipe" in text and "path exists" not in text
    assert "path exists" not in describe_unexpected(ConnectionResetError(104, "Connection reset by peer"))
    assert "path exists" in describe_unexpected(PermissionError(13, "Permission denied", "/x/y"))


@pytest.mark.parametrize("reader", ["true", "head -n 1"])
def test_query_piped_to_a_reader_that_stops_exits_quietly(data, reader):
    lib = data / "artifacts" / "tiny"
    script = (f"{PYTHON} -m ragspine_tools.cli query {lib} 'Acme product launch history' --top-k 50 | {reader} "
              "> /dev/null; echo rc=${PIPESTATUS[0]}")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300,
                          env=python_env(PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.stderr == "", done.stderr  # was: "error: Broken pipe: check that the path exists …"
    assert done.stdout.strip() in ("rc=141", "rc=0")  # 141: ended by the closed pipe, as `yes | head` is


def test_a_relative_dagster_home_gets_the_absolute_path_to_export(monkeypatch, tmp_path):
    from ragspine_assets.ingest import default_instance

    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", "rel_home")
    with pytest.raises(ConfigError, match=f"export DAGSTER_HOME={tmp_path / 'rel_home'}"):
        default_instance()
