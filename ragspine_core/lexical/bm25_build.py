"""Building BM25 arrays at index time: per-row token counts, impacts (per language in a mixed
library), and the chunk + document blend. Query time reads what this writes, with the
same weighting (:mod:`ragspine_core.lexical.bm25`)."""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ragspine_core.lexical.bm25_format import BM25Arrays, BM25Params, idf


@dataclass(frozen=True, slots=True)
class RowCounts:
    """Term counts of consecutive rows under a local vocabulary: one unit of a BM25 build.

    Made by :func:`count_rows` (in any process: it pickles compactly) and merged, in row
    order, by :func:`build_bm25_from_counts`.
    """

    tokens: list[str]  # local vocabulary, first-seen order; local term id = position
    terms: np.ndarray  # int32[postings]: local term id of each (row, term) posting
    tfs: np.ndarray  # float32[postings]
    row_sizes: np.ndarray  # int32[rows]: postings of each row
    lengths: np.ndarray  # int32[rows]: tokens of each row


def count_rows(token_lists: Iterable[Sequence[str]]) -> RowCounts:
    """Count the terms of each token list (rows in iteration order), one row at a time."""
    vocab: dict[str, int] = {}
    term_buf = array("i")
    tf_buf = array("f")
    size_buf = array("i")
    length_buf = array("i")
    setdefault = vocab.setdefault
    for toks in token_lists:
        length_buf.append(len(toks))
        if not toks:
            size_buf.append(0)
            continue
        counts = Counter(toks)
        term_buf.extend([setdefault(t, len(vocab)) for t in counts])
        tf_buf.extend(counts.values())
        size_buf.append(len(counts))
    return RowCounts(list(vocab), np.frombuffer(term_buf, dtype=np.int32), np.frombuffer(tf_buf, dtype=np.float32),
                     np.frombuffer(size_buf, dtype=np.int32), np.frombuffer(length_buf, dtype=np.int32))


def build_bm25_arrays(token_lists: Iterable[Sequence[str]], params: BM25Params = BM25Params(), *,
                      stat_rows: np.ndarray | None = None, row_languages: Sequence[str] | None = None) -> BM25Arrays:
    """Build BM25 postings with precomputed impacts; row ``i`` is the ``i``-th token list.

    ``token_lists`` may be a generator: rows are consumed one at a time and only their
    (term id, row, tf) triples are kept, in typed buffers (12 bytes a posting), so the
    build never holds every row's tokens at once (a million chunks' token lists as
    Python strings were ~6 GB; docs/scaling.md).
    """
    return build_bm25_from_counts([count_rows(token_lists)], params, stat_rows=stat_rows, row_languages=row_languages)


