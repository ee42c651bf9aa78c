"""Top-k selection over (row, score) arrays, ties broken by row: exact, with a sampled score
floor to skip most of a long candidate list."""

from __future__ import annotations

from typing import cast


import numpy as np



def keep_postings(cat: np.ndarray, scores: np.ndarray, lo: int, hi: int,
                   keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The postings where ``keep`` holds, and where ``[lo, hi)`` lands among them."""
    lo, hi = int(np.count_nonzero(keep[:lo])), int(np.count_nonzero(keep[:hi]))
    return cat[keep], scores[keep], lo, hi


def top_k_distinct(cat: np.ndarray, scores: np.ndarray, lo: int, hi: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` distinct rows of postings with exact scores, ties by row.

    ``[lo, hi)`` are the postings of one term (distinct rows): its k-th best score is a
    floor under the true k-th best, so rows below it are dropped before the sort. The
    copies of a row share its score, so sorted by (score desc, row asc) they are
    adjacent and only the first is kept.
    """
    n = hi - lo
    if n > k:
        seg = scores[lo:hi].copy()
        seg.partition(n - k)
        sel = (scores >= seg[n - k]).nonzero()[0]
        cat, scores = cat[sel], scores[sel]
    order = np.lexsort((cat, -scores))
    cat, scores = cat[order], scores[order]
    if cat.shape[0] > 1:
        first = np.empty(cat.shape[0], dtype=bool)
        first[0] = True
        np.not_equal(cat[1:], cat[:-1], out=first[1:])
        cat, scores = cat[first], scores[first]
    return cat[:k].astype(np.int64), scores[:k]


def empty_top_k() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)


#: Below this many candidates :func:`top_k_rows` selects directly; above it, a cheap
#: floor from a 1-in-``_SAMPLE_STEP`` sample of the rows first discards most of them.
SAMPLE_MIN = 4_096


_SAMPLE_STEP = 16


#: The sample is the first 1/_SAMPLE_STEP of every block of _SAMPLE_BLOCK rows: spread
#: over the whole array but read in contiguous runs (a plain stride would touch every
#: cache line, costing as much memory traffic as reading everything).
_SAMPLE_BLOCK = 1_024


def row_sample(values: np.ndarray) -> np.ndarray:
    """A view of about 1/_SAMPLE_STEP of ``values``, spread out, in contiguous runs."""
    n = values.shape[0]
    blocks = n // _SAMPLE_BLOCK
    if blocks < 4:
        return values[::_SAMPLE_STEP]
    return values[: blocks * _SAMPLE_BLOCK].reshape(blocks, _SAMPLE_BLOCK)[:, : _SAMPLE_BLOCK // _SAMPLE_STEP]


def kth_largest(values: np.ndarray, k: int) -> float | None:
    """The ``k``-th largest of ``values`` (any shape), or None if there are fewer."""
    flat = values.ravel()
    if flat.shape[0] < k:
        return None
    return cast("float | None", np.partition(flat, flat.shape[0] - k)[flat.shape[0] - k].item())


def sample_floor(values: np.ndarray, k: int) -> float | None:
    """A lower bound on the ``k``-th largest of ``values``, or None if none is cheap.

    The ``k``-th largest value of any subset is <= the ``k``-th largest of the whole,
    so the ``k``-th largest of a sample of the rows is a valid (and usually tight) floor.
    """
    return kth_largest(row_sample(values), k)


def top_k_rows(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` of (rows, scores) by score desc, ties by row asc (rows must be unique)."""
    n = rows.shape[0]
    if n == 0 or k <= 0:
        return empty_top_k()
    if n > k:
        if n >= SAMPLE_MIN:
            floor = sample_floor(scores, k)
            if floor is not None:
                # every member of the true top k scores >= floor; ties with it are kept
                sel = np.flatnonzero(scores >= floor)
                rows, scores, n = rows[sel], scores[sel], sel.shape[0]
        if n > k:
            kth = np.partition(scores, n - k)[n - k]
            # keep every row tied with the k-th score so the tie-break sees all of them
            sel = np.flatnonzero(scores >= kth)
            rows, scores = rows[sel], scores[sel]
    order = np.lexsort((rows, -scores))[:k]
    return rows[order].astype(np.int64), scores[order]
