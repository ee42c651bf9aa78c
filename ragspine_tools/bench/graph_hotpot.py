"""HotpotQA multi-hop retrieval with the relation graph: modes, tuning grid, latency, build cost.

    python -m ragspine_tools.bench.graph_hotpot eval  --dataset ../shared/datasets/hotpotqa-dev --out /tmp/graph-hotpot
    python -m ragspine_tools.bench.graph_hotpot tune  --dataset ../shared/datasets/hotpotqa-dev --out /tmp/graph-hotpot
    python -m ragspine_tools.bench.graph_hotpot build --chunks 10000 100000
    python -m ragspine_tools.bench.graph_hotpot rules --library DIR --graph-out /tmp/g   # this code's entity rules, BM25 + graph

``eval``/``tune`` index the dataset exactly as ``ragspine eval`` does (same cache key, so
they reuse its index) and score document-level nDCG@10, Recall@2/@5, both@5/@10 per
question type. hotpotqa-dev has one split, so ``tune`` uses a fixed *tuning* subset (the
300 queries with the smallest sha256("graph-tune:" + id)) and reports the other 700
(*held* subset) separately; the defaults in ``GraphChannelConfig`` were picked on the
tuning subset only (a config may also carry ``rrf_k`` and ``weights`` of the
RetrievalConfig; each query's channel rankings are computed once per graph configuration and
reused by the configs that change only the fusion: ``stage_weight``, ``stage_rrf_k``, …). ``build`` times the graph build on synthetic chunks: wall and CPU
seconds (the CPU figure is the one to compare on a loaded machine), peak RSS, in a child
process per size. ``rules`` builds the relation graph of an already built hotpotqa-dev
library (``ragspine eval … --embedding none --out OUT``; ``--library`` names its
``OUT/hotpotqa-dev-<key>`` folder) with *this* checkout's entity rules into ``--graph-out``
and scores graph mode over it (``ragspine eval``'s retriever, the library's own graph
swapped for the new one) on the tuning, held and all questions: a rule change is measured
without re-indexing (run it from a checkout of another commit to compare rules).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ragspine_tools.bench import checkout_root  # noqa: E402
from ragspine_core.settings import Settings
REPO = checkout_root()


def split_ids(qids, n_tune=300):
    order = sorted(qids, key=lambda q: hashlib.sha256(f"graph-tune:{q}".encode()).hexdigest())
    return set(order[:n_tune]), set(order[n_tune:])


def open_eval_library(dataset: Path, out: Path, embedding: str = "auto"):
    from ragspine_tools.evaluate import ensure_index, prepare_library
    from ragspine_query.library import open_library

    # the summary tree serves none of these modes: skip building it (its own key in the cache)
    paths = prepare_library(dataset, out, quiet=True, chunker_options={"summarizer": "none"})
    ensure_index(paths, embedding=embedding, quiet=False)
    return open_library(paths.root)


def subset(dataset, qids):
    import dataclasses

    return dataclasses.replace(dataset, queries={q: dataset.queries[q] for q in qids},
                               qrels={q: dataset.qrels[q] for q in qids})


def retriever_for(lib, mode, backend, **graph_kw):
    from ragspine_query.graph import GraphChannelConfig
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    weights = graph_kw.pop("weights", None)
    extra = {"rrf_k": graph_kw.pop("rrf_k")} if "rrf_k" in graph_kw else {}
    cfg = RetrievalConfig(mode=mode, graph=GraphChannelConfig(**graph_kw) if mode == "graph" else None,
                          channel_weights=weights or (), **extra)
    return HybridRetriever(lib, embedding_backend=None if mode == "bm25" else backend, config=cfg)


#: channel rankings already computed in this process: (channel, its ranking knobs, query, depth) ->
#: (rows, scores). A ``tune`` grid over fusion knobs then runs each query's channels once.
_RANKINGS: dict = {}
#: GraphChannelConfig fields that change only how the graph's ranking is fused, not the ranking
FUSION_ONLY = ("fusion_weight", "fusion_rrf_k", "stage_weight", "stage_rrf_k", "stage_keep_head")


class MemoChannel:
    """A channel whose rankings are remembered in :data:`_RANKINGS` (the same rows and scores)."""

    def __init__(self, inner, key):
        self._inner, self._key = inner, key
        self.name = inner.name

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def search(self, query, depth, allowed):
        key = (self.name, self._key, str(query), depth, None if allowed is None else hash(allowed.tobytes()))
        if key not in _RANKINGS:
            _RANKINGS[key] = self._inner.search(query, depth, allowed)
        return _RANKINGS[key]


def memoise_channels(retriever, graph_kw):
    knobs = json.dumps({k: v for k, v in sorted(graph_kw.items()) if k not in FUSION_ONLY}, default=str)
    retriever.channels = [MemoChannel(c, knobs if c.name == "graph" else "") for c in retriever.channels]


def evaluate(lib, dataset, subsets, types, mode, backend, **kw):
    """Run every query of the union of ``subsets`` once; metrics per named subset."""
    from ragspine_tools.evaluate import run_queries
    from ragspine_tools.eval.metrics import evaluate_run

    every = set().union(*subsets.values())
    graph_kw = {k: v for k, v in kw.items() if k not in ("weights", "rrf_k")}
    r = retriever_for(lib, mode, backend, **kw)
    memoise_channels(r, graph_kw)
    run, spq = run_queries(r, subset(dataset, every), quiet=True)
    res = {}
    for name, ids in subsets.items():
        rep = evaluate_run({q: run[q] for q in ids if q in run}, {q: dataset.qrels[q] for q in ids})
        out = {k: round(v, 4) for k, v in rep.to_dict().items()}
        out["ms_per_query"] = round(spq * 1000, 1)
        out["by_type"] = {t: {k: round(v, 4) for k, v in m.items()} for t, m in rep.by_group(types).items()}
        res[name] = out
    return res


def channel_latency(lib, dataset, qids, backend, **kw):
    r = retriever_for(lib, "graph", backend, **kw)
    ch = [c for c in r.channels if c.name == "graph"][0]
    times = []
    for q in sorted(qids):
        t0 = time.perf_counter()
        ch.search(dataset.queries[q], 100, None)
        times.append(time.perf_counter() - t0)
    t = np.asarray(times) * 1000
    return {"p50_ms": round(float(np.percentile(t, 50)), 2), "p99_ms": round(float(np.percentile(t, 99)), 2),
            "n": len(times), "store": ch.store.backend}


def cmd_eval(args, grid=False):
    from ragspine_tools.evaluate import query_types
    from ragspine_tools.eval.beir import load_beir
    from ragspine_query.agent_api import backend_for_library

    dataset = load_beir(Path(args.dataset), "test")
    types = query_types(Path(args.dataset))
    lib = open_eval_library(Path(args.dataset), Path(args.out))
    backend = backend_for_library(lib, "hybrid", settings=Settings.from_env())
    tune, held = split_ids(dataset.query_ids)
    results = {}

    def save():
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(results, indent=1))

    if not grid:
        for mode in args.modes.split(","):
            results[mode] = evaluate(lib, dataset, {"tune": tune, "held": held, "all": tune | held}, types, mode, backend)
            print(mode, json.dumps(results[mode]), flush=True)
            save()
        results["graph_channel_latency"] = channel_latency(lib, dataset, tune | held, backend)
        print(json.dumps(results["graph_channel_latency"]), flush=True)
    else:
        configs = json.loads(args.configs) if args.configs else [{}]
        for cfg in configs:
            res = evaluate(lib, dataset, {"tune": tune}, types, "graph", backend, **cfg)["tune"]
            print(json.dumps(cfg), json.dumps({k: res[k] for k in ("ndcg@10", "recall@2", "recall@5", "both@5", "both@10", "ms_per_query")}), flush=True)
            results[json.dumps(cfg)] = res
            save()
    save()


def synthetic_chunks(n: int, seed: int = 0):
    from ragspine_index.graph.graph_input import GraphChunk

    rng = np.random.default_rng(seed)
    syll = ["an", "bel", "cor", "dru", "el", "fa", "gor", "hal", "is", "jun", "ka", "lor", "mi", "nor", "os", "pra", "qui", "ran", "sel", "tor"]
    n_names = max(n // 2, 10)
    names = [" ".join("".join(rng.choice(syll, 2)).capitalize() for _ in range(int(rng.integers(1, 3)))) for _ in range(n_names)]
    words = "the of and a in was is for on by with as from that his her their it which".split()
    out = []
    for i in range(n):
        title = names[i % n_names]
        body = []
        for _ in range(int(rng.integers(40, 70))):
            body.append(names[int(rng.integers(n_names))] if rng.random() < 0.12 else str(rng.choice(words)))
        out.append(GraphChunk(i, f"c{i:08d}", f"d{i // 2}", f"{title} " + " ".join(body) + ".", title, "", "PUBLIC"))
    return out


def cmd_build(args):
    for n in args.chunks:
        code = ("import sys,time,resource,json,tempfile\n"
                "from pathlib import Path\nfrom ragspine_tools.bench.graph_hotpot import synthetic_chunks\n"
                "from ragspine_index.graph.build import build_relation_graph\n"
                "import os\nch=synthetic_chunks(%d); base=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
                "r0=resource.getrusage(resource.RUSAGE_SELF); t=time.perf_counter(); p=build_relation_graph(Path(tempfile.mkdtemp()), ch)\n"
                "s=time.perf_counter()-t; r1=resource.getrusage(resource.RUSAGE_SELF)\n"
                "cpu=(r1.ru_utime-r0.ru_utime)+(r1.ru_stime-r0.ru_stime)\n"
                "print(json.dumps({'chunks': %d, 'seconds': round(s,1), 'cpu_seconds': round(cpu,1), "
                "'peak_rss_mb': round(r1.ru_maxrss/1024), 'rss_before_build_mb': round(base/1024), "
                "'load_avg_1m': round(os.getloadavg()[0],1), 'counts': p['counts']}))") % (n, n)
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
        print(res.stdout.strip() or res.stderr[-2000:], flush=True)


def cmd_rules(args):
    """Build the graph of ``--library``'s chunks with this checkout's rules; score BM25 + graph over it."""

    from ragspine_tools.evaluate import query_types, run_queries
    from ragspine_index.graph.build import build_relation_graph
    from ragspine_index.graph.graph_config import GraphConfig
    from ragspine_index.graph.graph_input import read_graph_chunks
    from ragspine_tools.eval.beir import load_beir
    from ragspine_tools.eval.metrics import evaluate_run
    from ragspine_query.library import Library
    from ragspine_core.settings import Settings
    from ragspine_query.builder import PipelineSpec, build_pipeline

    dataset_dir = Path(args.dataset)
    currents = sorted(Path(args.library).glob("artifacts/*/current"))
    if not currents:
        raise SystemExit(f"{args.library}: no artifacts/<library>/current: build it first with "
                         "`ragspine eval <dataset> --mode bm25 --embedding none --out OUT`")
    root = currents[0].parent
    graph_dir = Path(args.graph_out)
    t0 = time.perf_counter()
    chunks = read_graph_chunks(currents[0].resolve() / "chunks.sqlite")
    params = build_relation_graph(graph_dir, chunks, config=GraphConfig(communities="off"))
    print(json.dumps({"graph": str(graph_dir), "seconds": round(time.perf_counter() - t0, 1), "counts": params["counts"]}),
          flush=True)
    original = Library.artifact_path

    def artifact_path(self, name):  # the library's own graph replaced by the one just built
        return graph_dir if name == "relation_graph" else original(self, name)

    Library.artifact_path = artifact_path
    try:
        dataset = load_beir(dataset_dir, "test")
        types = query_types(dataset_dir)
        tune, held = split_ids(dataset.query_ids)
        settings = Settings.from_env()  # the bench's edge: the environment, read once
        pipeline = build_pipeline(root, PipelineSpec.from_settings(settings).replace(mode="graph"), settings=settings,
                                  embedding_backend=None)
        run, _ = run_queries(pipeline, dataset, quiet=True)
    finally:
        Library.artifact_path = original
    out = {}
    for name, ids in (("tune", tune), ("held", held), ("all", tune | held)):
        rep = evaluate_run({q: run[q] for q in ids}, {q: dataset.qrels[q] for q in ids})
        keep = ("ndcg@10", "recall@2", "recall@5", "both@5", "both@10")
        out[name] = {k: round(v, 4) for k, v in rep.to_dict().items() if k in keep}
        out[name]["by_type"] = {t: {k: round(v, 4) for k, v in m.items() if k in ("recall@5", "both@5")}
                                for t, m in rep.by_group(types).items()}
    print(json.dumps(out), flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"metrics": out, "run": run}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["eval", "tune", "build", "rules"])
    p.add_argument("--dataset", default=str(REPO.parent / "shared" / "datasets" / "hotpotqa-dev"))
    p.add_argument("--out", default="/tmp/graph-hotpot")
    p.add_argument("--configs", default="", help="tune: JSON list of GraphChannelConfig kwargs (+ 'weights')")
    p.add_argument("--json-out", default="")
    p.add_argument("--modes", default="bm25,hybrid,graph", help="eval: modes, comma-separated")
    p.add_argument("--chunks", type=int, nargs="*", default=[10000, 100000])
    p.add_argument("--library", default="", help="rules: the OUT/hotpotqa-dev-<key> folder `ragspine eval --out OUT` built")
    p.add_argument("--graph-out", default="/tmp/graph-rules", help="rules: where the rebuilt graph goes")
    args = p.parse_args()
    if args.command == "build":
        cmd_build(args)
    elif args.command == "rules":
        cmd_rules(args)
    else:
        cmd_eval(args, grid=args.command == "tune")


if __name__ == "__main__":
    main()
