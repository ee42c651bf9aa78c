"""Okapi BM25 with impacts precomputed at index time (CSC-like arrays).

Weighting (Robertson/Sparck Jones with Lucene's non-negative IDF)::

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    impact(t,d) = idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))
    score(q,d)  = sum over query tokens t (with repetition) of impact(t, d)

The collection statistics ``N``, ``df`` and ``avgdl`` may be computed over a subset of
the rows (``stat_rows``): the library computes them over its *open* rows only, so that
a RESTRICTED chunk changes no open chunk's score (docs/security.md). Every row still
gets postings (an ``include_restricted`` search still finds RESTRICTED rows), scored
with the open rows' statistics.

A library that holds two languages may keep each language's statistics apart
(``row_languages`` with ``BM25Params.k1_by_language``): a row is then weighted with its
own language's ``N``, ``df``, ``avgdl`` and ``k1``, so an English chunk scores as it would
in a library of the English documents alone (Chinese titles do not shorten its
``avgdl``), whatever the other collection holds.

This module is the query-time index (:class:`BM25Index`, memory-mapped, read-only) and the
blended chunk + document search. What index time and query time must agree on sits beside
it in this package: the parameters and arrays (:mod:`.bm25_format`), the build
(:mod:`.bm25_build`; files are written by ``ragspine_index.steps.bm25_index``), top-k
selection (:mod:`.topk`) and the compiled kernels (:mod:`.bm25_jit`). Their names are
re-exported here. (About 650 lines: :class:`BM25Index`'s exact pruned search and its
kernel dispatch are one unit.)
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Literal, Sequence, cast

import numpy as np

from ragspine_core import schema
from ragspine_core.errors import IndexCorruptError, IndexNotFoundError

from ragspine_core.lexical.topk import SAMPLE_MIN, empty_top_k, keep_postings, kth_largest, row_sample, sample_floor, top_k_distinct

# the public names of the modules split out of this one, re-exported for older imports
from ragspine_core.lexical.bm25_build import (RowCounts, blend_bm25_arrays, build_bm25_arrays,  # noqa: F401
                                              build_bm25_from_counts, count_rows)
from ragspine_core.lexical.bm25_format import (DEFAULT_BM25_B, DEFAULT_BM25_K1, DEFAULT_DOC_WEIGHT,  # noqa: F401
                                               BM25Arrays, BM25Params, check_bm25_arrays, idf)
from ragspine_core.lexical.topk import top_k_rows  # noqa: F401


def terms_all_own(blend: BM25Index, own: np.ndarray) -> np.ndarray:
    """bool per term: every posting of the term is in its chunk's own text (then
    :func:`search_blend_index` needs no candidate filter for it — e.g. single-chunk
    documents)."""
    indptr = np.asarray(blend.indptr, dtype=np.int64)
    out = np.ones(indptr.shape[0] - 1, dtype=bool)
    nonempty = np.flatnonzero(np.diff(indptr) > 0)
    if nonempty.size:
        out[nonempty] = np.minimum.reduceat(np.asarray(own, dtype=np.uint8), indptr[nonempty]).astype(bool)
    return out


def search_blend_index(blend: BM25Index, own: np.ndarray, tokens: Sequence[str], k: int, *,
                       allowed: np.ndarray | None = None,
                       all_own: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Top-``k`` chunk rows by ``chunk + w × document`` BM25 from the blended index.

    Candidates are the rows that match a query term in their own text (``own``), as
    with :func:`blend_reference`; scores are summed in query order in float64, whichever
    strategy runs. A query with a frequent term takes the blended index's dense
    strategies (dense columns, MaxScore pruning, :meth:`BM25Index._search_dense`); the
    own-text filter is then an OR of per-term row masks, cached like the columns
    (none is needed when every posting of every query term is the chunk's own, e.g.
    single-chunk documents). The result is always a ranking (the ``None`` of older
    versions, "take the two-field path", is no longer returned; callers may keep
    handling it).
    """
    if k <= 0:
        return empty_top_k()
    term_ids, spans = blend._lookup(tokens)
    if not spans:
        return empty_top_k()
    total = sum([e - s for s, e in spans])
    if total * 4 >= blend.n_rows and blend._use_dense(spans, total):
        if all_own is None or not all([all_own[t] for t in term_ids]):
            mine = blend._own_mask(term_ids, spans, own, all_own)
            allowed = mine if allowed is None else np.logical_and(mine, allowed)
        return blend._search_dense(term_ids, spans, k, allowed)
    jit = blend._jit_kernel()
    if jit is not None and _kernel_mask(allowed) and own.dtype == np.uint8 and own.flags.c_contiguous:
        mixed = all_own is None or not all([all_own[t] for t in term_ids])
        return blend._kernel_top_k(jit, spans, k, own if mixed else None, allowed)
    cat, scores = blend._posting_scores(spans)
    lo, hi = _longest_span(spans)
    if all_own is None or not all([all_own[t] for t in term_ids]):
        # candidates: the rows of own-text postings (a row matching n terms appears n times)
        mine = np.concatenate([own[s:e] for s, e in spans]).view(bool)
        cat, scores, lo, hi = keep_postings(cat, scores, lo, hi, mine)
    if allowed is not None:
        cat, scores, lo, hi = keep_postings(cat, scores, lo, hi, allowed[cat])
    return top_k_distinct(cat, scores, lo, hi, k)


