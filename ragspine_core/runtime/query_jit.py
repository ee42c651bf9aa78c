"""Compiled steps of a hybrid query (optional: needs numba, extra ``accel``).

Three steps of an ``auto`` query ran as many small numpy calls: the dense top-k after
the matrix-vector product, the fusion of the channels' rankings and the per-channel
scores of the top rows. Here each is one compiled call, ~1.4x less CPU per query.
:mod:`ragspine_core.runtime.kernels` loads this module off the query thread and keeps
the numpy code as the fallback; both compute the same thing bit for bit (the tests
compare them), so which one answers never changes a ranking or a score.

Which calls release the GIL was measured, not assumed (docs/scaling.md, "Concurrent
queries in one process"): on the 2-core VM a GIL hand-over between two query threads
(a futex wake and a context switch) costs more than a call of a few to a few tens of
microseconds, and an ``auto`` query with every kernel ``nogil`` handed the GIL over ~8
times and served *fewer* queries on two threads than with the short kernels keeping it
(0.85x vs 0.95x one thread's rate, same run conditions). So the fusion and score-pick
kernels, whose size is fixed by the fusion depth, keep the GIL; the dense top-k releases
it only for blocks of :data:`NOGIL_MIN_ROWS` rows or more, where the work outgrows a
hand-over.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

#: the dense top-k releases the GIL from this many rows a block (a block of 10k rows
#: takes ~10 µs, less than a hand-over; a full block of top_k_cosine's 65,536 rows ~60 µs)
NOGIL_MIN_ROWS = 50_000


@njit(cache=True, nogil=True)
def _before(s1: float | np.floating[Any], r1: int | np.integer[Any], s2: float | np.floating[Any], r2: int | np.integer[Any]) -> bool | np.bool_:  # pragma: no cover - compiled
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
def _ordered_bits(x: float | np.floating[Any], bits: int | np.integer[Any]) -> np.int64:  # pragma: no cover - compiled
    """An int64 that orders like the float32 ``x`` (not NaN; ``bits``: its int32 view),
    in ``(-2**31, 2**31)``; -0.0 and 0.0 map alike."""
    if x == 0:
        return np.int64(0)
    b = np.int64(bits)
    return b if b >= 0 else b ^ np.int64(0x7FFFFFFF)


@njit(cache=True)
def _top_k(scores: np.ndarray, k: int, threshold: float | np.floating[Any], ids: np.ndarray, use_ids: bool, offset: int) -> tuple[np.ndarray, np.ndarray, bool]:  # pragma: no cover - compiled
    """Top ``k`` of a block of float32 ``scores`` whose ``k``-th largest value is
    ``threshold`` (found by the caller, with numpy's selection, which releases the GIL
    too): ``(ids int64, scores float32, True)`` best first, ties by the smaller id; or
    ``(…, False)`` when a score is NaN or infinite (a corrupt row: the caller's numpy code,
    which maps them, answers instead).

    An entry's id is ``ids[i]`` when ``use_ids``, else ``offset + i``. The result of
    :func:`ragspine_core.dense.vector_store.top_k_cosine`'s numpy block (every entry at
    least ``threshold``, then ``lexsort``) for distinct ids, in one GIL-free call instead
    of several numpy calls (a finiteness check, a mask, a small sort), each of which
    held the GIL or handed it over.
    """
    n = scores.shape[0]
    if use_ids and ids.shape[0] < n:
        n = ids.shape[0]
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32), True
    for i in range(n):
        s = scores[i]
        if s - s != 0:  # NaN or infinity (a corrupt row): the caller's numpy code answers
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32), False
    m = 0
    for i in range(n):
        if scores[i] >= threshold:
            m += 1
    pos = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(n):
        if scores[i] >= threshold:
            pos[m] = i
            m += 1
    cand_id = np.empty(m, dtype=np.int64)
    ascending = True
    for j in range(m):
        cand_id[j] = ids[pos[j]] if use_ids else offset + pos[j]
        if j > 0 and cand_id[j] < cand_id[j - 1]:
            ascending = False
    if not ascending:  # ids out of order: by id first (they are distinct), then j is the id's rank
        by_id = np.argsort(cand_id)
        pos = pos[by_id]
        cand_id = cand_id[by_id]
    # one sort of distinct int64 keys: score descending (an order-preserving integer of
    # the float32, -0.0 as 0.0), then j, the rank of the id
    packed = np.empty(m, dtype=np.int64)
    bits = scores.view(np.int32)
    for j in range(m):
        packed[j] = -_ordered_bits(scores[pos[j]], bits[pos[j]]) * np.int64(4294967296) + j
    packed.sort()
    t = min(k, m)
    out_r = np.empty(t, dtype=np.int64)
    out_s = np.empty(t, dtype=np.float32)
    for j in range(t):
        c = packed[j] & np.int64(4294967295)
        out_r[j] = cand_id[c]
        out_s[j] = scores[pos[c]]
    return out_r, out_s, True


@njit(cache=True)
def scores_top_k(scores: np.ndarray, k: int, threshold: float | np.floating[Any], ids: np.ndarray, use_ids: bool, offset: int) -> tuple[np.ndarray, np.ndarray, bool]:  # pragma: no cover - compiled
    """:func:`_top_k`, keeping the GIL: for a block of ordinary size it takes less time
    than handing the GIL to another query thread and back (see :data:`NOGIL_MIN_ROWS`)."""
    return _top_k(scores, k, threshold, ids, use_ids, offset)


@njit(cache=True, nogil=True)
def scores_top_k_nogil(scores: np.ndarray, k: int, threshold: float | np.floating[Any], ids: np.ndarray, use_ids: bool, offset: int) -> tuple[np.ndarray, np.ndarray, bool]:  # pragma: no cover - compiled
    """:func:`_top_k` without the GIL, for blocks of :data:`NOGIL_MIN_ROWS` rows or more."""
    return _top_k(scores, k, threshold, ids, use_ids, offset)


@njit(cache=True, nogil=True)
def _order(fused: np.ndarray, rows: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
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
def _rank(fused: np.ndarray, uniq: np.ndarray, limit: int) -> np.ndarray:  # pragma: no cover - compiled
    """Positions of ``fused`` by score descending, ties by ``uniq`` (ascending already);
    only the first ``limit`` when ``0 < limit``."""
    n = fused.shape[0]
    for i in range(n):
        if fused[i] != fused[i]:
            return _order(fused, uniq)  # a NaN: the comparison sort that puts it last
    if 0 < limit < n // 4:  # a few best: insertion into a short sorted list
        best = np.empty(limit, dtype=np.int64)
        size = 0
        for i in range(n):  # positions ascending: an equal score already kept stays ahead
            if size == limit and not fused[i] > fused[best[size - 1]]:
                continue
            p = size if size < limit else limit - 1
            while p > 0 and fused[i] > fused[best[p - 1]]:
                best[p] = best[p - 1]
                p -= 1
            best[p] = i
            if size < limit:
                size += 1
        return best[:size]
    return np.argsort(-fused, kind="mergesort")  # stable: ties keep the ascending rows


@njit(cache=True, nogil=True)
def _sum_sorted(rows: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Distinct ``rows`` ascending and each one's ``vals`` summed from 0.0 in input order
    (``np.unique`` + unbuffered ``np.add.at``)."""
    n = rows.shape[0]
    # by row, a row's entries in input order: one sort of (row, position) packed in int64
    shift = 1
    while (np.int64(1) << shift) <= n:
        shift += 1
    mask = (np.int64(1) << shift) - 1
    packed = np.empty(n, dtype=np.int64)
    for i in range(n):
        packed[i] = (np.int64(rows[i]) << shift) | i
    packed.sort()
    by_row = np.empty(n, dtype=np.int64)
    for p in range(n):
        by_row[p] = packed[p] & mask
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


