"""A publisher killed mid-way leaves temp files behind; the next publication removes them.

Each crash is real: a child process runs the assets (``ragspine ingest``'s code path) and
SIGKILLs itself at one point of the real code (while fsyncing a ``write_once`` temp
folder, while fsyncing ``snapshots/.staging-*``, between creating ``.current-<pid>`` and
renaming it over ``current``). The next ingest must publish and leave none of it.
"""

from __future__ import annotations

import fcntl
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine_index.artifacts import LibraryPaths, remove_stale_tmp_dirs
from ragspine_index.publish import LOCK_FILE, publication_lock
from ragspine_core.errors import RagspineError
from ragspine_query.library import open_library
from tests.conftest import PYTHON, ingest, python_env

from tests.assets.ops.helpers import write_doc

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]

# Runs one ingest and SIGKILLs itself at the point named by argv[1].
CRASHING_INGEST = r"""
import os, signal, sys
from pathlib import Path

point, raw = sys.argv[1], Path(sys.argv[2])
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
real_fsync, real_replace = os.fsync, os.replace

def fsync(fd):
    name = os.readlink(f"/proc/self/fd/{fd}")
    if (point == "work" and "/.tmp-" in name) or (point == "staging" and "/.staging-" in name):
        die()
    return real_fsync(fd)

def replace(src, dst, **kw):
    if point == "current" and os.path.basename(os.fspath(src)).startswith(".current-"):
        die()
    return real_replace(src, dst, **kw)

os.fsync, os.replace = fsync, replace
from tests.conftest import ingest
ingest(raw)
raise SystemExit("the crash point was never reached")
"""


def leftovers(artifacts: Path) -> list[str]:
    found = [*artifacts.glob("snapshots/.staging-*"), *artifacts.glob(".current-*"), *artifacts.glob("work/**/.tmp-*")]
    return sorted(p.relative_to(artifacts).as_posix() for p in found)


@pytest.fixture
def library(data_root: Path) -> Path:
    raw = data_root / "raw" / "lib"
    write_doc(raw / "revenue.md", "Revenue", "Revenue grew 12% on strong exports.")
    write_doc(raw / "hiring.md", "Hiring", "The company plans to hire 40 engineers.")
    return raw


@pytest.mark.parametrize("point", ["work", "staging", "current"])
def test_next_publish_removes_what_a_killed_publisher_left(library: Path, data_root: Path, point: str) -> None:
    artifacts = data_root / "artifacts" / "lib"
    if point == "current":
        ingest(library)  # a published snapshot exists; the crash comes at the pointer swap
        write_doc(library / "new.md", "New", "A new document changes the snapshot.")
    proc = subprocess.run([PYTHON, "-c", CRASHING_INGEST, point, str(library)], cwd=REPO, env=python_env(),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    left = leftovers(artifacts)
    prefix = {"work": "work/", "staging": "snapshots/.staging-", "current": ".current-"}[point]
    assert any(p.startswith(prefix) for p in left), left  # the crash really left one behind

    summary = ingest(library)
    assert leftovers(artifacts) == [], "the next publication must remove a dead publisher's temp files"
    assert Path(summary.snapshot_dir).resolve() == (artifacts / "current").resolve()
    with open_library(artifacts) as lib:
        assert lib.n_chunks > 0


def test_a_live_writers_tmp_folder_is_kept(tmp_path: Path) -> None:
    work = tmp_path / "work"
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait(timeout=60)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live_dir = work / "bm25" / f".tmp-abc-{sleeper.pid}"
        live_dir.mkdir(parents=True)
        dead_dir = work / "bm25" / f".tmp-def-{exited.pid}"
        (dead_dir / "nested").mkdir(parents=True)
        odd_dir = work / "vectors" / ".tmp-no-pid-here"  # not ours to judge: kept
        odd_dir.mkdir(parents=True)
        assert remove_stale_tmp_dirs(work) == [dead_dir]
        assert live_dir.is_dir() and odd_dir.is_dir() and not dead_dir.exists()
    finally:
        sleeper.kill()
        sleeper.wait(timeout=30)


HOLD_LOCK = """import fcntl, sys, time
f = open(sys.argv[1], "a+b")
fcntl.flock(f, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


def test_publication_lock_excludes_a_second_publisher(tmp_path: Path) -> None:
    paths = LibraryPaths("lib", tmp_path / "raw" / "lib", tmp_path / "artifacts" / "lib")
    paths.root.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(paths.root / LOCK_FILE)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RagspineError, match="another process has been publishing library 'lib'"):
            with publication_lock(paths, timeout=0.3):
                pass
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()
    with publication_lock(paths, timeout=5):  # released when its holder died
        with open(paths.root / LOCK_FILE, "a+b") as fh:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
