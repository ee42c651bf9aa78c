"""Measure filter extraction, routing, tiers and CRAG on judged sample questions (not a test;
run it by hand, see docs/query-intelligence.md).

    python -m tests.query.qi_judged EVAL_DIR LIBRARY_DIR [LIBRARY_DIR ...] [--configs a,b] [--routers profile,all]
    python -m tests.query.qi_judged EVAL_DIR LIBRARY_DIR --llm-base-url http://127.0.0.1:8000/v1 [--every 3]

``EVAL_DIR`` holds ``queries.jsonl`` (``_id``, ``text``, ``lang``, ``kind``),
``qrels/dev.tsv`` (query-id, corpus-id, score) and ``unanswerable.jsonl``. Every
configuration runs through ``build_narrative_retriever`` (what ``ragspine query`` runs)
with ``top_k`` 20 chunks; a document scores ``1 / rank`` of its first chunk (rank-based, so
order-only stages count). Prints nDCG@10 / R@10 / MRR@10 overall and per ``kind``, and for
every configuration how many answerable questions were refused and how many unanswerable
ones were answered.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections import defaultdict
from pathlib import Path

from ragspine_tools.eval.metrics import mrr_at_k, ndcg_at_k, recall_at_k
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.agent_api import build_narrative_retriever

CONFIGS = {
    "filters off": QueryIntelligence(filters="off"),
    "filters rules >=0.5 (blend)": QueryIntelligence(filters="rules", filter_min_confidence=0.5),
    "filters rules >=0.5 (fill)": QueryIntelligence(filters="rules", filter_min_confidence=0.5, filter_blend=False),
    "filters rules >=0.5 (strict)": QueryIntelligence(filters="rules", filter_min_confidence=0.5, filter_fill=False,
                                                      filter_blend=False),
    "filters rules >=0.7 (blend)": QueryIntelligence(filters="rules", filter_min_confidence=0.7),
    "filters rules >=0.7 (fill)": QueryIntelligence(filters="rules", filter_min_confidence=0.7, filter_blend=False),
    "filters rules >=0.7 (strict)": QueryIntelligence(filters="rules", filter_min_confidence=0.7, filter_fill=False,
                                                      filter_blend=False),
    "tiers rules (filters off)": QueryIntelligence(tiers="rules", filters="off"),
    "tiers rules + filters": QueryIntelligence(tiers="rules", filters="rules"),
    "crag relevance (filters off)": QueryIntelligence(corrective="relevance", filters="off"),
    "crag relevance + filters": QueryIntelligence(corrective="relevance", filters="rules"),
    "crag dynamic": QueryIntelligence(corrective="dynamic", filters="off"),
}


#: Each LLM feature against its deterministic default (``--llm-base-url``; docs/query-intelligence.md,
#: "Local model"): name -> (QueryIntelligence, reranker, needs the LLM provider)
LLM_CONFIGS = {
    "default (rules filters, no LLM)": (QueryIntelligence(), None, False),
    "step_back (rules)": (QueryIntelligence(transforms="step_back"), None, False),
    "decompose (rules)": (QueryIntelligence(transforms="decompose"), None, False),
    "crag relevance (rules)": (QueryIntelligence(corrective="relevance"), None, False),
    "hyde (llm)": (QueryIntelligence(transforms="hyde"), None, True),
    "step_back (llm)": (QueryIntelligence(transforms="step_back"), None, True),
    "decompose (llm)": (QueryIntelligence(transforms="decompose"), None, True),
    "filters (llm)": (QueryIntelligence(filters="llm"), None, True),
    "crag llm grader + rewrite": (QueryIntelligence(corrective="llm"), None, True),
    "listwise judge (llm)": (QueryIntelligence(), "listwise", True),
}


def load(eval_dir: Path):
    queries = [json.loads(line) for line in (eval_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with open(eval_dir / "qrels" / "dev.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels[row["query-id"]][row["corpus-id"]] = int(row["score"])
    un_path = eval_dir / "unanswerable.jsonl"
    unanswerable = [json.loads(line) for line in un_path.read_text(encoding="utf-8").splitlines() if line.strip()] if un_path.is_file() else []
    return [q for q in queries if q["_id"] in qrels], qrels, unanswerable


def doc_run(snippets) -> dict[str, float]:
    run: dict[str, float] = {}
    for rank, s in enumerate(snippets, start=1):
        run.setdefault(s["doc_id"], 1.0 / rank)
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir", type=Path)
    ap.add_argument("libraries", nargs="+")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--routers", default="profile", help="comma-separated router modes to try (several libraries)")
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--llm-base-url", default="", help="an OpenAI-compatible server: run LLM_CONFIGS (each LLM feature "
                    "against its deterministic default) instead of CONFIGS, e.g. `ragspine llm serve`'s URL")
    ap.add_argument("--llm-model", default="gemma3-270m")
    ap.add_argument("--llm-max-tokens", type=int, default=512, help="the provider's cap on every call's completion tokens")
    ap.add_argument("--every", type=int, default=1, help="keep every N-th question (a 2-core CPU model is seconds per call)")
    args = ap.parse_args(argv)
    queries, qrels, unanswerable = load(args.eval_dir)
    queries, unanswerable = queries[:: args.every], unanswerable[:: args.every]
    if args.llm_base_url:
        return _llm_main(args, queries, qrels, unanswerable)
    print(f"{len(queries)} judged questions, {len(unanswerable)} unanswerable; libraries: {', '.join(args.libraries)}")
    for router in args.routers.split(","):
        for name in args.configs.split(","):
            qi = CONFIGS[name]
            r = build_narrative_retriever(args.libraries, reranker=None, intelligence=qi, router=router)
            per_kind: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
            refused = 0
            outcomes: dict[str, int] = defaultdict(int)
            t0 = time.perf_counter()
            for q in queries:
                res = r.retrieve(q["text"], top_k=args.top_k)
                refused += res.refusal is not None
                if res.filters is not None:
                    outcomes[res.filters.outcome] += 1
                run = doc_run(res)
                m = (ndcg_at_k(run, qrels[q["_id"]], 10), recall_at_k(run, qrels[q["_id"]], 10), mrr_at_k(run, qrels[q["_id"]], 10))
                per_kind[q["kind"]].append(m)
                per_kind["all"].append(m)
            ms = (time.perf_counter() - t0) * 1e3 / max(1, len(queries))
            answered = sum(r.retrieve(u["text"], top_k=args.top_k).refusal is None for u in unanswerable)
            cells = "  ".join(f"{k}={sum(x[0] for x in v) / len(v):.4f}" for k, v in sorted(per_kind.items()))
            a = per_kind["all"]
            print(f"[{router}] {name:28s} nDCG@10 {sum(x[0] for x in a) / len(a):.4f}  R@10 {sum(x[1] for x in a) / len(a):.4f}  "
                  f"MRR@10 {sum(x[2] for x in a) / len(a):.4f}  | {cells} | refused answerable {refused}/{len(queries)}  "
                  f"answered unanswerable {answered}/{len(unanswerable)} | filters {dict(outcomes)} | {ms:.0f} ms/q", flush=True)
    return 0


def _llm_main(args, queries, qrels, unanswerable) -> int:
    from ragspine_core.llm import OpenAICompatibleProvider

    names = args.configs.split(",") if args.configs != ",".join(CONFIGS) else list(LLM_CONFIGS)
    print(f"{len(queries)} judged questions, {len(unanswerable)} unanswerable; LLM {args.llm_model} at {args.llm_base_url}")
    for name in names:
        qi, reranker, needs = LLM_CONFIGS[name]
        provider = OpenAICompatibleProvider(args.llm_base_url, args.llm_model, timeout_s=120, deadline_s=120, max_retries=0,
                                            max_tokens_cap=args.llm_max_tokens) \
            if needs else None
        if reranker is not None:
            from ragspine_query.rerank import make_reranker

            reranker = make_reranker(reranker, provider=provider)
        r = build_narrative_retriever(args.libraries, provider, reranker=reranker, intelligence=qi)
        per_kind: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        refused = 0
        notes: dict[str, int] = defaultdict(int)
        t0 = time.perf_counter()
        for q in queries:
            res = r.retrieve(q["text"], top_k=args.top_k, explain=needs)
            refused += res.refusal is not None
            if res.explain is not None:  # how often the feature fell back (its explain note)
                table = res.explain.format_table(per_stage=1)
                for marker in ("plain query", "deterministic (", "fused (RRF) order kept", "rest keep their fused order",
                               "rules (the LLM", "LLM grader:", "content words"):
                    notes[marker] += marker in table
            run = doc_run(res)
            m = (ndcg_at_k(run, qrels[q["_id"]], 10), recall_at_k(run, qrels[q["_id"]], 10), mrr_at_k(run, qrels[q["_id"]], 10))
            per_kind[q["kind"]].append(m)
            per_kind["all"].append(m)
        ms = (time.perf_counter() - t0) * 1e3 / max(1, len(queries))
        # unanswerable questions only where the configuration can refuse (CRAG), to save model calls
        answered = sum(r.retrieve(u["text"], top_k=args.top_k).refusal is None for u in unanswerable) \
            if qi.corrective not in ("off", "", None) else "-"
        a = per_kind["all"]
        cells = "  ".join(f"{k}={sum(x[0] for x in v) / len(v):.4f}" for k, v in sorted(per_kind.items()))
        usage = dict(provider.usage) if provider is not None else {}
        print(f"{name:34s} nDCG@10 {sum(x[0] for x in a) / len(a):.4f}  R@10 {sum(x[1] for x in a) / len(a):.4f}  "
              f"MRR@10 {sum(x[2] for x in a) / len(a):.4f}  | {cells} | refused answerable {refused}/{len(queries)}  "
              f"answered unanswerable {answered}/{len(unanswerable)} | {ms:.0f} ms/q | fallbacks "
              f"{ {k: v for k, v in notes.items() if v} } | usage {usage}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
