"""Hybrid query latency: BM25 + exact cosine + RRF through :class:`HybridRetriever`.

One process, one synthetic library built by the real pipeline
(:func:`ragspine_index.pipeline.build_library`, ``embedding="deterministic"`` so the
vectors are written by the same code as production), then per query, one query per call:

* ``hybrid`` / ``bm25`` — end-to-end ``HybridRetriever.search(q, top_k=10)`` (fusion and
  the SQLite fetch of the 10 chunks included), with and without a metadata filter that
  keeps 10% of the rows (``topic`` is assigned round-robin over 10 values);
* ``dense scan @64d`` — :func:`top_k_cosine` alone over the library's own vectors;
* ``dense scan @384d`` — :func:`top_k_cosine` alone over a memory-mapped float32 matrix
  of N L2-normalised random rows (all-MiniLM-L6-v2 vectors are 384-d; the deterministic
  backend's are 64-d), with and without the 10% row subset;
* ``query embedding`` — ``make_embedding_backend("onnx").embed([q], kind="query")`` with
  the packaged MiniLM (int8), as the factory builds it and pinned to one intra-op thread;
  the deterministic backend's for comparison;
* ``hybrid @384d + MiniLM`` — the same retriever, but its library reports the 384-d
  random matrix as its vectors and the real ONNX backend embeds each query: what a real
  hybrid query costs at this size (vectors are random, so only the cost is meaningful).

SciFact (``../shared/datasets/scifact`` beside the repository): the cached evaluation
library ``data/eval/scifact-*/artifacts/scifact`` built with the real MiniLM is opened
as it is, and its queries run through ``hybrid`` (real ONNX backend) and ``bm25``.

Every measurement runs ``--rounds`` times (all measurements take turns within a round);
a query's latency is its median over the rounds, QPS = queries ÷ the sum of those
medians. BLAS and onnxruntime are pinned to one thread where this process can pin them.

Usage::

    python -m ragspine_tools.bench.bench_hybrid [--chunks 100000] [--queries 300] [--rounds 3]
                                      [--json] [--out DIR] [--no-scifact]
    ragspine bench -- --hybrid [same options]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ragspine_tools.bench import REPORTS_DIR, checkout_root  # noqa: E402
REPO = checkout_root()
from ragspine_tools.bench import lexbench  # noqa: E402,F401  (pins numeric libraries to one thread)

import numpy as np  # noqa: E402  (after lexbench pinned the threads)


from ragspine_tools.bench.lexbench.corpus import DEFAULT_SEED, SyntheticConfig, synthetic_corpus  # noqa: E402
from ragspine_tools.bench.lexbench.measure import dir_size_mb, machine_description  # noqa: E402
from ragspine_core.settings import Settings  # noqa: E402

DEFAULT_OUT = REPORTS_DIR
SCIFACT_DIR = REPO.parent / "shared" / "datasets" / "scifact"
EVAL_DIR = REPO / "data" / "eval"
TOP_K = 10
DENSE_DIM = 384
N_TOPICS = 10  # topic-0 … topic-9 round-robin: one value keeps 10% of the rows
FILTER = {"topic": "topic-3"}
WARMUP = 10
BLOCK = 50  # calls one measurement makes before the next one's turn (spreads background load evenly)
LIBRARY_ID = "hybridbench"

#: measurement key -> (label, what it times); the report's row order.
SECTIONS: dict[str, tuple[str, str]] = {
    "hybrid": ("hybrid (deterministic 64-d)", "HybridRetriever.search(q, top_k=10), mode hybrid, deterministic backend"),
    "bm25": ("bm25", "HybridRetriever.search(q, top_k=10), mode bm25"),
    "hybrid_filtered": ("hybrid (64-d) + filter 10%", f"as hybrid, filters={FILTER}"),
    "bm25_filtered": ("bm25 + filter 10%", f"as bm25, filters={FILTER}"),
    "filter_mask": ("filter mask alone", f"HybridRetriever.allowed_mask({FILTER}) (parse + compare the column; runs in every filtered search)"),
    "dense_scan_64d": ("dense scan @64d", "top_k_cosine(library vectors, q, k=depth) alone"),
    "dense_scan_384d": ("dense scan @384d", "top_k_cosine(384-d random unit matrix, mmap, q, k=depth) alone"),
    "dense_scan_384d_filtered": ("dense scan @384d + filter 10%", "top_k_cosine(…, rows=the 10% subset) alone"),
    "embed_deterministic": ("query embedding, deterministic", "DeterministicEmbeddingBackend.embed([q], kind='query')"),
    "embed_onnx": ("query embedding, MiniLM ONNX", "make_embedding_backend('onnx').embed([q], kind='query') (factory threads)"),
    "embed_onnx_1thread": ("query embedding, MiniLM ONNX, 1 thread", "OnnxEmbeddingBackend.packaged_minilm(intra_op_threads=1)"),
    "hybrid_384d_minilm": ("hybrid @384d + MiniLM query", "HybridRetriever.search, ONNX query embedding + 384-d random vectors"),
    "hybrid_384d_minilm_filtered": ("hybrid @384d + MiniLM + filter 10%", f"as above, filters={FILTER}"),
    "hybrid_384d_minilm_1thread": ("hybrid @384d + MiniLM query, 1 ORT thread", "as hybrid @384d + MiniLM query, backend with intra_op_threads=1"),
}
SCIFACT_SECTIONS: dict[str, tuple[str, str]] = {
    "hybrid_onnx": ("hybrid (MiniLM ONNX)", "HybridRetriever.search(q, top_k=10), mode hybrid, make_embedding_backend('onnx')"),
    "bm25": ("bm25", "HybridRetriever.search(q, top_k=10), mode bm25"),
}


def _log(msg: str) -> None:
    print(f"[bench-hybrid] {msg}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragspine bench --hybrid", description="hybrid (BM25 + dense + RRF) query latency benchmark")
    p.add_argument("--chunks", type=int, default=100_000, help="synthetic passages (one chunk each) in the library; default 100000")
    p.add_argument("--queries", type=int, default=300, help="queries per measurement; default 300")
    p.add_argument("--rounds", type=int, default=3, help="timed passes per measurement; a query's latency is its median (default 3)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout (progress goes to stderr)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the Markdown and JSON reports go (default benchmarks/reports/)")
    p.add_argument("--no-scifact", action="store_true", help="skip the SciFact measurement")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    return p


# ------------------------------------------------------------------------ timing
class Timer:
    """Runs registered measurements round by round; each query's latency is its median.

    Within a round the measurements take turns every ``BLOCK`` calls, so a burst of
    background load on a shared machine lands on all of them alike.
    """

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self._jobs: list[tuple[str, Callable[[Any], Any], Sequence[Any]]] = []

    def add(self, name: str, fn: Callable[[Any], Any], items: Sequence[Any]) -> None:
        self._jobs.append((name, fn, items))

    def run(self) -> dict[str, dict]:
        for name, fn, items in self._jobs:  # warm-up: caches, page cache, lazy columns
            for it in items[:WARMUP]:
                fn(it)
        wall = {name: np.zeros((self.rounds, len(items))) for name, _, items in self._jobs}
        cpu = {name: np.zeros((self.rounds, len(items))) for name, _, items in self._jobs}
        longest = max((len(items) for _, _, items in self._jobs), default=0)
        for r in range(self.rounds):
            _log(f"round {r + 1}/{self.rounds}: {len(self._jobs)} measurements x {longest} calls, taking turns every {BLOCK}")
            gc.collect()
            for start in range(0, longest, BLOCK):
                for name, fn, items in self._jobs:
                    w, c = wall[name][r], cpu[name][r]
                    for i in range(start, min(start + BLOCK, len(items))):
                        it = items[i]
                        c0 = time.process_time()
                        t0 = time.perf_counter()
                        fn(it)
                        w[i] = time.perf_counter() - t0
                        c[i] = time.process_time() - c0
        return {name: latency_figures(wall[name], cpu[name]) for name, _, _ in self._jobs}


def latency_figures(wall: np.ndarray, cpu: np.ndarray) -> dict:
    """p50/p99/mean (ms) of per-query medians over rounds, QPS, CPU-time figures, raw tail."""
    med = np.median(wall, axis=0)
    cmed = np.median(cpu, axis=0)
    total = float(med.sum())
    return {
        "n": int(med.size),
        "rounds": int(wall.shape[0]),
        "p50_ms": round(float(np.percentile(med, 50)) * 1e3, 4),
        "p99_ms": round(float(np.percentile(med, 99)) * 1e3, 4),
        "mean_ms": round(float(med.mean()) * 1e3, 4),
        "qps": round(med.size / total, 1) if total > 0 else None,
        "qps_best_round": round(float(wall.shape[1] / wall.sum(axis=1).min()), 1),
        "p99_raw_ms": round(float(np.percentile(wall, 99)) * 1e3, 4),
        "cpu_p50_ms": round(float(np.percentile(cmed, 50)) * 1e3, 4),
        "cpu_qps": round(cmed.size / float(cmed.sum()), 1) if cmed.sum() > 0 else None,
    }


# ------------------------------------------------------------------------ inputs
def write_raw_library(raw_dir: Path, texts: Sequence[str]) -> None:
    """One ``corpus.jsonl`` line per passage; ``max_chars`` large enough for one chunk each."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    (raw_dir / "_library.toml").write_text("max_chars = 8000\noverlap_chars = 0\n", encoding="utf-8")
    with open(raw_dir / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({
                "doc_id": f"syn-{i:07d}",
                "title": " ".join(text.split()[:4]),
                "text": text,
                "sensitivity": "INTERNAL",
                "topic": f"topic-{i % N_TOPICS}",
            }) + "\n")


