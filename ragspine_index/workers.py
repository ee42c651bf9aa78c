"""Data parallelism inside one step: ordered ``map`` over a process pool.

The ingest's per-document Python work (parsing and marking checks, chunking, BM25
tokenizing) is independent per document, so a large library spreads it over the
machine's cores. Results come back in input order, so everything written from them
is byte-identical to a serial run (``tests/index/test_ingest_workers.py``).

* ``RAGSPINE_INGEST_WORKERS``: worker processes per step; ``0`` (default) = one per CPU
  (at most :data:`MAX_DEFAULT_WORKERS`), ``1`` = serial, in the step's own process.
* Work smaller than the caller's ``min_items`` runs serially: a pool costs ~0.3 s to
  start, which small libraries (and the test suite) should not pay.
* Serial, too, where a pool cannot start: in a daemonic process (Dask's worker processes
  by default) and when ``__main__`` is not importable (a script read from stdin).
* Workers start from ``forkserver`` (never ``fork``: the step runs inside Dagster,
  whose threads a forked child would inherit mid-lock). A worker that dies raises
  ``BrokenProcessPool`` in the step: the run fails with that error, it never hangs.
  Workers die with the step's process (:func:`die_with_parent`): a killed ingest leaves
  no worker behind.

This is not a distributed executor: it uses the cores of the node a step runs on, under
whichever Dagster executor placed the step there (``docs/operations.md``).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterator, Sequence, TypeVar

from ragspine_core.errors import RagspineError
from ragspine_index.machine import machine_settings

T = TypeVar("T")
R = TypeVar("R")

WORKERS_ENV = "RAGSPINE_INGEST_WORKERS"
#: With ``RAGSPINE_INGEST_WORKERS=0``: one worker per CPU, at most this many.
MAX_DEFAULT_WORKERS = 8
#: Tasks submitted ahead of the consumer, per worker.
IN_FLIGHT_PER_WORKER = 3


def ingest_workers() -> int:
    """Worker processes a step may use (``RAGSPINE_INGEST_WORKERS``; see the module docstring).

    Read at each call from :func:`~ragspine_index.machine.machine_settings` (what the edge
    of the process it runs in configured), so a step sees the value of its own machine.
    """
    n = machine_settings().ingest_workers
    if n == 0:
        n = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
                MAX_DEFAULT_WORKERS)
    return max(1, n)


def batches(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` cut into consecutive slices of at most ``size``."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def ordered_map(fn: Callable[[T], R], items: Sequence[T], *, min_items: int, workers: int | None = None) -> Iterator[R]:
    """``map(fn, items)`` in input order, over worker processes when it pays.

    ``fn`` must be a module-level function and ``items`` and results picklable. Serial
    (in this process) when there is one worker or fewer than ``min_items`` items.
    """
    n = ingest_workers() if workers is None else workers
    if n <= 1 or len(items) < max(min_items, 2) or not _main_is_importable() or daemonic_process():
        yield from map(fn, items)
        return
    ctx = multiprocessing.get_context("forkserver")
    workers_n = min(n, len(items))
    try:
        with ProcessPoolExecutor(max_workers=workers_n, mp_context=ctx, initializer=die_with_parent,
                                 initargs=(os.getpid(),)) as pool:
            # a bounded window of tasks in flight: results are consumed as they come, in
            # order, so a slow consumer (the chunk store's writes) never buffers them all
            pending: deque = deque()
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= IN_FLIGHT_PER_WORKER * workers_n:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
    except BrokenProcessPool as exc:
        raise RagspineError(
            f"a worker process of this step died ({exc}). If you start the ingest from a script, put the call "
            "under `if __name__ == \"__main__\":` (workers import the main module, as multiprocessing does); "
            f"or set {WORKERS_ENV}=1 to run the step in one process") from exc


def die_with_parent(step_pid: int) -> None:
    """Pool worker initializer: exit at once when the step's process ``step_pid`` is gone.

    A step killed with SIGKILL (``kill -9``, the OOM killer, ``dagster dev`` stopped with a
    run in flight) cannot shut its pool down, and its workers are not its children (the
    forkserver forks them; they hold the forkserver's liveness pipe, so it never exits
    either): they kept running the work they had. Each worker watches the step's process
    from a daemon thread — through a pidfd (Linux 5.3+: woken by the kernel when the
    process exits, no polling), else by checking every :data:`PARENT_POLL_S` seconds — and
    ends itself with SIGKILL when it is gone. The forkserver and resource tracker then see
    their last client go and exit too.
    """
    import threading

    if not _alive(step_pid):
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(step_pid,), name="ragspine-die-with-parent", daemon=True).start()


#: How often a worker checks its step's process where pidfds are unavailable.
PARENT_POLL_S = 1.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch_parent(step_pid: int) -> None:
    import select
    import signal
    import time

    fd = None
    try:
        fd = os.pidfd_open(step_pid)
    except (AttributeError, OSError):
        pass
    if fd is not None:
        select.select([fd], [], [])  # readable once the process has exited
    else:
        while _alive(step_pid):
            time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGKILL)


def daemonic_process() -> bool:
    """A daemonic process (a Dask worker with ``distributed.worker.daemon``) may not start children."""
    return bool(multiprocessing.current_process().daemon)


def _main_is_importable() -> bool:
    """Whether worker processes can import ``__main__`` as multiprocessing does (not ``python - <<EOF``)."""
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None:
        return True
    path = getattr(main, "__file__", None)
    return path is None or os.path.isfile(path)
