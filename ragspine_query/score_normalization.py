"""Agent score normalisation (the Go retrieval seed's ``NormalizeAgentScores``).

:func:`normalize_scores` puts every native retrieval score on [0, 1] by its signal's rule:
bounded signals (``dense``, ``maxsim``, ``ppr``, ``summary``) are clamped to [0, 1]; the
unbounded, non-negative ``lexical`` signal maps by ``x / (1 + x)`` (in the overflow-safe form
``1 / (1 + 1/x)``); a missing, negative or non-finite score is rejected with
:class:`~ragspine_core.errors.ScoreError` instead of getting a confidence-bearing default.
The result is ordered by normalised score descending, ties by source kind, then public
handle, then input order. The result grader (:mod:`ragspine_query.assessment`) and the
corrective-retrieval grader (:mod:`ragspine_query.corrective`) read scores through it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Literal

from ragspine_core.errors import ScoreError

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


__all__ = ["AgentScore", "BOUNDED_SIGNALS", "SIGNALS", "ScoreError", "normalize_score", "normalize_scores"]
