"""Runs of a library on the Dagster instance: which are in flight, which died.

* :func:`in_flight_runs` — unfinished runs of a library partition (queued, starting,
  started, canceling): ``raw_files_sensor`` requests no second run while one exists, and
  ``ragspine ingest`` refuses to start one beside it.
* :func:`fail_dead_runs` — runs left STARTED by a process that was killed (``dagster dev``
  stopped with runs in flight, the OOM killer): Dagster's run monitoring cannot check the
  workers of the default run launcher, so they would stay STARTED forever and their library
  would look "in flight" for good. A run counts as dead when the process that executed it
  — the pid in Dagster's own "Started process for run (pid: N)" engine event, or the pid a
  ``ragspine ingest`` recorded in its tags — no longer exists on this machine, or is
  another process that got the pid later. Only runs of the default (local) run launcher
  and ``ragspine ingest`` runs of this host are judged; any other run is left alone.
  The sensor runs this sweep at every tick (so on the first tick after a restart), and
  ``ragspine ingest`` before it starts.
* :func:`last_run_failed` — whether a library's latest run failed, and how many runs of its
  current content have failed: the sensor requests it again (at most
  :data:`MAX_AUTOMATIC_RETRIES` times per content fingerprint); a latest run whose
  publication failed on stale upstream is ``stale_upstream_sensor``'s (``stale.py``).
"""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

import dagster as dg

from ragspine_index.artifacts import pid_alive
from ragspine_index.locks import process_start

TAG_PARTITION = "dagster/partition"
#: Tags ``ragspine ingest`` puts on its runs: who runs them, so a later ingest can tell a
#: run whose process was killed (it stays STARTED forever) from one still running.
TAG_LAUNCHER = "ragspine/launcher"
LAUNCHER_INGEST = "ragspine-ingest"
TAG_HOST = "ragspine/host"
TAG_PID = "ragspine/pid"
TAG_PROCESS_START = "ragspine/process_start"  # start time of that pid (detects pid reuse)
#: The machine a run's steps executed on (set by the first step; a run on another machine
#: is never judged dead here).
TAG_RUN_HOST = "ragspine/run_host"
TAG_FINGERPRINT = "ragspine/fingerprint"
#: Why a sensor requested a run (``repair``: snapshot_verification_sensor; ``stale-upstream``: stale_upstream_sensor).
TAG_TRIGGER = "ragspine/trigger"
UNFINISHED = (dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
              dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING)
#: A library whose run failed is requested again by the sensor at most this many times
#: for the same content (a later change of its files starts the count again).
MAX_AUTOMATIC_RETRIES = 3
_STARTED_PROCESS = re.compile(r"Started process for run \(pid: (\d+)\)")


def in_flight_runs(instance: dg.DagsterInstance, library_id: str) -> list[str]:
    """Ids of the unfinished runs of partition ``library_id`` (newest first)."""
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=list(UNFINISHED), tags={TAG_PARTITION: library_id}))
    return [r.run_id for r in runs]


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        pass
    return None


def process_started_at(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds, Linux), or None when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None
    boot = _boot_time()
    return None if boot is None else boot + ticks / os.sysconf("SC_CLK_TCK")


def _worker_pid(instance: dg.DagsterInstance, run: dg.DagsterRun) -> tuple[int, float] | None:
    """(pid, when it was recorded) of the process that executes ``run``, from the event log."""
    found = None
    for record in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        match = _STARTED_PROCESS.search(record.message or record.user_message or "")
        if match:
            found = (int(match.group(1)), float(record.timestamp))  # the last one wins (a resumed run)
    return found


def _local_launcher(instance: dg.DagsterInstance) -> bool:
    try:
        from dagster._core.launcher.default_run_launcher import DefaultRunLauncher

        return isinstance(instance.run_launcher, DefaultRunLauncher)
    except Exception:  # an instance whose launcher cannot be loaded here: judge nothing
        return False


def ingest_run_tags() -> dict[str, str]:
    """Tags naming the process that runs an ingest (see :func:`fail_dead_runs`)."""
    pid = os.getpid()
    return {TAG_LAUNCHER: LAUNCHER_INGEST, TAG_HOST: socket.gethostname(), TAG_PID: str(pid),
            TAG_PROCESS_START: process_start(pid)}