def random_unit_matrix(path: Path, n: int, dim: int, seed: int, block: int = 16384) -> np.ndarray:
    """``n`` random float32 unit rows written as .npy, re-opened memory-mapped (like an index)."""
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
    for start in range(0, n, block):
        part = rng.standard_normal((min(block, n - start), dim), dtype=np.float32)
        part /= np.linalg.norm(part, axis=1, keepdims=True)
        out[start : start + part.shape[0]] = part
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def random_unit_queries(n: int, dim: int, seed: int) -> np.ndarray:
    q = np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def make_onnx() -> tuple[Any | None, Any | None, str | None]:
    """(factory backend, 1-thread backend, why not) for the packaged MiniLM."""
    try:
        from ragspine_core.dense.embedding import make_embedding_backend
        from ragspine_core.dense.minilm_onnx import OnnxEmbeddingBackend
        from ragspine_core.errors import ConfigError

        backend = make_embedding_backend("onnx", settings=Settings.from_env())
        if backend is None:  # "onnx" names a backend; None is only ever "none"/"auto"
            raise ConfigError("make_embedding_backend('onnx') built no backend")
        single = OnnxEmbeddingBackend.packaged_minilm(intra_op_threads=1)
        backend.embed(["warm up"], kind="query")
        single.embed(["warm up"], kind="query")
        return backend, single, None
    except Exception as exc:  # MissingExtraError, ConfigError, ImportError, a broken model …
        return None, None, f"packaged MiniLM ONNX backend unavailable: {type(exc).__name__}: {exc}"