def _longest_span(spans: list[tuple[int, int]]) -> tuple[int, int]:
    """Positions, in the concatenated postings, of the longest posting list."""
    lengths = [e - s for s, e in spans]
    longest = lengths.index(max(lengths))
    lo = sum(lengths[:longest])
    return lo, lo + lengths[longest]


class BM25Index:
    """A read-only BM25 index over rows (chunks or documents), arrays memory-mapped.

    Every query path computes the same score, ``float32(sum of the float32 impacts of
    the query tokens, added in float64 in query-token order)`` — bit for bit
    ``score_rows_dense(tokens).astype(float32)`` — so a ranking never depends on which
    path ran; ties are broken by row ascending. The paths differ only in how much work
    they skip, and each skip is exact:

    * few postings: ``np.add.at`` into a zeroed float64 scratch (sequential, so each
      row is summed in query order), touching only those postings; :meth:`search` then
      keeps the rows scoring at least the k-th best row of the longest posting list
      (k distinct rows with exact scores, so a floor under the true k-th score);
    * many postings of a frequent term (``df >= n_rows / DENSE_DF_DIVISOR``): the term
      is expanded once, on first use, into a dense float32 column (the columns of one
      index are bounded by ``DENSE_CACHE_BYTES``) and added to every row with one
      vectorised add — adding 0.0 where the term is absent leaves a float64 sum as it
      was; :meth:`search` keeps the rows at or above the k-th best of a row sample;
    * a query made only of such frequent terms (stop words) is pruned MaxScore-style:
      terms whose ``max_impact`` values sum to a small share of the k-th best score are
      left out of the pass over all rows and added back, exactly, for the few rows that
      can still reach the top k (:meth:`_search_pruned`);
    * :func:`top_k_rows` over many candidates first applies a sample floor too;
    * with numba installed (extra ``accel``), once the index has served
      :attr:`JIT_AFTER` sparse queries, a compiled kernel (:mod:`.bm25_jit`, built on a
      background thread, never at open) answers sparse queries in one loop: the same
      float64 query-order sums, the same candidates, a k-heap for the same order.

    Floors are compared in float32 terms (:func:`_float32_cut`), so a row that ties with
    the k-th score only after rounding to float32 is never dropped before the tie-break.

    One instance may be queried from several threads: the shared scratch buffers are
    taken under a non-blocking lock and a caller that finds them busy allocates its own.
    """

    #: a term whose posting list covers at least n_rows / DENSE_DF_DIVISOR rows is
    #: scored through a dense column (a vectorised add beats a scatter at that density).
    DENSE_DF_DIVISOR = 16
    #: upper bound on the memory held by the dense columns of one index.
    DENSE_CACHE_BYTES = 128 << 20
    #: indexes with fewer rows never use dense columns.
    DENSE_MIN_ROWS = 4_096
    #: MaxScore pruning leaves out terms whose maxima sum to at most this share of the
    #: k-th best score found so far (measured: 0.1–0.25 are equally good on stop words).
    PRUNE_SLACK = 0.2
    #: below this many rows a plain dense sum is cheaper than pruning.
    PRUNE_MIN_ROWS = 32_768
    #: after this many sparse queries an index compiles its numba kernel (extra
    #: ``accel``) on a background thread and answers sparse queries with it from then
    #: on (:mod:`.bm25_jit`, same results bit for bit); None: never. Not at open, where
    #: numba's import alone would break the cold-start budget.
    JIT_AFTER: int | None = 32

    __slots__ = (
        "tokens", "vocab", "indptr", "postings", "impacts", "max_impact", "n_rows", "params", "avgdl",
        "_ip", "_post", "_imp", "_maxi", "_zeros", "_dense", "_busy", "_columns", "_column_bytes", "_dense_df",
        "_known", "_jit", "_jit_calls", "_masks",
    )

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
        # plain-ndarray views of the (possibly memory-mapped) arrays: np.memmap's
        # Python-level __getitem__ costs microseconds per slice on the hot path
        self._ip = np.asarray(arrays.indptr)
        self._post = np.asarray(arrays.postings)
        self._imp = np.asarray(arrays.impacts)
        self._maxi = np.asarray(arrays.max_impact)
        self._zeros: np.ndarray | None = None  # float64[n_rows], all zero between calls
        self._dense: np.ndarray | None = None  # float64[n_rows], no invariant
        self._busy = threading.Lock()  # held while a call uses _zeros or _dense
        self._columns: dict[int, np.ndarray] = {}
        self._masks: dict[int, np.ndarray] = {}  # term -> bool[n_rows] own-text rows, see _own_mask
        self._column_bytes = 0
        self._known: dict[str, tuple[int, tuple[int, int]]] = {}  # token -> (id, span), see _lookup
        self._jit: tuple[Any, ...] | None = None  # (kernel, its array arguments) once compiled, see _jit_kernel
        self._jit_calls = 0
        n = self.n_rows
        self._dense_df = max(1, n // self.DENSE_DF_DIVISOR) if n >= self.DENSE_MIN_ROWS else n + 1

    @classmethod
    def load(cls, directory: str | Path, *, mmap: bool = True) -> "BM25Index":
        """Open a BM25 directory written by the ``bm25_index`` asset."""
        d = Path(directory)
        params_path = d / schema.BM25_PARAMS
        if not params_path.exists():
            raise IndexNotFoundError(f"no BM25 index at {d}: materialize the bm25_index asset")
        mode: Literal["r"] | None = "r" if mmap else None
        from ragspine_core.integrity import map_or_copy

        def load(path: Path) -> np.ndarray:  # small arrays copied, large ones mapped (integrity.map_or_copy)
            return map_or_copy(path) if mode else np.load(path, mmap_mode=None)
        try:
            meta = json.loads(params_path.read_text(encoding="utf-8"))
            tokens = json.loads((d / schema.BM25_VOCAB).read_text(encoding="utf-8"))["tokens"]
            arrays = BM25Arrays(
                tokens=tokens,
                indptr=load(d / schema.BM25_INDPTR),
                postings=load(d / schema.BM25_POSTINGS),
                impacts=load(d / schema.BM25_IMPACTS),
                max_impact=load(d / schema.BM25_MAX_IMPACT),
                doc_lengths=np.zeros(int(meta["n_rows"]), dtype=np.int32),
                params=BM25Params(float(meta["k1"]), float(meta["b"])),
                avgdl=float(meta["avgdl"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexCorruptError(f"BM25 index at {d} is unreadable ({exc}); re-materialize the bm25_index asset") from exc
        if arrays.indptr.shape[0] != len(tokens) + 1 or arrays.postings.shape != arrays.impacts.shape:
            raise IndexCorruptError(f"BM25 index at {d} has inconsistent array shapes; re-materialize the bm25_index asset")
        check_bm25_arrays(d, arrays)
        return cls(arrays)

    def term_ids(self, tokens: Sequence[str]) -> list[int]:
        """Vocabulary ids of ``tokens`` (unknown tokens dropped, repetition kept)."""
        get = self.vocab.get
        return [i for i in (get(t) for t in tokens) if i is not None]

    def _lookup(self, tokens: Sequence[str]) -> tuple[list[int], list[tuple[int, int]]]:
        """:meth:`term_ids` and :meth:`_spans` in one pass over ``tokens``.

        A token's (id, span) is remembered on first use (bounded by the vocabulary:
        unknown tokens are not remembered), so a query costs one dict lookup per token.
        """
        known = self._known
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        for t in tokens:
            entry = known.get(t)
            if entry is None:
                i = self.vocab.get(t)
                if i is None:
                    continue
                entry = known[t] = (i, (self._ip.item(i), self._ip.item(i + 1)))
            ids.append(entry[0])
            spans.append(entry[1])
        return ids, spans

    # -- scoring ---------------------------------------------------------------------
    def score_terms(self, term_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Sparse scores: (rows touched by any term, ascending; their BM25 scores)."""
        if not term_ids:
            return empty_top_k()
        spans, total = self._spans(term_ids)
        if len(spans) == 1:
            s, e = spans[0]
            return self._post[s:e].astype(np.int64), self._imp[s:e].copy()
        if self._use_dense(spans, total):
            acc, shared = self._borrow(dense=True)
            try:
                self._dense_scores(acc, term_ids, spans)
                rows = np.flatnonzero(acc)
                return rows, acc[rows].astype(np.float32)
            finally:
                self._release(shared)
        acc, shared = self._borrow(dense=False)
        try:
            cat = self._accumulate(acc, spans)
            if total * 8 < self.n_rows:
                rows = _unique_sorted(cat).astype(np.int64)
            else:
                rows = np.flatnonzero(acc)
            scores = acc[rows].astype(np.float32)
            acc[rows] = 0.0
            return rows, scores
        except BaseException:
            acc.fill(0.0)  # keep the all-zero invariant
            raise
        finally:
            self._release(shared)

    def search(self, tokens: Sequence[str], k: int = 10, *, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (rows, scores), ties by row ascending; ``allowed`` is a bool mask over rows."""
        if k <= 0:
            return empty_top_k()
        term_ids, spans = self._lookup(tokens)
        if not spans:
            return empty_top_k()
        total = sum([e - s for s, e in spans])
        if total * 4 >= self.n_rows and self._use_dense(spans, total):
            return self._search_dense(term_ids, spans, k, allowed)
        jit = self._jit_kernel()
        if jit is not None and _kernel_mask(allowed):
            return self._kernel_top_k(jit, spans, k, None, allowed)
        if len(spans) == 1:
            s, e = spans[0]
            rows, scores = self._post[s:e], self._imp[s:e]
            if allowed is not None:
                keep = allowed[rows]
                rows, scores = rows[keep], scores[keep]
            return top_k_rows(rows, scores, k)
        cat, scores = self._posting_scores(spans)
        lo, hi = _longest_span(spans)
        if allowed is not None:
            cat, scores, lo, hi = keep_postings(cat, scores, lo, hi, allowed[cat])
        return top_k_distinct(cat, scores, lo, hi, k)

    def score_rows_dense(self, tokens: Sequence[str]) -> np.ndarray:
        """Scores of every row (float64) — reference path for tests and small indexes."""
        out = np.zeros(self.n_rows, dtype=np.float64)
        for t in self.term_ids(tokens):
            s, e = int(self.indptr[t]), int(self.indptr[t + 1])
            out[self.postings[s:e]] += self.impacts[s:e]
        return out

    # -- the compiled sparse path ----------------------------------------------------------
    def compile_jit(self) -> bool:
        """Compile the numba kernel now (blocking) instead of after :attr:`JIT_AFTER`
        queries; False when numba (extra ``accel``) is not installed."""
        _load_jit(self)
        return self._jit is not None

    def _jit_kernel(self) -> tuple[Any, ...] | None:
        """The compiled kernel, or None (then counts the query toward :attr:`JIT_AFTER`)."""
        jit = self._jit
        if jit is None and self.JIT_AFTER is not None:
            n = self._jit_calls = self._jit_calls + 1
            if n == self.JIT_AFTER:
                # not a daemon: an exiting interpreter waits for the compile to end
                # (tearing numba down mid-compile can crash the exit)
                threading.Thread(target=_load_jit, args=(self,), name="ragspine-bm25-jit").start()
        return jit

    def _kernel_top_k(self, jit: tuple[Any, ...], spans: list[tuple[int, int]], k: int, own: np.ndarray | None,
                      allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        kernel, post, imp, no_own, no_mask = jit
        acc, shared = self._borrow(dense=False)
        try:
            return cast("tuple[np.ndarray, np.ndarray]", kernel(post, imp, np.array(spans, dtype=np.int64), acc, k,
                          no_own if own is None else _readonly(own), own is not None,
                          no_mask if allowed is None else _readonly(allowed), allowed is not None))
        except BaseException:
            acc.fill(0.0)  # keep the all-zero invariant
            raise
        finally:
            self._release(shared)

    # -- internals -------------------------------------------------------------------
    def _spans(self, term_ids: Sequence[int]) -> tuple[list[tuple[int, int]], int]:
        item = self._ip.item
        spans = [(item(t), item(t + 1)) for t in term_ids]
        return spans, sum(e - s for s, e in spans)

    def _use_dense(self, spans: list[tuple[int, int]], total: int) -> bool:
        """Dense accumulation pays off once a frequent term brings many postings."""
        if total * 4 < self.n_rows:
            return False
        cut = self._dense_df
        return any(e - s >= cut for s, e in spans)

    def _borrow(self, *, dense: bool) -> tuple[np.ndarray, bool]:
        """A float64[n_rows] scratch and whether it is the shared one (then release it).

        The zeroed scratch is all zero whenever it is not borrowed; the dense one holds
        garbage. A caller that finds the shared buffers busy gets a fresh buffer.
        """
        if not self._busy.acquire(blocking=False):
            return (np.empty if dense else np.zeros)(self.n_rows, dtype=np.float64), False
        if dense:
            buf = self._dense
            if buf is None:
                buf = self._dense = np.empty(self.n_rows, dtype=np.float64)
        else:
            buf = self._zeros
            if buf is None:
                buf = self._zeros = np.zeros(self.n_rows, dtype=np.float64)
        return buf, True

    def _release(self, shared: bool) -> None:
        if shared:
            self._busy.release()

    def _posting_scores(self, spans: list[tuple[int, int]], at: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(rows of the postings in query order, float32 scores)`` of a sparse query.

        Sums every posting into the zeroed scratch (:meth:`_accumulate`), reads the
        float32 scores at the rows ``at`` (default: the postings' own rows; a row hit by
        n terms appears n times) and leaves the scratch all zero again.
        """
        acc, shared = self._borrow(dense=False)
        try:
            cat = self._accumulate(acc, spans)
            scores = acc.take(cat if at is None else at).astype(np.float32)
            acc[cat] = 0.0
        except BaseException:
            acc.fill(0.0)  # keep the all-zero invariant
            raise
        finally:
            self._release(shared)
        return cat, scores

    def _accumulate(self, acc: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
        """Add every posting's impact into ``acc``; returns the postings' rows in query order.

        ``np.add.at`` is unbuffered and applies the additions in index order, so each
        row is summed left to right in query order, exactly like :meth:`score_rows_dense`.
        """
        post, imp = self._post, self._imp
        # intp rows: every fancy index below would otherwise convert int32 rows again
        cat = np.concatenate([post[s:e] for s, e in spans], dtype=np.intp)
        np.add.at(acc, cat, np.concatenate([imp[s:e] for s, e in spans], dtype=np.float64))
        return cat

    def _column(self, term: int, s: int, e: int) -> np.ndarray | None:
        """The dense float32 impact column of a frequent term (built on first use).

        Two threads may both build a missing column; either copy is correct.
        """
        col = self._columns.get(term)
        if col is None:
            if e - s < self._dense_df or self._column_bytes + 4 * self.n_rows > self.DENSE_CACHE_BYTES:
                return None
            col = np.zeros(self.n_rows, dtype=np.float32)
            col[self._post[s:e]] = self._imp[s:e]
            self._columns[term] = col
            self._column_bytes += col.nbytes
        return col

    def _dense_scores(self, acc: np.ndarray, term_ids: Sequence[int], spans: list[tuple[int, int]]) -> None:
        """Every row's float64 score into ``acc``, term by term in query order."""
        post, imp = self._post, self._imp
        for i, (t, (s, e)) in enumerate(zip(term_ids, spans)):
            col = self._column(t, s, e)
            if i == 0:
                if col is not None:
                    np.copyto(acc, col)
                    continue
                acc.fill(0.0)
            if col is not None:
                np.add(acc, col, out=acc)
            else:
                np.add.at(acc, post[s:e], imp[s:e].astype(np.float64))

    def _own_mask(self, term_ids: Sequence[int], spans: list[tuple[int, int]], own: np.ndarray,
                  all_own: np.ndarray | None) -> np.ndarray:
        """bool[n_rows]: the rows with a posting of a query term in their own text.

        For a blended index (:func:`blend_bm25_arrays`) and its ``own`` flags — always
        the same array for one index, so a frequent term's mask is cached with the dense
        columns (same byte budget). A fresh array: the caller may modify it.
        """
        out: np.ndarray | None = None
        for t, (s, e) in zip(term_ids, spans):
            m = self._masks.get(t)
            if m is None:
                m = np.zeros(self.n_rows, dtype=bool)
                rows = self._post[s:e]
                if all_own is None or not all_own[t]:
                    rows = rows[np.asarray(own[s:e], dtype=np.uint8).view(bool)]
                m[rows] = True
                if e - s >= self._dense_df and self._column_bytes + m.nbytes <= self.DENSE_CACHE_BYTES:
                    self._masks[t] = m
                    self._column_bytes += m.nbytes
            if out is None:
                out = m.copy()
            else:
                np.logical_or(out, m, out=out)
        return out if out is not None else np.zeros(self.n_rows, dtype=bool)

    def _search_dense(self, term_ids: list[int], spans: list[tuple[int, int]], k: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if len(spans) > 1 and self.n_rows >= self.PRUNE_MIN_ROWS:
            cols = [self._column(t, s, e) for t, (s, e) in zip(term_ids, spans)]
            if all(c is not None for c in cols):
                hit = self._search_pruned(term_ids, cols, k, allowed)  # type: ignore[arg-type]  # none is None
                if hit is not None:
                    return hit
        acc, shared = self._borrow(dense=True)
        try:
            self._dense_scores(acc, term_ids, spans)
            if allowed is not None:
                np.multiply(acc, allowed, out=acc)
            cut = 0.0
            floor = sample_floor(acc, k) if acc.shape[0] >= SAMPLE_MIN else None
            if floor is not None and floor > 0.0:
                cut = _float32_cut(floor)
            rows = np.flatnonzero(acc > cut)
            scores = acc[rows].astype(np.float32)
        finally:
            self._release(shared)
        return top_k_rows(rows, scores, k)

    def _search_pruned(self, term_ids: list[int], cols: list[np.ndarray], k: int,
                       allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """MaxScore over dense columns (Turtle & Flood 1995): leave out the terms whose
        maximum impacts together cannot lift a row over the k-th best score.

        1. Exact scores of a sample of rows give a floor under the k-th best score.
        2. The terms with the smallest ``max_impact`` are left out while the sum of
           their maxima (the slack) stays under ``PRUNE_SLACK`` of that floor; the other
           terms are summed for every row (a partial score, float32 for speed).
        3. Only rows whose partial score plus the slack reaches the floor (less a margin
           for the rounding of the partial sum) can be in the top k; their exact scores
           are recomputed from all columns in query order.

        With ``allowed`` (a bool mask over rows) only allowed rows are candidates: the
        sample's other rows count as 0 (the floor stays a floor of the allowed rows) and
        step 3 keeps allowed rows only.

        Returns None when the sample gives no usable floor or nothing can be skipped.
        """
        sample = row_sample(cols[0]).astype(np.float64)
        for col in cols[1:]:
            sample += row_sample(col)
        if allowed is not None:
            sample *= row_sample(allowed)
        floor = kth_largest(sample, k)
        if floor is None or floor <= 0.0:
            return None
        cut = _float32_cut(floor)
        maxima = [float(m) for m in self._maxi[term_ids]]
        slack, skipped = 0.0, set()
        for j in sorted(range(len(cols)), key=maxima.__getitem__):
            if slack + maxima[j] > self.PRUNE_SLACK * cut:
                break
            slack += maxima[j]
            skipped.add(j)
        if not skipped:
            return None
        kept = [col for j, col in enumerate(cols) if j not in skipped]
        # exact > cut needs partial > cut - slack; a float32 sum of m values is within
        # m * 2**-24 (relative) of the real sum, so the margin below is generous
        bound = (cut - slack) - (len(cols) + 1) * 2.0**-22 * (cut + slack)
        buf, shared = self._borrow(dense=True)
        try:
            partial = buf.view(np.float32)[: self.n_rows]
            np.copyto(partial, kept[0])
            for col in kept[1:]:
                np.add(partial, col, out=partial)
            rows = np.flatnonzero(partial >= bound)
        finally:
            self._release(shared)
        if allowed is not None:
            rows = rows[allowed[rows].astype(bool, copy=False)]
        scores = cols[0][rows].astype(np.float64)
        for col in cols[1:]:
            scores += col[rows]
        keep = np.flatnonzero(scores > 0.0)  # only if PRUNE_SLACK >= 1 could a 0 get here
        return top_k_rows(rows[keep], scores[keep].astype(np.float32), k)


def _readonly(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only array: the kernel is compiled for read-only arguments only."""
    if not a.flags.writeable:
        return a
    view = a.view()
    view.setflags(write=False)
    return view


def _kernel_mask(allowed: np.ndarray | None) -> bool:
    """Whether the kernel takes ``allowed`` as it is (else the numpy path answers)."""
    return allowed is None or (allowed.dtype == np.bool_ and allowed.ndim == 1 and allowed.flags.c_contiguous)


def _load_jit(index: BM25Index) -> None:
    """Import and compile :mod:`.bm25_jit` for ``index``'s arrays; nothing without numba.

    numba caches the machine code on disk, so only a machine's first compile is slow.
    """
    if index._jit is not None:
        return
    try:
        from ragspine_core.lexical import bm25_jit
    except Exception:  # the accel extra is not installed (or numba cannot cache here): numpy stays
        return
    post, imp = _readonly(np.ascontiguousarray(index._post)), _readonly(np.ascontiguousarray(index._imp))
    no_own, no_mask = _readonly(np.zeros(1, dtype=np.uint8)), _readonly(np.zeros(1, dtype=np.bool_))
    kernel = bm25_jit.sparse_top_k
    try:
        for own in (False, True):  # compile now, for the argument types of every later call
            kernel(post, imp, np.zeros((0, 2), dtype=np.int64), np.zeros(1), 1, no_own, own, no_mask, own)
    except Exception:  # a numba that cannot compile it: the numpy path stays
        return
    index._jit = (kernel, post, imp, no_own, no_mask)


def _float32_cut(floor: float) -> float:
    """The float64 just under every value whose float32 rounding is >= float32(floor).

    Rankings compare float32 scores, so a row whose float64 score is a hair under a
    float64 floor may still tie with it in float32 (and win the tie on its row id):
    candidates are taken strictly above the float32 just below ``float32(floor)``.
    """
    return float(np.nextafter(np.float32(floor), np.float32(-np.inf)))


def _unique_sorted(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (``np.unique`` is many times slower on small arrays)."""
    out = np.sort(values)
    if out.shape[0] > 1:
        first = np.empty(out.shape[0], dtype=bool)
        first[0] = True
        np.not_equal(out[1:], out[:-1], out=first[1:])
        out = out[first]
    return out


def blend_reference(chunk: BM25Index, doc: BM25Index, row_doc: np.ndarray, tokens: Sequence[str], k: int, *,
                    doc_weight: float, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` rows by ``chunk_bm25(row) + doc_weight × doc_bm25(doc(row))`` — the reference.

    Candidates are the rows the chunk field touches (a row none of whose own tokens
    match never ranks); scores are float32 as ``score_terms`` gives them, blended in
    float32; ties by row ascending. :func:`search_blended` returns the same, faster.
    """
    rows, scores = chunk.score_terms(chunk.term_ids(tokens))
    if rows.size and doc_weight > 0:
        drows, dscores = doc.score_terms(doc.term_ids(tokens))
        if drows.size * 8 >= doc.n_rows:  # many documents: a dense lookup table is cheaper
            table = np.zeros(doc.n_rows, dtype=np.float32)
            table[drows] = dscores
            scores = scores + np.float32(doc_weight) * table[row_doc[rows]]
        elif drows.size:
            docs = row_doc[rows]
            idx = np.searchsorted(drows, docs)
            np.minimum(idx, drows.shape[0] - 1, out=idx)
            found = drows[idx] == docs
            add = np.where(found, dscores[idx], np.float32(0.0)).astype(np.float32)
            scores = scores + np.float32(doc_weight) * add
    if allowed is not None and rows.size:
        keep = allowed[rows]
        rows, scores = rows[keep], scores[keep]
    return top_k_rows(rows, scores, k)


def search_blended(chunk: BM25Index, doc: BM25Index, row_doc: np.ndarray, tokens: Sequence[str], k: int, *,
                   doc_weight: float, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`blend_reference`, exactly, with :meth:`BM25Index.search`'s pruning.

    Sparse queries accumulate both fields into their zeroed scratch buffers, score every
    posting occurrence with its row's exact blended score, and keep only the rows at or
    above the k-th best row of the longest chunk posting list (k distinct rows with exact
    blended scores: a floor under the true k-th best) before the final sort. Queries
    with a frequent (dense-column) term take the reference path.
    """
    if k <= 0:
        return empty_top_k()
    term_ids = chunk.term_ids(tokens)
    if not term_ids:
        return empty_top_k()
    spans, total = chunk._spans(term_ids)
    dterm_ids = doc.term_ids(tokens) if doc_weight > 0 else []
    dspans, dtotal = doc._spans(dterm_ids) if dterm_ids else ([], 0)
    if len(spans) == 1 or chunk._use_dense(spans, total) or (dspans and doc._use_dense(dspans, dtotal)):
        return blend_reference(chunk, doc, row_doc, tokens, k, doc_weight=doc_weight, allowed=allowed)
    cat, scores = chunk._posting_scores(spans)
    lo, hi = _longest_span(spans)
    if allowed is not None:
        cat, scores, lo, hi = keep_postings(cat, scores, lo, hi, allowed[cat])
    if dspans:
        _, add = doc._posting_scores(dspans, at=row_doc[cat])
        scores = scores + np.float32(doc_weight) * add
    return top_k_distinct(cat, scores, lo, hi, k)