def ingest_process_alive(tags: dict[str, str]) -> bool | None:
    """Whether the process that ran a ``ragspine ingest`` run still exists; None when this
    machine cannot tell (another host, or no pid recorded)."""
    pid = tags.get(TAG_PID, "")
    if tags.get(TAG_HOST) != socket.gethostname() or not pid.isdigit():
        return None
    if not pid_alive(int(pid)):
        return False
    started, now = tags.get(TAG_PROCESS_START, ""), process_start(int(pid))
    return not (started and now and started != now)  # a different process got the pid


def run_process_alive(instance: dg.DagsterInstance, run: dg.DagsterRun, *, local: bool | None = None,
                      strict_host: bool = False) -> bool | None:
    """Whether the process executing ``run`` still exists; None when this machine cannot tell.

    A run whose steps recorded another machine (``ragspine/run_host``) is never judged;
    with ``strict_host`` neither is one that recorded none (``ragspine ingest`` may run on
    another machine than the code server that launches the instance's runs; the sensor
    runs in that code server, beside the run workers of the default launcher).
    """
    if run.tags.get(TAG_PID):
        return ingest_process_alive(dict(run.tags))
    if not (_local_launcher(instance) if local is None else local):
        return None
    host = run.tags.get(TAG_RUN_HOST)
    if (host and host != socket.gethostname()) or (strict_host and not host):
        return None
    worker = _worker_pid(instance, run)
    if worker is None:
        return None  # not started yet (run monitoring's start timeout covers that)
    pid, recorded_at = worker
    if not pid_alive(pid):
        return False
    started = process_started_at(pid)
    # a process that started after the run worker announced itself is another one with its pid
    return not (started is not None and started > recorded_at + 2.0)


def fail_dead_runs(instance: dg.DagsterInstance, libraries: list[str] | None = None, *,
                   local: bool | None = None, strict_host: bool = False) -> list[str]:
    """Mark failed every run whose process is gone (see the module docstring): a
    STARTED/STARTING run of ``libraries`` (default all) judged by :func:`run_process_alive`,
    and an unfinished ``ragspine ingest`` run of any library whose recorded process died
    (:func:`ingest_process_alive`; only runs started on this host). Returns the run ids
    marked failed. The one run monitor of the code location: the sensor and ``ragspine
    ingest`` both call it."""
    statuses = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING]
    runs = list(instance.get_runs(filters=dg.RunsFilter(statuses=statuses)))
    seen = {run.run_id for run in runs}
    runs += [run for run in instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.NOT_STARTED],
                                                                    tags={TAG_LAUNCHER: LAUNCHER_INGEST}))
             if run.run_id not in seen]
    wanted = None if libraries is None else set(libraries)
    failed = []
    for run in runs:
        by_ingest = run.tags.get(TAG_LAUNCHER) == LAUNCHER_INGEST
        if by_ingest:
            if ingest_process_alive(dict(run.tags)) is not False:
                continue
            why = (f"The process that ran this run (ragspine ingest, pid {run.tags.get(TAG_PID)} on "
                   f"{run.tags.get(TAG_HOST)}) is gone: it was killed before the run finished.")
        else:
            if wanted is not None and run.tags.get(TAG_PARTITION) not in wanted:
                continue
            if run_process_alive(instance, run, local=local, strict_host=strict_host) is not False:
                continue
            why = ("The process that executed this run is gone (killed before the run finished, e.g. dagster dev "
                   "stopped with the run in flight).")
        instance.report_run_failed(
            run, f"{why} Marked failed at {time.strftime('%Y-%m-%d %H:%M:%S')} by pid {os.getpid()}. "
                 "Nothing of it was published unless its index_manifest step succeeded.")
        failed.append(run.run_id)
    return failed


def latest_run(instance: dg.DagsterInstance, library_id: str) -> dg.DagsterRun | None:
    """The newest run of partition ``library_id`` (None: it has none)."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags={TAG_PARTITION: library_id}), limit=1)
    return runs[0] if runs else None


def last_run_failed(instance: dg.DagsterInstance, library_id: str, fingerprint16: str) -> int | None:
    """When the latest run of ``library_id`` failed: how many runs tagged with this content
    ``fingerprint16`` have failed (0 when the failed run was not the sensor's, e.g. one
    launched in the UI); None when the latest run did not fail (or there is none)."""
    latest = latest_run(instance, library_id)
    if latest is None or latest.status != dg.DagsterRunStatus.FAILURE:
        return None
    failures = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE],
                                                       tags={TAG_PARTITION: library_id, TAG_FINGERPRINT: fingerprint16}))
    return len(failures)
