"""``ragspine bench``: our lexical index side by side with bm25s and tantivy.

One process, one corpus, the same token lists and queries for every engine:

* ``ours`` — :func:`build_bm25_arrays` + ``write_bm25_arrays``, re-opened with
  ``BM25Index.load`` (memory-mapped) and queried through ``BM25Index.search(tokens,
  k=10)``, one query per call;
* ``bm25s-numpy`` / ``bm25s-numba`` — bm25s with ``method="lucene"``, k1=1.5, b=0.75,
  saved and re-loaded with ``mmap=True`` (the numba JIT on the first query is reported
  as part of the cold start, not the throughput);
* ``tantivy`` — tantivy-py (Rust); its BM25 is fixed at k1=1.2, so its scores and some
  rankings differ by design.

A tiny exact float64 BM25 (:mod:`lexbench.reference`) checks each engine's top-10
against the same k1/b, tie-aware. Everything runs on one thread (``*_NUM_THREADS=1``).

Usage::

    ragspine bench [--corpus synthetic-100k|synthetic-10k|scifact] [--queries 1000]
                   [--passages N] [--engines ours,bm25s-numpy,bm25s-numba,tantivy]
                   [--rounds 3] [--cold-start all|ours|none] [--no-tracemalloc]
                   [--json] [--out DIR] [--ingest [--ingest-docs 10000]] [--skip-lexical]
    ragspine bench --hybrid [--chunks 100000] [--queries 300] ...   # bench_hybrid.py
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import lexbench  # noqa: E402,F401  (pins numeric libraries to one thread)

import numpy as np  # noqa: E402  (after lexbench pinned the threads)


from lexbench.corpus import DEFAULT_SEED, Corpus, SyntheticConfig, scifact_corpus, stop_word_queries, synthetic_corpus  # noqa: E402
from lexbench.engines import ENGINE_NAMES, Engine, Tantivy, make_engines, time_queries  # noqa: E402
from lexbench.measure import dir_size_mb, latency_stats, machine_description, peak_rss, traced_peak  # noqa: E402
from lexbench.reference import ReferenceBM25, agreement  # noqa: E402
from lexbench.report import render_markdown, summary_lines, write_report  # noqa: E402

CORPORA = ("synthetic-100k", "synthetic-10k", "scifact")
DEFAULT_OUT = HERE / "reports"
SCIFACT_DIR = REPO.parent / "shared" / "datasets" / "scifact"
WARMUP_QUERIES = 20
BLOCK = 100  # queries an engine runs before the next engine's turn
QUERY_SETS = ("normal", "stop")


def _log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragspine bench", description="lexical index benchmark: ours vs bm25s vs tantivy")
    p.add_argument("--corpus", choices=CORPORA, default="synthetic-100k")
    p.add_argument("--passages", type=int, default=None, help="override the synthetic corpus size (e.g. 5000 for a smoke run)")
    p.add_argument("--analyzer", choices=("spec", "english"), default="spec",
                   help="tokenizer for documents and queries (default spec; english = stop words out + Snowball stems)")
    p.add_argument("--queries", type=int, default=1000, help="queries per set (normal and stop-word-heavy); default 1000")
    p.add_argument("--engines", default=",".join(ENGINE_NAMES), help=f"comma list from {','.join(ENGINE_NAMES)}")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout (progress goes to stderr)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the Markdown and JSON reports go (default benchmarks/reports/)")
    p.add_argument("--rounds", type=int, default=3, help="timed passes per engine and query set, interleaved; the fastest counts (default 3)")
    p.add_argument("--cold-start", choices=("all", "ours", "none"), default="all",
                   help="which engines get fresh-process cold-start runs (default all; bm25s-numba's includes its ~5 s JIT)")
    p.add_argument("--no-tracemalloc", action="store_true", help="skip the second, tracemalloc-instrumented builds")
    p.add_argument("--ingest", action="store_true", help="also measure end-to-end ingest through Dagster")
    p.add_argument("--ingest-docs", type=int, default=10_000, help="documents in the ingest run (default 10000)")
    p.add_argument("--skip-lexical", action="store_true", help="only the --ingest measurement")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--no-jit", action="store_true",
                   help="numpy only: never compile the numba sparse kernel (BM25Index.JIT_AFTER = None)")
    p.add_argument("--hybrid", action="store_true",
                   help="run the hybrid query-latency benchmark instead (bench_hybrid.py; the other arguments go to it)")
    return p


def load_corpus(args: argparse.Namespace) -> Corpus | None:
    from ragspine_core.text.tokenize import make_analyzer

    if args.corpus == "scifact":
        if not (SCIFACT_DIR / "corpus.jsonl").exists() or not (SCIFACT_DIR / "queries.jsonl").exists():
            return None
        return scifact_corpus(SCIFACT_DIR, make_analyzer(args.analyzer), args.queries)
    n = args.passages or (100_000 if args.corpus == "synthetic-100k" else 10_000)
    return synthetic_corpus(SyntheticConfig(n_passages=n, n_queries=args.queries, seed=args.seed))


def prepare_engine(engine: Engine, token_lists, query_sets: dict[str, list[list[str]]], args, scratch: Path) -> tuple[dict, dict]:
    """Build, re-open and warm up one engine; returns (figures, prepared queries per set)."""
    res: dict = {"label": engine.label, "k1": engine.k1, "b": 0.75, "notes": engine.notes}
    gc.collect()
    _log(f"{engine.name}: build")
    with peak_rss() as mem:
        t0 = time.perf_counter()
        engine.build(token_lists)
        res["build_s"] = round(time.perf_counter() - t0, 3)
    res["build_rss_delta_mb"] = round(mem.delta_mb, 1)
    res["index_mb"] = round(dir_size_mb(engine.index_dir), 2)
    if not args.no_tracemalloc and engine.name in ("ours", "bm25s-numpy"):
        traced = type(engine)(scratch / "traced")
        gc.collect()
        with traced_peak() as peak:
            traced.build(token_lists)
        res["build_tracemalloc_mb"] = round(peak[0], 1)
        shutil.rmtree(traced.index_dir, ignore_errors=True)
    gc.collect()
    prepared = {name: [engine.prepare(q) for q in qs] for name, qs in query_sets.items()}
    with peak_rss() as warm:
        t0 = time.perf_counter()
        engine.open()
        res["open_s"] = round(time.perf_counter() - t0, 4)
        t0 = time.perf_counter()
        first = engine.search(prepared["normal"][0])
        res["first_query_s"] = round(time.perf_counter() - t0, 4)
        for q in prepared["normal"][:WARMUP_QUERIES] + prepared["stop"][:WARMUP_QUERIES]:
            engine.search(q)
    # open + warm-up: pages of the index read so far, caches, scratch buffers, JIT code
    res["open_warm_rss_delta_mb"] = round(warm.delta_mb, 1)
    if isinstance(engine, Tantivy) and engine.single_segment and not engine.check_rows(first):
        engine.single_segment = False
    return res, prepared


def time_rounds(engines: list[Engine], prepared: dict[str, dict[str, list]], figures: dict, rounds: int) -> dict[str, dict[str, list[list[int]]]]:
    """Time every engine on every query set, one query per call, on this thread.

    The machine may be shared, and a query that straddles a scheduler time slice is
    charged milliseconds of someone else's work. So each set runs ``rounds`` times,
    engines taking turns every ``BLOCK`` queries (all see the same neighbours), and a
    query's latency is its median over the rounds (a preemption rarely hits it twice).
    QPS = queries ÷ the sum of those medians; ``qps_best_round`` is the raw figure
    (queries ÷ summed latencies of the fastest round) and ``p99_raw_ms`` the raw tail.
    """
    rows: dict[str, dict[str, list[list[int]]]] = {s: {e.name: [] for e in engines} for s in QUERY_SETS}
    lat: dict[tuple[str, str], list[list[float]]] = {}
    cpu: dict[tuple[str, str], list[list[float]]] = {}
    rss: dict[tuple[str, str], float] = {}
    for r in range(rounds):
        for qset in QUERY_SETS:
            n = len(prepared[engines[0].name][qset]) if engines else 0
            _log(f"round {r + 1}/{rounds}: {n} {qset} queries per engine, one per call, engines alternating every {BLOCK}")
            for engine in engines:
                lat.setdefault((engine.name, qset), []).append([])
                cpu.setdefault((engine.name, qset), []).append([])
            for start in range(0, n, BLOCK):
                for engine in engines:
                    key = (engine.name, qset)
                    with peak_rss() as qmem:
                        block_lat, block_cpu, out = time_queries(engine, prepared[engine.name][qset][start : start + BLOCK])
                    lat[key][-1].extend(block_lat)
                    cpu[key][-1].extend(block_cpu)
                    rss[key] = max(rss.get(key, 0.0), qmem.delta_mb)
                    if r == 0:
                        rows[qset][engine.name].extend(out)
    for engine in engines:
        for qset in QUERY_SETS:
            key = (engine.name, qset)
            per_round = np.asarray(lat[key])
            stats = latency_stats(np.median(per_round, axis=0).tolist())
            cpu_med = np.median(np.asarray(cpu[key]), axis=0)
            stats["cpu_qps"] = round(cpu_med.shape[0] / float(cpu_med.sum()), 1) if cpu_med.sum() > 0 else None
            stats["qps_best_round"] = round(float(per_round.shape[1] / per_round.sum(axis=1).min()), 1)
            stats["p99_raw_ms"] = round(float(np.percentile(per_round, 99)) * 1e3, 4)
            stats["rss_delta_mb"] = round(rss[key], 1)
            stats["rounds"] = rounds
            qs = prepared[engine.name][qset]
            t0 = time.perf_counter()
            engine.batch(qs)
            batch_s = time.perf_counter() - t0
            stats["batch_qps"] = round(len(qs) / batch_s, 1) if batch_s > 0 else None
            stats["batch_api"] = engine.has_batch_api
            figures[engine.name][qset] = stats
    return rows


def _ratio(a, b) -> float | None:
    return round(a / b, 3) if a and b else None


def compute_ratios(engines: dict) -> dict:
    def qps(name, qset, key="qps"):
        e = engines.get(name) or {}
        return (e.get(qset) or {}).get(key)

    out: dict = {}
    ours = engines.get("ours") or {}
    for qset, suffix in (("normal", ""), ("stop", "_stop")):
        bm = [q for q in (qps("bm25s-numpy", qset), qps("bm25s-numba", qset)) if q]
        out[f"qps_ratio{suffix}"] = _ratio(qps("ours", qset), max(bm)) if bm else None
        out[f"qps_ratio_vs_tantivy{suffix}"] = _ratio(qps("ours", qset), qps("tantivy", qset))
    for qset, suffix in (("normal", ""), ("stop", "_stop")):
        bm = [q for q in (qps("bm25s-numpy", qset, "cpu_qps"), qps("bm25s-numba", qset, "cpu_qps")) if q]
        out[f"cpu_qps_ratio{suffix}"] = _ratio(qps("ours", qset, "cpu_qps"), max(bm)) if bm else None
    for qset, suffix in (("normal", ""), ("stop", "_stop")):
        # the query path a notebook user runs (open_library + HybridRetriever, bm25) vs bm25s-numba
        out[f"qps_ratio_query_path{suffix}"] = _ratio(qps("query-path", qset), qps("bm25s-numba", qset))
    builds = [engines[n]["build_s"] for n in ("bm25s-numpy", "bm25s-numba") if "build_s" in engines.get(n, {})]
    out["build_speed_ratio"] = _ratio(min(builds), ours.get("build_s")) if builds and ours.get("build_s") else None
    out["build_speed_ratio_vs_tantivy"] = _ratio((engines.get("tantivy") or {}).get("build_s"), ours.get("build_s"))
    return out


def goals(engines: dict, ratios: dict) -> dict:
    ours = engines.get("ours") or {}
    cold = (ours.get("cold_start") or {}).get("total_s")
    stop_qps = (ours.get("stop") or {}).get("qps")
    agree = [(ours.get(s) or {}).get("top10_overlap") for s in QUERY_SETS]
    return {
        "qps_ratio >= 1.0": None if ratios.get("qps_ratio") is None else ratios["qps_ratio"] >= 1.0,
        "cpu_qps_ratio >= 1.0": None if ratios.get("cpu_qps_ratio") is None else ratios["cpu_qps_ratio"] >= 1.0,
        "qps_ratio_query_path >= 1.0": None if ratios.get("qps_ratio_query_path") is None else ratios["qps_ratio_query_path"] >= 1.0,
        "cold start < 0.5 s": None if cold is None else cold < 0.5,
        "stop-word QPS >= 2000": None if stop_qps is None else stop_qps >= 2000,
        "top-10 agreement with reference = 1.0": None if None in agree else all(a == 1.0 for a in agree),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns a process exit code."""
    if argv and argv[0] == "--":  # `ragspine bench -- --corpus ...` forwards the separator
        argv = argv[1:]
    raw = list(sys.argv[1:] if argv is None else argv)
    if "--hybrid" in raw:  # the hybrid benchmark has its own options: hand every other argument to it
        from bench_hybrid import main as hybrid_main

        return hybrid_main([a for a in raw if a != "--hybrid"])
    args = build_parser().parse_args(argv)
    if args.no_jit:
        from ragspine_core.lexical.bm25 import BM25Index

        BM25Index.JIT_AFTER = None
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "command": "ragspine bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine_description(),
        "threads": "single (OMP/OPENBLAS/MKL/NUMBA/RAYON_NUM_THREADS=1; bm25s n_threads<=1; tantivy writer num_threads=1)",
    }
    report["load_average_start"] = [round(x, 2) for x in os.getloadavg()]
    report["jit"] = "off (--no-jit)" if args.no_jit else "numba kernel after BM25Index.JIT_AFTER sparse queries when numba is installed"
    with tempfile.TemporaryDirectory(prefix="ragspine-bench-") as tmp:
        scratch = Path(tmp)
        if not args.skip_lexical:
            corpus = load_corpus(args)
            if corpus is None:
                msg = f"SciFact not found at {SCIFACT_DIR} (needs corpus.jsonl and queries.jsonl); skipping — see ../shared/datasets/README.md"
                _log(msg)
                report["skipped"] = msg
            else:
                report.update(run_lexical(corpus, args, scratch))
        if args.ingest:
            from lexbench.ingest import measure_ingest

            _log(f"ingest: {args.ingest_docs:,} documents through the Dagster assets")
            report["ingest"] = measure_ingest(scratch / "ingest", args.ingest_docs, args.seed)
    report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    stem = "ingest" if args.skip_lexical else f"lexical_{report.get('corpus', {}).get('name', args.corpus)}"
    if args.analyzer != "spec" and not args.skip_lexical:
        stem += f"-{args.analyzer}"
    return write_report(report, out_dir, stem, as_json=args.json, render=render_markdown, summarize=summary_lines)