def build_bm25_from_counts(parts: Iterable[RowCounts], params: BM25Params = BM25Params(), *,
                           stat_rows: np.ndarray | None = None, row_languages: Sequence[str] | None = None) -> BM25Arrays:
    """Build BM25 arrays from :class:`RowCounts` of consecutive row blocks, in row order.

    The result does not depend on how the rows were cut into parts (term ids are
    re-numbered by the sorted vocabulary), so counting blocks in worker processes gives
    the bytes of :func:`build_bm25_arrays` over the same rows.

    ``stat_rows`` (bool per row, optional): the rows whose terms and lengths make
    ``N``, ``df`` and ``avgdl``; every row is indexed and scored with them. With it, a
    row outside the mask changes no score of a row inside it: those scores are the
    bytes a build over the masked rows alone gives. When the mask selects no row, all
    rows count (nothing would be scored otherwise).
    
    ``row_languages`` (a language label per row) with ``params.k1_by_language``: each
    language's rows are weighted with their own statistics and ``k1`` (see the module
    docstring); a row's score is then what a build over its language's rows alone gives.
    """
    vocab: dict[str, int] = {}
    setdefault = vocab.setdefault
    term_parts: list[np.ndarray] = []
    row_parts: list[np.ndarray] = []
    tf_parts: list[np.ndarray] = []
    length_parts: list[np.ndarray] = []
    row0 = 0
    for part in parts:
        ids = np.fromiter((setdefault(t, len(vocab)) for t in part.tokens), dtype=np.int32, count=len(part.tokens))
        n = int(part.lengths.shape[0])
        if part.terms.size:
            term_parts.append(ids[part.terms])
            row_parts.append(np.repeat(np.arange(row0, row0 + n, dtype=np.int32), part.row_sizes))
            tf_parts.append(part.tfs)
        length_parts.append(part.lengths)
        row0 += n
    term_buf = np.concatenate(term_parts) if term_parts else np.zeros(0, dtype=np.int32)
    row_buf = np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int32)
    tf_buf = np.concatenate(tf_parts) if tf_parts else np.zeros(0, dtype=np.float32)
    length_buf = np.concatenate(length_parts) if length_parts else np.zeros(0, dtype=np.int32)
    del term_parts, row_parts, tf_parts, length_parts
    n_rows = len(length_buf)
    lengths = np.array(length_buf, dtype=np.int32)
    tokens = sorted(vocab)
    n_terms = len(tokens)
    # remap first-seen ids to sorted-vocabulary ids
    remap = np.empty(n_terms, dtype=np.int32)
    for new_id, tok in enumerate(tokens):
        remap[vocab[tok]] = new_id
    del vocab
    terms = remap[term_buf] if len(term_buf) else np.zeros(0, dtype=np.int32)
    del term_buf
    order = np.argsort(terms, kind="stable")  # rows already ascending within a term
    terms = terms[order]
    rows = row_buf[order]
    tfs = tf_buf[order]
    del order, row_buf, tf_buf
    postings_per_term = np.bincount(terms, minlength=n_terms).astype(np.int64)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(postings_per_term, out=indptr[1:])
    counted = _stat_mask(stat_rows, n_rows)
    if counted is None:
        df, n_stat, stat_lengths = postings_per_term, n_rows, lengths
    else:
        df = np.bincount(terms[counted[rows]], minlength=n_terms).astype(np.int64)
        n_stat, stat_lengths = int(counted.sum()), lengths[counted]
    del postings_per_term
    avgdl = float(stat_lengths.mean()) if n_stat and stat_lengths.sum() > 0 else 1.0
    k1, b = params.k1, params.b
    tf64 = tfs.astype(np.float64)
    if params.k1_by_language and row_languages is not None:
        impacts = _impacts_by_language(params, row_languages, counted, terms, rows, tf64, lengths, n_terms)
    else:
        norm = k1 * (1.0 - b + b * lengths.astype(np.float64) / avgdl)
        impacts = (idf(df, n_stat)[terms] * tf64 * (k1 + 1.0) / (tf64 + norm[rows])).astype(np.float32)
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


def _impacts_by_language(params: BM25Params, row_languages: Sequence[str], counted: np.ndarray | None,
                         terms: np.ndarray, rows: np.ndarray, tf64: np.ndarray, lengths: np.ndarray,
                         n_terms: int) -> np.ndarray:
    """Impacts with each language's own ``N``/``df``/``avgdl`` (over its counted rows) and ``k1``."""
    n_rows = int(lengths.shape[0])
    if len(row_languages) != n_rows:
        raise ValueError(f"row_languages has {len(row_languages)} entries for {n_rows} BM25 rows")
    index = {lang: i for i, (lang, _) in enumerate(params.k1_by_language)}
    group = np.fromiter((index.get(lang, 0) for lang in row_languages), dtype=np.int32, count=n_rows)
    impacts = np.zeros(terms.shape[0], dtype=np.float32)
    posting_group = group[rows]
    for g, (_, k1) in enumerate(params.k1_by_language):
        members = group == g
        stat = members if counted is None else members & counted
        if not stat.any():  # no open row of this language: its (unshown) rows count
            stat = members
        n_stat = int(stat.sum())
        if not n_stat:
            continue
        df = np.bincount(terms[stat[rows]], minlength=n_terms).astype(np.int64)
        stat_lengths = lengths[stat]
        avgdl = float(stat_lengths.mean()) if stat_lengths.sum() > 0 else 1.0
        sel = posting_group == g
        norm = k1 * (1.0 - params.b + params.b * lengths[rows[sel]].astype(np.float64) / avgdl)
        tf = tf64[sel]
        impacts[sel] = (idf(df, n_stat)[terms[sel]] * tf * (k1 + 1.0) / (tf + norm)).astype(np.float32)
    return impacts


