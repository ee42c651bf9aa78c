"""Query vectors, embedded once per model and text in a process.

A default query is several texts (the user's query and its glossary variants) ranked by
several dense channels (one per model of an embedding ensemble), and a query may run
twice (the filter retry). :func:`query_vectors` embeds each *distinct* text once per
model: the texts a model has not seen go to it in **one** ``embed(..., kind="query")``
call (a batch, not one call per text), and every vector is kept in a bounded LRU of that
backend instance, so a later variant, channel, retry or repeated query of the same process
reads it back.

The cache belongs to the backend *object* (a weak reference: it goes when the backend
goes). Two backends of the same model share nothing, so a test's or plug-in's backend
that changes behaviour is never served another's vectors; the query side builds one
backend per model and process (``ragspine_query.agent_api.backend_for_library``), so
every retriever of a process shares these vectors. Batching does not change a vector:
the ONNX encoders pad to the batch's longest text under an attention mask and pool over
the mask (MiniLM and multilingual-e5 return the same bytes batched or alone; USE differs
by ~1e-7, its BLAS summation order); ``tests/core/dense/test_query_vectors.py`` checks this.

Only query text is kept (never a chunk's), in memory only.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

#: Vectors kept per backend (each at most a few KiB: 2,048 x 512 float32 is 4 MiB).
MAX_ENTRIES = 2048


class _Lru:
    __slots__ = ("rows", "lock", "hits", "misses", "calls")

    def __init__(self) -> None:
        self.rows: OrderedDict[str, np.ndarray] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.calls = 0


_CACHES: "weakref.WeakKeyDictionary[Any, _Lru]" = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def _lru_of(backend: Any) -> _Lru | None:
    with _CACHES_LOCK:
        try:
            lru = _CACHES.get(backend)
            if lru is None:
                lru = _CACHES[backend] = _Lru()
        except TypeError:  # not weak-referenceable (a __slots__ class): no cache, still one batched call
            return None
    return lru


def query_vectors(backend: Any, texts: Sequence[str]) -> np.ndarray:
    """float32 ``(len(texts), backend.dim)``: the query vectors of ``texts`` by ``backend``.

    The distinct texts not cached yet are embedded in one ``backend.embed(missing,
    kind="query")`` call; the rest come from the cache. Rows are read-only views shared
    with the cache: copy before writing.
    """
    items = [str(t) for t in texts]
    lru = _lru_of(backend)
    if lru is None:
        distinct = list(dict.fromkeys(items))
        got = np.asarray(backend.embed(distinct, kind="query"), dtype=np.float32)
        at = {t: i for i, t in enumerate(distinct)}
        return got[[at[t] for t in items]] if items else got
    found: dict[str, np.ndarray] = {}
    with lru.lock:
        for t in items:
            row = lru.rows.get(t)
            if row is not None:
                lru.rows.move_to_end(t)
                found[t] = row
    missing = list(dict.fromkeys(t for t in items if t not in found))
    if missing:
        got = np.asarray(backend.embed(missing, kind="query"), dtype=np.float32)
        got.setflags(write=False)
        with lru.lock:
            lru.calls += 1
            lru.misses += len(missing)
            for t, row in zip(missing, got):
                found[t] = row
                lru.rows[t] = row
                lru.rows.move_to_end(t)
            while len(lru.rows) > MAX_ENTRIES:
                lru.rows.popitem(last=False)
    with lru.lock:
        lru.hits += len(items) - len(missing)
    if not items:
        return np.zeros((0, int(backend.dim)), dtype=np.float32)
    return np.stack([found[t] for t in items])


def query_vector_stats(backend: Any) -> dict[str, int]:
    """``{"entries", "hits", "misses", "calls"}`` of ``backend``'s cache (zeros when it has none):
    ``calls`` counts the model calls, ``misses`` the texts they embedded."""
    with _CACHES_LOCK:
        try:
            lru = _CACHES.get(backend)
        except TypeError:
            lru = None
    if lru is None:
        return {"entries": 0, "hits": 0, "misses": 0, "calls": 0}
    with lru.lock:
        return {"entries": len(lru.rows), "hits": lru.hits, "misses": lru.misses, "calls": lru.calls}


def clear_query_vectors(backend: Any | None = None) -> None:
    """Forget ``backend``'s cached query vectors (``None``: every backend's)."""
    with _CACHES_LOCK:
        if backend is None:
            _CACHES.clear()
        else:
            try:
                _CACHES.pop(backend, None)
            except TypeError:
                pass


__all__ = ["MAX_ENTRIES", "clear_query_vectors", "query_vector_stats", "query_vectors"]
