"""The ``Reranker`` protocol, the one ordering rule every scoring reranker shares, and
the languages a reranker serves.

Languages: a reranker may declare ``languages`` (a frozenset of the labels of
:func:`ragspine_core.text.language.detect_language`, ``en``/``zh``; None = every
language). A query outside them is not reranked at all; a candidate outside them is
not scored and keeps its place, like a RESTRICTED hit. The English MiniLM of the
ColBERT-style reranker, for example, maps Chinese characters to ``[UNK]`` and would
scramble a Chinese ranking. :func:`language_note` says what was skipped, for explain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ragspine_core.errors import ConfigError, RagspineError
from ragspine_core.records import Hit
from ragspine_core.text.language import detect_language

if TYPE_CHECKING:
    import numpy as np

#: The channel name under which a scoring reranker stores its score in ``Hit.scores``.
RERANK_CHANNEL = "rerank"

#: ``scorer(query, passages) -> one score per passage``; higher is more relevant.
PassageScorer = Callable[[str, list[str]], "Sequence[float] | np.ndarray"]


def passage_text(hit: Hit) -> str:
    """The text every reranker reads for a hit: its index text (header + text), else its text."""
    return hit.chunk.index_text or hit.chunk.text


def check_languages(languages: Iterable[str] | None) -> frozenset[str] | None:
    """``languages`` as a frozenset of lower-case labels (None = every language)."""
    if languages is None:
        return None
    if isinstance(languages, str):
        languages = (languages,)
    out = frozenset(str(lang).strip().lower() for lang in languages)
    if not out or "" in out:
        raise ConfigError(f"languages must name at least one language (e.g. ('en',)) or be None for all, got {languages!r}")
    return out


def hit_language(hit: Hit) -> str:
    """A hit's language: its chunk's ``language`` label, else detected from its text."""
    return hit.chunk.language or detect_language(passage_text(hit))


def language_note(reranker: Reranker, query: str, hits: Sequence[Hit], top_n: int | None = None) -> str:
    """What ``reranker`` skips for this query because of its ``languages`` ("" = nothing)."""
    langs = getattr(reranker, "languages", None)
    if not langs:
        return ""
    served = "/".join(sorted(langs))
    qlang = detect_language(query)
    if qlang not in langs:
        return f"skipped: query language {qlang} is not served by {type(reranker).__name__} ({served})"
    limit = len(hits) if top_n is None else min(top_n, len(hits))
    outside = sum(1 for h in hits[:limit] if not h.chunk.is_restricted and hit_language(h) not in langs)
    return f"{outside} of {limit} candidates not in {served} kept their places" if outside else ""


@runtime_checkable
class Reranker(Protocol):
    """Reorders hits for a query: one verb, ``rank``."""

    def rank(self, query: str, hits: list[Hit], *, top_n: int | None = None) -> list[Hit]:
        """Return the hits reordered for ``query``.

        Args:
            query: the user query.
            hits: hits in their current (fused) order.
            top_n: rerank only the first ``top_n`` hits; the rest keep their places.
                ``None`` means the reranker's default — every hit for a local model,
                the judge's own ``top_n`` for the LLM listwise judge.

        Returns:
            The same chunks in a new order. Scoring rerankers return new ``Hit``s whose
            ``score`` is the rerank score and whose ``scores`` add ``"rerank"`` to the
            channel scores already there. RESTRICTED hits keep their index and their
            ``Hit`` unchanged, and their text is never scored. Ties keep the previous
            order, so the result is deterministic.
        """
        ...


def rank_by_scores(
    query: str,
    hits: Sequence[Hit],
    scorer: PassageScorer,
    *,
    top_n: int | None = None,
    languages: frozenset[str] | None = None,
) -> list[Hit]:
    """Apply ``scorer`` to the open hits among the first ``top_n`` and sort them into place.

    RESTRICTED hits are not scored (their text is never handed to ``scorer``) and keep
    their index; the open hits fill the remaining slots by descending score, ties and
    NaN scores ordered by previous position (NaN last). Hits past ``top_n`` are untouched.
    With ``languages`` (see the module docstring) a query outside them returns the hits
    unchanged, and candidates outside them are not scored and keep their index.

    Raises:
        ConfigError: ``top_n`` is neither ``None`` nor a positive integer.
        RagspineError: ``scorer`` returned the wrong number of scores.
    """
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise ConfigError(f"top_n must be None (rerank every hit) or an integer >= 1, got {top_n!r}")
    ordered = list(hits)
    if languages and detect_language(query) not in languages:
        return ordered
    limit = len(ordered) if top_n is None else min(top_n, len(ordered))
    open_slots = [i for i in range(limit) if not ordered[i].chunk.is_restricted
                  and (not languages or hit_language(ordered[i]) in languages)]
    if not open_slots:
        return ordered
    passages = [passage_text(ordered[i]) for i in open_slots]
    scores = [float(s) for s in scorer(query, passages)]
    if len(scores) != len(passages):
        raise RagspineError(
            f"reranker scorer returned {len(scores)} scores for {len(passages)} passages; "
            f"it must return exactly one score per passage"
        )

    def sort_key(k: int) -> tuple[float, int]:
        s = scores[k]
        return (math.inf if math.isnan(s) else -s, k)

    reranked = list(ordered)
    for slot, k in zip(open_slots, sorted(range(len(scores)), key=sort_key)):
        hit = ordered[open_slots[k]]
        reranked[slot] = hit.with_score(scores[k], **{RERANK_CHANNEL: scores[k]})
    return reranked