def _stat_mask(stat_rows: np.ndarray | None, n_rows: int) -> np.ndarray | None:
    """The validated statistics mask, or None when every row counts."""
    if stat_rows is None:
        return None
    mask = np.asarray(stat_rows, dtype=bool)
    if mask.shape != (n_rows,):
        raise ValueError(f"stat_rows has {mask.shape[0] if mask.ndim else 0} entries for {n_rows} BM25 rows")
    if mask.all() or not mask.any():
        return None
    return mask


def blend_bm25_arrays(chunk: BM25Arrays, doc: BM25Arrays, row_doc: np.ndarray, doc_weight: float) -> tuple[BM25Arrays, np.ndarray]:
    """One index whose impacts are ``chunk impact + doc_weight × document impact``.

    The lexical score of a chunk row is its own BM25 plus ``doc_weight`` times the BM25
    of its document. Both are sums over query terms, so the blend is one sum over query
    terms of ``impact(t, row) + w × impact(t, doc(row))``: a term posts to every chunk
    of every document that contains it. Precomputing that at index time turns the
    two-field query into one sparse pass. The vocabulary is the union of both fields';
    rows are the chunk rows.

    Returns the arrays and ``own`` (uint8, one per posting): 1 where the term occurs in
    the chunk's own text. As at query time, only a chunk that matches a query term
    itself is a candidate; the document field only adds to its score
    (:func:`search_blend_index`).
    """
    row_doc = np.asarray(row_doc, dtype=np.int64)
    n_rows = chunk.n_rows
    vocab = sorted(set(chunk.tokens) | set(doc.tokens))
    where = {t: i for i, t in enumerate(vocab)}
    # both vocabularies are sorted, so their ids map increasingly into the union's
    chunk_map = np.asarray([where[t] for t in chunk.tokens], dtype=np.int64)
    doc_map = np.asarray([where[t] for t in doc.tokens], dtype=np.int64)
    del where
    c_indptr = np.asarray(chunk.indptr, dtype=np.int64)
    d_indptr = np.asarray(doc.indptr, dtype=np.int64)
    order = np.argsort(row_doc, kind="stable")  # chunk rows grouped by document
    per_doc = np.bincount(row_doc, minlength=doc.n_rows) if n_rows else np.zeros(doc.n_rows, np.int64)
    doc_start = np.concatenate(([0], np.cumsum(per_doc)))
    # postings each union term will hold before merging: its chunk postings plus, per
    # document posting, that document's chunk count; the union's terms are then cut into
    # blocks of about BLEND_BLOCK_POSTINGS so the temporaries stay bounded at any size
    expanded = np.zeros(len(vocab), dtype=np.int64)
    expanded[chunk_map] += np.diff(c_indptr)
    d_counts = per_doc[np.asarray(doc.postings, dtype=np.int64)]
    d_cum = np.concatenate(([0], np.cumsum(d_counts)))
    expanded[doc_map] += d_cum[d_indptr[1:]] - d_cum[d_indptr[:-1]]
    cum = np.cumsum(expanded)
    cuts = np.searchsorted(cum, np.arange(BLEND_BLOCK_POSTINGS, int(cum[-1]) if cum.size else 0, BLEND_BLOCK_POSTINGS), side="left")
    bounds = np.unique(np.concatenate(([0], cuts + 1, [len(vocab)]))).astype(np.int64)
    out_terms: list[np.ndarray] = []
    out_rows: list[np.ndarray] = []
    out_vals: list[np.ndarray] = []
    out_own: list[np.ndarray] = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if lo >= hi:
            continue
        t, r, v, f = _blend_block(lo, hi, chunk, doc, chunk_map, doc_map, c_indptr, d_indptr, order, per_doc,
                                  doc_start, n_rows, doc_weight)
        out_terms.append(t)
        out_rows.append(r)
        out_vals.append(v)
        out_own.append(f)
    if out_terms:
        terms = np.concatenate(out_terms)
        rows = np.concatenate(out_rows)
        impacts = np.concatenate(out_vals)
        own = np.concatenate(out_own)
    else:
        terms = np.zeros(0, dtype=np.int64)
        rows = np.zeros(0, dtype=np.int32)
        impacts = np.zeros(0, dtype=np.float32)
        own = np.zeros(0, dtype=np.uint8)
    del out_terms, out_rows, out_vals, out_own
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=len(vocab)), out=indptr[1:])
    max_impact = np.zeros(len(vocab), dtype=np.float32)
    if impacts.size:
        np.maximum.at(max_impact, terms, impacts)
    arrays = BM25Arrays(tokens=vocab, indptr=indptr, postings=rows.astype(np.int32), impacts=impacts,
                        max_impact=max_impact, doc_lengths=chunk.doc_lengths, params=chunk.params, avgdl=chunk.avgdl)
    return arrays, own.astype(np.uint8)


