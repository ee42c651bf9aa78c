"""What every query result carries besides its hits: the tier that ran and a confidence.

The Cortex seed's ``ExecuteAdaptiveSearch`` returns ``tier``, ``confidence`` (a grade
``high | medium | low``), ``confidence_score`` and ``needs_refinement`` with every result;
here :class:`~ragspine_query.pipeline.state.SearchResult` (and the snippets) carry
``tier``, ``confidence`` (:class:`Confidence`) and ``needs_refinement``.

* :func:`default_tier` — the tier that describes the channels a pipeline runs when no
  classifier picks one (``semantic`` for BM25 + dense, ``direct`` for BM25 alone, …).
* :class:`RelevanceGrader` — the default grader: a **calibrated probability that the
  library answers the query** (:class:`Calibration`, a logistic model), from signals read
  off the library's **open** (non-RESTRICTED) rows that the run's filters allow, never off
  the ranking (:func:`relevance_features`): the largest share of the query's open-row IDF
  mass one row holds (``lexical``), and per dense channel the best cosine and how far it
  stands above the next rows (``<channel>-gap``: e5 gives any text a cosine near 0.8, so
  the level alone says little). A library with its RESTRICTED documents removed gives the
  same value, and a word only a RESTRICTED document holds weighs what an unseen word
  weighs. The calibration is chosen by the library's dense channels (its embedding);
  thresholds ``high`` / ``low`` were chosen on the dev half of the sample's judged
  questions, unanswerable ones included (docs/query-intelligence.md has the figures).

Grades map to the Cortex confidence grades: correct → ``high``, ambiguous → ``medium``,
incorrect → ``low``; ``needs_refinement`` is true unless the grade is ``high``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ragspine_query.library import library_key
from ragspine_query.score_normalization import AgentScore, normalize_scores
from ragspine_query.source import LibraryRetriever, Source, channels_of, retrievers_of

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

    def to_dict(self) -> dict[str, Any]:
        return {"grade": self.grade, "score": round(float(self.score), 4)}

    @classmethod
    def of(cls, crag_grade: Any) -> "Confidence":
        """From a corrective-retrieval :class:`~ragspine_query.corrective.Grade`."""
        return cls(GRADE_TO_CONFIDENCE[crag_grade.grade], float(crag_grade.confidence), crag_grade.how)


def default_tier(source: Source | None) -> str:
    """The tier the channels of ``source`` amount to when no classifier chose one."""
    chans = [c for c in channels_of(source) if not c.on_demand]
    names = {c.name for c in chans}
    if "graph" in names:
        return "multi_hop"
    if names & {"tree", "raptor", "summary", "summary_tree"}:
        return "global"
    if any(n == "vector" or n.startswith("vector") for n in names):
        return "semantic"
    return "direct" if names else "semantic"


class _LibraryTerms:
    """IDF of a library's BM25 vocabulary over its **open** (non-RESTRICTED) rows, and its
    analyzer (read once per library). A term only RESTRICTED rows hold weighs what an
    unseen term weighs, so no score derived from it says a hidden document holds it."""

    __slots__ = ("analyze", "vocab", "idf", "unseen_idf", "indptr", "postings", "open_rows", "key")

    def __init__(self, library: Any, hidden: np.ndarray | None = None) -> None:
        """``hidden``: the rows a caller may not see (a retriever's ``hidden_mask`` under a
        sensitivity ceiling); the weights are then over the rows it may see. None: RESTRICTED rows."""
        from ragspine_core.lexical.bm25_format import idf

        #: the library and its generation these weights were computed at (a retriever that
        #: reopened its library, or a newer snapshot that withholds rows, issue 37: computed again)
        self.key = library_key(library)
        bm25 = library.bm25
        self.analyze = getattr(library.analyzer, "fn", library.analyzer)
        self.vocab = bm25.vocab
        ip = np.asarray(bm25.indptr, dtype=np.int64)
        post = np.asarray(bm25.postings, dtype=np.int64)
        open_rows = ~np.asarray(library.restricted_mask() if hidden is None else hidden, dtype=bool)
        n_open = int(open_rows.sum())
        hit = np.concatenate(([0], np.cumsum(open_rows[post], dtype=np.int64)))
        df = (hit[ip[1:]] - hit[ip[:-1]]).astype(np.float64)  # each term's open rows
        self.idf = idf(df, max(n_open, 1))
        self.unseen_idf = float(idf(np.zeros(1), max(n_open, 1))[0])
        self.indptr, self.postings, self.open_rows = ip, post, open_rows

    def weight(self, token: str) -> float:
        i = self.vocab.get(token)
        return self.unseen_idf if i is None else float(self.idf[i])

    def best_share(self, query: str, allowed: np.ndarray | None) -> float:
        """The largest share of the query's IDF mass one open (allowed) row contains."""
        q = sorted(set(self.analyze(str(query))))
        if not q:
            return 0.0
        total = sum(self.weight(t) for t in q)
        acc = np.zeros(self.open_rows.shape[0], dtype=np.float64)
        for t in q:
            i = self.vocab.get(t)
            if i is not None and self.idf[i] > 0:
                acc[self.postings[self.indptr[i]:self.indptr[i + 1]]] += self.idf[i]
        ok = self.open_rows if allowed is None else (self.open_rows & allowed)
        best = float(acc[ok].max()) if ok.any() else 0.0
        return best / total if total > 0 else 0.0


