"""The sparse BM25 top-k as one compiled loop (optional: needs numba, extra ``accel``).

:class:`~ragspine_core.lexical.bm25.BM25Index` imports this module only off the query
thread, after an index has served :attr:`~ragspine_core.lexical.bm25.BM25Index.JIT_AFTER`
sparse queries (numba's import alone would cost more than the whole cold-start budget);
until then, and wherever numba is missing, the numpy path answers. Both compute the same
thing bit for bit — see :func:`sparse_top_k` — and the tests compare them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _worse(s1: float | np.floating[Any], r1: int | np.integer[Any], s2: float | np.floating[Any], r2: int | np.integer[Any]) -> bool | np.bool_:
    """Whether (score s1, row r1) ranks below (s2, r2): lower score, ties by larger row."""
    return s1 < s2 or (s1 == s2 and r1 > r2)


@njit(cache=True, nogil=True)
def _sift_down(heap_s: np.ndarray, heap_r: np.ndarray, size: int, s: float | np.floating[Any], r: int | np.integer[Any]) -> None:  # pragma: no cover - compiled
    """Put (s, r) at the root of the worst-at-root heap ``heap[:size]`` and sift it down."""
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _worse(heap_s[child + 1], heap_r[child + 1], heap_s[child], heap_r[child]):
            child += 1
        if _worse(heap_s[child], heap_r[child], s, r):
            heap_s[i] = heap_s[child]
            heap_r[i] = heap_r[child]
            i = child
        else:
            break
    heap_s[i] = s
    heap_r[i] = r


@njit(cache=True, nogil=True)
def sparse_top_k(post: np.ndarray, imp: np.ndarray, spans: np.ndarray, acc: np.ndarray, k: int, own: np.ndarray, use_own: bool, allowed: np.ndarray,
                 use_allowed: bool) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Top ``k`` distinct rows of a sparse query: ``(rows int64, scores float32)``.

    ``spans`` (int64[n, 2]) are the query terms' posting ranges in query order; ``acc``
    is an all-zero float64 scratch over rows, left all zero. A row's score is
    ``float32`` of its float64 sum of the impacts, added in query order — the numpy
    path's ``np.add.at`` over the concatenated postings, exactly. Candidates are the
    rows of postings with ``own`` set (when ``use_own``) whose ``allowed`` entry is
    set (when ``use_allowed``). Ranked by score descending, ties by row ascending.
    """
    n_terms = spans.shape[0]
    # memory safety even if a mapped file is damaged in place after its check at open
    # (ragspine_core.integrity): no posting outside the arrays, no row outside ``acc``
    n_post = min(post.shape[0], imp.shape[0])
    n_rows = acc.shape[0]
    for t in range(n_terms):
        for p in range(max(spans[t, 0], 0), min(spans[t, 1], n_post)):
            row = post[p]
            if row >= 0 and row < n_rows:
                acc[row] += np.float64(imp[p])
    heap_s = np.empty(max(k, 1), dtype=np.float32)
    heap_r = np.empty(max(k, 1), dtype=np.int64)
    size = 0
    for t in range(n_terms):
        for p in range(max(spans[t, 0], 0), min(spans[t, 1], n_post)):
            row = post[p]
            if row < 0 or row >= n_rows:
                continue
            total = acc[row]
            if total < 0.0:  # ranked already (marked below)
                continue
            if use_own and (p >= own.shape[0] or not own[p]):
                continue
            if use_allowed and (row >= allowed.shape[0] or not allowed[row]):
                continue
            acc[row] = -1.0  # every row is ranked once; scores are >= 0
            s = np.float32(total)
            r = np.int64(row)
            if size < k:  # sift up in a heap whose root is the worst entry
                i = size
                size += 1
                while i > 0:
                    parent = (i - 1) // 2
                    if _worse(s, r, heap_s[parent], heap_r[parent]):
                        heap_s[i] = heap_s[parent]
                        heap_r[i] = heap_r[parent]
                        i = parent
                    else:
                        break
                heap_s[i] = s
                heap_r[i] = r
            elif k > 0 and _worse(heap_s[0], heap_r[0], s, r):  # better than the worst: replace it
                _sift_down(heap_s, heap_r, size, s, r)
    for t in range(n_terms):
        for p in range(max(spans[t, 0], 0), min(spans[t, 1], n_post)):
            row = post[p]
            if row >= 0 and row < n_rows:
                acc[row] = 0.0
    # pop the worst entry to the back until the heap is empty: best first
    out_s = np.empty(size, dtype=np.float32)
    out_r = np.empty(size, dtype=np.int64)
    for last in range(size - 1, -1, -1):
        out_s[last] = heap_s[0]
        out_r[last] = heap_r[0]
        _sift_down(heap_s, heap_r, last, heap_s[last], heap_r[last])
    return out_r, out_s
