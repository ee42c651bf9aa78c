"""A tiny exact float64 BM25 and tie-aware top-k agreement measures.

The reference shares no code with ``ragspine_core.lexical.bm25``: term frequencies come
from a sort of (term, row) keys, and every weight is computed in float64 at query time
(no float32 impacts). Lucene's non-negative idf, Robertson's tf saturation with the
``(k1 + 1)`` numerator (a constant factor: engines that drop it rank identically).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np


class ReferenceBM25:
    """Exact float64 Okapi BM25 over token lists; scores every row of the corpus."""

    def __init__(self, token_lists: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75) -> None:
        vocab: dict[str, int] = {}
        ids = [vocab.setdefault(t, len(vocab)) for toks in token_lists for t in toks]
        lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=len(token_lists))
        n = lengths.shape[0]
        rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keys = np.sort(np.asarray(ids, dtype=np.int64) * n + rows)
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        tf = np.diff(np.append(starts, keys.shape[0])).astype(np.float64)
        uniq = keys[starts]
        term, row = uniq // n, uniq % n
        self.vocab = vocab
        self.n_rows = n
        self.k1, self.b = k1, b
        self.indptr = np.searchsorted(term, np.arange(len(vocab) + 1))
        self.rows = row
        self.tf = tf
        df = np.diff(self.indptr).astype(np.float64)
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5))
        avgdl = float(lengths.mean()) if n and lengths.sum() else 1.0
        self.norm = k1 * (1.0 - b + b * lengths / avgdl)

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """float64 scores of every row; each query token (with repetition) adds its weight."""
        out = np.zeros(self.n_rows, dtype=np.float64)
        for tok in query:
            t = self.vocab.get(tok)
            if t is None:
                continue
            s, e = self.indptr[t], self.indptr[t + 1]
            r, tf = self.rows[s:e], self.tf[s:e]
            out[r] += self.idf[t] * tf * (self.k1 + 1.0) / (tf + self.norm[r])
        return out


@dataclass(frozen=True, slots=True)
class Agreement:
    """Top-k agreement of one engine's result lists with the reference, tie-aware."""

    overlap: float  # mean tie-aware overlap (1.0 = every list is a correct top-k)
    valid: float  # share of queries whose list is exactly a correct top-k (ties allowed)
    jaccard: float  # mean Jaccard with the reference's list (ties broken by row asc)
    n_queries: int

    def as_dict(self) -> dict:
        return {"top10_overlap": round(self.overlap, 6), "top10_valid": round(self.valid, 6),
                "top10_jaccard": round(self.jaccard, 6), "n_queries": self.n_queries}


def agreement(
    reference: ReferenceBM25,
    queries: Sequence[Sequence[str]],
    results: Mapping[str, Sequence[Sequence[int]]],
    k: int = 10,
    rel_tol: float = 1e-5,
) -> dict[str, Agreement]:
    """Compare every engine's result lists with the reference, query by query.

    Only rows with a positive reference score count (engines that pad short lists with
    zero-score rows are not penalised). A row within ``rel_tol`` of the reference's
    k-th score is a tie: any of the tied rows may fill the slots left after the rows
    that score strictly higher.
    """
    acc: dict[str, tuple[list[float], list[float], list[float]]] = {name: ([], [], []) for name in results}
    for qi, query in enumerate(queries):
        scores = reference.scores(query)
        pos = np.flatnonzero(scores > 0)
        m = min(k, pos.shape[0])
        if m == 0:
            continue
        s = scores[pos]
        kth = float(s[np.argpartition(-s, m - 1)[:m]].min())
        tol = rel_tol * max(abs(kth), 1e-12)
        strict = set(pos[s > kth + tol].tolist())
        tied = set(pos[np.abs(s - kth) <= tol].tolist())
        near = pos[s >= kth - tol]
        ref_top = set(near[np.lexsort((near, -scores[near]))][:m].tolist())
        for name, lists in results.items():
            mine = set(int(r) for r in list(lists[qi])[:m])
            found = len(strict & mine) + min(len(tied & mine), m - len(strict))
            overlaps, valids, jaccards = acc[name]
            overlaps.append(found / m)
            valids.append(float(len(mine) == m and strict <= mine and mine <= (strict | tied)))
            jaccards.append(len(ref_top & mine) / len(ref_top | mine))
    mean = (lambda xs: float(np.mean(xs)) if xs else math.nan)
    return {name: Agreement(mean(o), mean(v), mean(j), len(o)) for name, (o, v, j) in acc.items()}