#: Postings (before merging) the blend handles at a time: bounds its temporaries to
#: ~60 bytes a posting of one block (~0.5 GB) whatever the library's size.
BLEND_BLOCK_POSTINGS = 8_000_000


def _blend_block(lo: int, hi: int, chunk: BM25Arrays, doc: BM25Arrays, chunk_map: np.ndarray, doc_map: np.ndarray,
                 c_indptr: np.ndarray, d_indptr: np.ndarray, order: np.ndarray, per_doc: np.ndarray,
                 doc_start: np.ndarray, n_rows: int, doc_weight: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The blended postings of union terms ``lo .. hi - 1``: (terms, rows, float32 impacts, own flags)."""
    ca, cb = np.searchsorted(chunk_map, [lo, hi])
    da, db = np.searchsorted(doc_map, [lo, hi])
    # chunk field postings as (term, row, value)
    c_lo, c_hi = int(c_indptr[ca]), int(c_indptr[cb])
    c_terms = np.repeat(chunk_map[ca:cb], np.diff(c_indptr[ca:cb + 1]))
    c_rows = np.asarray(chunk.postings[c_lo:c_hi], dtype=np.int64)
    c_vals = np.asarray(chunk.impacts[c_lo:c_hi], dtype=np.float64)
    # document field postings expanded to every chunk row of the document
    d_lo, d_hi = int(d_indptr[da]), int(d_indptr[db])
    d_terms = np.repeat(doc_map[da:db], np.diff(d_indptr[da:db + 1]))
    d_docs = np.asarray(doc.postings[d_lo:d_hi], dtype=np.int64)
    counts = per_doc[d_docs]
    total = int(counts.sum())
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    e_rows = order[np.repeat(doc_start[d_docs], counts) + offsets]
    e_terms = np.repeat(d_terms, counts)
    e_vals = np.repeat(np.asarray(doc.impacts[d_lo:d_hi], dtype=np.float64) * float(np.float32(doc_weight)), counts)
    del offsets, d_terms, d_docs, counts
    terms = np.concatenate([c_terms, e_terms])
    rows = np.concatenate([c_rows, e_rows])
    vals = np.concatenate([c_vals, e_vals])
    flags = np.concatenate([np.ones(c_terms.shape[0], np.uint8), np.zeros(e_terms.shape[0], np.uint8)])
    del c_terms, e_terms, c_rows, e_rows, c_vals, e_vals
    key = terms * max(n_rows, 1) + rows
    del terms, rows
    srt = np.argsort(key, kind="stable")  # the chunk field's value first, then the document's
    key, vals, flags = key[srt], vals[srt], flags[srt]
    del srt
    if key.size:
        first = np.ones(key.size, dtype=bool)
        np.not_equal(key[1:], key[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        vals = np.add.reduceat(vals, starts)
        flags = np.maximum.reduceat(flags, starts)
        key = key[starts]
    return key // max(n_rows, 1), (key % max(n_rows, 1)).astype(np.int32), vals.astype(np.float32), flags.astype(np.uint8)
