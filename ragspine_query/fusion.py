"""Reciprocal Rank Fusion (Cormack, Clarke & Buettcher, SIGIR 2009).

``rrf_k`` is the smoothing constant of the paper (60), not the number of results.
"""

from __future__ import annotations

import math
from datetime import date
from typing import Hashable, Iterable, Mapping, Sequence

DEFAULT_RRF_K = 60


def rrf_fuse(rankings: Iterable[Sequence[Hashable]], *, rrf_k: int = DEFAULT_RRF_K, depth: int | None = None) -> dict:
    """Fuse ranked id lists: ``score(id) += 1 / (rrf_k + rank)``, rank starting at 1.

    ``depth`` truncates every input list first. Returns id -> fused score; order the
    result with :func:`rrf_order` for deterministic ties.
    """
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
    fused: dict = {}
    for ranking in rankings:
        seq = ranking if depth is None else ranking[:depth]
        for rank, item in enumerate(seq, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (rrf_k + rank)
    return fused


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
