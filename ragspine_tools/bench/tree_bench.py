"""Summary-tree measurements: build time and peak memory, LLM calls on a re-run, retrieval with the tree channel.

    python -m ragspine_tools.bench.tree_bench synthetic --n 100000           # build time / peak RSS, extractive, hashed-lexical vectors;
                                                                   # then a re-run (reused, 0 summarizer calls)
    python -m ragspine_tools.bench.tree_bench beir ../shared/datasets/scifact --out /tmp/h11-sci \
        --cache /tmp/h11-sci/cache/embeddings.sqlite --splits test --embedding auto --mode hybrid   # MiniLM tree, hybrid
    python -m ragspine_tools.bench.tree_bench beir ../shared/datasets/scifact --out /tmp/tree-sci \\
        --cache /tmp/evalsci/cache/embeddings.sqlite --splits train,test   # build + tree off/collapsed/traversal
    python -m ragspine_tools.bench.tree_bench beir ../shared/datasets/hotpotqa-dev --out /tmp/tree-hotpot-bm25 \
        --cache /tmp/tree-hotpot/cache/embeddings.sqlite --embedding none --mode bm25   # BM25 + hashed-lexical tree

Peak memory is the process's resident high-water mark while the step runs (Linux:
``/proc/self/clear_refs`` resets it before the step; ``VmHWM`` is read after; ``synthetic``
includes embedding the leaves). In ``beir``, ``timings_s.summary_tree`` is the first
build (summaries embedded by the library's model) and ``summary_tree.build_s`` a re-build
with the tree's work directory deleted (incremental from the published tree; summary
vectors from the embedding cache).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ragspine_core.dense.embedding import EmbeddingSpec
    from ragspine_index.raptor.summarizers import Summarizer


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


def _extractive() -> Summarizer:
    """The extractive summarizer (the tree builder's offline ``Summarizer``)."""
    from ragspine_index.raptor.summarizers import ExtractiveSummarizer

    return ExtractiveSummarizer()


def synthetic(n: int, seed: int = 7) -> dict:
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.steps.summary_tree import LEXICAL_VECTOR_DIM, Leaves, TreeParams, build_summary_tree
    from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend

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
                             summarizer=_extractive(), summary_cache_path=None, params=TreeParams(),
                             input_hash=f"synthetic-{n}-{seed}", store_leaf_vectors=True,
                             progress=lambda m: print(m, file=sys.stderr, flush=True))
    peak = _rss_kb("VmHWM")
    # a re-run over the unchanged input: the built tree is reused (no clustering, no summarizer call)
    again = build_summary_tree(paths, leaves, vectors, embed=embed, vector_kind=f"lexical:{backend.model_id}",
                               summarizer=_extractive(), summary_cache_path=None, params=TreeParams(),
                               input_hash=f"synthetic-{n}-{seed}", store_leaf_vectors=True)
    return {"chunks": n, "embed_leaves_s": round(t_embed, 1), "build_s": round(ref.seconds, 1),
            "peak_rss_mb": round(peak / 1024, 1), "rss_before_mb": round(base / 1024, 1),
            "nodes_per_level": list(ref.nodes_per_level), "mean_cluster_size": ref.mean_cluster_size,
            "compression_ratio": ref.compression_ratio, "llm_calls": ref.llm_calls,
            "rerun": {"reused": again.reused, "seconds": round(again.seconds, 2), "llm_calls": again.llm_calls}}


def beir(dataset: Path, out: Path, cache: Path, splits: list[str], trees: list[str], embedding: str, mode: str = "hybrid",
         rebuild_tree: bool = True) -> dict:
    from ragspine_tools.evaluate import code_versions, prepare_library, run_queries
    from ragspine_index.pipeline import build_library
    from ragspine_core.dense.embedding import EmbeddingSpec
    from ragspine_core.settings import Settings
    from ragspine_tools.eval.beir import load_beir
    from ragspine_tools.eval.metrics import evaluate_run, paired_bootstrap
    from ragspine_query.library import open_library
    from ragspine_query.backends import backend_for_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    paths = prepare_library(dataset, out, quiet=True)
    t0 = time.perf_counter()
    spec = EmbeddingSpec.from_settings(Settings.from_env(), backend=embedding)  # the environment, read here
    res = build_library(paths, embedding=spec, cache_path=cache, run_id="tree-bench", code_versions=code_versions(),
                        progress=lambda m: print(m, file=sys.stderr, flush=True))
    result: dict = {"dataset": dataset.name, "build_total_s": round(time.perf_counter() - t0, 1),
                    "timings_s": {k: round(v, 1) for k, v in res.timings.items()}}
    if rebuild_tree:
        result["summary_tree"] = _retime_tree(paths, cache, spec, res)
    lib = open_library(paths.root)
    backend = backend_for_library(lib, mode, spec=embedding, settings=Settings.from_env())
    for split in splits:
        data = load_beir(dataset, split)
        reps = {}
        for tree in trees:
            retriever = HybridRetriever(lib, embedding_backend=backend, config=RetrievalConfig(mode=mode, tree=tree))
            run, spq = run_queries(retriever, data, quiet=True)
            rep = reps[tree] = evaluate_run(run, data.qrels, ks=(5, 10, 100))
            result[f"{split}/{tree}"] = {"ndcg@10": round(rep.means["ndcg@10"], 4), "recall@5": round(rep.means["recall@5"], 4),
                                         "recall@100": round(rep.means["recall@100"], 4), "ms_per_query": round(spq * 1000, 1),
                                         "queries": len(rep.per_query)}
            if tree != "off" and "off" in reps:  # paired bootstrap of nDCG@10 against the tree off
                b = paired_bootstrap(reps["off"].metric("ndcg@10"), rep.metric("ndcg@10"))
                result[f"{split}/{tree}"]["vs_off_ndcg@10"] = {"diff": round(b.mean_difference, 4), "ci95": [
                    round(b.ci_low, 4), round(b.ci_high, 4)], "p": round(b.p_value, 4)}
            print(json.dumps({f"{split}/{tree}": result[f"{split}/{tree}"]}), file=sys.stderr, flush=True)
    lib.close()
    return result