@njit(cache=True)  # keeps the GIL: 2 x depth rows take less than a hand-over
def fuse_minmax(rows: np.ndarray, scores: np.ndarray, bounds: np.ndarray, weights: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`ragspine_query.fusion.weighted_score_fusion` over concatenated rankings.

    Ranking ``c`` is ``rows[bounds[c]:bounds[c+1]]`` with float64 ``scores`` (already cut
    to the fusion depth); each is min-max normalised by its own range (all 1.0 when the
    range is empty or NaN), times ``weights[c]``, summed per row in ranking order; rows
    best first, ties by row ascending (only the first ``limit`` when ``limit > 0``). Same
    float64 operations, in the same order, as the numpy code.
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
    order = _rank(fused, uniq, limit)
    return uniq[order], fused[order]


@njit(cache=True)  # keeps the GIL: 2 x depth rows take less than a hand-over
def fuse_rrf(rows: np.ndarray, bounds: np.ndarray, weights: np.ndarray, rrf_k: float, limit: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`ragspine_query.fusion.weighted_rrf` over concatenated int row rankings:
    ``weights[c] / (rrf_k + rank)`` per ranking, summed per row in ranking order (only
    the first ``limit`` rows when ``limit > 0``)."""
    vals = np.empty(rows.shape[0], dtype=np.float64)
    for c in range(bounds.shape[0] - 1):
        w = weights[c]
        for i in range(bounds[c], bounds[c + 1]):
            vals[i] = w / (rrf_k + np.float64(i - bounds[c] + 1))
    uniq, fused = _sum_sorted(rows, vals)
    order = _rank(fused, uniq, limit)
    return uniq[order], fused[order]


@njit(cache=True)  # keeps the GIL: a few µs, less than handing the GIL to another thread and back
def pick_scores(top: np.ndarray, rows: np.ndarray, scores: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
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
