"""``scripts/dagster_dev.sh`` started in the background stops on SIGTERM, children included.

Started the way a background job of a non-interactive shell starts (SIGINT ignored),
plain ``dagster dev`` ignores SIGTERM too (it maps SIGTERM to its SIGINT handler); the
script restores both signals, so SIGTERM shuts the webserver, daemon and code servers down.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import PYTHON, python_env

from tests.assets.ops.helpers import make_dagster_home

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "dagster_dev.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serving(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def as_background_job() -> None:
    """What `cmd &` in a non-interactive shell gives cmd: SIGINT ignored, everything else
    as a fresh shell has it (SIGTERM default, no signal blocked) whatever state this test
    process is in."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def signal_state(pid: int) -> str:
    """The SigIgn/SigBlk/SigCgt lines of a process (what it ignores, blocks and catches)."""
    try:
        return " ".join(line.strip() for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                        if line.startswith(("SigIgn", "SigBlk", "SigCgt")))
    except OSError as exc:
        return f"unreadable: {exc}"


def test_dagster_dev_script_stops_on_sigterm_in_the_background(tmp_path: Path) -> None:
    home = make_dagster_home(tmp_path / "dagster_home")
    port = free_port()
    log = open(tmp_path / "dagster_dev.log", "wb")
    proc = subprocess.Popen(["bash", str(SCRIPT), "-w", "workspace.yaml", "-p", str(port)], cwd=REPO,
                            env=python_env(DAGSTER_HOME=str(home), PYTHON=PYTHON, DAGSTER_DEV_STOP_GRACE_S="240"),
                            stdout=log, stderr=subprocess.STDOUT, preexec_fn=as_background_job, start_new_session=True)
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 600  # a liveness bound, generous for a busy machine: never a timing claim
        while not serving(port):
            assert proc.poll() is None, (tmp_path / "dagster_dev.log").read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "dagster dev did not serve within 600 s"
            time.sleep(0.5)
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        names = " ".join(" ".join(p.cmdline()) for p in tree)
        assert "dagster_webserver" in names and "dagster._daemon" in names, names

        before = {p.pid: signal_state(p.pid) for p in tree}
        proc.send_signal(signal.SIGTERM)
        try:  # liveness only (it stops at all, by itself): how long it takes depends on the machine's load
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            pytest.fail(f"dagster_dev.sh did not stop within 300 s of SIGTERM; signal state before it: {before}; log: "
                        + (tmp_path / "dagster_dev.log").read_text(errors="replace")[-2000:])
        gone, alive = psutil.wait_procs(tree, timeout=60)
        assert not alive, f"left running after SIGTERM: {[p.pid for p in alive]}"
        assert proc.returncode == 0  # a graceful stop within the (long) grace, not the SIGKILL fallback
        assert not serving(port)
    finally:
        for p in tree:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
        shutil.rmtree(home, ignore_errors=True)
