"""Deprecated: this module held three unrelated rules of the Go retrieval seed. They now live
where each belongs, and this name re-exports them, with a DeprecationWarning, for one release:

* :func:`~ragspine_query.score_normalization.normalize_scores` (and ``normalize_score``,
  ``AgentScore``) — :mod:`ragspine_query.score_normalization`;
* :func:`~ragspine_query.fusion.time_decayed` — :mod:`ragspine_query.fusion`, next to
  ``time_decay_weight``;
* :func:`~ragspine_core.text.normalize.normalize_query` — :mod:`ragspine_core.text.normalize`.
"""

from __future__ import annotations

import warnings

from ragspine_core.text.normalize import normalize_query
from ragspine_query.fusion import time_decayed
from ragspine_query.score_normalization import (BOUNDED_SIGNALS, SIGNALS, AgentScore, ScoreError, normalize_score,
                                                normalize_scores)

warnings.warn("ragspine_query.cortex is deprecated and goes in the next release: import normalize_scores from "
              "ragspine_query.score_normalization, time_decayed from ragspine_query.fusion, normalize_query from "
              "ragspine_core.text.normalize", DeprecationWarning, stacklevel=2)

__all__ = ["AgentScore", "BOUNDED_SIGNALS", "SIGNALS", "ScoreError", "normalize_query", "normalize_score",
           "normalize_scores", "time_decayed"]
