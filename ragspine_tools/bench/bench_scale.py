"""Scale benchmark: ingest N chunks through the real assets, then query them at N.

``ragspine bench --scale N`` (or ``python -m ragspine_tools.bench.bench_scale --scale N``). Synthetic
and seeded; three phases, each reported with the load average (``os.getloadavg``) it ran
under, because the figures move with whatever else the machine is doing:

1. **ingest** — ``ceil(N / 3.26)`` jsonl documents of three synthetic passages each
   (``lexbench.corpus``; the default paragraph chunker cuts ~3.26 chunks per document)
   go through :func:`ragspine_assets.ingest.ingest_library` — every Dagster asset, in
   process, ``embedding="none"``. Reported: documents/s, chunks/s, peak RSS growth
   (kernel high-water mark) and its children, per-asset step seconds from the run's
   event log (so ``relation_graph`` / ``summary_tree`` costs are visible on their own),
   and the size of every published artifact.
2. **query** — with embedding off the library has no vectors, so the bench writes a
   seeded synthetic ``rows x 384`` float32 matrix: a Gaussian mixture around
   ``--centroids`` cluster centres in a ``--latent``-dimensional space, projected to
   384-d with a fixed random matrix plus isotropic noise and L2-normalised (real sentence
   embeddings are clustered with a low intrinsic dimension; uniform noise would be the
   worst case for any graph index). The usearch HNSW index over it is built by the
   product's own :func:`ragspine_core.dense.ann.build_ann_index` with the product's
   default :class:`AnnParams`. The library is then queried through
   :class:`~ragspine_query.retriever.HybridRetriever` (BM25 channel + dense channel +
   RRF + the SQLite fetch of the 10 results) in ``bm25``, exact ``hybrid`` and ANN
   ``hybrid`` (the dense channel's real :func:`search_dense` path). Query vectors are
   held-out points of the same mixture, served by a lookup backend (embedding cost ~0);
   the ``+ MiniLM`` rows use the real packaged MiniLM ONNX query embedder instead, so
   they include the query-embedding cost, which is also reported on its own.
   ANN recall@10 = overlap of ``search_dense(..., ann)`` with the exact
   ``top_k_cosine`` top 10, same vectors, same run.
3. **re-ingest** — 1% of the documents (every 100th) get one sentence appended, and
   ``ingest_library`` runs again. Reported: seconds, and what was recomputed, from the
   assets' own metadata (documents changed, chunks re-chunked, BM25 rows re-indexed)
   and from the two snapshots (chunk ids that are new, i.e. the texts an embedding
   backend would embed; the embedding cache is keyed by text). The ANN index is
   updated for the changed rows, not rebuilt: ``--phases ann_update`` measures that on
   the prebuilt synthetic index (vectors only).

``--workdir DIR --reuse`` skips the ingest and reuses the library (and the vectors and
ANN index when their size matches), so the query phase can be rerun alone on a quiet
machine. Reports: ``benchmarks/reports/scale_<N>.json`` and ``.md``.

Usage::

    python -m ragspine_tools.bench.bench_scale --scale 1000000 --workdir /tmp/scale1m
    python -m ragspine_tools.bench.bench_scale --scale 1000000 --workdir /tmp/scale1m --reuse --phases query
    python -m ragspine_tools.bench.bench_scale --scale 1000000 --rows 1001627 --workdir /tmp/scale1m --phases ann_update
    ragspine bench --scale 100000

(About 720 lines, one file on purpose: the phases share the report they fill, and a reader
of a report finds every figure's code in one place.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ragspine_tools.bench import REPORTS_DIR, checkout_root  # noqa: E402
REPO = checkout_root()
from ragspine_tools.bench import lexbench  # noqa: E402,F401  (pins numeric libraries to one thread)

import numpy as np  # noqa: E402

from ragspine_tools.bench.bench_hybrid import Timer, make_onnx  # noqa: E402
from ragspine_tools.bench.lexbench.corpus import DEFAULT_SEED, SyntheticConfig, synthetic_corpus  # noqa: E402
from ragspine_tools.bench.lexbench.measure import machine_description, peak_rss  # noqa: E402

DEFAULT_OUT = REPORTS_DIR
LIBRARY_ID = "scalebench"
PASSAGES_PER_DOC = 3
#: Chunks the default paragraph chunker cuts per document of three synthetic passages
#: (10,000 documents -> 32,612 chunks); used to size the corpus, the real count is reported.
CHUNKS_PER_DOC = 3.26
DIM = 384
TOP_K = 10
CHANGE_EVERY = 100  # every 100th document changes in the re-ingest phase: 1%
STATE_FILE = "scale_state.json"
PHASES = ("ingest", "query", "reingest", "dense", "ann_update")
SECTIONS: dict[str, str] = {
    "bm25": "HybridRetriever.search(q, top_k=10), mode bm25",
    "hybrid_exact": "HybridRetriever.search(q, top_k=10), mode hybrid, exact 384-d scan, lookup query vectors",
    "hybrid_ann": "as hybrid_exact, dense channel through the usearch ANN index (search_dense)",
    "hybrid_exact_minilm": "mode hybrid, exact scan, query embedded by the packaged MiniLM ONNX (cost included)",
    "hybrid_ann_minilm": "mode hybrid, ANN, query embedded by the packaged MiniLM ONNX (cost included)",
    "embed_minilm": "make_embedding_backend('onnx').embed([q], kind='query') alone",
    "dense_exact": "top_k_cosine(vectors, q, depth) alone",
    "dense_ann": "search_dense(vectors, q, depth, ann) alone",
}


def _log(msg: str) -> None:
    print(f"[bench-scale] {msg}", file=sys.stderr, flush=True)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragspine bench --scale", description="scale benchmark: ingest + query + re-ingest at N chunks")
    p.add_argument("--scale", type=int, default=100_000, help="target chunks (default 100000)")
    p.add_argument("--workdir", type=Path, default=None, help="where the library is built (default: a temporary folder, removed)")
    p.add_argument("--reuse", action="store_true", help="reuse the library already ingested in --workdir (skips the ingest phase)")
    p.add_argument("--phases", default="ingest,query,reingest",
                   help=f"comma-separated subset of {','.join(PHASES)} (dense and ann_update run alone, on vectors only)")
    p.add_argument("--queries", type=int, default=200, help="queries per measurement (default 200)")
    p.add_argument("--rounds", type=int, default=2, help="timed passes; a query's latency is its median (default 2)")
    p.add_argument("--centroids", type=int, default=0, help="mixture components of the synthetic vectors (default: N/250, 16..4096)")
    p.add_argument("--latent", type=int, default=48, help="intrinsic dimension of the synthetic vectors (default 48)")
    p.add_argument("--ann-threads", type=int, default=1, help="ANN build threads (1 = the product default, deterministic)")
    p.add_argument("--no-tree", action="store_true", help="write summarizer = \"none\" into the library's _library.toml (no summary tree)")
    p.add_argument("--no-minilm", action="store_true", help="skip the MiniLM ONNX rows")
    p.add_argument("--rows", type=int, default=0,
                   help="with --phases dense or ann_update: the number of vectors (no library needed; default --scale)")
    p.add_argument("--prebuild-ann", type=int, default=0, metavar="ROWS",
                   help="only write the vectors and build the ANN index for a library of ROWS chunks into --workdir "
                        "(run beside a long ingest; the query phase then reuses them)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="report folder (default benchmarks/reports/)")
    p.add_argument("--name", default=None, help="report name (default scale_<N>)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    return p


# ------------------------------------------------------------------------ corpus
def n_docs_for(scale: int) -> int:
    return max(4, math.ceil(scale / CHUNKS_PER_DOC))


def library_toml(args: argparse.Namespace) -> str:
    lines = []
    if args.no_tree:
        lines.append('summarizer = "none"')
    return "".join(line + "\n" for line in lines)


def write_library(raw_dir: Path, n_docs: int, seed: int, toml: str) -> tuple[int, list[str]]:
    """Write ``docs.jsonl`` (+ ``_library.toml``); returns (characters, queries)."""
    corpus = synthetic_corpus(SyntheticConfig(n_passages=n_docs * PASSAGES_PER_DOC, n_queries=1000, seed=seed))
    raw_dir.mkdir(parents=True, exist_ok=True)
    if toml:
        (raw_dir / "_library.toml").write_text(toml, encoding="utf-8")
    with open(raw_dir / "docs.jsonl", "w", encoding="utf-8") as f:
        for i in range(n_docs):
            body = "\n\n".join(corpus.texts[i * PASSAGES_PER_DOC:(i + 1) * PASSAGES_PER_DOC])
            f.write(json.dumps({"doc_id": f"doc-{i:07d}", "title": f"Synthetic document {i}", "text": body}) + "\n")
    return sum(len(t) for t in corpus.texts), [" ".join(q) for q in corpus.queries]


def change_one_percent(raw_dir: Path) -> list[str]:
    """Append one sentence to every ``CHANGE_EVERY``-th document; the changed doc ids."""
    path = raw_dir / "docs.jsonl"
    changed: list[str] = []
    tmp = path.with_suffix(".tmp")
    with open(path, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i % CHANGE_EVERY == 0:
                doc = json.loads(line)
                doc["text"] = doc["text"] + f" Revised clause {i} was amended in this edition."
                line = json.dumps(doc) + "\n"
                changed.append(doc["doc_id"])
            dst.write(line)
    os.replace(tmp, path)
    return changed


# ------------------------------------------------------------------------ ingest
def _children_maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def _tree_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 2**20


def run_ingest(raw_dir: Path, instance: Any) -> dict:
    """One ``ingest_library`` run: throughput, memory, per-step seconds and asset metadata."""
    import dagster as dg

    from ragspine_assets.ingest import ingest_library

    before = load()
    with peak_rss() as mem, contextlib.redirect_stdout(sys.stderr):
        c0 = time.process_time()
        t0 = time.perf_counter()
        summary = ingest_library(raw_dir, embedding="none", instance=instance)
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - c0
    steps = {s.step_key: round(s.end_time - s.start_time, 2) for s in instance.get_run_step_stats(summary.run_id)
             if s.end_time and s.start_time}
    assets: dict[str, dict] = {}
    for ev in instance.all_logs(summary.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        mat = ev.dagster_event.event_specific_data.materialization
        assets[mat.asset_key.path[-1]] = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    meta = summary.metadata
    docs, chunks = int(meta.get("documents") or 0), int(meta.get("chunks") or 0)
    snap = Path(summary.snapshot_dir)
    sizes = {p.name: round(_tree_mb(p), 1) for p in sorted(snap.iterdir())}
    return {
        "documents": docs, "chunks": chunks, "seconds": round(seconds, 2),
        "documents_per_s": round(docs / seconds, 1), "chunks_per_s": round(chunks / seconds, 1),
        "cpu_seconds": round(cpu, 2), "documents_per_cpu_s": round(docs / cpu, 1) if cpu > 0 else None,
        "peak_rss_growth_mb": round(mem.delta_mb, 1), "peak_rss_method": mem.method,
        "process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "children_peak_rss_mb": round(_children_maxrss_mb(), 1),
        "step_seconds": steps, "artifact_mb": sizes, "snapshot_mb": round(sum(sizes.values()), 1),
        "chunk_store_mb": round(_tree_mb(snap.parent.parent / "chunk_store.sqlite"), 1),
        "artifact_sets": meta.get("artifact_sets"), "snapshot_dir": str(snap),
        "asset_metadata": {k: {m: v for m, v in d.items() if isinstance(v, (int, float, bool)) or m in ("chunker", "analyzer")}
                           for k, d in assets.items()},
        "load_before": before, "load_after": load(),
    }


# ------------------------------------------------------------------------ vectors
def n_centroids(rows: int, requested: int) -> int:
    return requested if requested > 0 else int(min(4096, max(16, rows // 250)))


def mixture_vectors(path: Path, rows: int, n_queries: int, centroids: int, latent: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` unit vectors (memory-mapped .npy) and ``n_queries`` held-out ones, same mixture.

    Points are ``centre[c] + N(0, I_latent)`` in a ``latent``-d space (centres ~ N(0, 4 I)),
    projected to 384-d by a fixed Gaussian matrix, plus ``0.5 x N(0, I_384)`` noise,
    then L2-normalised. Deterministic in (rows, centroids, latent, seed).
    """
    rng = np.random.default_rng(seed)
    proj = (rng.standard_normal((latent, DIM)) / math.sqrt(latent)).astype(np.float32)
    centres = (rng.standard_normal((centroids, latent)) * 2.0).astype(np.float32)

    def block(m: int, r: np.random.Generator) -> np.ndarray:
        z = centres[r.integers(0, centroids, m)] + r.standard_normal((m, latent), dtype=np.float32)
        x = z @ proj + 0.5 * r.standard_normal((m, DIM), dtype=np.float32)
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    if not path.exists() or np.load(path, mmap_mode="r").shape != (rows, DIM):
        tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(rows, DIM))
        data_rng = np.random.default_rng(seed + 1)
        for s in range(0, rows, 65536):
            m = min(65536, rows - s)
            out[s:s + m] = block(m, data_rng)
        out.flush()
        del out
        os.replace(tmp, path)
    queries = block(n_queries, np.random.default_rng(seed + 2))
    return np.load(path, mmap_mode="r"), queries