def run_lexical(corpus: Corpus, args, scratch: Path) -> dict:
    from ragspine_core.text.tokenize import make_analyzer

    analyzer = make_analyzer(args.analyzer)
    _log(f"corpus {corpus.name}: {corpus.description}")
    t0 = time.perf_counter()
    token_lists = analyzer.many(corpus.texts)
    tokenize_s = time.perf_counter() - t0
    _log("reference BM25 (float64, k1=1.5 b=0.75)")
    t0 = time.perf_counter()
    reference = ReferenceBM25(token_lists, 1.5, 0.75)
    reference_s = time.perf_counter() - t0
    df = {tok: int(reference.indptr[i + 1] - reference.indptr[i]) for tok, i in reference.vocab.items()}
    queries = [q for q in corpus.queries if any(t in df for t in q)][: args.queries]
    stop = stop_word_queries(df, len(queries) or args.queries, seed=args.seed)
    query_sets = {"normal": queries, "stop": stop}
    n_rows = len(token_lists)
    stop_terms = sorted({t for q in stop for t in q}, key=lambda t: -df[t])
    info = {
        "name": corpus.name,
        "description": corpus.description,
        "rows": n_rows,
        "tokens": int(sum(len(t) for t in token_lists)),
        "vocabulary": len(df),
        "analyzer": analyzer.id,
        "tokenize_s": round(tokenize_s, 3),
        "reference_build_s": round(reference_s, 3),
        "queries": {
            "normal": {"n": len(queries), "mean_terms": _mean(len(q) for q in queries),
                       "mean_postings": _mean(sum(df.get(t, 0) for t in q) for q in queries),
                       "how": "2–6 distinct terms drawn Zipf-wise from the vocabulary below the 100 most frequent ranks"
                       if corpus.name.startswith("synthetic") else f"the dataset's queries, analyzer {analyzer.id}"},
            "stop": {"n": len(stop), "mean_terms": _mean(len(q) for q in stop),
                     "mean_postings": _mean(sum(df[t] for t in q) for q in stop),
                     "terms_df": {t: df[t] for t in stop_terms},
                     "how": "3–5 distinct terms drawn uniformly from the 6 highest-df terms"},
        },
    }
    engines_out: dict = {}
    ready: list[Engine] = []
    prepared: dict[str, dict[str, list]] = {}
    for engine in make_engines([e.strip() for e in args.engines.split(",") if e.strip()], scratch):
        why = engine.available()
        if why:
            _log(f"{engine.name}: skipped — {why}")
            engines_out[engine.name] = {"label": engine.label, "skipped": why}
            continue
        engines_out[engine.name], prepared[engine.name] = prepare_engine(engine, token_lists, query_sets, args, scratch)
        ready.append(engine)
    rows_by_set = time_rounds(ready, prepared, engines_out, args.rounds)
    if args.cold_start != "none":
        for engine in (e for e in ready if args.cold_start == "all" or e.name == "ours"):
            _log(f"{engine.name}: cold start (fresh process: import + open + first query)")
            cold = engines_out[engine.name]["cold_start"] = engine.cold_start(query_sets["normal"][0])
            if cold.get("total_s", 99.0) < 2.0:  # cheap enough to repeat with a stop-word query
                engines_out[engine.name]["cold_start_stop"] = engine.cold_start(query_sets["stop"][0])
    _log("top-10 agreement with the reference")
    for s in QUERY_SETS:
        # the query path ranks the library's index text (with its contextual header) by
        # chunk + 2.0 x document BM25: not the plain-BM25 reference, so it is not compared
        plain = {n: r for n, r in rows_by_set[s].items() if n != "query-path"}
        for name, agr in agreement(reference, query_sets[s], plain).items():
            engines_out[name][s].update(agr.as_dict())
    if "tantivy" in rows_by_set["normal"]:
        ref12 = ReferenceBM25(token_lists, 1.2, 0.75)
        for s in QUERY_SETS:
            agr = agreement(ref12, query_sets[s], {"tantivy": rows_by_set[s]["tantivy"]})["tantivy"]
            engines_out["tantivy"][s]["top10_overlap_vs_k1_1.2"] = round(agr.overlap, 6)
    ratios = compute_ratios(engines_out)
    return {"corpus": info, "engines": engines_out, **ratios, "goals": goals(engines_out, ratios),
            "warmup_queries": 1 + 2 * WARMUP_QUERIES}


def _mean(values) -> float:
    vals = list(values)
    return round(sum(vals) / len(vals), 1) if vals else 0.0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
