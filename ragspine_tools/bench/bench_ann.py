"""Approximate nearest-neighbour engines vs the exact scan: recall@10, QPS, build time, size.

Used to choose the ANN engine of ``ragspine_core.dense.ann`` (see docs/operations.md,
"Scaling model"). Vectors are synthetic and seeded: ``latent``-dimensional Gaussian
points pushed through a fixed random ``latent x dim`` projection plus isotropic noise,
then L2-normalised. Real sentence embeddings have a low intrinsic dimension; pure
isotropic Gaussian vectors (``--latent 0``) are the worst case for any graph index and
are reported separately. Queries are held-out points from the same distribution.

Per engine (all single-threaded at query time, one query per call, as the dense channel
searches): build seconds (``--build-threads``), on-disk size, peak RSS growth of the
build, recall@10 against the exact top 10 (``top_k_cosine``), p50 latency and QPS.

Usage::

    python -m ragspine_tools.bench.bench_ann --n 100000 --dim 384 --queries 300 \
        [--engines hnswlib,usearch,faiss] [--latent 32] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from ragspine_tools.bench import checkout_root  # noqa: E402
REPO = checkout_root()


def synthetic_vectors(n: int, dim: int, latent: int, seed: int) -> np.ndarray:
    """``n`` unit rows: a ``latent``-d Gaussian mixture projected to ``dim`` (0 = isotropic)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    proj = rng.standard_normal((latent, dim)).astype(np.float32) if latent else None
    centers = rng.standard_normal((256, latent)).astype(np.float32) * 2.0 if latent else None
    step = 65536
    for s in range(0, n, step):
        m = min(step, n - s)
        if proj is not None and centers is not None:  # latent > 0
            z = centers[rng.integers(0, 256, m)] + rng.standard_normal((m, latent)).astype(np.float32)
            block = z @ proj + 0.5 * rng.standard_normal((m, dim)).astype(np.float32)
        else:
            block = rng.standard_normal((m, dim)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[s:s + m] = block
    return out


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    from ragspine_core.dense.vector_store import top_k_cosine

    out = np.empty((len(queries), k), dtype=np.int64)
    lat = []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        rows, _ = top_k_cosine(vectors, q, k)
        lat.append(time.perf_counter() - t)
        out[i] = rows
    return out, float(np.median(lat))


def bench_engine(name: str, vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray, k: int,
                 threads: int, work: Path, ef_values: list[int]) -> list[dict]:
    from ragspine_core.dense.ann import AnnIndex as load_ann_index, AnnParams, build_ann_index

    params = AnnParams(engine=name, m=16, ef_construction=128, ef_search=ef_values[0])
    before = rss_mb()
    t0 = time.perf_counter()
    d = work / name
    d.mkdir()
    build_ann_index(vectors, d, params, threads=threads)
    build_s = time.perf_counter() - t0
    build_rss = rss_mb() - before
    size_mb = sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) / 1e6
    index = load_ann_index(d)
    results = []
    for ef in ef_values:
        index.set_ef(ef)
        lat, hits = [], 0
        for i, q in enumerate(queries):
            t = time.perf_counter()
            rows, _ = index.search(q, k)
            lat.append(time.perf_counter() - t)
            hits += len(set(rows[:k].tolist()) & set(truth[i].tolist()))
        results.append({"engine": name, "ef_search": ef, "build_s": round(build_s, 1),
                        "build_rss_growth_mb": round(build_rss), "size_mb": round(size_mb, 1),
                        "recall@10": round(hits / (k * len(queries)), 4),
                        "p50_ms": round(1000 * float(np.median(lat)), 3),
                        "p99_ms": round(1000 * float(np.percentile(lat, 99)), 3),
                        "qps": round(len(queries) / sum(lat), 1)})
        print(json.dumps(results[-1]), flush=True)
    index.close()
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--latent", type=int, default=32, help="intrinsic dimension (0 = isotropic Gaussian)")
    ap.add_argument("--engines", default="hnswlib,usearch,faiss")
    ap.add_argument("--ef", default="32,64,128,256", help="ef_search values to sweep")
    ap.add_argument("--build-threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    allv = synthetic_vectors(args.n + args.queries, args.dim, args.latent, args.seed)
    vectors, queries = allv[:args.n], allv[args.n:]
    truth, exact_p50 = exact_top(vectors, queries, 10)
    print(json.dumps({"engine": "exact", "n": args.n, "dim": args.dim, "latent": args.latent,
                      "p50_ms": round(1000 * exact_p50, 3)}), flush=True)
    out: list[dict] = [{"engine": "exact", "recall@10": 1.0, "p50_ms": round(1000 * exact_p50, 3)}]
    efs = [int(x) for x in args.ef.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-ann-") as tmp:
        for name in args.engines.split(","):
            try:
                out += bench_engine(name, vectors, queries, truth, 10, args.build_threads, Path(tmp), efs)
            except ImportError as exc:
                print(json.dumps({"engine": name, "skipped": str(exc)}), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"n": args.n, "dim": args.dim, "latent": args.latent, "queries": args.queries,
                                         "results": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
