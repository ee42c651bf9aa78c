"""Real local services for the operations tests: Redis and PostgreSQL on loopback.

Every service runs in a temp folder on a free port, in its own process group, and is
stopped by process id (SIGTERM, then SIGKILL after a grace period) by the fixture that
started it. Every wait has a deadline. A missing binary skips the test with a message
naming the Debian package (``.ci/run`` installs both).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pytest

VENV_BIN = str(Path(sys.executable).parent)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, *, interval: float = 0.2,
               on_timeout: Callable[[], str] | None = None) -> None:
    """Poll ``predicate`` until true; fail the test (with ``on_timeout()`` appended) after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    detail = on_timeout() if on_timeout else ""
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{detail}")


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def stop_group(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM the process group led by ``proc`` (started with start_new_session), SIGKILL after ``grace`` s."""
    if proc.poll() is not None:
        _kill_group(proc.pid, signal.SIGKILL)  # stragglers of an exited leader
        return
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    _kill_group(proc.pid, signal.SIGKILL)


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def spawn(cmd: Sequence[str], *, log: Path, env: dict[str, str] | None = None, cwd: Path | None = None,
          user: str | None = None) -> subprocess.Popen:
    """Start ``cmd`` in a new session (its own process group), output to ``log``."""
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    with open(log, "ab") as out:
        return subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)


# ----------------------------------------------------------------------------- Redis
@dataclass
class Redis:
    proc: subprocess.Popen
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"


def start_redis(workdir: Path, timeout: float = 20.0) -> Redis:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server; .ci/run installs it)")
    port = free_port()
    log = workdir / "redis.log"
    proc = spawn([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir), "--save", "",
                  "--appendonly", "no", "--protected-mode", "yes"], log=log)
    service = Redis(proc, port)
    await_listening(proc, port, "redis-server", log, timeout, stop=lambda: stop_group(proc))
    return service


def await_listening(proc, port: int, name: str, log: Path, timeout: float, *, stop) -> None:
    """Wait until ``proc`` listens on ``port``; fail with its log tail if it exits, and
    ``stop()`` it on any failure (a timeout included), so no service outlives its test."""
    try:
        wait_until(lambda: port_open(port) or proc.poll() is not None, timeout, f"{name} to listen",
                   on_timeout=lambda: tail(log))
        if proc.poll() is not None:
            pytest.fail(f"{name} exited {proc.returncode}:\n{tail(log)}")
    except BaseException:
        stop()
        raise


# ----------------------------------------------------------------------------- Celery
def write_celery_run_config(path: Path, redis: Redis) -> Path:
    """The run config of a ``celery_executor`` run on ``redis`` (broker db 0, results db 1)."""
    path.write_text("execution:\n  config:\n"
                    f"    broker: \"{redis.url}/0\"\n    backend: \"{redis.url}/1\"\n", encoding="utf-8")
    return path


def start_celery_workers(work: Path, run_config: Path, env: dict[str, str], procs: list, *,
                         names: Sequence[str] = ("w1", "w2"), cwd: Path | None = None,
                         timeout: float = 90.0) -> dict[str, tuple[subprocess.Popen, Path]]:
    """``dagster-celery worker start`` once per name (``--pool solo``: each executes its
    steps in its own process; ``-n`` gives each its own Celery node name;
    ``--prefetch-multiplier 1``: a worker reserves one task at a time, so the first worker
    to poll cannot take every queued step while the other is still connecting — under load
    it took all three shards once), and wait until each says it is ready. Every started process is appended to ``procs`` at once, so the
    caller's ``finally`` stops it even when a wait fails."""
    workers: dict[str, tuple[subprocess.Popen, Path]] = {}
    for name in names:
        log = work / f"{name}.log"
        proc = spawn([f"{VENV_BIN}/dagster-celery", "worker", "start", "-A", "dagster_celery.app",
                      "-y", str(run_config), "-n", name, "--", "--pool", "solo", "--prefetch-multiplier", "1", "--without-gossip",
                      "--without-mingle", "--without-heartbeat"], log=log, env=env, cwd=cwd)
        procs.append(proc)
        workers[name] = (proc, log)
    for name, (proc, log) in workers.items():
        wait_until(lambda: " ready." in tail(log) or proc.poll() is not None, timeout,
                   f"celery worker {name}", on_timeout=lambda: tail(log))
        if proc.poll() is not None:
            pytest.fail(f"worker {name} exited {proc.returncode}:\n{tail(log)}")
    return workers


# ------------------------------------------------------------------------ PostgreSQL
PG_VERSIONS_DIR = Path("/usr/lib/postgresql")


def postgres_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<v>/bin`` holding initdb and postgres (Debian layout)."""
    if not PG_VERSIONS_DIR.is_dir():
        return None
    found = []
    for d in PG_VERSIONS_DIR.iterdir():
        if (d / "bin" / "initdb").exists() and (d / "bin" / "postgres").exists() and d.name.isdigit():
            found.append((int(d.name), d / "bin"))
    return max(found)[1] if found else None


@dataclass
class Postgres:
    proc: subprocess.Popen
    port: int
    root: Path
    user: str

    @property
    def url(self) -> str:
        """For psycopg2 / libpq."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    @property
    def sqlalchemy_url(self) -> str:
        """For dagster-postgres (SQLAlchemy 2.1 maps a bare ``postgresql://`` to psycopg 3)."""
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/postgres"


def start_postgres(timeout: float = 60.0) -> Postgres:
    """initdb + postgres on loopback in a fresh temp folder (trust auth, no fsync).

    PostgreSQL refuses to run as root: as root the server runs as the ``postgres`` system
    user (created by the Debian package) through ``runuser``, in a folder it owns.
    """
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries are not installed (Debian: apt-get install postgresql; "
                    ".ci/run installs it)")
    run_as = None
    if os.geteuid() == 0:
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as "
                        "(the Debian postgresql package creates it)")
        if shutil.which("runuser") is None:
            pytest.skip("running as root and runuser (util-linux) is missing")
        run_as = "postgres"
    root = Path(tempfile.mkdtemp(prefix="ragspine-pg-"))
    if run_as is not None:
        os.chmod(root, 0o700)
        os.chown(root, account.pw_uid, account.pw_gid)
    data, log = root / "data", root / "server.log"
    init = subprocess.run(
        (["runuser", "-u", run_as, "--"] if run_as else []) +
        [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
        capture_output=True, text=True, timeout=timeout)
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"initdb failed ({init.returncode}):\n{init.stdout[-2000:]}\n{init.stderr[-2000:]}")
    port = free_port()
    log.touch()
    if run_as is not None:
        os.chown(log, account.pw_uid, account.pw_gid)
    proc = spawn([str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1", "-k", str(root),
                  "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                  "-c", "max_connections=100"], log=log, user=run_as)
    service = Postgres(proc, port, root, "postgres")
    await_listening(proc, port, "postgres", log, timeout, stop=lambda: stop_postgres(service))
    return service


def stop_postgres(service: Postgres) -> None:
    # SIGINT = PostgreSQL's "fast" shutdown; then the group, by pid
    if service.proc.poll() is None:
        try:
            os.killpg(service.proc.pid, signal.SIGINT)
            service.proc.wait(timeout=20)
        except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
            pass
    stop_group(service.proc, grace=5)
    shutil.rmtree(service.root, ignore_errors=True)
