"""``ragspine eval``: index a BEIR-format dataset through the production pipeline and score it.

The corpus becomes a library (one ``corpus.jsonl`` under ``<out>/raw/<name>/``) that is
built by :func:`ragspine_assets.indexing.pipeline.build_library` — the same functions, in the
same order, that the Dagster assets call. The built index is cached under a key made of
the corpus hash and the pipeline's code versions, so a second run with the same inputs
skips the build. Queries go through :mod:`ragspine_query`; chunk hits aggregate to their
document by max score; metrics follow trec_eval conventions (see ``ragspine_query.eval``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ragspine_query.errors import ConfigError, DatasetError

DEFAULT_EVAL_ROOT = Path("data") / "eval"
EVAL_DEPTH = 100


def _say(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def code_versions() -> dict[str, str]:
    """The pipeline's code versions (no Dagster import needed)."""
    from ragspine_query import schema
    from ragspine_query.text.tokenize import ENGLISH_ANALYZER_VERSION, SPEC_TOKENIZER_VERSION

    from .indexing.chunking import CHUNKER_VERSIONS
    from .indexing.pipeline import CODE_VERSIONS

    return {
        # every step's code version: a changed step rebuilds the cached evaluation index
        "steps": ",".join(f"{k}@{v}" for k, v in sorted(CODE_VERSIONS.items())),
        "schema": str(schema.SCHEMA_VERSION),
        "chunkers": ",".join(f"{k}@{v}" for k, v in sorted(CHUNKER_VERSIONS.items())),
        "tokenizer": f"spec@{SPEC_TOKENIZER_VERSION},english@{ENGLISH_ANALYZER_VERSION}",
        "eval_library": "2",  # 2: honours the corpus's sensitivity field
    }