def ensure_ann(directory: Path, vectors: np.ndarray, threads: int) -> dict:
    """Build (or reuse a matching) ANN index with the product's builder and default params."""
    from ragspine_core.dense.ann import ANN_PARAMS_FILE, AnnParams, build_ann_index

    params = AnnParams()
    meta_path = directory / ANN_PARAMS_FILE
    state_path = directory / "bench_build.json"
    lock = directory.with_name(directory.name + ".building")
    while lock.exists():  # another bench process (--prebuild-ann) is building this very index: wait for it
        try:
            os.kill(int(lock.read_text() or 0), 0)
        except (ProcessLookupError, ValueError, OSError):
            break
        time.sleep(10)
    if meta_path.exists() and state_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("count") == vectors.shape[0]:
            info = json.loads(state_path.read_text())
            info["reused"] = True
            return info
    lock.write_text(str(os.getpid()))
    tmp = directory.with_name(f"{directory.name}.tmp{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        before = load()
        with peak_rss() as mem:
            t0 = time.perf_counter()
            meta = build_ann_index(np.asarray(vectors), tmp, params, threads=threads)
            seconds = time.perf_counter() - t0
        info = {"seconds": round(seconds, 1), "threads": threads, "params": meta,
                "mb": round(_tree_mb(tmp / meta["file"]), 1), "peak_rss_growth_mb": round(mem.delta_mb, 1),
                "load_before": before, "load_after": load(), "reused": False,
                "how": "ragspine_core.dense.ann.build_ann_index(vectors, dir, AnnParams(), threads=...)"}
        (tmp / "bench_build.json").write_text(json.dumps(info, indent=1))
        shutil.rmtree(directory, ignore_errors=True)
        os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        lock.unlink(missing_ok=True)
    return info


def run_dense(args: argparse.Namespace, work: Path, rows: int) -> dict:
    """The dense channel alone over ``rows`` synthetic vectors: the exact scan, and the ANN
    (with recall@10) when ``--prebuild-ann`` already built the index for these rows."""
    from ragspine_core.dense.ann import ANN_PARAMS_FILE, AnnIndex, search_dense
    from ragspine_core.dense.vector_store import top_k_cosine

    cents = n_centroids(rows, args.centroids)
    vectors, qvecs = mixture_vectors(work / f"vectors_{rows}_{cents}_{args.latent}_{args.seed}.npy", rows, args.queries,
                                     cents, args.latent, args.seed)
    ann_dir = work / f"ann_{rows}_{cents}_{args.latent}_{args.seed}"
    ann = AnnIndex(ann_dir) if (ann_dir / ANN_PARAMS_FILE).exists() else None
    depth = 100
    timer = Timer(args.rounds)
    timer.add("dense_exact", lambda i: top_k_cosine(vectors, qvecs[i], depth), range(len(qvecs)))
    out: dict[str, Any] = {"rows": rows, "dim": DIM, "centroids": cents, "latent": args.latent, "depth": depth,
                           "ann": None if ann is None else json.loads((ann_dir / "bench_build.json").read_text())}
    if ann is not None:
        hits = 0
        for q in qvecs:
            truth, _ = top_k_cosine(vectors, q, TOP_K)
            got, _ = search_dense(vectors, q, TOP_K, ann)
            hits += len(set(truth.tolist()) & set(got.tolist()))
        out["recall_at_10"] = round(hits / (TOP_K * len(qvecs)), 4)
        timer.add("dense_ann", lambda i: search_dense(vectors, qvecs[i], depth, ann), range(len(qvecs)))
    before = load()
    out["latency"] = timer.run()
    out.update({"load_before": before, "load_after": load(), "queries": len(qvecs)})
    return out


def run_ann_update(args: argparse.Namespace, work: Path, rows: int) -> dict:
    """The product's ANN *update* after a 1% change of ``rows`` synthetic vectors.

    Every ``CHANGE_EVERY``-th row on average is dropped (a seeded random 1%), as many new
    mixture vectors are inserted at random positions (so nearly every kept row moves, as
    new chunk ids sort between old ones), and ``update_ann_index`` brings the prebuilt
    index (``--prebuild-ann``) to the new matrix. Reports its seconds (and the delta's),
    recall@10 of the updated index against the exact scan of the new matrix, and the
    ANN dense latency on it.
    """
    from ragspine_core.dense.ann import ANN_PARAMS_FILE, AnnIndex, ann_delta, search_dense, update_ann_index
    from ragspine_core.dense.vector_store import top_k_cosine

    cents = n_centroids(rows, args.centroids)
    n_change = max(1, rows // CHANGE_EVERY)
    vectors, extra = mixture_vectors(work / f"vectors_{rows}_{cents}_{args.latent}_{args.seed}.npy", rows,
                                     args.queries + n_change, cents, args.latent, args.seed)
    qvecs, fresh = extra[:args.queries], extra[args.queries:]
    base = work / f"ann_{rows}_{cents}_{args.latent}_{args.seed}"
    if not (base / ANN_PARAMS_FILE).exists():
        raise SystemExit(f"no prebuilt ANN index in {base}: run --prebuild-ann {rows} first")
    rng = np.random.default_rng(args.seed + 3)
    keep = np.ones(rows, dtype=bool)
    keep[rng.choice(rows, n_change, replace=False)] = False
    fresh_at = np.zeros(rows, dtype=bool)
    fresh_at[rng.choice(rows, n_change, replace=False)] = True
    new = np.empty((rows, DIM), dtype=np.float32)
    new[fresh_at] = fresh
    new[~fresh_at] = vectors[keep]
    old_keys = np.array([i.to_bytes(16, "big") for i in range(rows)], dtype="S16")
    new_keys = np.empty(rows, dtype="S16")
    new_keys[~fresh_at] = old_keys[keep]
    new_keys[fresh_at] = np.array([(rows + i).to_bytes(16, "big") for i in range(n_change)], dtype="S16")
    before = load()
    t0 = time.perf_counter()
    delta = ann_delta(old_keys, new_keys)
    delta_s = time.perf_counter() - t0
    out = work / f"ann_update_{rows}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    with peak_rss() as mem:
        t0 = time.perf_counter()
        meta = update_ann_index(base, delta, new, out, threads=1)
        update_s = time.perf_counter() - t0
    index = AnnIndex(out)
    hits = 0
    for q in qvecs:
        truth, _ = top_k_cosine(new, q, TOP_K)
        got, _ = search_dense(new, q, TOP_K, index)
        hits += len(set(truth.tolist()) & set(got.tolist()))
    probe = rng.choice(rows, 200, replace=False)
    self_found = sum(int(index.search(new[i], 1)[0][0]) == int(i) for i in probe)
    timer = Timer(args.rounds)
    timer.add("dense_ann_updated", lambda i: search_dense(new, qvecs[i], 100, index), range(len(qvecs)))
    latency = timer.run()
    return {"rows": rows, "removed": int(delta.removed.size), "added": int(delta.added.size),
            "moved": int((delta.kept_old != delta.kept_new).sum()), "delta_s": round(delta_s, 2),
            "update_s": round(update_s, 1), "update_peak_rss_growth_mb": round(mem.delta_mb, 1),
            "full_build": json.loads((base / "bench_build.json").read_text()) if (base / "bench_build.json").exists() else None,
            "recall_at_10": round(hits / (TOP_K * len(qvecs)), 4), "queries": len(qvecs),
            "rows_found_at_their_new_position": f"{self_found}/{len(probe)}", "params": meta, "latency": latency,
            "load_before": before, "load_after": load(),
            "how": "ragspine_core.dense.ann.update_ann_index(prebuilt, ann_delta(old_keys, new_keys), new_matrix, dir)"}


def prebuild_ann(args: argparse.Namespace, work: Path, rows: int) -> dict:
    """Vectors + ANN index for a library of ``rows`` chunks, ahead of (or beside) the ingest."""
    cents = n_centroids(rows, args.centroids)
    vectors, _ = mixture_vectors(work / f"vectors_{rows}_{cents}_{args.latent}_{args.seed}.npy", rows, 1,
                                 cents, args.latent, args.seed)
    return ensure_ann(work / f"ann_{rows}_{cents}_{args.latent}_{args.seed}", vectors, args.ann_threads)


class LookupBackend:
    """Query 'embedding' by table lookup: the held-out mixture vector of each query text."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.model_id = "bench-mixture-384d"
        self.dim = DIM

    def embed(self, texts, kind: str = "document"):  # noqa: D102
        return np.stack([self.table[t] for t in texts])


def library_view(base: Any, vectors: np.ndarray, model_id: str, ann_dir: Path | None) -> Any:
    """``base``'s snapshot whose dense channel is ``vectors`` (one per row) and, optionally, ``ann_dir``."""
    from ragspine_query.library import EmbeddingMatrix, Library

    class _ScaleView(Library):
        _bench_matrix: EmbeddingMatrix  # both set below, after Library.__init__
        _bench_ann: Path | None

        def embeddings(self):  # noqa: D102
            return getattr(self, "_bench_matrix", None)

        def artifact_path(self, name: str):  # noqa: D102
            if name == "ann":
                return getattr(self, "_bench_ann", None)
            return super().artifact_path(name)

    manifest = dict(base.manifest)
    manifest["embedding"] = {"model_id": model_id, "backend": "bench-mixture", "dim": DIM, "count": int(vectors.shape[0])}
    view = _ScaleView(base.snapshot_dir, manifest)
    view._bench_matrix = EmbeddingMatrix(model_id, DIM, vectors, np.arange(vectors.shape[0], dtype=np.int32))
    view._bench_ann = ann_dir
    return view


def run_query(args: argparse.Namespace, work: Path, snapshot: Path, queries: list[str]) -> dict:
    from ragspine_core.dense.ann import ann_for_library, search_dense
    from ragspine_core.dense.vector_store import top_k_cosine
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    lib = open_library(snapshot)
    rows = lib.n_chunks
    queries = queries[:args.queries]
    cents = n_centroids(rows, args.centroids)
    _log(f"synthetic vectors: {rows:,} x {DIM}, {cents} centroids, latent {args.latent}")
    t0 = time.perf_counter()
    vectors, qvecs = mixture_vectors(work / f"vectors_{rows}_{cents}_{args.latent}_{args.seed}.npy", rows, len(queries),
                                     cents, args.latent, args.seed)
    gen_s = time.perf_counter() - t0
    ann_dir = work / f"ann_{rows}_{cents}_{args.latent}_{args.seed}"
    _log(f"ANN build over {rows:,} vectors (threads={args.ann_threads}); load {load()}")
    ann_info = ensure_ann(ann_dir, vectors, args.ann_threads)
    _log(f"ANN: {ann_info['seconds']} s, {ann_info['mb']} MB, reused={ann_info['reused']}")

    lookup = LookupBackend(dict(zip(queries, qvecs)))
    exact_view = library_view(lib, vectors, lookup.model_id, None)
    ann_view = library_view(lib, vectors, lookup.model_id, ann_dir)
    ann = ann_for_library(ann_view)
    if ann is None:
        raise RuntimeError("the ANN index did not open: is usearch installed (pip install 'ragspine[ann]')?")
    depth = RetrievalConfig().depth
    bm25 = HybridRetriever(lib, config=RetrievalConfig(mode="bm25"))
    h_exact = HybridRetriever(exact_view, embedding_backend=lookup, config=RetrievalConfig(mode="hybrid"))
    h_ann = HybridRetriever(ann_view, embedding_backend=lookup, config=RetrievalConfig(mode="hybrid"))

    # recall@10 of the ANN path (search_dense, as the dense channel calls it) vs the exact scan
    hits10 = hits_d = 0
    agree = 0.0
    for i, q in enumerate(qvecs):
        truth_d, _ = top_k_cosine(vectors, q, depth)
        truth = truth_d[:TOP_K]  # the exact top 10 (scores descending, ties by position)
        got, _ = search_dense(vectors, q, TOP_K, ann)
        hits10 += len(set(truth.tolist()) & set(got.tolist()))
        got_d, _ = search_dense(vectors, q, depth, ann)
        hits_d += len(set(truth_d.tolist()) & set(got_d.tolist()))
        a = [r.chunk_id for r in h_exact.search(queries[i], top_k=TOP_K)]
        b = [r.chunk_id for r in h_ann.search(queries[i], top_k=TOP_K)]
        agree += len(set(a) & set(b)) / max(len(a), 1)
    n_q = len(queries)
    recall = {"recall_at_10": round(hits10 / (TOP_K * n_q), 4), f"recall_at_{depth}": round(hits_d / (depth * n_q), 4),
              "hybrid_top10_agreement": round(agree / n_q, 4), "queries": n_q,
              "how": "search_dense(vectors, q, k, ann) vs top_k_cosine(vectors, q, k), held-out mixture query vectors"}
    _log(f"recall@10 {recall['recall_at_10']}, recall@{depth} {recall[f'recall_at_{depth}']}")

    timer = Timer(args.rounds)
    timer.add("bm25", lambda q: bm25.search(q, top_k=TOP_K), queries)
    timer.add("hybrid_exact", lambda q: h_exact.search(q, top_k=TOP_K), queries)
    timer.add("hybrid_ann", lambda q: h_ann.search(q, top_k=TOP_K), queries)
    timer.add("dense_exact", lambda i: top_k_cosine(vectors, qvecs[i], depth), range(n_q))
    timer.add("dense_ann", lambda i: search_dense(vectors, qvecs[i], depth, ann), range(n_q))
    views = [exact_view, ann_view]
    why: str | None = "--no-minilm"
    if not args.no_minilm:
        backend, _single, why = make_onnx()
        if backend is not None:
            mv_exact = library_view(lib, vectors, backend.model_id, None)
            mv_ann = library_view(lib, vectors, backend.model_id, ann_dir)
            views += [mv_exact, mv_ann]
            hm_exact = HybridRetriever(mv_exact, embedding_backend=backend, config=RetrievalConfig(mode="hybrid"))
            hm_ann = HybridRetriever(mv_ann, embedding_backend=backend, config=RetrievalConfig(mode="hybrid"))
            timer.add("embed_minilm", lambda q: backend.embed([q], kind="query"), queries)
            timer.add("hybrid_exact_minilm", lambda q: hm_exact.search(q, top_k=TOP_K), queries)
            timer.add("hybrid_ann_minilm", lambda q: hm_ann.search(q, top_k=TOP_K), queries)
    before = load()
    t0 = time.perf_counter()
    try:
        figures = timer.run()
    finally:
        for v in views:
            v.close()
        lib.close()
    for name in SECTIONS:
        figures.setdefault(name, {"skipped": why})
    return {
        "rows": rows, "depth": depth,
        "vectors": {"rows": rows, "dim": DIM, "centroids": cents, "latent": args.latent, "generate_s": round(gen_s, 1),
                    "mb": round(rows * DIM * 4 / 2**20, 1),
                    "how": "Gaussian mixture in a latent space, projected to 384-d + isotropic noise, L2-normalised; "
                           "queries are held-out points of the same mixture"},
        "ann": ann_info, "recall": recall, "latency": figures,
        "timed_s": round(time.perf_counter() - t0, 1), "load_before": before, "load_after": load(),
    }


# ------------------------------------------------------------------------ re-ingest
def _chunk_ids(snapshot: Path) -> dict[str, str]:
    con = sqlite3.connect(f"file:{snapshot / 'chunks.sqlite'}?mode=ro", uri=True)
    try:
        return dict(con.execute("SELECT chunk_id, doc_id FROM narrative_chunk"))
    finally:
        con.close()


def run_reingest(raw_dir: Path, instance: Any, old_snapshot: Path) -> dict:
    changed = change_one_percent(raw_dir)
    _log(f"re-ingest after changing {len(changed)} documents (1%); load {load()}")
    res = run_ingest(raw_dir, instance)
    new_snapshot = Path(res["snapshot_dir"])
    old, new = _chunk_ids(old_snapshot), _chunk_ids(new_snapshot)
    changed_set = set(changed)
    chunks_of_changed = sum(1 for d in new.values() if d in changed_set)
    am = res["asset_metadata"]
    ch, bm = am.get("chunks", {}), am.get("bm25_index", {})
    return {
        "changed_documents": len(changed), "seconds": res["seconds"],
        "documents_per_s_equivalent": res["documents_per_s"],
        "step_seconds": res["step_seconds"],
        "documents_changed_by_asset": ch.get("documents_changed"),
        "documents_unchanged_by_asset": ch.get("documents_unchanged"),
        "chunks_rechunked": ch.get("chunks_written"),
        "chunks_of_changed_documents": chunks_of_changed,
        "bm25_rows_reindexed": bm.get("chunk_rows"),
        "bm25_how": "the BM25 index is rebuilt over every row (content-addressed by the index text)",
        "new_chunk_ids": len(set(new) - set(old)),
        "vectors_to_embed": len(set(new) - set(old)),
        "vectors_how": "embedding off here; with a backend only chunk texts not in the embedding cache (the new chunk ids) are embedded",
        "ann_rebuilt": False,
        "ann_how": "embedding off here, so no index; with vectors the published ANN index is updated for the changed "
                   "rows (a full build only past 10% of rows changed since the last one, or for a RESTRICTED row): "
                   "--phases ann_update measures it",
        "relation_graph_reused": am.get("relation_graph", {}).get("reused"),
        "snapshot_dir": str(new_snapshot), "load_before": res["load_before"], "load_after": res["load_after"],
    }


# ------------------------------------------------------------------------ report
def _ms(fig: dict, key: str = "p50_ms") -> str:
    return "–" if key not in fig else f"{fig[key]:.2f}"


def markdown(rep: dict) -> str:
    out = [f"# Scale benchmark: {rep['target_chunks']:,} chunks", "",
           f"`{rep['command']}` — {rep['machine']['cpu']}, {rep['machine']['logical_cores']} cores, "
           f"{rep['machine']['ram_gb']} GB; {rep['when']}", ""]
    ing = rep.get("ingest")
    if ing:
        out += ["## Ingest (all assets, embedding none)", "",
                f"{ing['documents']:,} documents → {ing['chunks']:,} chunks in {ing['seconds']} s: "
                f"**{ing['documents_per_s']:,} documents/s**, {ing['chunks_per_s']:,} chunks/s "
                + (f"({ing['cpu_seconds']} CPU-s in this process: {ing['documents_per_cpu_s']} documents per CPU-second); "
                   if ing.get("cpu_seconds") else "; ")
                + f"peak RSS growth {ing['peak_rss_growth_mb']} MB (process peak {ing['process_peak_rss_mb']} MB); "
                f"load average {ing['load_before']} → {ing['load_after']}.", "",
                "| step | seconds |", "|---|---:|"]
        out += [f"| {k} | {v} |" for k, v in ing["step_seconds"].items()]
        out += ["", "| artifact | MB |", "|---|---:|"]
        out += [f"| {k} | {v} |" for k, v in ing["artifact_mb"].items()]
        out += [f"| chunk_store.sqlite (library, not in the snapshot) | {ing['chunk_store_mb']} |", ""]
    q = rep.get("query")
    if q:
        a, r = q["ann"], q["recall"]
        out += ["## Query", "",
                f"{q['rows']:,} rows; vectors {q['vectors']['rows']:,} x {q['vectors']['dim']} "
                f"({q['vectors']['centroids']} centroids, latent {q['vectors']['latent']}, {q['vectors']['mb']} MB). "
                f"ANN (usearch, m={a['params']['m']}, ef_construction={a['params']['ef_construction']}, "
                f"ef_search={a['params']['ef_search']}): build {a['seconds']} s with {a['threads']} thread(s), "
                f"{a['mb']} MB{' (reused)' if a.get('reused') else ''}.", "",
                f"**ANN recall@10 vs exact: {r['recall_at_10']}**; recall@{q['depth']} {r['recall_at_' + str(q['depth'])]}; "
                f"hybrid top-10 agreement ANN vs exact {r['hybrid_top10_agreement']} ({r['queries']} queries).", "",
                f"Load average {q['load_before']} → {q['load_after']}.", "",
                "CPU p50 is the query's own CPU time (``time.process_time``): on a shared, loaded machine it is "
                "closer to what the query costs than the wall-clock figures, which include time spent descheduled.", "",
                "| measurement | p50 ms | p99 ms | CPU p50 ms | QPS | what |", "|---|---:|---:|---:|---:|---|"]
        for name, what in SECTIONS.items():
            f = q["latency"].get(name, {})
            out.append(f"| {name} | {_ms(f)} | {_ms(f, 'p99_ms')} | {_ms(f, 'cpu_p50_ms')} | {f.get('qps', '–')} | "
                       f"{what if 'skipped' not in f else 'skipped: ' + str(f['skipped'])} |")
        out.append("")
    re_ = rep.get("reingest")
    if re_:
        out += ["## Re-ingest after changing 1% of the documents", "",
                f"{re_['changed_documents']:,} documents changed; re-ingest {re_['seconds']} s "
                f"(load {re_['load_before']} → {re_['load_after']}).", "",
                f"* chunks re-chunked: {re_['chunks_rechunked']} (the changed documents now have {re_['chunks_of_changed_documents']} chunks); "
                f"documents unchanged and skipped by the chunker: {re_['documents_unchanged_by_asset']}",
                f"* BM25 rows re-indexed: {re_['bm25_rows_reindexed']} ({re_['bm25_how']})",
                f"* vectors to (re-)embed: {re_['vectors_to_embed']} ({re_['vectors_how']})",
                f"* ANN rebuilt: {re_['ann_rebuilt']} — {re_['ann_how']}",
                f"* relation graph reused: {re_['relation_graph_reused']}", "",
                "| step | seconds |", "|---|---:|"]
        out += [f"| {k} | {v} |" for k, v in re_["step_seconds"].items()]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    bad = [p for p in phases if p not in PHASES]
    if bad:
        raise SystemExit(f"unknown phase(s) {bad}; choose from {PHASES}")
    if args.reuse:
        if args.workdir is None:
            raise SystemExit("--reuse needs --workdir (the folder of an earlier run)")
        phases = [p for p in phases if p != "ingest"]
    if args.prebuild_ann:
        if args.workdir is None:
            raise SystemExit("--prebuild-ann needs --workdir")
        args.workdir.mkdir(parents=True, exist_ok=True)
        info = prebuild_ann(args, args.workdir, args.prebuild_ann)
        _log(f"ANN for {args.prebuild_ann:,} rows: {info['seconds']} s, {info['mb']} MB, reused={info['reused']}")
        return 0
    if phases in (["dense"], ["ann_update"]):  # vectors only, without a library (e.g. where the ingest does not fit)
        if args.workdir is None:
            raise SystemExit(f"--phases {phases[0]} needs --workdir")
        args.workdir.mkdir(parents=True, exist_ok=True)
        run = run_dense if phases == ["dense"] else run_ann_update
        report: dict[str, Any] = {
            "target_chunks": args.scale, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": "python -m ragspine_tools.bench.bench_scale " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": machine_description(), "seed": args.seed,
            phases[0]: run(args, args.workdir, args.rows or args.scale)}
        name = args.name or f"scale_{args.scale}_{phases[0]}"
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{name}.json").write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
        _log(f"wrote {args.out / name}.json")
        return 0
    import dagster as dg

    tmp = None
    work = args.workdir
    if work is None:
        tmp = tempfile.mkdtemp(prefix="bench-scale-")
        work = Path(tmp)
    work.mkdir(parents=True, exist_ok=True)
    raw = work / "raw" / LIBRARY_ID
    state_path = work / STATE_FILE
    state = json.loads(state_path.read_text()) if (args.reuse and state_path.exists()) else {}
    report = {
        "target_chunks": args.scale, "command": "python -m ragspine_tools.bench.bench_scale " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine_description(),
        "seed": args.seed, "library_toml": library_toml(args),
    }
    instance = dg.DagsterInstance.ephemeral()
    name = args.name or f"scale_{args.scale}"
    args.out.mkdir(parents=True, exist_ok=True)

    def write_report() -> None:  # after every phase: a long run that dies keeps what it measured
        (args.out / f"{name}.json").write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
        (args.out / f"{name}.md").write_text(markdown(report), encoding="utf-8")

    try:
        if "ingest" in phases:
            if raw.exists():
                shutil.rmtree(work / "raw")
                shutil.rmtree(work / "artifacts", ignore_errors=True)
            n_docs = n_docs_for(args.scale)
            _log(f"writing {n_docs:,} documents (~{args.scale:,} chunks) to {raw}")
            t0 = time.perf_counter()
            chars, queries = write_library(raw, n_docs, args.seed, library_toml(args))
            gen_s = time.perf_counter() - t0
            _log(f"ingest_library(embedding='none'); load {load()}")
            ing = run_ingest(raw, instance)
            ing.update({"characters": chars, "generate_s": round(gen_s, 1)})
            _log(f"ingest: {ing['documents_per_s']} docs/s, {ing['chunks']:,} chunks, {ing['seconds']} s")
            state = {"ingest": ing, "queries": queries, "snapshot_dir": ing["snapshot_dir"]}
            state_path.write_text(json.dumps(state))
        if not state:
            raise SystemExit(f"{work} holds no earlier run ({STATE_FILE} missing): run without --reuse first")
        report["ingest"] = state["ingest"]
        write_report()
        snapshot = Path(state["snapshot_dir"])
        if "query" in phases:
            report["query"] = run_query(args, work, snapshot, state["queries"])
            write_report()
        if "reingest" in phases:
            rei = run_reingest(raw, instance, snapshot)
            report["reingest"] = rei
            state["snapshot_dir"] = rei["snapshot_dir"]
            state_path.write_text(json.dumps(state))
            write_report()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    _log(f"wrote {args.out / name}.json / .md")
    if args.json:
        print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