def dense_library(base, vectors: np.ndarray, model_id: str):
    """A second view of ``base``'s snapshot whose dense channel is ``vectors`` (one row per chunk)."""
    from ragspine_query.library import EmbeddingMatrix, Library

    class _DenseView(Library):
        _bench_matrix: EmbeddingMatrix  # set below, after Library.__init__

        def embeddings(self):  # noqa: D102 - the bench's 384-d matrix instead of the snapshot's
            return getattr(self, "_bench_matrix", None)  # None while Library.__init__ runs

    manifest = dict(base.manifest)
    manifest["embedding"] = {"model_id": model_id, "backend": "bench-random-384d", "dim": int(vectors.shape[1]), "count": int(vectors.shape[0])}
    view = _DenseView(base.snapshot_dir, manifest)
    view._bench_matrix = EmbeddingMatrix(model_id, int(vectors.shape[1]), vectors, np.arange(vectors.shape[0], dtype=np.int32))
    return view


# ------------------------------------------------------------------------ synthetic
def run_synthetic(args, scratch: Path, onnx: tuple[Any | None, Any | None, str | None]) -> dict:
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_core.dense.embedding import make_embedding_backend
    from ragspine_core.dense.vector_store import top_k_cosine
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    t0 = time.perf_counter()
    corpus = synthetic_corpus(SyntheticConfig(n_passages=args.chunks, n_queries=args.queries, seed=args.seed))
    queries = [" ".join(q) for q in corpus.queries]
    raw = scratch / "raw" / LIBRARY_ID
    write_raw_library(raw, corpus.texts)
    gen_s = time.perf_counter() - t0
    _log(f"corpus {corpus.name}: {corpus.description}")
    _log(f"build_library({LIBRARY_ID!r}, embedding='deterministic') over {args.chunks:,} passages")
    t0 = time.perf_counter()
    res = build_library(LibraryPaths(LIBRARY_ID, raw, scratch / "artifacts" / LIBRARY_ID), embedding="deterministic",
                        cache_path=scratch / "embedding-cache.sqlite", run_id="bench-hybrid",
                        progress=lambda m: None if m.startswith("embedded ") else _log(m))
    build_s = time.perf_counter() - t0
    lib = open_library(res.snapshot_dir)
    emb = lib.embeddings()
    if emb is None or lib.n_chunks != args.chunks or emb.vectors.shape[0] != lib.n_chunks:
        raise RuntimeError(f"unexpected library: {lib.n_chunks} chunks, vectors {None if emb is None else emb.vectors.shape}")
    depth = RetrievalConfig().depth

    _log(f"dense matrix: {lib.n_chunks:,} x {DENSE_DIM} float32 random unit rows (memory-mapped)")
    t0 = time.perf_counter()
    m384 = random_unit_matrix(scratch / "vectors-384d.npy", lib.n_chunks, DENSE_DIM, args.seed + 384)
    gen384_s = time.perf_counter() - t0
    q384 = random_unit_queries(len(queries), DENSE_DIM, args.seed + 385)
    q64 = [np.asarray(x, dtype=np.float32) for x in lib_embed(make_embedding_backend("deterministic"), queries)]

    hybrid = HybridRetriever(lib, embedding_backend=make_embedding_backend("deterministic"), config=RetrievalConfig(mode="hybrid"))
    bm25 = HybridRetriever(lib, config=RetrievalConfig(mode="bm25"))
    allowed = hybrid.allowed_mask(FILTER)
    assert allowed is not None  # a mask for every non-empty filter
    subset = np.flatnonzero(allowed)
    n_q = len(queries)
    hits = {"hybrid": _mean_hits(hybrid, queries), "hybrid_filtered": _mean_hits(hybrid, queries, FILTER),
            "bm25": _mean_hits(bm25, queries)}

    timer = Timer(args.rounds)
    timer.add("hybrid", lambda q: hybrid.search(q, top_k=TOP_K), queries)
    timer.add("bm25", lambda q: bm25.search(q, top_k=TOP_K), queries)
    timer.add("hybrid_filtered", lambda q: hybrid.search(q, filters=FILTER, top_k=TOP_K), queries)
    timer.add("bm25_filtered", lambda q: bm25.search(q, filters=FILTER, top_k=TOP_K), queries)
    timer.add("filter_mask", lambda q: hybrid.allowed_mask(FILTER), queries)
    timer.add("dense_scan_64d", lambda i: top_k_cosine(emb.vectors, q64[i], depth), range(n_q))
    timer.add("dense_scan_384d", lambda i: top_k_cosine(m384, q384[i], depth), range(n_q))
    timer.add("dense_scan_384d_filtered", lambda i: top_k_cosine(m384, q384[i], depth, rows=subset), range(n_q))
    deterministic = hybrid.embedding_backend
    assert deterministic is not None  # built with one above
    timer.add("embed_deterministic", lambda q: deterministic.embed([q], kind="query"), queries)
    backend, single, why = onnx
    view = None
    if backend is not None and single is not None:  # make_onnx: both or neither
        timer.add("embed_onnx", lambda q: backend.embed([q], kind="query"), queries)
        timer.add("embed_onnx_1thread", lambda q: single.embed([q], kind="query"), queries)
        view = dense_library(lib, m384, backend.model_id)
        real = HybridRetriever(view, embedding_backend=backend, config=RetrievalConfig(mode="hybrid"))
        timer.add("hybrid_384d_minilm", lambda q: real.search(q, top_k=TOP_K), queries)
        timer.add("hybrid_384d_minilm_filtered", lambda q: real.search(q, filters=FILTER, top_k=TOP_K), queries)
        real1 = HybridRetriever(view, embedding_backend=single, config=RetrievalConfig(mode="hybrid"))
        timer.add("hybrid_384d_minilm_1thread", lambda q: real1.search(q, top_k=TOP_K), queries)
        hits["hybrid_384d_minilm"] = _mean_hits(real, queries)
    else:
        _log(f"skipping the ONNX measurements: {why}")
    try:
        figures = timer.run()
    finally:
        if view is not None:
            view.close()
        lib.close()
    for name, mean in hits.items():
        figures[name]["mean_hits"] = mean
    for name in SECTIONS:
        if name not in figures:
            figures[name] = {"skipped": why}
    return {
        "corpus": {
            "name": corpus.name, "description": corpus.description, "documents": len(corpus.texts),
            "chunks": lib.n_chunks, "queries": n_q,
            "query_how": "2–6 distinct terms drawn Zipf-wise below the 100 most frequent ranks, joined with spaces",
            "generate_and_write_s": round(gen_s, 2),
        },
        "build": {
            "how": "ragspine_index.pipeline.build_library(LibraryPaths, embedding='deterministic') from corpus.jsonl",
            "seconds": round(build_s, 2),
            "timings_s": {k: round(v, 2) for k, v in res.timings.items()},
            "analyzer": res.bm25.analyzer,
            "embedding_model": res.embeddings.model_id,
            "embedding_dim": res.embeddings.dim,
            "snapshot_mb": round(dir_size_mb(res.snapshot_dir), 1),
        },
        "dense_384d": {
            "rows": int(m384.shape[0]), "dim": DENSE_DIM, "mb": round(m384.nbytes / 2**20, 1),
            "generate_s": round(gen384_s, 2),
            "how": "float32 N(0,1) rows L2-normalised, saved as .npy and np.load(mmap_mode='r'); queries random unit vectors",
        },
        "filter": {"filters": FILTER, "kept_rows": int(subset.size), "kept_fraction": round(subset.size / lib.n_chunks, 4)},
        "depth": depth,
        "top_k": TOP_K,
        "measurements": {name: {"label": SECTIONS[name][0], "what": SECTIONS[name][1], **figures[name]} for name in SECTIONS},
    }


