"""Concurrent queries: does a second thread add throughput to ``auto``-mode search?

One process, one synthetic library built by the real pipeline
(:func:`ragspine_index.pipeline.build_library`, ``embedding="deterministic"`` by
default or ``--embedding onnx`` for the packaged MiniLM that an English user's queries are
embedded with, one chunk per passage, ~10k chunks by default), opened with ``open_library`` and queried
through ``HybridRetriever(lib)`` in its default ``auto`` mode (BM25 + dense + fusion) and
in ``bm25`` mode, one query per call:

* ``1 thread`` — one thread answers all the queries;
* ``N threads`` — N threads answer them together (query ``i`` goes to thread ``i % N``),
  sharing the one retriever, as a web server's worker threads would.

The numeric libraries are *not* pinned by this script (no ``*_NUM_THREADS`` variables):
the query path must pin its own thread pools (:mod:`ragspine_core.runtime.threads`);
that is what the benchmark checks. The query path's compiled kernels (numba, extra
``accel``: :mod:`ragspine_core.runtime.kernels`, the BM25 kernel) are compiled before
measuring, as a long-running server would have them; ``RAGSPINE_QUERY_JIT=0`` measures
the numpy code instead. Every configuration runs ``--rounds`` times,
configurations alternating within each round (a burst of background load on a shared
machine lands on all of them alike); queries/s is the median over rounds and the ratio
is taken between medians of the same run. Each threaded run's rankings are compared
with the one-thread run's (they must be identical).

Usage::

    python -m ragspine_tools.bench.bench_concurrency [--chunks 10000] [--queries 1000] [--threads 1,2,4]
                                           [--rounds 5] [--embedding deterministic|onnx] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

# lexbench pins every numeric library to one thread through environment variables when
# imported; this benchmark measures the library's own pinning, so they are put back.
from ragspine_tools.bench import lexbench  # noqa: E402

lexbench.unpin_threads()


from ragspine_tools.bench.lexbench.corpus import DEFAULT_SEED, SyntheticConfig, synthetic_corpus  # noqa: E402
from ragspine_tools.bench.lexbench.measure import machine_description  # noqa: E402

LIBRARY_ID = "concurrencybench"
#: the background threads that compile the numba kernels (BM25, the query kernels)
JIT_THREADS = ("ragspine-bm25-jit", "ragspine-query-jit")
TOP_K = 10
WARMUP = 50


def _log(msg: str) -> None:
    print(f"[bench-concurrency] {msg}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench_concurrency", description="queries/s of auto-mode search on 1 vs N threads")
    p.add_argument("--chunks", type=int, default=10_000, help="synthetic passages (one chunk each); default 10000")
    p.add_argument("--queries", type=int, default=1_000, help="queries per run; default 1000")
    p.add_argument("--threads", default="1,2", help="comma list of thread counts; default 1,2 (the first is the baseline)")
    p.add_argument("--modes", default="auto,bm25", help="retrieval modes to measure; default auto,bm25")
    p.add_argument("--rounds", type=int, default=5, help="runs per configuration, alternating; the median counts (default 5)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout (progress goes to stderr)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--embedding", default="deterministic",
                   help="the library's embedding spec (default deterministic: hashed vectors, the query "
                        "embedding costs ~35 µs of Python; onnx: the packaged MiniLM, as an English user runs it)")
    return p


def write_raw_library(raw_dir: Path, texts: list[str]) -> None:
    raw_dir.mkdir(parents=True, exist_ok=True)
    (raw_dir / "_library.toml").write_text("max_chars = 8000\noverlap_chars = 0\nsummarizer = \"none\"\n", encoding="utf-8")
    with open(raw_dir / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"doc_id": f"c{i:07d}", "title": " ".join(text.split()[:4]), "text": text,
                                "sensitivity": "INTERNAL"}) + "\n")


def run_threads(retriever, queries: list[str], n_threads: int) -> tuple[float, list[list[str]]]:
    """(seconds, chunk ids per query): ``n_threads`` threads answer ``queries`` together."""
    out: list[list[str] | None] = [None] * len(queries)
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads + 1)

    def work(t: int) -> None:
        try:
            start.wait(timeout=60)
            for i in range(t, len(queries), n_threads):
                out[i] = [h.chunk_id for h in retriever.search(queries[i], top_k=TOP_K)]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(n_threads)]
    for th in threads:
        th.start()
    start.wait(timeout=60)
    t0 = time.perf_counter()
    for th in threads:
        th.join(timeout=600)
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    if any(th.is_alive() for th in threads):
        raise RuntimeError("a query thread did not finish within 600 s")
    return wall, out  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    counts = [int(x) for x in args.threads.split(",") if x.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_index.machine import configure_machine
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig
    from ragspine_core.dense.embedding import EmbeddingSpec
    from ragspine_core.settings import Settings
    from ragspine_core.runtime.kernels import compile_query_kernels, kernel_state
    from ragspine_core.runtime.threads import pinned_pools

    load_start = os.getloadavg()
    corpus = synthetic_corpus(SyntheticConfig(n_passages=args.chunks, n_queries=args.queries, seed=args.seed))
    queries = [" ".join(q) for q in corpus.queries]
    with tempfile.TemporaryDirectory(prefix="ragspine-concurrency-") as tmp:
        scratch = Path(tmp)
        raw = scratch / "raw" / LIBRARY_ID
        write_raw_library(raw, corpus.texts)
        _log(f"build_library({LIBRARY_ID!r}, embedding={args.embedding!r}) over {args.chunks:,} passages")
        settings = Settings.from_env()  # this tool's edge
        configure_machine(settings)  # RAGSPINE_INGEST_WORKERS for build_library's steps
        t0 = time.perf_counter()
        res = build_library(LibraryPaths(LIBRARY_ID, raw, scratch / "artifacts" / LIBRARY_ID), embedding=EmbeddingSpec.from_settings(settings, backend=args.embedding),
                            cache_path=scratch / "embedding-cache.sqlite", run_id="bench-concurrency")
        build_s = time.perf_counter() - t0
        lib = open_library(res.snapshot_dir)
        retrievers = {m: HybridRetriever(lib, config=RetrievalConfig(mode=m)) for m in modes}
        for r in retrievers.values():
            for q in queries[:WARMUP]:
                r.search(q, top_k=TOP_K)
        # the compiled kernels (numba, extra accel) start compiling off the query thread
        # during the warm-up: measure once they answer
        kernels = compile_query_kernels()
        for th in threading.enumerate():
            if th.name in JIT_THREADS:
                th.join(timeout=600)
        for r in retrievers.values():
            for q in queries[:WARMUP]:
                r.search(q, top_k=TOP_K)
        pools = pinned_pools()
        qps: dict[str, dict[int, list[float]]] = {m: {n: [] for n in counts} for m in modes}
        same: dict[str, dict[int, bool]] = {m: {n: True for n in counts} for m in modes}
        reference = {m: run_threads(retrievers[m], queries, 1)[1] for m in modes}
        for rnd in range(args.rounds):
            _log(f"round {rnd + 1}/{args.rounds}")
            for m in modes:
                for n in counts:
                    wall, ids = run_threads(retrievers[m], queries, n)
                    qps[m][n].append(len(queries) / wall)
                    same[m][n] = same[m][n] and ids == reference[m]
    base = counts[0]
    result = {
        "benchmark": "concurrency",
        "machine": machine_description(),
        "cpu_count": os.cpu_count(),
        "chunks": lib.n_chunks,
        "embedding": args.embedding,
        "queries": len(queries),
        "rounds": args.rounds,
        "build_s": round(build_s, 2),
        "thread_pools": pools,
        "query_kernels": kernel_state() if kernels else f"{kernel_state()} (numpy code: numba missing or RAGSPINE_QUERY_JIT=0)",
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "modes": {
            m: {
                "qps_median": {str(n): round(statistics.median(v), 1) for n, v in qps[m].items()},
                "qps_rounds": {str(n): [round(x, 1) for x in v] for n, v in qps[m].items()},
                "ratio_vs_1_thread": {str(n): round(statistics.median(qps[m][n]) / statistics.median(qps[m][base]), 3)
                                      for n in counts},
                "rankings_identical": same[m],
            }
            for m in modes
        },
    }
    if "auto" in modes and 2 in counts and base == 1:
        result["goal_auto_2_threads_ge_1.6x"] = result["modes"]["auto"]["ratio_vs_1_thread"]["2"] >= 1.6
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for m in modes:
            f = result["modes"][m]
            _log(f"{m}: qps {f['qps_median']} ratio {f['ratio_vs_1_thread']} identical {f['rankings_identical']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
