"""Compiled, GIL-free steps of a hybrid query (optional: needs numba, extra ``accel``).

Two steps of an ``auto`` query ran as many small numpy calls, each holding the GIL (numpy
releases it only above a few hundred elements), so two query threads mostly waited for
each other: the dense top-k after the matrix-vector product, and the fusion of the
channels' rankings. Here each is one ``nogil`` loop. :mod:`ragspine_query.runtime.kernels`
loads this module off the query thread and keeps the numpy code as the fallback; both
compute the same thing bit for bit (the tests compare them), so which one answers never
changes a ranking or a score.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _before(s1, r1, s2, r2):  # pragma: no cover - compiled
    """Whether (score s1, id r1) ranks before (s2, r2): higher score, ties by smaller id.

    NaN ranks after every number (numpy's sort order), NaNs among themselves by id."""
    n1 = s1 != s1
    n2 = s2 != s2
    if n1 or n2:
        if n1 and n2:
            return r1 < r2
        return n2
    return s1 > s2 or (s1 == s2 and r1 < r2)


@njit(cache=True, nogil=True)
def _sift_down(heap_s, heap_r, size, s, r):  # pragma: no cover - compiled
    """Put (s, r) at the root of the worst-at-root heap ``heap[:size]`` and sift it down."""
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _before(heap_s[child], heap_r[child], heap_s[child + 1], heap_r[child + 1]):
            child += 1  # the worse child
        if _before(s, r, heap_s[child], heap_r[child]):
            heap_s[i] = heap_s[child]
            heap_r[i] = heap_r[child]
            i = child
        else:
            break
    heap_s[i] = s
    heap_r[i] = r


@njit(cache=True, nogil=True)
def scores_top_k(scores, k, ids, use_ids, offset):  # pragma: no cover - compiled
    """Top ``k`` of a block of float32 ``scores``: ``(ids int64, scores float32)`` best first.

    An entry's id is ``ids[i]`` when ``use_ids``, else ``offset + i``; ties break on the
    smaller id. Non-finite scores (a corrupt row) are mapped as ``np.nan_to_num(scores,
    nan=-inf)`` maps them (NaN to ``-inf``, ``±inf`` to ``±`` the largest float32) — the
    result of :func:`ragspine_query.dense.vector_store.top_k_cosine`'s numpy block
    (tie-inclusive partition, then ``lexsort``), for distinct ids.
    """
    n = scores.shape[0]
    if use_ids and ids.shape[0] < n:
        n = ids.shape[0]
    heap_s = np.empty(max(k, 1), dtype=np.float32)
    heap_r = np.empty(max(k, 1), dtype=np.int64)
    size = 0
    neg_inf = np.float32(-np.inf)
    big = np.float32(np.finfo(np.float32).max)
    for i in range(n):
        s = scores[i]
        if s != s:
            s = neg_inf
        elif s == np.inf:
            s = big
        elif s == -np.inf:
            s = -big
        r = ids[i] if use_ids else offset + i
        if size < k:  # sift up in a heap whose root is the worst entry
            j = size
            size += 1
            while j > 0:
                parent = (j - 1) // 2
                if _before(heap_s[parent], heap_r[parent], s, r):
                    heap_s[j] = heap_s[parent]
                    heap_r[j] = heap_r[parent]
                    j = parent
                else:
                    break
            heap_s[j] = s
            heap_r[j] = r
        elif k > 0 and _before(s, r, heap_s[0], heap_r[0]):  # better than the worst: replace it
            _sift_down(heap_s, heap_r, size, s, r)
    out_s = np.empty(size, dtype=np.float32)
    out_r = np.empty(size, dtype=np.int64)
    for last in range(size - 1, -1, -1):  # pop the worst entry to the back: best first
        out_s[last] = heap_s[0]
        out_r[last] = heap_r[0]
        _sift_down(heap_s, heap_r, last, heap_s[last], heap_r[last])
    return out_r, out_s


@njit(cache=True, nogil=True)
def _order(fused, rows):  # pragma: no cover - compiled
    """Positions of ``fused`` by score descending, ties by row ascending, NaN last
    (``np.lexsort((rows, -fused))``): a bottom-up merge sort with that comparison."""
    n = fused.shape[0]
    a = np.arange(n)
    b = np.empty(n, dtype=a.dtype)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, o = lo, mid, lo
            while i < mid and j < hi:
                if _before(fused[a[j]], rows[a[j]], fused[a[i]], rows[a[i]]):
                    b[o] = a[j]
                    j += 1
                else:
                    b[o] = a[i]
                    i += 1
                o += 1
            while i < mid:
                b[o] = a[i]
                i += 1
                o += 1
            while j < hi:
                b[o] = a[j]
                j += 1
                o += 1
        a, b = b, a
        width *= 2
    return a


@njit(cache=True, nogil=True)
def _sum_sorted(rows, vals):  # pragma: no cover - compiled
    """Distinct ``rows`` ascending and each one's ``vals`` summed from 0.0 in input order
    (``np.unique`` + unbuffered ``np.add.at``)."""
    n = rows.shape[0]
    by_row = np.argsort(rows, kind="mergesort")  # stable: a row's entries keep their order
    uniq = np.empty(n, dtype=np.int64)
    fused = np.empty(n, dtype=np.float64)
    m = -1
    for p in range(n):
        i = by_row[p]
        if m < 0 or rows[i] != uniq[m]:
            m += 1
            uniq[m] = rows[i]
            fused[m] = 0.0
        fused[m] += vals[i]
    return uniq[: m + 1], fused[: m + 1]


@njit(cache=True, nogil=True)
def fuse_minmax(rows, scores, bounds, weights):  # pragma: no cover - compiled
    """:func:`ragspine_query.fusion.weighted_score_fusion` over concatenated rankings.

    Ranking ``c`` is ``rows[bounds[c]:bounds[c+1]]`` with float64 ``scores`` (already cut
    to the fusion depth); each is min-max normalised by its own range (all 1.0 when the
    range is empty or NaN), times ``weights[c]``, summed per row in ranking order; rows
    best first, ties by row ascending. Same float64 operations, in the same order, as the
    numpy code.
    """
    vals = np.empty(rows.shape[0], dtype=np.float64)
    for c in range(bounds.shape[0] - 1):
        s, e = bounds[c], bounds[c + 1]
        if e <= s:
            continue
        lo = scores[s]
        hi = scores[s]
        nan = False
        for i in range(s, e):
            v = scores[i]
            if v != v:
                nan = True
            if v < lo:
                lo = v
            if v > hi:
                hi = v
        w = weights[c]
        if (not nan) and hi > lo:
            span = hi - lo
            for i in range(s, e):
                vals[i] = w * ((scores[i] - lo) / span)
        else:
            for i in range(s, e):
                vals[i] = w * 1.0
    uniq, fused = _sum_sorted(rows, vals)
    order = _order(fused, uniq)
    return uniq[order], fused[order]


@njit(cache=True, nogil=True)
def fuse_rrf(rows, bounds, weights, rrf_k):  # pragma: no cover - compiled
    """:func:`ragspine_query.fusion.weighted_rrf` over concatenated int row rankings:
    ``weights[c] / (rrf_k + rank)`` per ranking, summed per row in ranking order."""
    vals = np.empty(rows.shape[0], dtype=np.float64)
    for c in range(bounds.shape[0] - 1):
        w = weights[c]
        for i in range(bounds[c], bounds[c + 1]):
            vals[i] = w / (rrf_k + np.float64(i - bounds[c] + 1))
    uniq, fused = _sum_sorted(rows, vals)
    order = _order(fused, uniq)
    return uniq[order], fused[order]


@njit(cache=True, nogil=True)
def pick_scores(top, rows, scores, bounds):  # pragma: no cover - compiled
    """Each channel's score of each of the ``top`` rows: ``(values float64[t, c], found
    bool[t, c])``. Channel ``c`` ranked ``rows[bounds[c]:bounds[c+1]]`` with ``scores``;
    a row listed twice by one channel keeps its last score."""
    t = top.shape[0]
    n_ch = bounds.shape[0] - 1
    vals = np.zeros((t, n_ch), dtype=np.float64)
    found = np.zeros((t, n_ch), dtype=np.bool_)
    for c in range(n_ch):
        for i in range(bounds[c], bounds[c + 1]):
            r = rows[i]
            for j in range(t):
                if top[j] == r:
                    vals[j, c] = scores[i]
                    found[j, c] = True
    return vals, found
