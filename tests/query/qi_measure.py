"""Measure the query-intelligence stages (not a test; run it by hand, see docs/query-intelligence.md).

    python -m tests.query.qi_measure LIBRARY_DIR DATASET_DIR --split test [--limit N] [--mode hybrid|bm25]

Prints nDCG@10 and R@5 (document level, rank-based so that order-only stages count) per
configuration, stage latency p50/p99 with every stage on, and the cache hit rate and
latency on a repeated-query workload.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import defaultdict

import numpy as np

from ragspine_query.cache import ScopedCache
from ragspine_tools.eval.beir import load_beir
from ragspine_tools.eval.metrics import ndcg_at_k, recall_at_k
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.builder import PipelineSpec, build_pipeline
from ragspine_query.library import open_library
from ragspine_query.retriever import HybridRetriever, RetrievalConfig

CONFIGS = {
    "baseline": QueryIntelligence(gate=False),
    "normalize": QueryIntelligence(gate=False, transforms="normalize"),
    "decompose(rules)": QueryIntelligence(gate=False, transforms="decompose"),
    "step_back(rules)": QueryIntelligence(gate=False, transforms="step_back"),
    "tiers(rules)": QueryIntelligence(gate=False, tiers="rules"),
    "mmr:0.5": QueryIntelligence(gate=False, postprocessor="mmr:0.5"),
    "mmr:0.7": QueryIntelligence(gate=False, postprocessor="mmr:0.7"),
    "mmr:0.9": QueryIntelligence(gate=False, postprocessor="mmr:0.9"),
    "lost_in_middle": QueryIntelligence(gate=False, postprocessor="lost_in_middle"),
    "corrective(dynamic)": QueryIntelligence(gate=False, corrective="dynamic"),
}


def doc_run(hits) -> dict[str, float]:
    run: dict[str, float] = {}
    for rank, h in enumerate(hits, start=1):
        run.setdefault(h.chunk.doc_id, 1.0 / rank)  # the final order, whatever the stage's scores
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("library")
    ap.add_argument("dataset")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--mode", default="auto")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--no-extras", action="store_true", help="skip the stage latency and cache workloads")
    args = ap.parse_args()
    ds = load_beir(args.dataset, args.split)
    qids = sorted(q for q in ds.qrels if q in ds.queries)
    if args.limit:
        qids = random.Random(7).sample(qids, min(args.limit, len(qids)))
    lib = open_library(args.library)
    src = HybridRetriever(lib, config=RetrievalConfig(mode=args.mode))
    out = {"mode": src.active_mode, "queries": len(qids), "configs": {}}
    for name in args.configs.split(","):
        idx = build_pipeline(src, PipelineSpec(intelligence=CONFIGS[name]), glossary=None)
        nd, r5, secs, refused = [], [], [], 0
        for q in qids:
            t0 = time.perf_counter()
            hits = idx.search(ds.queries[q], top_k=10)
            secs.append(time.perf_counter() - t0)
            refused += getattr(hits, "refusal", None) is not None
            run = doc_run(hits)
            nd.append(ndcg_at_k(run, ds.qrels[q], 10))
            r5.append(recall_at_k(run, ds.qrels[q], 5))
        out["configs"][name] = {"ndcg@10": round(float(np.mean(nd)), 4), "r@5": round(float(np.mean(r5)), 4),
                                "p50_ms": round(1e3 * statistics.median(secs), 2), "refused": refused}
        print(name, out["configs"][name], flush=True)
    if args.no_extras:
        print(json.dumps(out, indent=1))
        return
    # stage latency with every deterministic stage on
    every = QueryIntelligence(transforms="normalize,decompose,step_back", tiers="rules", postprocessor="mmr,lost_in_middle,compress",
                              corrective="dynamic")
    idx = build_pipeline(src, PipelineSpec(intelligence=every), glossary=None)
    per: dict[str, list[float]] = defaultdict(list)
    for q in qids[:200]:
        res = idx.search(ds.queries[q], top_k=10, explain=True)
        acc: dict[str, float] = defaultdict(float)
        for s in res.explain.stages:
            acc[f"{s.stage}:{s.name}"] += s.seconds
        for k, v in acc.items():
            per[k].append(v)
    out["stage_ms"] = {k: {"p50": round(1e3 * float(np.percentile(v, 50)), 3), "p99": round(1e3 * float(np.percentile(v, 99)), 3)}
                       for k, v in sorted(per.items())}
    # cache: a repeated-query workload (Zipf-like: 1000 requests over the first 100 queries)
    rng = random.Random(11)
    pool = [ds.queries[q] for q in qids[:100]]
    weights = [1.0 / (i + 1) for i in range(len(pool))]
    workload = rng.choices(pool, weights=weights, k=1000)
    cache = ScopedCache(256, 300.0)
    cached = build_pipeline(src, PipelineSpec(intelligence=QueryIntelligence(cache_size=256)), glossary=None, cache=cache)
    lat_hit, lat_miss = [], []
    for q in workload:
        before = cache.hits
        t0 = time.perf_counter()
        cached.search(q, top_k=10)
        (lat_hit if cache.hits > before else lat_miss).append(time.perf_counter() - t0)
    out["cache"] = {"requests": len(workload), "hit_rate": round(cache.hit_rate, 3),
                    "hit_p50_ms": round(1e3 * statistics.median(lat_hit), 4), "miss_p50_ms": round(1e3 * statistics.median(lat_miss), 3)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