def lib_embed(backend, texts: Sequence[str]) -> np.ndarray:
    return np.asarray(backend.embed(list(texts), kind="query"), dtype=np.float32)


def _mean_hits(retriever, queries: Sequence[str], filters=None) -> float:
    sample = queries[: min(len(queries), 50)]
    return round(sum(len(retriever.search(q, filters=filters, top_k=TOP_K)) for q in sample) / max(len(sample), 1), 2)


# ------------------------------------------------------------------------ SciFact
def find_scifact_library(model_id: str) -> tuple[Path | None, str]:
    """The newest cached eval library under data/eval/scifact-* whose vectors are ``model_id``'s."""
    seen = []
    for art in sorted(EVAL_DIR.glob("scifact-*/artifacts/scifact"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            manifest = json.loads((art / "current" / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            seen.append(f"{art} (no readable current/manifest.json)")
            continue
        emb = manifest.get("embedding") or {}
        if emb.get("model_id") == model_id and emb.get("count"):
            return art, ""
        seen.append(f"{art} (embedding {emb.get('model_id')!r})")
    where = "; ".join(seen) or f"nothing under {EVAL_DIR}/scifact-*/artifacts/scifact"
    return None, f"no cached SciFact eval library with {model_id!r} embeddings ({where}); build one with the evaluation harness"


def run_scifact(args, onnx: tuple[Any | None, Any | None, str | None]) -> dict:
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    if not (SCIFACT_DIR / "queries.jsonl").exists():
        return {"skipped": f"SciFact not found at {SCIFACT_DIR} (needs queries.jsonl); skipping — see ../shared/datasets/README.md"}
    backend, _, why = onnx
    if backend is None:
        return {"skipped": f"SciFact hybrid needs the real MiniLM: {why}"}
    art, why = find_scifact_library(backend.model_id)
    if art is None:
        return {"skipped": why}
    queries = []
    with open(SCIFACT_DIR / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                text = str(json.loads(line).get("text", "")).strip()
                if text:
                    queries.append(text)
            if len(queries) >= args.queries:
                break
    lib = open_library(art)
    emb = lib.embeddings()
    assert emb is not None  # find_scifact_library picked a library with vectors
    _log(f"SciFact: {art} ({lib.n_chunks:,} chunks, {emb.vectors.shape[1]}-d), {len(queries)} queries")
    try:
        hybrid = HybridRetriever(lib, embedding_backend=backend, config=RetrievalConfig(mode="hybrid"))
        bm25 = HybridRetriever(lib, config=RetrievalConfig(mode="bm25"))
        timer = Timer(args.rounds)
        timer.add("hybrid_onnx", lambda q: hybrid.search(q, top_k=TOP_K), queries)
        timer.add("bm25", lambda q: bm25.search(q, top_k=TOP_K), queries)
        figures = timer.run()
        info = {
            "library": str(art.relative_to(REPO)) if art.is_relative_to(REPO) else str(art),
            "snapshot_id": lib.snapshot_id, "chunks": lib.n_chunks, "documents": int(lib.manifest["counts"]["documents"]),
            "embedding_model": lib.embedding_model_id, "embedding_dim": int(emb.vectors.shape[1]),
            "analyzer": lib.manifest["tokenizer"]["analyzer"], "queries": len(queries),
            "query_how": f"the first {len(queries)} texts of ../shared/datasets/scifact/queries.jsonl",
        }
    finally:
        lib.close()
    info["measurements"] = {n: {"label": SCIFACT_SECTIONS[n][0], "what": SCIFACT_SECTIONS[n][1], **figures[n]} for n in SCIFACT_SECTIONS}
    return info


# ------------------------------------------------------------------------ report
def _f(value, fmt: str = "{:.3f}") -> str:
    if value is None:
        return "–"
    try:
        return fmt.format(value)
    except (TypeError, ValueError):
        return str(value)


def _rows(measurements: dict) -> list[str]:
    lines = ["| measurement | p50 ms | p99 ms | mean ms | QPS | CPU p50 ms | CPU-time QPS | p99 raw ms | queries × rounds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in measurements.values():
        if "skipped" in m:
            lines.append(f"| {m['label']} | skipped | | | | | | | |")
            continue
        lines.append(f"| {m['label']} | {_f(m['p50_ms'])} | {_f(m['p99_ms'])} | {_f(m['mean_ms'])} | {_f(m['qps'], '{:,.0f}')} | "
                     f"{_f(m['cpu_p50_ms'])} | {_f(m['cpu_qps'], '{:,.0f}')} | {_f(m['p99_raw_ms'])} | {m['n']} × {m['rounds']} |")
    return lines


def render_markdown(report: dict) -> str:
    mach = report["machine"]
    syn = report["synthetic"]
    out = [
        f"# Hybrid query-latency benchmark — {syn['corpus']['name']}",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Machine: {mach['cpu']}, {mach['logical_cores']} logical cores ({mach['physical_cores']} physical), "
        f"{mach['ram_gb']} GiB RAM, {mach['os']}, Python {mach['python']}, numpy {mach['versions'].get('numpy')}. "
        f"Load average (1/5/15 min) at start {report['load_average_start']}, at end {report['load_average_end']} "
        f"— the machine may be shared; CPU-time figures are the ones to trust when the load is above the core count.",
        "",
        f"Threads: {report['threads']}. Total wall time {report['total_s']} s.",
        "",
        "## Synthetic library",
        "",
        f"{syn['corpus']['description']}; {syn['corpus']['chunks']:,} chunks (one per passage, `max_chars` 8000), "
        f"{syn['corpus']['queries']} queries ({syn['corpus']['query_how']}).",
        "",
        f"Built with `{syn['build']['how']}` in {syn['build']['seconds']} s "
        f"({', '.join(f'{k} {v}' for k, v in syn['build']['timings_s'].items())}); analyzer {syn['build']['analyzer']}, "
        f"vectors {syn['build']['embedding_model']} ({syn['build']['embedding_dim']}-d); snapshot {syn['build']['snapshot_mb']} MiB.",
        "",
        f"Dense @384d: {syn['dense_384d']['rows']:,} × {syn['dense_384d']['dim']} float32 ({syn['dense_384d']['mb']} MiB), "
        f"{syn['dense_384d']['how']}. Dense channel depth k = {syn['depth']}; results top_k = {syn['top_k']}. "
        f"Filter {json.dumps(syn['filter']['filters'])} keeps {syn['filter']['kept_rows']:,} rows ({syn['filter']['kept_fraction']:.1%}).",
        "",
        *_rows(syn["measurements"]),
        "",
        "What each row times:",
        "",
        *[f"* **{m['label']}** — {m['what']}" + (f" (mean hits {m['mean_hits']})" if "mean_hits" in m else "")
          for m in syn["measurements"].values()],
        "",
    ]
    sci = report["scifact"]
    out += ["## SciFact (cached evaluation library, real MiniLM vectors)", ""]
    if "skipped" in sci:
        out += [f"Skipped: {sci['skipped']}", ""]
    else:
        out += [
            f"`{sci['library']}` (snapshot {sci['snapshot_id']}): {sci['documents']:,} documents, {sci['chunks']:,} chunks, "
            f"{sci['embedding_model']} ({sci['embedding_dim']}-d), analyzer {sci['analyzer']}; {sci['query_how']}.",
            "",
            *_rows(sci["measurements"]),
            "",
        ]
    out += [
        "## Method",
        "",
        "One query per call, on this thread. Every measurement first runs "
        f"{WARMUP} warm-up calls; then `--rounds` passes in which all measurements take turns every {BLOCK} calls, and a query's latency "
        "is its median over the passes (a scheduler preemption rarely hits the same query twice). "
        "QPS = queries ÷ the sum of those medians; *p99 raw* is the tail over every timed call. "
        "CPU time is `time.process_time()` (all threads of the process), so it exceeds wall time where onnxruntime "
        "runs more than one thread. The 384-d matrix and the MiniLM query embedder are combined in "
        "*hybrid @384d + MiniLM query* through a view of the same snapshot whose dense channel is the random matrix: "
        "the BM25, filter, fusion and chunk-fetch code is the production code, only the vectors are random.",
        "",
    ]
    return "\n".join(out)


def summary_lines(report: dict) -> list[str]:
    syn = report["synthetic"]
    lines = [f"hybrid bench — {syn['corpus']['name']} ({syn['corpus']['chunks']:,} chunks, {syn['corpus']['queries']} queries, "
             f"build {syn['build']['seconds']} s), load {report['load_average_start']} → {report['load_average_end']}"]

    def add(ms: dict) -> None:
        for m in ms.values():
            if "skipped" in m:
                lines.append(f"  {m['label']:<40} skipped")
            else:
                lines.append(f"  {m['label']:<40} p50 {m['p50_ms']:8.3f} ms  p99 {m['p99_ms']:8.3f} ms  QPS {m['qps']:>9,.1f}")

    add(syn["measurements"])
    sci = report["scifact"]
    if "skipped" in sci:
        lines.append(f"SciFact: skipped — {sci['skipped']}")
    else:
        lines.append(f"SciFact ({sci['chunks']:,} chunks, {sci['embedding_dim']}-d {sci['embedding_model']}, {sci['queries']} queries):")
        add(sci["measurements"])
    return lines


# ------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns a process exit code."""
    if argv and argv[0] == "--":
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    if args.chunks < 10 or args.queries < 1 or args.rounds < 1:
        raise SystemExit("--chunks must be >= 10, --queries and --rounds >= 1")
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    report: dict = {
        "command": " ".join(["python -m ragspine_tools.bench.bench_hybrid", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine_description(),
        "threads": "one query per call on the main thread; BLAS via "
                   + ", ".join(f"{v}={os.environ.get(v)}" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
                   + " (effective only when set before numpy loads); onnxruntime: the factory's intra_op threads "
                     "(os.cpu_count()) except the '1 thread' row",
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }
    onnx = make_onnx()
    report["onnx"] = ({"available": True, "model_id": onnx[0].model_id, "dim": int(onnx[0].dim),
                       "factory_intra_op_threads": getattr(onnx[0], "intra_op_threads", None)}
                      if onnx[0] is not None else {"available": False, "reason": onnx[2]})
    with tempfile.TemporaryDirectory(prefix="ragspine-bench-hybrid-") as tmp:
        report["synthetic"] = run_synthetic(args, Path(tmp), onnx)
    report["scifact"] = {"skipped": "--no-scifact"} if args.no_scifact else run_scifact(args, onnx)
    report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    report["total_s"] = round(time.perf_counter() - t_start, 1)
    for part in (report["synthetic"]["measurements"], (report["scifact"].get("measurements") or {})):
        for m in part.values():
            bad = [k for k in ("p50_ms", "p99_ms", "qps") if k in m and not (m[k] and math.isfinite(m[k]) and m[k] > 0)]
            if bad:
                raise RuntimeError(f"non-positive or non-finite figures {bad} in {m['label']}")
    stem = f"hybrid_{report['synthetic']['corpus']['name']}"
    from ragspine_tools.bench.lexbench.bench_report import write_report

    return write_report(report, out_dir, stem, as_json=args.json, render=render_markdown, summarize=summary_lines)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
