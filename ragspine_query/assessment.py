"""What every query result carries besides its hits: the tier that ran and a confidence.

The Cortex seed's ``ExecuteAdaptiveSearch`` returns ``tier``, ``confidence`` (a grade
``high | medium | low``), ``confidence_score`` and ``needs_refinement`` with every result;
here :class:`~ragspine_query.pipeline.stages.SearchResult` (and the snippets) carry
``tier``, ``confidence`` (:class:`Confidence`) and ``needs_refinement``.

* :func:`default_tier` — the tier that describes the channels a pipeline runs when no
  classifier picks one (``semantic`` for BM25 + dense, ``direct`` for BM25 alone, …).
* :class:`RelevanceGrader` — the default CRAG grader: how well the top hits match *the
  query*. For each of the top ``n`` hits two native signals are put through the seed's
  batch normaliser (:func:`~ragspine_query.score_normalization.normalize_scores`), which is what lets
  scores of different kinds be compared: the **lexical** signal is the odds of the query's
  IDF mass the hit's text contains (matched ÷ unmatched IDF of the query's terms, under the
  hit's library analyzer and IDF) — the seed's lexical rule ``x / (1 + x)`` turns it into
  the matched share; the **dense** signal is the hit's cosine (clamped to [0, 1]). A hit's
  relevance is the larger of the two; the set's confidence is the best hit's. Graded with
  the seed's thresholds: ``correct`` >= 0.65 > ``ambiguous`` >= 0.30 > ``incorrect``.

Grades map to the Cortex confidence grades: correct → ``high``, ambiguous → ``medium``,
incorrect → ``low``; ``needs_refinement`` is true unless the grade is ``high``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ragspine_query.score_normalization import AgentScore, normalize_scores

GRADE_TO_CONFIDENCE = {"correct": "high", "ambiguous": "medium", "incorrect": "low"}
CONFIDENCE_GRADES = ("high", "medium", "low")


@dataclass(frozen=True, slots=True)
class Confidence:
    """A result's confidence: ``grade`` (high | medium | low) and ``score`` in [0, 1]."""

    grade: str
    score: float
    how: str = ""

    @property
    def needs_refinement(self) -> bool:
        return self.grade != "high"

    def to_dict(self) -> dict:
        return {"grade": self.grade, "score": round(float(self.score), 4)}

    @classmethod
    def of(cls, crag_grade: Any) -> "Confidence":
        """From a corrective-retrieval :class:`~ragspine_query.corrective.Grade`."""
        return cls(GRADE_TO_CONFIDENCE[crag_grade.grade], float(crag_grade.confidence), crag_grade.how)


def _channels_of(source: Any) -> list[Any]:
    if hasattr(source, "retrievers"):
        return [c for r in source.retrievers.values() for c in getattr(r, "channels", ())]
    return list(getattr(source, "channels", ()))


def default_tier(source: Any) -> str:
    """The tier the channels of ``source`` amount to when no classifier chose one."""
    chans = [c for c in _channels_of(source) if not c.on_demand]
    names = {c.name for c in chans}
    if "graph" in names:
        return "multi_hop"
    if names & {"tree", "raptor", "summary", "summary_tree"}:
        return "global"
    if any(n == "vector" or n.startswith("vector") for n in names):
        return "semantic"
    return "direct" if names else "semantic"


class _LibraryTerms:
    """IDF of a library's BM25 vocabulary and its analyzer (read once per library)."""

    __slots__ = ("analyze", "vocab", "idf", "unseen_idf")

    def __init__(self, library: Any) -> None:
        from ragspine_core.lexical.bm25 import idf

        bm25 = library.bm25
        self.analyze = getattr(library.analyzer, "fn", library.analyzer)
        self.vocab = bm25.vocab
        ip = np.asarray(bm25.indptr)
        df = (ip[1:] - ip[:-1]).astype(np.float64)
        self.idf = idf(df, bm25.n_rows)
        self.unseen_idf = float(idf(np.zeros(1), bm25.n_rows)[0])

    def weight(self, token: str) -> float:
        i = self.vocab.get(token)
        return self.unseen_idf if i is None else float(self.idf[i])


class RelevanceGrader:
    """The default grader of corrective retrieval (see the module docstring).

    ``(query, hits, config) -> (Grade, kept)``, like :class:`~ragspine_query.corrective.LLMGrader`.
    Hits under the config's floor (absolute, on the same per-hit relevance) are not kept.

    Args:
        source: the retriever the hits come from (its libraries' analyzers and IDF).
        n: how many of the top hits are graded (3).
    """

    def __init__(self, source: Any, *, n: int = 3) -> None:
        libs = [r.library for r in source.retrievers.values()] if hasattr(source, "retrievers") else (
            [source.library] if hasattr(source, "library") else [])
        self._libs = {lib.library_id: lib for lib in libs}
        self._terms: dict[str, _LibraryTerms] = {}
        self.n = n

    def _terms_of(self, library_id: str) -> _LibraryTerms | None:
        t = self._terms.get(library_id)
        if t is None and library_id in self._libs:
            t = self._terms[library_id] = _LibraryTerms(self._libs[library_id])
        return t

    def hit_relevance(self, query: str, hit: Any) -> tuple[float, dict[str, float]]:
        """``(relevance, {signal: normalised})`` of one hit for ``query``."""
        scores: list[AgentScore] = []
        terms = self._terms_of(hit.chunk.library_id)
        if terms is not None:
            q = set(terms.analyze(str(query)))
            if q:
                text = set(terms.analyze(hit.chunk.index_text or hit.chunk.text))
                total = sum(terms.weight(t) for t in q)
                matched = sum(terms.weight(t) for t in q if t in text)
                unmatched = total - matched
                odds = matched / max(unmatched, 1e-9 * total)
                scores.append(AgentScore("lexical", odds, "lexical", hit.chunk_id))
        dense = [float(v) for k, v in hit.scores.items() if (k == "vector" or k.startswith("vector")) and v]
        if dense:
            scores.append(AgentScore("dense", max(0.0, max(dense)), "dense", hit.chunk_id))
        if not scores:
            return 0.0, {}
        normed = normalize_scores(scores)
        return normed[0].normalized, {s.signal: s.normalized for s in normed}

    def __call__(self, query: str, hits: Sequence[Any], config: Any) -> tuple[Any, list[Any]]:
        from ragspine_query.corrective import Grade

        if not hits:
            return Grade("incorrect", 0.0, 0, "nothing retrieved"), []
        rel = [self.hit_relevance(query, h) for h in hits]
        top = rel[: self.n]
        conf = max(r for r, _ in top)
        best = max(range(len(top)), key=lambda i: (top[i][0], -i))
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(top[best][1].items()))
        kept = [h for h, (r, _) in zip(hits, rel) if r >= config.floor]
        grade = "correct" if conf >= config.high else ("incorrect" if conf < config.low else "ambiguous")
        return Grade(grade, float(conf), len(kept), f"relevance of the top {len(top)} to the query (best: #{best + 1}, {parts})"), kept


__all__ = ["CONFIDENCE_GRADES", "Confidence", "GRADE_TO_CONFIDENCE", "RelevanceGrader", "default_tier"]
