"""The Cortex rules (SPEC §14, the Go retrieval seed): score normalisation, time-decayed
RRF and query normalisation.

* :func:`normalize_scores` is the seed's ``NormalizeAgentScores``: bounded signals
  (``dense``, ``maxsim``, ``ppr``, ``summary``) are clamped to [0, 1]; the unbounded,
  non-negative ``lexical`` signal maps by ``x / (1 + x)`` (in the overflow-safe form
  ``1 / (1 + 1/x)``); a missing, negative or non-finite score is rejected with
  :class:`~ragspine_core.errors.ScoreError` instead of getting a confidence-bearing
  default. The result is ordered by normalised score descending, ties by source kind,
  then public handle, then input order.
* :func:`time_decayed` multiplies fused RRF scores by the exponential recency weight of
  each chunk's ``valid_as_of`` (:func:`~ragspine_query.fusion.time_decay_weight`) and
  re-sorts — the seed's Time-Decayed RRF (``FuseOptions.DecayHalfLifeDays``; <= 0 is off).
* :func:`normalize_query` (defined in :mod:`ragspine_core.text.normalize`, shared with the
  build side's competitor screening) is re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Iterable, Literal

import numpy as np

from ragspine_core.errors import ScoreError
from ragspine_query.fusion import time_decay_weight
from ragspine_core.text.normalize import normalize_query

ScoreSignal = Literal["lexical", "dense", "maxsim", "ppr", "summary"]
BOUNDED_SIGNALS = frozenset({"dense", "maxsim", "ppr", "summary"})
SIGNALS: tuple[str, ...] = ("lexical", "dense", "maxsim", "ppr", "summary")


@dataclass(frozen=True, slots=True)
class AgentScore:
    """One native retrieval score and its public identity; ``raw=None`` is a *missing* score
    (never confused with the valid value 0)."""

    signal: str
    raw: float | None
    source_kind: str = ""
    public_handle: str = ""
    normalized: float = 0.0


def normalize_score(signal: str, raw: float | None) -> float:
    """One score on [0, 1] by its signal's rule (see :func:`normalize_scores`).

    Raises:
        ScoreError: ``raw`` is None, negative, NaN or infinite, or ``signal`` is unknown.
    """
    if signal not in SIGNALS:
        raise ScoreError(f"unknown score signal {signal!r}; allowed: {', '.join(SIGNALS)}")
    if raw is None:
        raise ScoreError(f"missing {signal} score: a retrieval result must carry its score (None is not 0)")
    x = float(raw)
    if not math.isfinite(x):
        raise ScoreError(f"non-finite {signal} score {raw!r}: fix the channel that produced it")
    if x < 0:
        raise ScoreError(f"negative {signal} score {raw!r}: normalisation accepts scores >= 0 only "
                         "(map cosine to [0, 1] or clamp before passing it)")
    if signal in BOUNDED_SIGNALS:
        return min(x, 1.0)
    # x / (1 + x) without overflow for huge x: 1 / (1 + 1/x)
    return 0.0 if x == 0.0 else 1.0 / (1.0 + 1.0 / x)


def normalize_scores(scores: Iterable[AgentScore]) -> list[AgentScore]:
    """Validate and normalise every score, then order by normalised score descending.

    Ties break on ``source_kind``, then ``public_handle``; the sort is stable, so equal
    identities keep their input order.

    Raises:
        ScoreError: any score is missing, negative or non-finite (nothing is returned
            partially: one bad score rejects the batch, as in the seed).
    """
    out = [AgentScore(s.signal, s.raw, s.source_kind, s.public_handle, normalize_score(s.signal, s.raw)) for s in scores]
    return sorted(out, key=lambda s: (-s.normalized, s.source_kind, s.public_handle))


def time_decayed(rows: np.ndarray, fused: np.ndarray, valid_as_of: np.ndarray, *, half_life_days: float,
                 reference: str | date = "") -> tuple[np.ndarray, np.ndarray]:
    """Time-decayed RRF: ``fused[i] * 0.5 ** (age_days(row_i) / half_life_days)``, re-sorted.

    ``valid_as_of`` is the library's column (aligned with rows); undated rows weigh 1.0,
    future dates count as age 0. ``reference`` is the day ages are counted to (default
    today). Ties break on row ascending. ``half_life_days <= 0`` returns the input as is.
    """
    rows = np.asarray(rows, dtype=np.int64)
    fused = np.asarray(fused, dtype=np.float64)
    if half_life_days <= 0 or rows.size == 0:
        return rows, fused
    today = reference if isinstance(reference, date) else (date.fromisoformat(reference) if reference else date.today())
    cache: dict[str, float] = {}
    w = np.empty(rows.shape[0], dtype=np.float64)
    for i, r in enumerate(rows.tolist()):
        d = str(valid_as_of[r])
        if d not in cache:
            cache[d] = time_decay_weight(d, half_life_days=half_life_days, today=today)
        w[i] = cache[d]
    scores = fused * w
    order = np.lexsort((rows, -scores))
    return rows[order], scores[order]


__all__ = ["AgentScore", "BOUNDED_SIGNALS", "SIGNALS", "ScoreError", "normalize_query", "normalize_score",
           "normalize_scores", "time_decayed"]