def _retime_tree(paths, cache: Path, embedding: "EmbeddingSpec", res) -> dict:
    """The summary tree again with its work dir removed, timed with its memory high-water mark."""
    from ragspine_index.pipeline import STEP_BY_NAME, StepContext

    shutil.rmtree(paths.work / "summary_tree", ignore_errors=True)
    ctx = StepContext(paths=paths, cache_path=cache, embedding=embedding)
    base = _rss_kb("VmRSS")
    _reset_peak()
    t0 = time.perf_counter()
    ref = STEP_BY_NAME["summary_tree"].function(ctx, index_text=res.index_text, chunk_embeddings=res.embeddings,
                                                documents=res.docs).value
    return {"build_s": round(time.perf_counter() - t0, 1), "peak_rss_mb": round(_rss_kb("VmHWM") / 1024, 1),
            "rss_before_mb": round(base / 1024, 1), "nodes_per_level": list(ref.nodes_per_level),
            "mean_cluster_size": ref.mean_cluster_size, "compression_ratio": ref.compression_ratio,
            "summarizer": ref.summarizer_id, "vector_kind": ref.vector_kind, "llm_calls": ref.llm_calls}


def scratch(dataset: Path, out: Path, cache: Path, embedding: str) -> dict:
    """The built library's tree again from scratch (no previous tree to start from), its
    summary vectors from the embedding cache: the clustering + summarizing cost."""
    from ragspine_tools.evaluate import prepare_library
    from ragspine_index.steps.summary_tree import TreeParams, cached_embed, read_leaves, build_summary_tree
    from ragspine_query.library import open_library
    from ragspine_query.backends import backend_for_library
    from ragspine_core.settings import Settings

    paths = prepare_library(dataset, out, quiet=True)
    leaves, _, _ = read_leaves(paths.chunk_store)
    lib = open_library(paths.root)
    emb = lib.embeddings()
    if emb is None or not np.array_equal(np.asarray(emb.rows), leaves.rows):
        raise SystemExit("build the library first (tree_bench.py beir … with the same --out and --embedding)")
    backend = backend_for_library(lib, "hybrid", spec=embedding, settings=Settings.from_env())
    if backend is None:
        raise SystemExit(f"no embedding backend for the library's vectors ({lib.embedding_model_id}) with "
                         f"--embedding {embedding}: install its model, or pass the --embedding the library was built with")
    embed = cached_embed(backend, cache)
    _reset_peak()
    t0, c0 = time.perf_counter(), time.process_time()
    ref = build_summary_tree(paths, leaves, np.asarray(emb.vectors, np.float32), embed=embed,
                             vector_kind=f"embedding:{backend.model_id}", summarizer=_extractive(),
                             summary_cache_path=None, params=TreeParams(), input_hash=f"scratch-{time.time_ns()}",
                             previous=None)
    out_ = {"leaves": len(leaves.rows), "build_s": round(time.perf_counter() - t0, 1),
            "cpu_s": round(time.process_time() - c0, 1), "peak_rss_mb": round(_rss_kb("VmHWM") / 1024, 1),
            "nodes_per_level": list(ref.nodes_per_level), "llm_calls": ref.llm_calls}
    lib.close()
    return out_


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
    b.add_argument("--no-retime", action="store_true", help="skip re-building the tree for its time and memory")
    b.add_argument("--scratch", action="store_true",
                   help="only re-build the built library's tree from scratch (no previous tree) and time it")
    a = p.parse_args()
    if a.cmd == "synthetic":
        out = synthetic(a.n)
    elif a.scratch:
        out = scratch(a.dataset, a.out, a.cache, a.embedding)
    else:
        out = beir(a.dataset, a.out, a.cache, a.splits.split(","), a.trees.split(","), a.embedding, a.mode,
                   rebuild_tree=not a.no_retime)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
