"""``ragspine ingest`` as an operator runs it: a real child process against a real instance.

* its terminal output is a summary (no Dagster DEBUG lines) that names the files that
  failed to parse, while Dagster's events still land in the instance's event log;
* a run whose process was SIGKILLed (STARTED forever) is marked failed by the next ingest,
  and a run whose process is alive is left alone;
* it only reads ``<data>/raw/<library>`` (or a folder given with ``--data-root``) and
  never writes outside the data root.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from ragspine_index.pipeline import STEPS
from ragspine_assets.ingest import locate_library
from ragspine_assets.runs import TAG_LAUNCHER
from ragspine_core.errors import ConfigError, RagspineError
from tests.conftest import PYTHON, ingest, python_env

from tests.assets.ops.helpers import write_doc

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
BODY_MARKER = "BODY-TEXT-THAT-MUST-NOT-BE-PRINTED"

# ``ragspine ingest`` whose documents step announces itself, then hangs (until killed).
HANGING_INGEST = r"""
import importlib, sys, time
from pathlib import Path
from ragspine_tools.cli import main

# the documents step's module (ragspine_index.steps.documents), not the asset
documents_module = importlib.import_module("ragspine_index.steps.documents")

marker = Path(sys.argv[1])
def hang(*args, **kwargs):
    marker.write_text("in documents step")
    time.sleep(600)
