"""A killed step leaves no pool worker behind (a real SIGKILL of the parent process).

The parent runs ``ordered_map`` over tasks that record their worker's pid and then sleep
for ten minutes; once every worker has reported, the parent gets SIGKILL. Every worker
must be gone soon after (the wait below is a generous liveness bound, not a timing claim);
before workers watched their step's process (``workers.die_with_parent``) they kept running
their task, and the forkserver stayed too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ragspine_index.artifacts import pid_alive
from tests.conftest import PYTHON, python_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")
WAIT_S = 300.0  # liveness bound only

HELPER = '''
import os, sys, time
from pathlib import Path

def task(args):
    out, i = args
    Path(out, f"{os.getpid()}-{i}").write_text("")
    time.sleep(600)
    return i

def main(out, n):
    from ragspine_index.workers import ordered_map
    print("parent", os.getpid(), flush=True)
    for _ in ordered_map(task, [(out, i) for i in range(n)], min_items=1, workers=n):
        pass
'''


def _zombie_or_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_pool_workers_die_when_the_step_process_is_killed(tmp_path: Path) -> None:
    (tmp_path / "killhelper.py").write_text(textwrap.dedent(HELPER), encoding="utf-8")
    out = tmp_path / "pids"
    out.mkdir()
    n = 2
    env = python_env(PYTHONPATH=os.pathsep.join([str(tmp_path), os.getcwd()]), RAGSPINE_INGEST_WORKERS=str(n))
    parent = subprocess.Popen([PYTHON, "-c", f"import killhelper; killhelper.main({str(out)!r}, {n})"],
                              env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    workers: set[int] = set()
    try:
        assert parent.stdout.readline().startswith("parent")
        deadline = time.monotonic() + WAIT_S
        while len(workers) < n:
            assert parent.poll() is None, "the parent process ended early"
            assert time.monotonic() < deadline, "the workers did not start"
            workers = {int(p.name.split("-")[0]) for p in out.iterdir()}
            time.sleep(0.1)
        assert os.getpid() not in workers and parent.pid not in workers
        import psutil

        descendants = {p.pid for p in psutil.Process(parent.pid).children(recursive=True)}  # + forkserver, tracker
        assert workers <= descendants
        workers |= descendants
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while not all(_zombie_or_gone(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [w for w in workers if not _zombie_or_gone(w)]
        assert not left, f"processes {left} (workers, forkserver, resource tracker) outlived their killed parent"
    finally:
        for w in workers:
            if pid_alive(w):
                try:
                    os.kill(w, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            os.killpg(parent.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
