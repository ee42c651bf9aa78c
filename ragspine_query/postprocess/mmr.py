"""Maximal Marginal Relevance (Carbonell & Goldstein, SIGIR 1998) over the chunk vectors.

``MMR = argmax_d [ λ · rel(d) − (1 − λ) · max_{s ∈ selected} sim(d, s) ]``: ``rel`` is the
hit's score scaled to [0, 1] by the list's best score, ``sim`` the cosine between the
chunks' stored vectors (the library's embeddings, memory-mapped, never re-embedded).
A library without vectors — or a hit whose chunk has none, or a pair of hits from
libraries whose vectors are of different models or sizes (not comparable) — falls back to
the Jaccard overlap of the chunks' token sets, and ``describe`` says so. λ = 1 is the input order;
smaller λ favours diversity. Ties break on the input order (itself deterministic).
"""

from __future__ import annotations

import re
import threading
from typing import Any, Mapping, Sequence, cast

import numpy as np

from ragspine_core.errors import ConfigError
from ragspine_core.records import Hit
from ragspine_query.source import Source, libraries_of

_TOKEN = re.compile(r"\w+", re.UNICODE)


class VectorLookup:
    """Stored chunk vectors by ``(library_id, chunk_id)``, for the libraries of one retriever."""

    def __init__(self, libraries: Mapping[str, Any]) -> None:
        self.libraries = dict(libraries)
        self._index: dict[str, tuple[dict[str, int], Any, tuple[str, int]] | None] = {}
        self._lock = threading.Lock()

    @classmethod
    def of_source(cls, source: Source) -> "VectorLookup":
        """The libraries behind a HybridRetriever / MultiIndexRetriever (:func:`~ragspine_query.source.libraries_of`)."""
        return cls({lib.library_id: lib for lib in libraries_of(source)})

    def _for(self, library_id: str) -> tuple[dict[str, int], Any, tuple[str, int]] | None:
        with self._lock:
            if library_id not in self._index:
                lib: Any = self.libraries.get(library_id)
                emb = lib.embeddings() if lib is not None else None
                if emb is None:
                    self._index[library_id] = None
                else:
                    ids = lib.chunk_ids()
                    rows = np.asarray(emb.rows)
                    space = (str(getattr(emb, "model_id", "")), int(np.asarray(emb.vectors).shape[1]))
                    self._index[library_id] = ({ids[int(r)]: i for i, r in enumerate(rows.tolist())}, emb.vectors,
                                               space)
            return self._index[library_id]

    def vectors(self, hits: Sequence[Hit]) -> tuple[np.ndarray | None, np.ndarray]:
        """``(unit vectors [n, dim] or None, has_vector bool[n])`` for ``hits``; with
        libraries of different vector spaces (model or size), zero-padded to the largest size
        (compare only within one space: :meth:`spaces`)."""
        mat, has, _ = self.vectors_and_spaces(hits)
        return mat, has

    def vectors_and_spaces(self, hits: Sequence[Hit]) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """As :meth:`vectors`, plus each hit's vector space as a small int (-1: no vector):
        two vectors are comparable only when their spaces are equal."""
        found: list[np.ndarray | None] = []
        spaces: list[Any] = []
        for h in hits:
            entry: Any = self._for(h.chunk.library_id) if self.libraries else None
            i = entry[0].get(h.chunk_id) if entry is not None else None
            found.append(None if i is None else np.asarray(entry[1][i], dtype=np.float32))
            spaces.append(None if i is None else entry[2])
        has = np.array([v is not None for v in found], dtype=bool)
        numbering: dict[Any, int] = {}
        space_ids = np.array([-1 if sp is None else numbering.setdefault(sp, len(numbering)) for sp in spaces],
                             dtype=np.int64)
        if not has.any():
            return None, has, space_ids
        dim = max(v.shape[0] for v in found if v is not None)
        mat = np.zeros((len(hits), dim), dtype=np.float32)
        for i, v in enumerate(found):
            if v is not None:
                n = float(np.linalg.norm(v))
                mat[i, : v.shape[0]] = v / n if n > 0 else v
        return mat, has, space_ids