def prepare_library(dataset_dir: Path, out_root: Path, *, quiet: bool = False):
    """Write the corpus as a raw library folder keyed by corpus hash + code versions."""
    from .indexing.artifacts import LibraryPaths, sha256_file, sha256_json

    corpus = dataset_dir / "corpus.jsonl"
    if not corpus.is_file():
        raise DatasetError(f"{corpus} is missing: a BEIR dataset folder needs corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
    key = sha256_json([sha256_file(corpus), code_versions()])[:16]
    name = dataset_dir.name.replace("_", "-")
    lib_root = out_root / f"{name}-{key}"
    raw = lib_root / "raw" / name
    paths = LibraryPaths(name, raw, lib_root / "artifacts" / name)
    marker = raw / ".complete"
    if not marker.exists():
        _say(f"writing corpus of {dataset_dir.name} as a library under {raw}", quiet)
        raw.mkdir(parents=True, exist_ok=True)
        from ragspine_query.eval.beir import iter_corpus_jsonl

        with open(raw / "corpus.jsonl", "w", encoding="utf-8") as fh:
            for doc in iter_corpus_jsonl(corpus):
                text = doc.text if doc.text.strip() else doc.title
                # the corpus's own marking is honoured (validated, fail-closed, by the parser);
                # an unmarked evaluation document is PUBLIC
                fh.write(json.dumps({"doc_id": doc.doc_id, "title": doc.title, "text": text,
                                     "sensitivity": doc.sensitivity or "PUBLIC"}, ensure_ascii=False) + "\n")
        marker.write_text(key)
    return paths


def ensure_index(paths, *, embedding: str, quiet: bool = False) -> dict[str, Any]:
    """Build (or reuse) the published index; returns the manifest."""
    from ragspine_query.library import read_manifest, resolve_snapshot_dir

    from .indexing.pipeline import build_library

    want_dense = embedding != "none"
    try:
        manifest = read_manifest(resolve_snapshot_dir(paths.root))
        has_dense = manifest.get("embedding") is not None
        if has_dense or not want_dense:  # an index with vectors serves BM25 runs too
            _say(f"reusing cached index {manifest['snapshot_id']} ({manifest['counts']['chunks']} chunks)", quiet)
            return manifest
    except Exception:
        pass
    t0 = time.perf_counter()
    res = build_library(paths, embedding=embedding, cache_path=paths.root.parent.parent.parent / "cache" / "embeddings.sqlite",
                        run_id="eval", code_versions=code_versions(), progress=lambda m: _say(m, quiet))
    _say(f"indexed in {time.perf_counter() - t0:.1f}s: " + ", ".join(f"{k} {v:.1f}s" for k, v in res.timings.items()), quiet)
    return read_manifest(Path(res.snapshot_dir))


@dataclass(frozen=True, slots=True)
class ModeResult:
    mode: str
    reranker: str
    metrics: dict[str, Any]
    per_query_ndcg: dict[str, float]
    seconds_per_query: float
    run_path: str


def run_queries(retriever, dataset, *, reranker=None, depth: int = EVAL_DEPTH, quiet: bool = False, rerank_depth: int = 100) -> tuple[dict[str, dict[str, float]], float]:
    from ragspine_query.eval.metrics import aggregate_chunk_hits_to_docs

    run: dict[str, dict[str, float]] = {}
    qids = dataset.query_ids
    t0 = time.perf_counter()
    chunk_depth = max(depth * 3, rerank_depth)
    for i, qid in enumerate(qids, 1):
        query = dataset.queries[qid]
        # what a user is shown: RESTRICTED chunks never enter the ranking
        hits = retriever.search(query, top_k=chunk_depth, include_restricted=False)
        if reranker is not None:
            hits = reranker.rank(query, hits[:rerank_depth], top_n=rerank_depth) + hits[rerank_depth:]
        # rank-based document scores: the evaluated order is exactly the order a user sees
        best = aggregate_chunk_hits_to_docs([(h.chunk.doc_id, -float(pos)) for pos, h in enumerate(hits)], depth=depth)
        ordered = sorted(best, key=lambda d: -best[d])
        run[qid] = {d: float(depth + 1 - r) for r, d in enumerate(ordered, 1)}
        if not quiet and (i % 100 == 0 or i == len(qids)):
            _say(f"  queries {i}/{len(qids)} ({(time.perf_counter() - t0) / i * 1000:.1f} ms/query)")
    return run, (time.perf_counter() - t0) / max(len(qids), 1)


def evaluate_dataset(dataset_dir: Path, *, split: str = "test", qrels_file: str | None = None, modes: Sequence[str] = ("auto",), reranker: str = "none", out: Path | None = None, embedding: str = "auto", quiet: bool = False) -> list[ModeResult]:
    from ragspine_query.eval.beir import load_beir
    from ragspine_query.eval.metrics import evaluate_run, write_trec_run
    from ragspine_query.library import open_library
    from ragspine_query.link import backend_for_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    dataset = load_beir(dataset_dir, split, qrels_file=qrels_file)
    out_root = Path(out) if out else DEFAULT_EVAL_ROOT
    paths = prepare_library(Path(dataset_dir), out_root, quiet=quiet)
    needs_dense = any(m in ("auto", "hybrid", "vector") for m in modes) and embedding != "none"
    ensure_index(paths, embedding=embedding if needs_dense else "none", quiet=quiet)
    lib = open_library(paths.root)
    rr = None
    if reranker and reranker != "none":
        from ragspine_query.rerank import make_reranker

        rr = make_reranker(reranker)
    results = []
    try:
        for mode in modes:
            backend = backend_for_library(lib, mode, spec=embedding)
            retriever = HybridRetriever(lib, embedding_backend=backend, config=RetrievalConfig(mode=mode))
            _say(f"[{dataset_dir.name} {split}{'/' + qrels_file if qrels_file else ''}] mode={mode} (runs {retriever.active_mode}) reranker={reranker}: {len(dataset.query_ids)} queries", quiet)
            run, spq = run_queries(retriever, dataset, reranker=rr, quiet=quiet)
            report = evaluate_run(run, dataset.qrels)
            run_dir = paths.root.parent.parent / "runs"
            run_dir.mkdir(parents=True, exist_ok=True)
            run_name = f"{paths.library_id}-{qrels_file or split}-{mode}-{reranker}"
            run_path = run_dir / f"{run_name}.trec"
            write_trec_run(run_path, run, run_name)
            metrics = {**report.to_dict(), "mode": mode, "active_mode": retriever.active_mode, "reranker": reranker,
                       "analyzer": lib.manifest["tokenizer"]["analyzer"], "embedding_model": lib.embedding_model_id if retriever.active_mode != "bm25" else None,
                       "ms_per_query": round(spq * 1000, 2), "dataset": dataset_dir.name, "split": split, "qrels": qrels_file or split}
            results.append(ModeResult(mode, reranker, metrics, report.metric("ndcg@10"), spq, str(run_path)))
    finally:
        lib.close()
    return results


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset_dir", help="BEIR-format folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    p.add_argument("--split", default="test")
    p.add_argument("--qrels", default=None, help="qrels file stem when it differs from the split (e.g. test-monolingual)")
    p.add_argument("--mode", default="auto", help="retrieval mode(s), comma-separated: auto,bm25,hybrid,vector (default auto: what a user gets)")
    p.add_argument("--reranker", default="none", help="none|maxsim|colbert|cross_encoder|splade")
    p.add_argument("--embedding", default="auto", help="embedding backend for the dense channel (default auto, as for a user)")
    p.add_argument("--out", default=None, help=f"where the cached library, runs and report go (default {DEFAULT_EVAL_ROOT})")
    p.add_argument("--json", action="store_true", help="print one JSON object (a list when several modes are given)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run_eval_cli(args: argparse.Namespace) -> int:
    from ragspine_query.eval.metrics import paired_bootstrap

    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    if not modes:
        raise ConfigError("--mode needs at least one mode")
    results = evaluate_dataset(Path(args.dataset_dir), split=args.split, qrels_file=args.qrels, modes=modes,
                               reranker=args.reranker, out=Path(args.out) if args.out else None,
                               embedding=args.embedding, quiet=args.quiet)
    if len(results) > 1:
        base = results[0]
        for r in results[1:]:
            bs = paired_bootstrap(base.per_query_ndcg, r.per_query_ndcg)
            r.metrics[f"ndcg@10_vs_{base.mode}"] = {"difference": round(bs.mean_difference, 4), "ci95": [round(bs.ci_low, 4), round(bs.ci_high, 4)], "p": round(bs.p_value, 4)}
    if args.json:
        payload = [r.metrics for r in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, ensure_ascii=False))
        return 0
    print(f"{'mode':8} {'runs':7} {'reranker':10} {'nDCG@10':>8} {'R@100':>7} {'MRR@10':>7} {'queries':>7} {'ms/q':>7}")
    for r in results:
        m = r.metrics
        print(f"{r.mode:8} {m['active_mode']:7} {r.reranker:10} {m['ndcg@10']:8.4f} {m['recall@100']:7.4f} {m['mrr@10']:7.4f} {m['n_queries']:7d} {m['ms_per_query']:7.2f}")
        for k, v in m.items():
            if k.startswith("ndcg@10_vs_"):
                print(f"         {k}: {v['difference']:+.4f} (95% CI {v['ci95'][0]:+.4f}..{v['ci95'][1]:+.4f}, p={v['p']})")
        print(f"         run file: {r.run_path}")
    return 0
