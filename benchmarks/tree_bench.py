"""Summary-tree measurements: build time and peak memory, LLM calls on a re-run, retrieval with the tree channel.

    python benchmarks/tree_bench.py synthetic --n 100000           # build time / peak RSS, extractive, hashed-lexical vectors
    python benchmarks/tree_bench.py beir ../shared/datasets/scifact --out /tmp/tree-sci \\
        --cache /tmp/evalsci/cache/embeddings.sqlite --splits train,test   # build + tree off/collapsed/traversal
    python benchmarks/tree_bench.py beir ../shared/datasets/hotpotqa-dev --out /tmp/tree-hotpot-bm25 \
        --cache /tmp/tree-hotpot/cache/embeddings.sqlite --embedding none --mode bm25   # BM25 + hashed-lexical tree

Peak memory is the process's resident high-water mark while the step runs (Linux:
``/proc/self/clear_refs`` resets it before the step; ``VmHWM`` is read after).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def synthetic(n: int, seed: int = 7) -> dict:
    from ragspine_assets.indexing.artifacts import LibraryPaths
    from ragspine_assets.indexing.summarizers import ExtractiveSummarizer
    from ragspine_assets.indexing.summary_tree import LEXICAL_VECTOR_DIM, Leaves, TreeParams, build_summary_tree
    from ragspine_query.dense.deterministic import DeterministicEmbeddingBackend

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    topics = [rng.sample(vocab, 40) for _ in range(400)]
    texts = []
    for i in range(n):
        t = topics[i % len(topics)]
        texts.append(" ".join(" ".join(rng.choice(t) if rng.random() < 0.6 else rng.choice(vocab) for _ in range(12)) + "."
                              for _ in range(5)))
    root = Path(f"/tmp/tree-bench-synth-{n}")
    shutil.rmtree(root, ignore_errors=True)
    paths = LibraryPaths("synth", root / "raw", root / "art")
    leaves = Leaves(np.arange(n, dtype=np.int32), tuple(f"c{i:07d}" for i in range(n)), tuple(f"d{i // 4}" for i in range(n)),
                    tuple(texts))
    backend = DeterministicEmbeddingBackend(dim=LEXICAL_VECTOR_DIM)
    embed = lambda ts: np.asarray(backend.embed(list(ts), kind="passage"), dtype=np.float32)  # noqa: E731
    base = _rss_kb("VmRSS")
    _reset_peak()
    t0 = time.perf_counter()
    vectors = embed(texts)
    t_embed = time.perf_counter() - t0
    ref = build_summary_tree(paths, leaves, vectors, embed=embed, vector_kind=f"lexical:{backend.model_id}",
                             summarizer=ExtractiveSummarizer(), summary_cache_path=None, params=TreeParams(),
                             input_hash=f"synthetic-{n}-{seed}", store_leaf_vectors=True,
                             progress=lambda m: print(m, file=sys.stderr, flush=True))
    return {"chunks": n, "embed_leaves_s": round(t_embed, 1), "build_s": round(ref.seconds, 1),
            "peak_rss_mb": round(_rss_kb("VmHWM") / 1024, 1), "rss_before_mb": round(base / 1024, 1),
            "nodes_per_level": list(ref.nodes_per_level), "mean_cluster_size": ref.mean_cluster_size}


def beir(dataset: Path, out: Path, cache: Path, splits: list[str], trees: list[str], embedding: str, mode: str = "hybrid") -> dict:
    from ragspine_assets.evaluate import code_versions, prepare_library, run_queries
    from ragspine_assets.indexing.pipeline import STEP_BY_NAME, StepContext, build_library
    from ragspine_query.eval.beir import load_beir
    from ragspine_query.eval.metrics import evaluate_run
    from ragspine_query.library import open_library
    from ragspine_query.link import backend_for_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    paths = prepare_library(dataset, out, quiet=True)
    t0 = time.perf_counter()
    res = build_library(paths, embedding=embedding, cache_path=cache, run_id="tree-bench", code_versions=code_versions(),
                        progress=lambda m: print(m, file=sys.stderr, flush=True))
    result: dict = {"dataset": dataset.name, "build_total_s": round(time.perf_counter() - t0, 1),
                    "timings_s": {k: round(v, 1) for k, v in res.timings.items()}}
    # the summary tree again, from scratch (its work dir removed), timed with its memory high-water mark
    shutil.rmtree(paths.work / "summary_tree", ignore_errors=True)
    ctx = StepContext(paths=paths, cache_path=cache, embedding=embedding)
    base = _rss_kb("VmRSS")
    _reset_peak()
    t0 = time.perf_counter()
    ref = STEP_BY_NAME["summary_tree"].function(ctx, index_text=res.index_text, chunk_embeddings=res.embeddings,
                                                documents=res.docs).value
    result["summary_tree"] = {"build_s": round(time.perf_counter() - t0, 1), "peak_rss_mb": round(_rss_kb("VmHWM") / 1024, 1),
                              "rss_before_mb": round(base / 1024, 1), "nodes_per_level": list(ref.nodes_per_level),
                              "mean_cluster_size": ref.mean_cluster_size, "compression_ratio": ref.compression_ratio,
                              "summarizer": ref.summarizer_id, "vector_kind": ref.vector_kind, "llm_calls": ref.llm_calls}
    lib = open_library(paths.root)
    backend = backend_for_library(lib, mode, spec=embedding)
    for split in splits:
        data = load_beir(dataset, split)
        for tree in trees:
            retriever = HybridRetriever(lib, embedding_backend=backend, config=RetrievalConfig(mode=mode, tree=tree))
            run, spq = run_queries(retriever, data, quiet=True)
            rep = evaluate_run(run, data.qrels, ks=(5, 10, 100))
            result[f"{split}/{tree}"] = {"ndcg@10": round(rep.means["ndcg@10"], 4), "recall@5": round(rep.means["recall@5"], 4),
                                         "recall@100": round(rep.means["recall@100"], 4), "ms_per_query": round(spq * 1000, 1)}
            print(json.dumps({f"{split}/{tree}": result[f"{split}/{tree}"]}), file=sys.stderr, flush=True)
    lib.close()
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("synthetic")
    s.add_argument("--n", type=int, default=100_000)
    b = sub.add_parser("beir")
    b.add_argument("dataset", type=Path)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--cache", type=Path, required=True, help="embedding cache (reuse an evaluation's)")
    b.add_argument("--splits", default="test")
    b.add_argument("--trees", default="off,collapsed,traversal")
    b.add_argument("--embedding", default="auto")
    b.add_argument("--mode", default="hybrid", help="retrieval mode the tree channel is fused with (bm25 for --embedding none)")
    a = p.parse_args()
    if a.cmd == "synthetic":
        out = synthetic(a.n)
    else:
        out = beir(a.dataset, a.out, a.cache, a.splits.split(","), a.trees.split(","), a.embedding, a.mode)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