def _tokens(hit: Hit) -> frozenset[str]:
    return frozenset(t.casefold() for t in _TOKEN.findall(hit.chunk.text))


def jaccard_matrix(token_sets: Sequence[frozenset[str]]) -> np.ndarray:
    """Pairwise Jaccard overlap of token sets (one binary matrix product)."""
    vocab: dict[str, int] = {}
    cols = [[vocab.setdefault(t, len(vocab)) for t in sorted(ts)] for ts in token_sets]
    m = np.zeros((len(token_sets), max(len(vocab), 1)), dtype=np.float32)
    for i, c in enumerate(cols):
        m[i, c] = 1.0
    inter = (m @ m.T).astype(np.float64)
    size = m.sum(axis=1).astype(np.float64)
    union = size[:, None] + size[None, :] - inter
    return cast("np.ndarray", np.divide(inter, union, out=np.zeros_like(inter), where=union > 0))


def mmr_order(relevance: np.ndarray, similarity: np.ndarray, *, lam: float, top_n: int | None = None) -> list[int]:
    """Indices in MMR order (greedy); the first ``top_n`` are chosen by MMR, the rest keep
    their input order. Ties break on the lower index."""
    n = relevance.shape[0]
    k = n if top_n is None else min(top_n, n)
    chosen: list[int] = []
    left = list(range(n))
    max_sim = np.full(n, -np.inf)
    while len(chosen) < k:
        idx = np.asarray(left)
        penalty = np.where(np.isfinite(max_sim[idx]), max_sim[idx], 0.0)
        score = lam * relevance[idx] - (1.0 - lam) * penalty
        pick = int(idx[int(np.argmax(score))])  # argmax: first maximum = lowest index
        chosen.append(pick)
        left.remove(pick)
        max_sim = np.maximum(max_sim, similarity[pick])
    return chosen + left


class MMRPostProcessor:
    """Re-order the deep list by MMR.

    Args:
        lookup: where chunk vectors come from (None: token-overlap similarity only).
        lam: λ in [0, 1] (1 = relevance only).
        top_n: how many hits MMR picks (the rest follow in their order); default all.
    """

    final = False

    def __init__(self, lookup: VectorLookup | None = None, *, lam: float = 0.7, top_n: int | None = 50) -> None:
        if not (0.0 <= lam <= 1.0):
            raise ConfigError(f"MMR lambda must be in [0, 1], got {lam}")
        self.lookup = lookup
        self.lam = float(lam)
        self.top_n = top_n
        self.describe = f"lambda={self.lam}"

    def __call__(self, query: str, hits: list[Hit]) -> list[Hit]:
        if len(hits) < 2 or self.lam == 1.0:
            return list(hits)
        scores = np.array([float(h.score) for h in hits], dtype=np.float64)
        top = scores.max()
        rel = scores / top if top > 0 else np.ones_like(scores)
        if self.lookup is not None:
            mat, has, space = self.lookup.vectors_and_spaces(hits)
        else:
            mat, has, space = None, np.zeros(len(hits), bool), np.full(len(hits), -1)
        sim = np.zeros((len(hits), len(hits)), dtype=np.float64)
        if mat is not None:
            sim = (mat @ mat.T).astype(np.float64)
        comparable = has[:, None] & has[None, :] & (space[:, None] == space[None, :])
        if not comparable.all():  # token overlap where a vector is missing (RESTRICTED rows, bm25-only
            # libraries) or two vectors are of different models/sizes
            jac = jaccard_matrix([_tokens(h) for h in hits])
            sim[~comparable] = jac[~comparable]
        order = mmr_order(rel, sim, lam=self.lam, top_n=self.top_n)
        return [hits[i] for i in order]
