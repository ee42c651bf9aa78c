"""End-to-end ingest throughput: a synthetic jsonl library through the Dagster assets."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

from .corpus import SyntheticConfig, synthetic_corpus
from .measure import peak_rss

PASSAGES_PER_DOC = 3


def write_library(raw_dir: Path, n_docs: int, seed: int) -> int:
    """Write ``n_docs`` documents (3 synthetic passages each, blank-line separated)."""
    corpus = synthetic_corpus(SyntheticConfig(n_passages=n_docs * PASSAGES_PER_DOC, n_queries=0, seed=seed))
    raw_dir.mkdir(parents=True, exist_ok=True)
    with open(raw_dir / "docs.jsonl", "w", encoding="utf-8") as f:
        for i in range(n_docs):
            body = "\n\n".join(corpus.texts[i * PASSAGES_PER_DOC : (i + 1) * PASSAGES_PER_DOC])
            f.write(json.dumps({"doc_id": f"doc-{i:06d}", "title": f"Synthetic document {i}", "text": body}) + "\n")
    return sum(len(t) for t in corpus.texts)


def measure_ingest(workdir: Path, n_docs: int, seed: int) -> dict:
    """Materialize every asset once for a fresh library; documents/s and chunks/s."""
    import dagster as dg

    from ragspine_assets.ingest import ingest_library

    raw_dir = workdir / "raw" / "benchlib"
    chars = write_library(raw_dir, n_docs, seed)
    with peak_rss() as mem, contextlib.redirect_stdout(sys.stderr):
        t0 = time.perf_counter()
        summary = ingest_library(raw_dir, embedding="none", instance=dg.DagsterInstance.ephemeral())
        seconds = time.perf_counter() - t0
    meta = summary.metadata
    docs, chunks = int(meta.get("documents") or 0), int(meta.get("chunks") or 0)
    return {
        "documents": docs,
        "chunks": chunks,
        "characters": chars,
        "seconds": round(seconds, 3),
        "documents_per_s": round(docs / seconds, 1),
        "chunks_per_s": round(chunks / seconds, 1),
        "rss_delta_mb": round(mem.delta_mb, 1),
        "analyzer": meta.get("analyzer"),
        "embedding": "none",
        "how": "ragspine_assets.ingest.ingest_library(raw_dir, embedding='none', instance=DagsterInstance.ephemeral()) "
        f"on {n_docs:,} jsonl documents of {PASSAGES_PER_DOC} synthetic passages each",
    }
