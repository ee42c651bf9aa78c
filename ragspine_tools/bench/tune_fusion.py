"""Tune the mixed-language fusion policy offline, on the evaluation path's own channels.

Each judged query's channels (``bm25`` and every dense channel, RESTRICTED rows masked as
on the narrative path) are run once and kept; fusion policies are then scored on those
rankings with the product's own :func:`ragspine_query.fusion.fuse_mixed_languages`, so a
grid of hundreds of settings costs seconds. The chosen setting is re-measured through
``ragspine eval`` (the user path: glossary variants, gate, variant fusion), which is what
``docs/evaluation.md`` reports; this script only narrows the search.

    python -m ragspine_tools.bench.tune_fusion ../shared/datasets/xquad-zh-en --qrels test
    python -m ragspine_tools.bench.tune_fusion data/eval/sample --split dev --json

Prints nDCG@10 per policy (and per query language) for: BM25 alone, the dense channels
alone, the previous ``mixed`` policy (RRF: same-language BM25 + 0.1 dense, other-language
dense at 1.056) and a grid of :class:`~ragspine_query.fusion.MixedLanguagePolicy` values.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
from ragspine_core.settings import Settings

DEPTH = 300


def collect(dataset_dir: Path, *, split: str, qrels: str | None, embedding: str, out: Path) -> dict:
    """Run every channel of every judged query once; returns the rankings and the qrels."""
    from ragspine_tools.evaluate import dataset_glossary, ensure_index, prepare_library
    from ragspine_tools.eval.beir import load_beir
    from ragspine_query.library import open_library
    from ragspine_query.backends import backend_for_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig
    from ragspine_core.text.language import detect_language

    dataset = load_beir(dataset_dir, split, qrels_file=qrels)
    paths = prepare_library(dataset_dir, out, embedding=embedding)
    ensure_index(paths, embedding=embedding, glossary_path=dataset_glossary(dataset_dir))
    lib = open_library(paths.root)
    backend = backend_for_library(lib, "hybrid", spec=embedding, settings=Settings.from_env())
    retriever = HybridRetriever(lib, embedding_backend=backend, config=RetrievalConfig(mode="hybrid"))
    allowed = retriever.allowed_mask(None, include_restricted=False)
    kinds = {}
    with open(dataset_dir / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                if rec.get("kind"):
                    kinds[str(rec["_id"])] = str(rec["kind"])
    queries = []
    for qid in dataset.query_ids:
        text = dataset.queries[qid]
        channels = []
        for ch in retriever.channels:
            rows, scores = ch.search(text, DEPTH, allowed)
            # declared abilities of ragspine_query.pipeline.channels.Channel (every built channel is one)
            channels.append((ch.name, ch.languages, rows, scores, ch.cross_lingual))
        queries.append((qid, detect_language(text), channels, kinds.get(qid, "")))
    return {"queries": queries, "qrels": dataset.qrels, "row_language": retriever._row_languages().copy(),
            "row_doc": np.asarray(lib.column("doc_id")), "profile": retriever.language_profile.describe(),
            "model": lib.embedding_model_id}


def doc_run(rows: np.ndarray, row_doc: np.ndarray, depth: int = 100) -> dict[str, float]:
    """Rank-based document scores (a document's best chunk), as ``ragspine eval`` makes them."""
    out: dict[str, float] = {}
    for r in rows.tolist():
        d = str(row_doc[r])
        if d not in out:
            out[d] = float(depth + 1 - len(out))
            if len(out) >= depth:
                break
    return out


def score(data: dict, fuse) -> dict[str, float]:
    from ragspine_tools.eval.metrics import ndcg_at_k

    groups: dict[str, list[float]] = {}
    allv = []
    for qid, lang, channels, kind in data["queries"]:
        rows = fuse(lang, channels)
        v = ndcg_at_k(doc_run(rows, data["row_doc"]), data["qrels"][qid], 10)
        allv.append(v)
        groups.setdefault(lang, []).append(v)
        if kind:
            groups.setdefault(kind, []).append(v)
            groups.setdefault(f"{lang}/{kind}", []).append(v)
    return {"all": float(np.mean(allv)), **{k: float(np.mean(v)) for k, v in sorted(groups.items())}}


def bm25_only(lang, channels):
    return next((r for n, _, r, _, _ in channels if n == "bm25"), np.zeros(0, np.int64))


def dense_only(lang, channels):
    from ragspine_query.fusion import weighted_score_fusion

    dense = [(r, s) for n, served, r, s, _ in channels if n != "bm25" and (served is None or lang in served)]
    return weighted_score_fusion(dense, weights=[1.0] * len(dense), depth=DEPTH)[0] if dense else np.zeros(0, np.int64)


def previous_mixed(row_language):
    """The policy this replaces: RRF k=60, same-language BM25 1.0 + dense 0.1, other-language dense 1.056."""
    from ragspine_query.fusion import weighted_rrf

    def fuse(lang, channels):
        lists, ws = [], []
        for n, _, rows, _, _ in channels:
            if n not in ("bm25", "vector"):
                continue
            same = row_language[rows] == lang
            lists.append(rows[same])
            ws.append(1.0 if n == "bm25" else 0.1)
            if n == "vector":
                lists.append(rows[~same])
                ws.append(1.056)
        return weighted_rrf(lists, weights=ws, rrf_k=60)[0]
    return fuse


def mixed(policy_by_lang, row_language):
    from ragspine_query.fusion import fuse_mixed_languages

    def fuse(lang, channels):
        return fuse_mixed_languages([(n, r, s) for n, _, r, s, _ in channels], row_language=row_language,
                                    query_language=lang, policy=policy_by_lang[lang],
                                    channel_languages={n: served for n, served, _, _, _ in channels},
                                    cross_lingual={n for n, _, _, _, x in channels if x})[0]
    return fuse


def main(argv=None) -> int:
    from ragspine_query.fusion import FUSION_POLICIES, MixedLanguagePolicy

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset_dir")
    p.add_argument("--split", default="test")
    p.add_argument("--qrels", default=None)
    p.add_argument("--embedding", default="auto")
    p.add_argument("--out", default="data/eval")
    p.add_argument("--json", action="store_true")
    p.add_argument("--only", default="", help="score only these settings, not the grid: 'en:dense=1.0 cross=0.0 other=1.0 earn=0.75 "
                                               "margin=0.1|zh:...' (one per query language), several joined by ';;'")
    args = p.parse_args(argv)
    data = collect(Path(args.dataset_dir), split=args.split, qrels=args.qrels, embedding=args.embedding, out=Path(args.out))
    rl = data["row_language"]
    rows = [("bm25", score(data, bm25_only)), ("dense", score(data, dense_only)),
            ("previous-mixed", score(data, previous_mixed(rl)))]
    default = {"en": FUSION_POLICIES["mixed:en"].mixed, "zh": FUSION_POLICIES["mixed:zh"].mixed}
    rows.append(("default", score(data, mixed(default, rl))))
    for setting in filter(None, args.only.split(";;")):
        chosen = {}
        for part in setting.split("|"):
            lang, _, spec = part.partition(":")
            kv = dict(item.split("=") for item in spec.split())
            chosen[lang.strip()] = MixedLanguagePolicy(bm25=1.0, dense=float(kv["dense"]), cross_same=float(kv["cross"]),
                                                       other_dense=float(kv["other"]), earn=float(kv["earn"]),
                                                       margin=float(kv["margin"]))
        rows.append((setting, score(data, mixed(chosen, rl))))
    for dense, cross, earn, margin, other in () if args.only else itertools.product((0.0, 0.5, 1.0), (0.0, 0.25, 0.5), (0.25, 0.5, 0.75, 1.0, 1.25),
                                                               (0.02, 0.05, 0.1), (0.0, 0.5, 1.0)):
        pol = MixedLanguagePolicy(bm25=1.0, dense=dense, cross_same=cross, other_dense=other, earn=earn, margin=margin)
        rows.append((f"dense={dense} cross={cross} other={other} earn={earn} margin={margin}",
                     score(data, mixed({"en": pol, "zh": pol}, rl))))
    if args.json:
        print(json.dumps({"dataset": args.dataset_dir, "profile": data["profile"], "model": data["model"], "results": dict(rows)}))
        return 0
    print(f"{args.dataset_dir} ({data['profile']}, {data['model']})")
    for name, res in rows:
        print(f"{name:45s} " + " ".join(f"{k}={v:.4f}" for k, v in res.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
