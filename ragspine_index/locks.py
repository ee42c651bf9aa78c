"""One writer per library for a whole ingest, not only for its publication.

Two ingests of one library at once share its ``chunk_store.sqlite``: one run's steps
would read rows the other wrote and publish a summary tree or relation graph of another
chunk-store state than its chunk rows. Three guards, from the cheapest:

* :func:`library_run_lock` — ``ragspine ingest`` (and :func:`~.pipeline.build_library`
  callers that want it) hold ``artifacts/<library>/.ingest.lock`` (an exclusive
  ``flock``, released when the holder dies) for the whole run; a second one is refused
  at once with a message naming the holder;
* Dagster runs (sensor, UI, schedule) are kept apart by the instance's run-queue tag
  concurrency limit on ``dagster/partition`` (the ``dagster.yaml`` written by
  ``ragspine ingest`` and ``scripts/dagster_dev.sh``) and by ``raw_files_sensor``, which
  never requests a run of a library that has one in flight;
* whatever ran anyway: the manifest records the chunk-store state the run's ``chunks``
  step produced (:data:`CHUNK_STATE_KEY`), and publication refuses to publish when the
  store's active rows are in another state by then (:class:`ConcurrentIngestError`).
"""

from __future__ import annotations

import contextlib
import json
import fcntl
import os
import socket
import time
from pathlib import Path

from ragspine_core.errors import RagspineError

from ragspine_index.artifacts import LibraryPaths

INGEST_LOCK_FILE = ".ingest.lock"
#: The manifest key of the chunk-store state (``ChunkUpdate.active_hash``) the run built from.
CHUNK_STATE_KEY = "chunk_store_state"


class ConcurrentIngestError(RagspineError):
    """Another ingest of the same library is running, or ran during this one."""


def flock_within(fh, timeout_s: float, *, poll_s: float) -> bool:
    """Take an exclusive ``flock`` on ``fh``, retrying every ``poll_s`` for up to ``timeout_s``.

    Returns False when another holder kept it that long (the caller raises its own error).
    The lock goes with the file description: released on unlock, close or process death.
    """
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)


@contextlib.contextmanager
def library_run_lock(paths: LibraryPaths, *, wait_s: float = 0.0):
    """Hold ``<library>/.ingest.lock`` for a whole ingest run.

    Waits up to ``wait_s`` seconds for another holder, then refuses.

    Raises:
        ConcurrentIngestError: another process holds the lock (the message names it).
    """
    paths.root.mkdir(parents=True, exist_ok=True)
    lock_path = paths.root / INGEST_LOCK_FILE
    fh = open(lock_path, "a+b")
    try:
        if not flock_within(fh, wait_s, poll_s=0.2):
            raise ConcurrentIngestError(
                f"another ingest of library {paths.library_id!r} is running ({_holder(lock_path)}); "
                "wait for it to finish, then run again (two ingests of one library at once would "
                "publish a snapshot mixed from two chunk-store states)")
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()
            fh.flush()
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    finally:
        fh.close()


def _holder(lock_path: Path) -> str:
    try:
        text = lock_path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return text or f"it holds {lock_path}"


def check_chunk_state(paths: LibraryPaths, recorded: str | None, published: str) -> None:
    """Refuse to publish rows of another chunk-store state than the run's artifacts were built from.

    Raises:
        ConcurrentIngestError: the store's active rows (hash ``published``) are not the
            state the run's ``chunks`` step produced (``recorded``).
    """
    if recorded and recorded != published:
        raise ConcurrentIngestError(
            f"the chunk store of library {paths.library_id!r} changed while this run built its artifacts (another "
            "ingest of this library ran at the same time), so its index would not match the chunk rows; nothing was "
            "published and the previous snapshot keeps serving. Run the ingest again once the other one has finished")


# ------------------------------------------------------------------ the run claim
#: ``<library>/.ingest.owner``: the run that is writing the library (JSON: run id, host,
#: pid and its start time). Every step of every path claims it before it writes —
#: ``ragspine ingest``, ``dagster asset materialize``, sensor, schedule and backfill runs,
#: :func:`~.pipeline.build_library` — so two runs of one library never interleave, whatever
#: launched them (the flock above covers one process only; a Dagster run's steps may run in
#: several processes, one after another).
OWNER_FILE = ".ingest.owner"
_OWNER_MUTEX = ".ingest.owner.lock"
#: How long a claim waits for another step's claim to finish reading/writing the owner file.
_MUTEX_WAIT_S = 30.0


