"""Okapi BM25 with impacts precomputed at index time (CSC-like arrays).

Weighting (Robertson/Sparck Jones with Lucene's non-negative IDF)::

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    impact(t,d) = idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))
    score(q,d)  = sum over query tokens t (with repetition) of impact(t, d)

Both the build (:func:`build_bm25_arrays`) and the scoring (:class:`BM25Index`) live in
this module because index time and query time must agree on them. Files are written
by ``ragspine_assets``; this module only reads them (memory-mapped).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import schema
from ..errors import ConfigError, IndexCorruptError, IndexNotFoundError

DEFAULT_BM25_K1 = 1.5
DEFAULT_BM25_B = 0.75


@dataclass(frozen=True, slots=True)
class BM25Params:
    """BM25 free parameters, validated on construction."""

    k1: float = DEFAULT_BM25_K1
    b: float = DEFAULT_BM25_B

    def __post_init__(self) -> None:
        if not (math.isfinite(self.k1) and self.k1 >= 0):
            raise ConfigError(f"BM25 k1 must be a finite number >= 0, got {self.k1!r}")
        if not (math.isfinite(self.b) and 0.0 <= self.b <= 1.0):
            raise ConfigError(f"BM25 b must be within [0, 1], got {self.b!r}")


@dataclass(frozen=True, slots=True)
class BM25Arrays:
    """The in-memory form of a BM25 index (what is written to / read from disk)."""

    tokens: list[str]  # sorted vocabulary; token id = position
    indptr: np.ndarray  # int64[V+1]
    postings: np.ndarray  # int32[nnz]
    impacts: np.ndarray  # float32[nnz]
    max_impact: np.ndarray  # float32[V]
    doc_lengths: np.ndarray  # int32[n_rows]
    params: BM25Params
    avgdl: float

    @property
    def n_rows(self) -> int:
        return int(self.doc_lengths.shape[0])


def idf(df: np.ndarray, n_rows: int) -> np.ndarray:
    """Lucene's non-negative BM25 IDF, float64."""
    df = df.astype(np.float64)
    return np.log1p((n_rows - df + 0.5) / (df + 0.5))


def build_bm25_arrays(token_lists: Sequence[Sequence[str]], params: BM25Params = BM25Params()) -> BM25Arrays:
    """Build BM25 postings with precomputed impacts; row ``i`` is ``token_lists[i]``."""
    n_rows = len(token_lists)
    vocab: dict[str, int] = {}
    term_chunks: list[np.ndarray] = []
    row_chunks: list[np.ndarray] = []
    tf_chunks: list[np.ndarray] = []
    lengths = np.zeros(n_rows, dtype=np.int32)
    for row, toks in enumerate(token_lists):
        lengths[row] = len(toks)
        if not toks:
            continue
        counts = Counter(toks)
        ids = [vocab.setdefault(t, len(vocab)) for t in counts]
        term_chunks.append(np.asarray(ids, dtype=np.int32))
        tf_chunks.append(np.fromiter(counts.values(), dtype=np.float32, count=len(counts)))
        row_chunks.append(np.full(len(counts), row, dtype=np.int32))
    tokens = sorted(vocab)
    n_terms = len(tokens)
    if term_chunks:
        # remap first-seen ids to sorted-vocabulary ids
        remap = np.empty(n_terms, dtype=np.int32)
        for new_id, tok in enumerate(tokens):
            remap[vocab[tok]] = new_id
        terms = remap[np.concatenate(term_chunks)]
        rows = np.concatenate(row_chunks)
        tfs = np.concatenate(tf_chunks)
        order = np.argsort(terms, kind="stable")  # rows already ascending within a term
        terms, rows, tfs = terms[order], rows[order], tfs[order]
    else:
        terms = np.zeros(0, dtype=np.int32)
        rows = np.zeros(0, dtype=np.int32)
        tfs = np.zeros(0, dtype=np.float32)
    df = np.bincount(terms, minlength=n_terms).astype(np.int64)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    avgdl = float(lengths.mean()) if n_rows and lengths.sum() > 0 else 1.0
    k1, b = params.k1, params.b
    norm = k1 * (1.0 - b + b * lengths.astype(np.float64) / avgdl)
    tf64 = tfs.astype(np.float64)
    impacts = (idf(df, n_rows)[terms] * tf64 * (k1 + 1.0) / (tf64 + norm[rows])).astype(np.float32)
    max_impact = np.zeros(n_terms, dtype=np.float32)
    if impacts.size:
        np.maximum.at(max_impact, terms, impacts)
    return BM25Arrays(
        tokens=tokens,
        indptr=indptr,
        postings=rows.astype(np.int32),
        impacts=impacts,
        max_impact=max_impact,
        doc_lengths=lengths,
        params=params,
        avgdl=avgdl,
    )


def _empty() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)


