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
