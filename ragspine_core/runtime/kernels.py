"""The query path's compiled kernels (:mod:`.query_jit`), loaded off the query thread.

Like the BM25 kernel (:mod:`ragspine_core.lexical.bm25_jit`), the kernels are optional
(numba, extra ``accel``) and never imported on the first queries of a process: numba's
import alone costs more than a cold query. :func:`query_kernels` counts calls; after
:data:`JIT_AFTER` it starts one background thread that imports and compiles them (numba
caches the machine code on disk, so only a machine's first compile is slow). Until then,
and wherever numba is missing or cannot compile, it returns None and callers run their
numpy code, which gives the same bytes.

``RAGSPINE_QUERY_JIT=0`` keeps the numpy code (a check, or a platform where numba
misbehaves): the edge's :class:`~ragspine_core.settings.Settings` carry it in through
:func:`set_query_jit` (nothing here reads the environment); :func:`compile_query_kernels`
compiles now, blocking (tests, benchmarks).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np


ENV_QUERY_JIT = "RAGSPINE_QUERY_JIT"
#: calls of :func:`query_kernels` before the background compile starts
JIT_AFTER = 32

_lock = threading.Lock()
_load_lock = threading.Lock()
_kernels: SimpleNamespace | None = None
_state = "idle"  # idle -> loading -> ready | missing
_calls = 0


_enabled = True  # settings.query_jit, set at an edge through set_query_jit


def set_query_jit(enabled: bool) -> None:
    """The process-wide switch (``Settings.query_jit``, ``RAGSPINE_QUERY_JIT``), set from an
    edge's settings (:func:`ragspine_core.runtime.threads.pin_query_threads` passes it when
    the first retriever is built). Off before the compile starts keeps the numpy code for
    good; once compiled, the kernels stay."""
    global _enabled
    _enabled = bool(enabled)


def _disabled() -> bool:
    return not _enabled


def query_kernels() -> SimpleNamespace | None:
    """The compiled kernels (``scores_top_k`` and its ``_nogil`` twin, ``fuse_minmax``,
    ``fuse_rrf``, ``pick_scores``), or None
    (not compiled yet, numba missing, or ``RAGSPINE_QUERY_JIT=0``)."""
    global _calls, _state
    k = _kernels
    if k is not None or _state != "idle":
        return k
    _calls += 1  # racy on purpose: an approximate count is enough, the start below is locked
    if _calls >= JIT_AFTER:
        with _lock:
            if _state == "idle":
                if _disabled():
                    _state = "missing"
                    return None
                _state = "loading"
                # not a daemon: an exiting interpreter waits for the compile to end
                threading.Thread(target=_load, name="ragspine-query-jit").start()
    return None


def compile_query_kernels() -> bool:
    """Compile the kernels now (blocking); False when numba is missing, cannot compile,
    or ``RAGSPINE_QUERY_JIT=0``."""
    global _state
    with _lock:
        if _state == "idle" and _disabled():
            _state = "missing"
        if _state == "missing":
            return False
        if _state == "idle":
            _state = "loading"
    _load()
    return _kernels is not None


def _load() -> None:
    global _kernels, _state
    with _load_lock:
        if _kernels is not None:
            return
        try:
            from ragspine_core.runtime import query_jit as jit
        except Exception:  # the accel extra is not installed (or numba cannot cache here): numpy stays
            _state = "missing"
            return
        try:  # compile now, for the argument types of every later call
            f32, f64, i64 = np.zeros(3, np.float32), np.zeros(3, np.float64), np.zeros(3, np.int64)
            bounds, weights = np.array([0, 1, 3], np.int64), np.ones(2, np.float64)
            jit.scores_top_k(f32, 2, np.float32(0.0), i64, True, 0)
            jit.scores_top_k_nogil(f32, 2, np.float32(0.0), i64, True, 0)
            jit.fuse_minmax(i64, f64, bounds, weights, 0)
            jit.fuse_rrf(i64, bounds, weights, 60.0, 0)
            jit.pick_scores(i64, i64, f64, bounds)
        except Exception:  # a numba that cannot compile them: the numpy code stays
            _state = "missing"
            return
        _kernels = SimpleNamespace(scores_top_k=jit.scores_top_k, scores_top_k_nogil=jit.scores_top_k_nogil,
                                   nogil_min_rows=jit.NOGIL_MIN_ROWS, fuse_minmax=jit.fuse_minmax, fuse_rrf=jit.fuse_rrf,
                                   pick_scores=jit.pick_scores)
        _state = "ready"



def kernel_state() -> str:
    """``idle`` (not asked for yet), ``loading``, ``ready`` or ``missing`` (numpy answers)."""
    return _state


__all__ = ["ENV_QUERY_JIT", "JIT_AFTER", "compile_query_kernels", "kernel_state", "query_kernels", "set_query_jit"]