def process_start(pid: int) -> str:
    """The start time of process ``pid`` (clock ticks since boot, Linux), or "" if unknown:
    with the pid, it names one process (a pid reused later has another start)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return ""


def _owner_alive(owner: dict, run_unfinished) -> bool:
    """Whether the run that owns the claim may still be writing.

    The Dagster instance decides for a run it knows (unfinished: alive; finished, failed or
    canceled: not). Otherwise its process does: alive on this host while the pid exists
    with the same start time; a claim from another host counts as alive.
    """
    status = run_unfinished(str(owner.get("run_id", ""))) if run_unfinished is not None else None
    if status is not None:
        return bool(status)
    if owner.get("host") != socket.gethostname():
        return True
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    from ragspine_index.artifacts import pid_alive

    if not pid_alive(pid):
        return False
    started, now = str(owner.get("start", "")), process_start(pid)
    return not (started and now and started != now)


def _read_owner(path: Path) -> dict | None:
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent, or torn/damaged: no claim to honour
    return owner if isinstance(owner, dict) and owner.get("run_id") else None


@contextlib.contextmanager
def _owner_mutex(paths: LibraryPaths):
    paths.root.mkdir(parents=True, exist_ok=True)
    with open(paths.root / _OWNER_MUTEX, "a+b") as fh:
        if not flock_within(fh, _MUTEX_WAIT_S, poll_s=0.05):
            raise ConcurrentIngestError(f"could not read the run claim of library {paths.library_id!r} within "
                                        f"{_MUTEX_WAIT_S:.0f} s ({paths.root / _OWNER_MUTEX} stays locked); run again")
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def claim_library(paths: LibraryPaths, run_id: str, *, run_unfinished=None, step: str = "") -> None:
    """Claim ``paths``' library for run ``run_id`` (again: a no-op), or refuse.

    ``run_unfinished(run_id)`` (the Dagster layer passes one reading its instance) says
    whether a run is unfinished (True), finished (False) or unknown to it (None).

    Raises:
        ConcurrentIngestError: another run that may still be writing holds the claim; the
            message names it and how to go on.
    """
    if not run_id:
        return  # an asset invoked directly in a test: no run to tell apart
    path = paths.root / OWNER_FILE
    with _owner_mutex(paths):
        owner = _read_owner(path)
        if owner and owner.get("run_id") != run_id and _owner_alive(owner, run_unfinished):
            raise ConcurrentIngestError(
                f"library {paths.library_id!r} is being written by run {owner.get('run_id')} (pid {owner.get('pid')} on "
                f"{owner.get('host')}){f', so step {step} of run {run_id} did not start' if step else ''}: one writer per "
                "library, so that no snapshot mixes the outputs of two runs; wait for that run to finish (or cancel it "
                f"in the Dagster UI), then run again. If no such run is running, delete {path}")
        if owner and owner.get("run_id") == run_id and owner.get("pid") == os.getpid():
            return
        pid = os.getpid()
        tmp = path.with_name(f".{OWNER_FILE}-{pid}")
        tmp.write_text(json.dumps({"run_id": run_id, "host": socket.gethostname(), "pid": pid,
                                   "start": process_start(pid), "step": step}), encoding="utf-8")
        os.replace(tmp, path)


def release_library(paths: LibraryPaths, run_id: str | None = None) -> None:
    """Give up ``run_id``'s claim (after its publication); another run's claim is left alone.

    Without ``run_id``: the claim last written by this process, whatever its run (an
    in-process run is over — published or failed — when the call that ran it returns).
    """
    if not (paths.root / OWNER_FILE).exists():
        return
    with _owner_mutex(paths):
        owner = _read_owner(paths.root / OWNER_FILE)
        mine = (owner.get("run_id") == run_id) if (owner and run_id) else \
            bool(owner and run_id is None and owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname())
        if mine:
            (paths.root / OWNER_FILE).unlink(missing_ok=True)
