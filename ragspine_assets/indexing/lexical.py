"""Build and write the chunk-level and document-level BM25 arrays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from ragspine_query import schema
from ragspine_query.lexical.bm25 import BM25Arrays, BM25Params, build_bm25_arrays
from ragspine_query.text.tokenize import Analyzer


def write_bm25_arrays(directory: Path, arrays: BM25Arrays, analyzer_id: str) -> None:
    """Write one BM25 index directory (the layout of :mod:`ragspine_query.schema`)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / schema.BM25_VOCAB).write_text(json.dumps({"tokens": arrays.tokens}, ensure_ascii=False), encoding="utf-8")
    np.save(directory / schema.BM25_INDPTR, arrays.indptr)
    np.save(directory / schema.BM25_POSTINGS, arrays.postings)
    np.save(directory / schema.BM25_IMPACTS, arrays.impacts)
    np.save(directory / schema.BM25_MAX_IMPACT, arrays.max_impact)
    params = {
        "k1": arrays.params.k1,
        "b": arrays.params.b,
        "avgdl": arrays.avgdl,
        "n_rows": arrays.n_rows,
        "vocab_size": len(arrays.tokens),
        "nnz": int(arrays.postings.shape[0]),
        "analyzer": analyzer_id,
    }
    (directory / schema.BM25_PARAMS).write_text(json.dumps(params, indent=2, sort_keys=True), encoding="utf-8")


def build_library_bm25(
    directory: Path,
    *,
    chunk_texts: Sequence[str],
    chunk_doc_rows: Sequence[int],
    doc_ids: Sequence[str],
    doc_texts: Sequence[str],
    analyzer: Analyzer,
    params: BM25Params = BM25Params(),
) -> dict:
    """Write ``bm25/`` (one row per chunk) and ``bm25_doc/`` (one row per document).

    Returns summary statistics for materialization metadata.
    """
    chunk_tokens = analyzer.many(chunk_texts)
    chunk_arrays = build_bm25_arrays(chunk_tokens, params)
    doc_arrays = build_bm25_arrays(analyzer.many(doc_texts), params)
    write_bm25_arrays(directory / schema.BM25_DIR, chunk_arrays, analyzer.id)
    np.save(directory / schema.BM25_DIR / schema.BM25_ROW_DOC, np.asarray(chunk_doc_rows, dtype=np.int32))
    write_bm25_arrays(directory / schema.BM25_DOC_DIR, doc_arrays, analyzer.id)
    (directory / schema.BM25_DOC_DIR / schema.BM25_DOC_IDS).write_text(json.dumps(list(doc_ids), ensure_ascii=False), encoding="utf-8")
    return {
        "chunk_rows": chunk_arrays.n_rows,
        "doc_rows": doc_arrays.n_rows,
        "vocab_size": len(chunk_arrays.tokens),
        "postings": int(chunk_arrays.postings.shape[0]),
        "tokens": int(chunk_arrays.doc_lengths.sum()),
        "avgdl": round(chunk_arrays.avgdl, 3),
    }