def top_k_rows(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` of (rows, scores) by score desc, ties by row asc (rows must be unique)."""
    n = rows.shape[0]
    if n == 0 or k <= 0:
        return _empty()
    if n > k:
        part = np.argpartition(-scores, k - 1)[:k]
        kth = scores[part].min()
        # keep every row tied with the k-th score so the tie-break sees all of them
        sel = np.flatnonzero(scores >= kth)
        rows, scores = rows[sel], scores[sel]
    order = np.lexsort((rows, -scores))[:k]
    return rows[order].astype(np.int64), scores[order]


class BM25Index:
    """A read-only BM25 index over rows (chunks or documents), arrays memory-mapped."""

    __slots__ = ("tokens", "vocab", "indptr", "postings", "impacts", "max_impact", "n_rows", "params", "avgdl", "_acc")

    def __init__(self, arrays: BM25Arrays) -> None:
        self.tokens = arrays.tokens
        self.vocab = {t: i for i, t in enumerate(arrays.tokens)}
        self.indptr = arrays.indptr
        self.postings = arrays.postings
        self.impacts = arrays.impacts
        self.max_impact = arrays.max_impact
        self.n_rows = arrays.n_rows
        self.params = arrays.params
        self.avgdl = arrays.avgdl
        self._acc: np.ndarray | None = None

    @classmethod
    def load(cls, directory: str | Path, *, mmap: bool = True) -> "BM25Index":
        """Open a BM25 directory written by the ``bm25_index`` asset."""
        d = Path(directory)
        params_path = d / schema.BM25_PARAMS
        if not params_path.exists():
            raise IndexNotFoundError(f"no BM25 index at {d}: materialize the bm25_index asset")
        meta = json.loads(params_path.read_text(encoding="utf-8"))
        mode = "r" if mmap else None
        try:
            tokens = json.loads((d / schema.BM25_VOCAB).read_text(encoding="utf-8"))["tokens"]
            arrays = BM25Arrays(
                tokens=tokens,
                indptr=np.load(d / schema.BM25_INDPTR, mmap_mode=mode),
                postings=np.load(d / schema.BM25_POSTINGS, mmap_mode=mode),
                impacts=np.load(d / schema.BM25_IMPACTS, mmap_mode=mode),
                max_impact=np.load(d / schema.BM25_MAX_IMPACT, mmap_mode=mode),
                doc_lengths=np.zeros(int(meta["n_rows"]), dtype=np.int32),
                params=BM25Params(float(meta["k1"]), float(meta["b"])),
                avgdl=float(meta["avgdl"]),
            )
        except (OSError, ValueError, KeyError) as exc:
            raise IndexCorruptError(f"BM25 index at {d} is unreadable ({exc}); re-materialize the bm25_index asset") from exc
        if arrays.indptr.shape[0] != len(tokens) + 1 or arrays.postings.shape != arrays.impacts.shape:
            raise IndexCorruptError(f"BM25 index at {d} has inconsistent array shapes; re-materialize the bm25_index asset")
        return cls(arrays)

    def term_ids(self, tokens: Sequence[str]) -> list[int]:
        """Vocabulary ids of ``tokens`` (unknown tokens dropped, repetition kept)."""
        get = self.vocab.get
        return [i for i in (get(t) for t in tokens) if i is not None]

    def score_terms(self, term_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Sparse scores: (rows touched by any term, ascending; their BM25 scores)."""
        if not term_ids:
            return _empty()
        ip = self.indptr
        spans = [(int(ip[t]), int(ip[t + 1])) for t in term_ids]
        total = sum(e - s for s, e in spans)
        if len(spans) == 1:
            s, e = spans[0]
            return np.asarray(self.postings[s:e], dtype=np.int64), np.asarray(self.impacts[s:e], dtype=np.float32)
        if total * 8 < self.n_rows:
            rows = np.concatenate([self.postings[s:e] for s, e in spans])
            imps = np.concatenate([self.impacts[s:e] for s, e in spans])
            uniq, inv = np.unique(rows, return_inverse=True)
            scores = np.bincount(inv, weights=imps, minlength=uniq.shape[0]).astype(np.float32)
            return uniq.astype(np.int64), scores
        acc = self._accumulator()
        try:
            for s, e in spans:
                acc[self.postings[s:e]] += self.impacts[s:e]
            rows = np.flatnonzero(acc)
            return rows, acc[rows].copy()
        finally:
            acc[:] = 0.0

    def _accumulator(self) -> np.ndarray:
        acc = self._acc
        if acc is None:
            acc = self._acc = np.zeros(self.n_rows, dtype=np.float32)
        return acc

    def search(self, tokens: Sequence[str], k: int = 10, *, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (rows, scores), ties by row ascending; ``allowed`` is a bool mask over rows."""
        rows, scores = self.score_terms(self.term_ids(tokens))
        if allowed is not None and rows.size:
            keep = allowed[rows]
            rows, scores = rows[keep], scores[keep]
        return top_k_rows(rows, scores, k)

    def score_rows_dense(self, tokens: Sequence[str]) -> np.ndarray:
        """Scores of every row (float64) — reference path for tests and small indexes."""
        out = np.zeros(self.n_rows, dtype=np.float64)
        for t in self.term_ids(tokens):
            s, e = int(self.indptr[t]), int(self.indptr[t + 1])
            out[self.postings[s:e]] += self.impacts[s:e]
        return out