documents_module.load_documents = hang
raise SystemExit(main(["ingest", sys.argv[2], "--embedding", "none"]))
"""


def ragspine(*args: str, cwd: Path, home: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "ragspine_tools.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout, env=python_env(DAGSTER_HOME=str(home)))


def small_library(raw: Path) -> Path:
    write_doc(raw / "revenue.md", "Revenue", "Revenue grew 12% on strong exports.")
    write_doc(raw / "hiring.md", "Hiring", "The company plans to hire 40 engineers.")
    return raw


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def test_ingest_prints_a_clean_summary_naming_failed_files(data_root: Path, local_instance) -> None:
    raw = small_library(data_root / "raw" / "lib")
    (raw / "reports").mkdir()
    (raw / "reports" / "bad-sensitivity.md").write_text(
        f"---\nsensitivity: TOPSECRET\n---\n# Bad\n\n{BODY_MARKER}\n", encoding="utf-8")
    (raw / "feed.jsonl").write_text('{"doc_id": "ok", "text": "fine"}\n{"doc_id": "nope"}\n', encoding="utf-8")
    home = Path(local_instance.root_directory)

    proc = ragspine("ingest", "data/raw/lib", "--embedding", "none", cwd=data_root.parent, home=home)
    assert proc.returncode == 1, proc.stderr[-3000:]  # published; two files failed (exit 1)
    assert proc.stderr == "", proc.stderr[:3000]  # nothing from Dagster on the terminal
    assert "DEBUG" not in proc.stdout and "dagster - " not in proc.stdout
    out = proc.stdout
    assert "lib: published snapshot" in out and "3 documents" in out
    assert "2 files failed to parse (3 documents parsed)" in out
    lines = out.splitlines()
    failed = [ln.strip() for ln in lines if ln.startswith("    ")]
    assert any(ln.startswith("reports/bad-sensitivity.md (field 'sensitivity'):") for ln in failed), out
    assert any(ln.startswith("feed.jsonl#L2 (field 'text'):") for ln in failed), out
    assert BODY_MARKER not in out
    assert len(lines) < 12, out

    # Dagster's events went to the instance's event log instead
    (run,) = local_instance.get_runs()
    assert run.is_success and run.run_id in out
    events = local_instance.all_logs(run.run_id)
    assert sum(1 for e in events if e.is_dagster_event and e.dagster_event.is_step_success) == len(STEPS)
    assert len(events) > 50


def test_next_ingest_marks_a_killed_ingests_run_failed(data_root: Path, local_instance, tmp_path: Path) -> None:
    lib = small_library(data_root / "raw" / "lib")
    other = small_library(data_root / "raw" / "other")
    home, marker = Path(local_instance.root_directory), tmp_path / "in-documents-step"
    hanging = subprocess.Popen([PYTHON, "-c", HANGING_INGEST, str(marker), str(lib)], cwd=REPO,
                               env=python_env(DAGSTER_HOME=str(home)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: marker.exists() or hanging.poll() is not None, 180, "the ingest to reach its documents step")
        assert hanging.poll() is None, hanging.stderr.read()[-3000:]
        (run,) = local_instance.get_runs()
        assert run.status == dg.DagsterRunStatus.STARTED

        # a run whose process is alive is not touched by another ingest
        proc = ragspine("ingest", other, "--embedding", "none", cwd=tmp_path, home=home)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "marked failed" not in proc.stdout
        assert local_instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
    finally:
        hanging.send_signal(signal.SIGKILL)
        hanging.wait(timeout=60)
        hanging.stderr.close()
    assert local_instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED  # stuck: nobody ends it

    proc = ragspine("ingest", lib, "--embedding", "none", cwd=tmp_path, home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"marked failed 1 earlier ingest run(s) whose process had been killed: {run.run_id}" in proc.stdout
    dead = local_instance.get_run_by_id(run.run_id)
    assert dead.status == dg.DagsterRunStatus.FAILURE and dead.tags[TAG_LAUNCHER] == "ragspine-ingest"
    failure = [e for e in local_instance.all_logs(run.run_id) if e.is_dagster_event and e.dagster_event.is_run_failure]
    assert failure and f"pid {hanging.pid}" in failure[-1].dagster_event.message
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in local_instance.get_runs() if r.run_id != run.run_id)


# -- where ingest may read and write ---------------------------------------------------


def test_ingest_refuses_a_folder_outside_raw_and_writes_nothing(tmp_path: Path, local_instance) -> None:
    outside = small_library(tmp_path / "etc")
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    home = Path(local_instance.root_directory)
    proc = ragspine("ingest", "../../etc", "--embedding", "none", cwd=cwd, home=home)
    assert proc.returncode == 2
    assert "is not inside a data root's raw/ folder" in proc.stderr and "--data-root" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "etc"]  # no artifacts/ or cache/ next to it
    assert sorted(p.name for p in outside.iterdir()) == ["hiring.md", "revenue.md"]

    # an empty path is an error, even inside a library folder (it used to index the current folder)
    lib = small_library(tmp_path / "data" / "raw" / "lib")
    proc = ragspine("ingest", "", "--embedding", "none", cwd=lib, home=home)
    assert proc.returncode == 2 and "empty path" in proc.stderr
    assert not (tmp_path / "data" / "artifacts").exists()
    assert local_instance.get_runs() == []


def test_data_root_flag_reads_anywhere_and_writes_under_the_data_root(tmp_path: Path) -> None:
    outside = small_library(tmp_path / "elsewhere" / "lib")
    data = tmp_path / "data"
    summary = ingest(outside, data_root=data)
    assert Path(summary.snapshot_dir).resolve() == (data / "artifacts" / "lib" / "current").resolve()
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["lib"]


def test_locate_library_rules(tmp_path: Path) -> None:
    lib = small_library(tmp_path / "data" / "raw" / "lib")
    where = locate_library(str(lib))
    assert (where.library_id, where.folder, where.data_root) == ("lib", lib, tmp_path / "data")
    assert locate_library(lib / "sub" / "..").folder == lib  # '..' is resolved before the checks
    with pytest.raises(ConfigError, match="empty path"):
        locate_library("")
    with pytest.raises(ConfigError, match="empty path"):
        locate_library(lib, data_root="  ")
    with pytest.raises(ConfigError, match=r"move it to <data>/raw/raw .* or pass --data-root"):
        locate_library(lib / "..")  # data/raw itself: its parent is not raw/
    bad = tmp_path / "data" / "raw" / "bad name"
    bad.mkdir()
    with pytest.raises(ConfigError, match="library name 'bad name' is not allowed"):
        locate_library(bad)
    with pytest.raises(RagspineError, match="is not a directory"):
        locate_library(tmp_path / "data" / "raw" / "absent")
    assert locate_library(bad.parent / "lib", data_root=os.fspath(tmp_path / "d2")).data_root == tmp_path / "d2"
