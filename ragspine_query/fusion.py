"""Reciprocal Rank Fusion (Cormack, Clarke & Buettcher, SIGIR 2009) — the one fusion.

``rrf_k`` is the smoothing constant of the paper (60), not the number of results.
:func:`weighted_rrf` is the single definition used everywhere rankings are fused: the
channels of one library (rows), the query variants of a multi-query transform and the
libraries of :class:`~ragspine_query.retriever.MultiIndexRetriever` (``(chunk_id,
library_id)`` keys). ``score(id) = sum over rankings of weight / (rrf_k + rank)``,
ranks from 1, contributions added in ranking order; ties break on the id ascending
(for rows of one library, row order is ``chunk_id`` order).
"""

from __future__ import annotations

import math
from datetime import date
from typing import Hashable, Iterable, Mapping, Sequence

import numpy as np

DEFAULT_RRF_K = 60


def _check_k(rrf_k: float) -> None:
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")


def weighted_rrf(
    rankings: Mapping[str, Sequence[Hashable] | np.ndarray] | Sequence[Sequence[Hashable] | np.ndarray],
    *,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    rrf_k: float = DEFAULT_RRF_K,
    depth: int | None = None,
) -> tuple[list, list[float]] | tuple[np.ndarray, np.ndarray]:
    """Fuse ranked id lists; returns ``(ids, fused scores)`` best first, ties by id ascending.

    ``rankings`` maps a name (a channel, a query variant, a library) to its ids best
    first, or is a plain sequence of such lists. ``weights`` (by name, or by position)
    default to 1.0. ``depth`` truncates every input list first. When every ranking is an
    integer numpy array (rows of one library) the fusion is vectorised and returns numpy
    arrays; the result is the same as the generic path, bit for bit.
    """
    _check_k(rrf_k)
    if isinstance(rankings, Mapping):
        names = list(rankings)
        lists = [rankings[n] for n in names]
        ws = [float((weights or {}).get(n, 1.0)) for n in names] if not isinstance(weights, Sequence) else [float(w) for w in weights]
    else:
        lists = list(rankings)
        ws = [float(w) for w in weights] if isinstance(weights, Sequence) else [1.0] * len(lists)
    if depth is not None:
        lists = [r[:depth] for r in lists]
    if lists and all(isinstance(r, np.ndarray) and r.dtype.kind in "iu" for r in lists):
        return _fuse_rows(lists, ws, rrf_k)
    fused: dict = {}
    for w, ranking in zip(ws, lists):
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + w / (rrf_k + rank)
    order = sorted(fused, key=lambda i: (-fused[i], i))
    return order, [fused[i] for i in order]


def _fuse_rows(lists: list[np.ndarray], ws: list[float], rrf_k: float) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`weighted_rrf` over int row arrays (each row at most once per list)."""
    lists = [np.asarray(r, dtype=np.int64) for r in lists]
    contrib = [w / (rrf_k + np.arange(1, r.shape[0] + 1, dtype=np.float64)) for w, r in zip(ws, lists)]
    if len(lists) == 1:  # already ordered: strictly decreasing scores (w > 0) in rank order
        if ws[0] > 0:
            return lists[0], contrib[0]
    cat = np.concatenate(lists)
    if cat.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    uniq, inv = np.unique(cat, return_inverse=True)
    fused = np.zeros(uniq.shape[0], dtype=np.float64)
    # unbuffered and in order: each id's contributions are summed in ranking order,
    # 0.0 + first + second …, exactly like the dict path
    np.add.at(fused, inv, np.concatenate(contrib))
    order = np.lexsort((uniq, -fused))
    return uniq[order], fused[order]


def rrf_fuse(rankings: Iterable[Sequence[Hashable]], *, rrf_k: int = DEFAULT_RRF_K, depth: int | None = None) -> dict:
    """Fuse ranked id lists: ``score(id) += 1 / (rrf_k + rank)``, rank starting at 1.

    ``depth`` truncates every input list first. Returns id -> fused score (best first,
    ties by id); :func:`rrf_order` orders any such mapping. A thin wrapper of
    :func:`weighted_rrf` with every weight 1.0.
    """
    _check_k(rrf_k)
    ids, scores = weighted_rrf([list(r) for r in rankings], rrf_k=rrf_k, depth=depth)
    return dict(zip(ids, scores))


def rrf_order(fused: Mapping) -> list:
    """Ids ordered by fused score descending, ties by id ascending."""
    return sorted(fused, key=lambda i: (-fused[i], i))


def time_decay_weight(valid_as_of: str, *, half_life_days: float, today: date) -> float:
    """Exponential decay ``0.5 ** (age_days / half_life_days)``; undated items weigh 1.0."""
    if half_life_days <= 0:
        raise ValueError(f"half_life_days must be > 0, got {half_life_days}")
    try:
        d = date.fromisoformat(valid_as_of[:10])
    except (TypeError, ValueError):
        return 1.0
    age = max((today - d).days, 0)
    return math.pow(0.5, age / half_life_days)