def relevance_features(retriever: LibraryRetriever, terms: "_LibraryTerms", query: str, filters: Any = None) -> dict[str, float] | None:
    """The query's relevance signals in one library, from its **open** rows only (those the
    filters allow): ``lexical`` — the largest share of the query's open-row IDF mass one row
    contains — and, per dense channel, the largest cosine (``vector``, ``vector:e5``, …) and
    ``<channel>-gap``, how far it stands above the mean of the next :data:`GAP_DEPTH` − 1.
    They depend on the open rows alone, not on a ranking: a library with its RESTRICTED
    documents removed gives the same values. None when the filters name a field the library
    lacks (it holds no row they allow)."""
    from ragspine_core.errors import FilterError

    try:
        allowed = retriever.allowed_mask(filters, include_restricted=False)
    except FilterError:
        return None
    if allowed is None:
        allowed = terms.open_rows
    if not allowed.any():
        return {}  # no open row the filters allow: nothing can answer (probability 0)
    feats = {"lexical": terms.best_share(query, allowed)}
    for ch in getattr(retriever, "channels", ()):
        if getattr(ch, "on_demand", False) or not (ch.name == "vector" or ch.name.startswith("vector:")):
            continue
        _rows, scores = ch.search(str(query), GAP_DEPTH, allowed)
        feats[ch.name] = float(scores[0]) if len(scores) else 0.0
        # how far the best row stands out from the query's next-best rows (a model's cosines
        # sit high for any text — e5's near 0.8 — so the level alone says little)
        feats[ch.name + "-gap"] = float(scores[0] - np.mean(scores[1:])) if len(scores) > 1 else 0.0
    return feats


#: how many of a dense channel's best rows the ``-gap`` feature compares the best one with
GAP_DEPTH = 20


@dataclass(frozen=True, slots=True)
class Calibration:
    """A logistic model from :func:`relevance_features` to P(the library answers the query).

    ``weights`` per feature (``lexical`` and dense channel names), ``bias``; the grades'
    probability thresholds ``high`` and ``low``. Chosen for a set of dense channels (a
    library's embedding), fitted on judged questions with unanswerable ones
    (``ragspine_tools/bench/query_fields.py --fit``; figures in docs/query-intelligence.md).
    """

    name: str
    weights: tuple[tuple[str, float], ...]
    bias: float
    high: float
    low: float

    @property
    def channels(self) -> frozenset[str]:
        return frozenset(k.removesuffix("-gap") for k, _ in self.weights if k != "lexical")

    def probability(self, feats: Mapping[str, float]) -> float:
        z = self.bias + sum(w * float(feats.get(k, 0.0)) for k, w in self.weights)
        return float(1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z)))))


#: Calibrations shipped, by the dense channels a library has (its embedding). Fitted on the
#: sample's judged questions (dev half) — see docs/query-intelligence.md. A library whose
#: dense channels match none uses ``lexical`` (its dense channels are then not read).
CALIBRATIONS: tuple[Calibration, ...] = (
    # the sample's default build: MiniLM + multilingual-e5-small + USE-multilingual
    Calibration("minilm+e5+multilingual",
                (("vector-gap", -9.5143), ("vector:e5-gap", 56.3434), ("vector:multilingual", 11.4360)),
                bias=-4.1896, high=0.7599, low=0.2652),
    # any other library (BM25 only, or dense channels without a calibration of their own)
    Calibration("lexical", (("lexical", 3.3026),), bias=-1.1761, high=1.0, low=0.3658),
)


def calibration_for(channels: Iterable[str]) -> Calibration:
    have = frozenset(channels)
    for c in CALIBRATIONS:
        if c.channels and c.channels == have:
            return c
    return next(c for c in CALIBRATIONS if not c.channels)


class RelevanceGrader:
    """The default grader: a calibrated probability that the library answers the query.

    ``(query, hits, config) -> (Grade, kept)``, like :class:`~ragspine_query.corrective.LLMGrader`
    (and ``filters=`` — the run's filters — since the grader reads the rows they allow).
    The confidence is :meth:`Calibration.probability` of :func:`relevance_features` — open
    rows only, independent of the ranking — of the library that scores highest; the grade
    is ``correct`` at or above the calibration's ``high``, ``incorrect`` under its ``low``
    (the config's thresholds are not used: they are on another scale). Hits whose own
    lexical/dense relevance (:meth:`hit_relevance`) is under the config's floor are not kept.

    Args:
        source: the retriever the hits come from (its libraries, channels and masks).
        n: how many of the top hits the ``how`` text describes (3).
    """

    takes_filters = True

    def __init__(self, source: Source, *, n: int = 3) -> None:
        self._retrievers = {r.library.library_id: r for r in retrievers_of(source)}
        self._terms: dict[str, _LibraryTerms] = {}
        self.n = n

    def _terms_of(self, library_id: str) -> _LibraryTerms | None:
        r = self._retrievers.get(library_id)
        if r is None:
            return None
        lib = r.library  # read each time: a retriever that reopened its library holds a new one (Follower)
        t = self._terms.get(library_id)
        if t is None or t.key != library_key(lib):  # reopened, or rows withheld since
            r = self._retrievers[library_id]
            ceiling = getattr(getattr(r, "config", None), "max_sensitivity", None)  # per-ceiling weights
            t = self._terms[library_id] = _LibraryTerms(lib, r.hidden_mask() if ceiling else None)
        return t

    def library_scores(self, query: str, filters: Any = None) -> dict[str, tuple[float, dict[str, float], Calibration]]:
        """``{library_id: (probability, features, calibration)}`` (libraries the filters can match)."""
        out = {}
        for lib_id, r in sorted(self._retrievers.items()):
            terms = self._terms_of(lib_id)
            if terms is None:
                continue
            feats = relevance_features(r, terms, query, filters)
            if feats is None:
                continue
            cal = calibration_for(k for k in feats if not k.startswith("lexical") and not k.endswith("-gap"))
            out[lib_id] = (cal.probability(feats) if feats else 0.0, feats, cal)
        return out

    def features(self, query: str, filters: Any = None) -> dict[str, float]:
        """The features of the best-scoring library (what a calibration is fitted on)."""
        scores = self.library_scores(query, filters)
        if not scores:
            return {"lexical": 0.0}
        return max(scores.values(), key=lambda v: v[0])[1]

    def hit_relevance(self, query: str, hit: Any) -> tuple[float, dict[str, float]]:
        """``(relevance, {signal: normalised})`` of one hit for ``query`` (open-row IDF)."""
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

    def __call__(self, query: str, hits: Sequence[Any], config: Any, *, filters: Any = None) -> tuple[Any, list[Any]]:
        if not hits:
            return Grade("incorrect", 0.0, 0, "nothing retrieved"), []
        scores = self.library_scores(query, filters)
        if not scores:
            return Grade("incorrect", 0.0, 0, "no library holds a row the filters allow"), []
        best_lib, (conf, feats, cal) = max(scores.items(), key=lambda kv: (kv[1][0], kv[0]))
        kept = [h for h in hits if self.hit_relevance(query, h)[0] >= config.floor]
        grade = "correct" if conf >= cal.high else ("incorrect" if conf < cal.low else "ambiguous")
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(feats.items()))
        how = (f"calibrated relevance ({cal.name}; high >= {cal.high:.2f}, low < {cal.low:.2f}) of the open rows"
               + (f" of {best_lib}" if len(scores) > 1 else "") + f": {parts}")
        return Grade(grade, float(conf), len(kept), how), kept


@dataclass(frozen=True, slots=True)
class Grade:
    grade: str
    confidence: float
    kept: int
    how: str

    def describe(self) -> str:
        return f"{self.grade} (confidence {self.confidence:.2f}, {self.kept} kept, {self.how})"

__all__ = ["CALIBRATIONS", "CONFIDENCE_GRADES", "Calibration", "Confidence", "GRADE_TO_CONFIDENCE", "Grade", "RelevanceGrader", "calibration_for",
           "default_tier", "relevance_features"]
