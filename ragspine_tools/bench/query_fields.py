"""Measure what the query output *says* about a result on a judged set (docs/query-intelligence.md).

For each question of a BEIR-layout judged set over a published library (the sample's
``data/eval/sample``: ``queries.jsonl``, ``qrels/dev.tsv``, ``unanswerable.jsonl`` and
``extra-unanswerable.jsonl``), run the narrative chain that ``ragspine query`` builds and
record nDCG@10 (answerable questions; ranked and scored exactly as ``ragspine eval`` does,
:func:`ragspine_tools.evaluate.query_documents`), the top documents, and the confidence score and
grade. Prints, per configuration: nDCG@10 per kind, the AUROC of the confidence for
answerable vs unanswerable questions, and the share of each that the corrective loop
(``relevance``) refuses.

    python -m ragspine_tools.bench.query_fields data/artifacts/sample --set data/eval/sample \
        --config filters=off --config filters=rules

``--fit``: instead, compute each question's relevance features
(:func:`ragspine_query.assessment.relevance_features`, open rows only) and fit the
confidence's logistic calibration on the *dev* half of the questions (by SHA-256 of the
id), choosing the grade thresholds there, and report AUROC on the other (test) half and on
all; it prints the :class:`~ragspine_query.assessment.Calibration` to ship.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Iterable


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        f = line.split("\t")
        if i == 0 and f[0] == "query-id":
            continue
        if len(f) >= 3:
            out.setdefault(f[0], {})[f[1]] = int(f[2])
    return out


def auroc(pos: Iterable[float], neg: Iterable[float]) -> float:
    """P(score of a positive > score of a negative), ties count half (Mann-Whitney U)."""
    p, n = list(pos), list(neg)
    if not p or not n:
        return float("nan")
    wins = sum((a > b) + 0.5 * (a == b) for a in p for b in n)
    return wins / (len(p) * len(n))


def ndcg10(run: dict[str, float], qrels: dict[str, int]) -> float:
    """nDCG@10 of one question's document run, by ``ragspine eval``'s own metric code."""
    from ragspine_tools.eval.metrics import evaluate_run

    return evaluate_run({"q": run}, {"q": qrels}).per_query["q"]["ndcg@10"]


def run_config(library: list[str], questions: list[dict], overrides: dict[str, str]) -> list[dict]:
    """Each question through the narrative chain ``ragspine query`` builds (the user's
    ``RAGSPINE_*`` defaults, ``overrides`` on top), ranked and cut exactly as ``ragspine eval``
    ranks (:func:`ragspine_tools.evaluate.query_documents`: the top 300 chunks aggregated to
    their documents); the confidence and refusal are that same search's."""
    from ragspine_core.settings import Settings
    from ragspine_query.builder import PipelineSpec, build_pipeline
    from ragspine_tools.evaluate import EVAL_RERANK_DEPTH, query_documents

    settings = dataclasses.replace(Settings.from_env(), **overrides) if overrides else Settings.from_env()  # type: ignore[arg-type]
    index = build_pipeline(library, PipelineSpec.from_settings(settings).replace(rerank_top_n=EVAL_RERANK_DEPTH), settings=settings)
    rows = []
    for q in questions:
        res, run = query_documents(index, q["text"])
        conf = getattr(res, "confidence", None)
        rows.append({"id": q["_id"], "kind": q.get("kind", "unanswerable"), "docs": sorted(run, key=lambda d: -run[d]), "run": run,
                     "score": None if conf is None else float(conf.score), "grade": None if conf is None else conf.grade,
                     "refused": getattr(res, "refusal", None) is not None})
    return rows


def is_dev(qid: str) -> bool:
    import hashlib

    return hashlib.sha256(qid.encode()).digest()[0] % 2 == 0


def question_features(library: list[str], questions: list[dict]) -> list[dict[str, float]]:
    """Per question, the features of the library whose calibrated probability is highest
    (one library: its features)."""
    from ragspine_core.settings import Settings
    from ragspine_query.assessment import RelevanceGrader
    from ragspine_query.builder import PipelineSpec, build_pipeline

    settings = Settings.from_env()  # the bench's edge: the environment, read once
    pipeline = build_pipeline(library, PipelineSpec.from_settings(settings), settings=settings)
    assert pipeline.source is not None  # build_pipeline always gives its pipeline the retriever it searches
    grader = RelevanceGrader(pipeline.source)
    return [grader.features(q["text"]) for q in questions]


def fit_logistic(x, y, l2: float = 1e-2, iters: int = 50):
    """L2-regularised logistic regression by Newton's method on standardised features:
    (weights, bias) on the raw features."""
    import numpy as np

    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    x = (x - mu) / sd

    X = np.hstack([x, np.ones((x.shape[0], 1))])
    w = np.zeros(X.shape[1])
    reg = l2 * np.eye(X.shape[1])
    reg[-1, -1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-X @ w))
        g = X.T @ (p - y) + reg @ w
        h = (X * (p * (1 - p))[:, None]).T @ X + reg
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w[:-1] / sd, float(w[-1] - (w[:-1] * mu / sd).sum())


def fit(library: list[str], answerable: list[dict], unanswerable: list[dict], features: str = "") -> int:
    import numpy as np

    qs = answerable + unanswerable
    feats = question_features(library, qs)
    names = [k.strip() for k in features.split(",") if k.strip()] or sorted({k for f in feats for k in f})
    x = np.asarray([[f.get(k, 0.0) for k in names] for f in feats])
    y = np.asarray([1.0] * len(answerable) + [0.0] * len(unanswerable))
    dev = np.asarray([is_dev(q["_id"]) for q in qs])
    w, b = fit_logistic(x[dev], y[dev], l2=0.1)
    p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
    # thresholds on dev: low = the highest that refuses at most 3% of dev answerable questions;
    # high = the lowest at which >= 90% of dev questions at or above it are answerable
    pa = np.sort(p[dev & (y == 1)])
    low = float(pa[int(np.floor(0.03 * len(pa)))]) if len(pa) else 0.3
    high = 1.0
    for t in sorted(set(p[dev].tolist())):
        above = dev & (p >= t)
        if above.any() and y[above].mean() >= 0.90:
            high = t
            break
    high = max(high, low)
    for part, m in (("dev", dev), ("test", ~dev), ("all", np.ones_like(dev))):
        a, u = p[m & (y == 1)], p[m & (y == 0)]
        print(f"{part}: AUROC {auroc(a.tolist(), u.tolist()):.4f} (answerable {len(a)}, unanswerable {len(u)}); "
              f"refused (p < low): answerable {int((a < low).sum())}/{len(a)}, unanswerable {int((u < low).sum())}/{len(u)}; "
              f"high: answerable {int((a >= high).sum())}, unanswerable {int((u >= high).sum())}")
    for kind in sorted({q.get("kind", "unanswerable") for q in unanswerable}):
        m = np.asarray([q.get("kind", "unanswerable") == kind for q in qs])
        print(f"  vs {kind}: AUROC {auroc(p[y == 1].tolist(), p[m].tolist()):.4f}, refused {int((p[m] < low).sum())}/{int(m.sum())}")
    print("Calibration(name=..., weights=(" + ", ".join(f"({k!r}, {v:.4f})" for k, v in zip(names, w))
          + f"), bias={b:.4f}, high={high:.4f}, low={low:.4f})")
    return 0


def routing_check(library: list[str], questions: list[dict], qrels: dict, overrides: dict) -> tuple[int, int]:
    """How many questions have every library that holds a score-2 document routed to."""
    from ragspine_core.settings import Settings
    from ragspine_query.library import open_library
    from ragspine_query.router import make_router

    libs = {open_library(p).library_id: open_library(p) for p in library}
    holder = {d: lib_id for lib_id, lib in libs.items() for d in set(lib.column("doc_id").tolist())}

    class _R:
        def __init__(self, lib):
            self.library = lib

    settings = dataclasses.replace(Settings.from_env(), **overrides) if overrides else Settings.from_env()
    from ragspine_core.glossary import Glossary

    gpath = next(iter(libs.values())).artifact_path("glossary")
    router = make_router(settings.router, {k: _R(v) for k, v in libs.items()}, Glossary.load(gpath) if gpath else None)
    ok = 0
    for q in questions:
        need = {holder[d] for d, g in qrels[q["_id"]].items() if g >= 2 and d in holder}
        chosen = set(libs) if router is None else set(router(q["text"]))
        ok += need <= chosen
    return ok, len(questions)


_KEYS = {"filters": "filter_extraction", "corrective": "corrective", "router": "router", "mode": "retrieval_mode"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("library", nargs="+", help="published library directories (several: multi-library)")
    ap.add_argument("--set", required=True, help="judged set folder (queries.jsonl, qrels/dev.tsv, *unanswerable.jsonl)")
    ap.add_argument("--config", action="append", default=[], help="KEY=VALUE[,KEY=VALUE] (filters, corrective, router, mode)")
    ap.add_argument("--dump", default=None, help="write the per-question rows as JSON here")
    ap.add_argument("--fit", action="store_true", help="fit the confidence calibration (see above) instead")
    ap.add_argument("--held-only", action="store_true",
                    help="questions none of whose score-2 answers the libraries hold count as unanswerable "
                         "(kind answer-elsewhere): for a library cut from the judged corpus")
    ap.add_argument("--features", default="", help="with --fit: the features, comma-separated (default: all)")
    args = ap.parse_args(argv)
    root = Path(args.set)
    qrels = read_qrels(root / "qrels" / "dev.tsv")
    answerable = [q for q in read_jsonl(root / "queries.jsonl") if q["_id"] in qrels]
    unanswerable = read_jsonl(root / "unanswerable.jsonl") + read_jsonl(root / "extra-unanswerable.jsonl")
    if args.held_only:  # a library holding part of the corpus: a question it holds no answer of is unanswerable in it
        from ragspine_query.library import open_library

        held = {d for p in args.library for d in open_library(p).column("doc_id").tolist()}
        moved = [q for q in answerable if not any(g >= 2 and d in held for d, g in qrels[q["_id"]].items())]
        answerable = [q for q in answerable if q not in moved]
        unanswerable += [{**q, "kind": "answer-elsewhere"} for q in moved]
        qrels = {k: v for k, v in qrels.items() if k in {q["_id"] for q in answerable}}
    if args.fit:
        return fit(args.library, answerable, unanswerable, args.features)
    dump = {}
    for spec in args.config or [""]:
        overrides = {}
        for kv in filter(None, spec.split(",")):
            k, _, v = kv.partition("=")
            overrides[_KEYS.get(k, k)] = v
        rows = run_config(args.library, answerable + unanswerable, overrides)
        dump[spec or "default"] = rows
        ans = [r for r in rows if r["id"] in qrels]
        una = [r for r in rows if r["id"] not in qrels]
        kinds: dict[str, list[float]] = {}
        for r in ans:
            v = ndcg10(r["run"], qrels[r["id"]])
            r["ndcg10"] = v
            kinds.setdefault(r["kind"], []).append(v)
            kinds.setdefault("all", []).append(v)
        for r in rows:
            r.pop("run", None)
        if len(args.library) > 1:
            routed_all = routing_check(args.library, answerable, qrels, overrides)
            print(f"  routing: the libraries holding every score-2 answer searched for {routed_all[0]}/{routed_all[1]} questions")
        line = " ".join(f"{k}={sum(v) / len(v):.4f}(n={len(v)})" for k, v in sorted(kinds.items()))
        print(f"[{spec or 'default'}] nDCG@10 {line}")
        if all(r["score"] is not None for r in rows):
            print(f"  AUROC answerable vs unanswerable: {auroc([r['score'] for r in ans], [r['score'] for r in una]):.4f} "
                  f"(answerable {len(ans)}, unanswerable {len(una)})")
            for kind in sorted({r['kind'] for r in una}):
                sub = [r['score'] for r in una if r['kind'] == kind]
                print(f"    vs {kind} ({len(sub)}): {auroc([r['score'] for r in ans], sub):.4f}")
        print(f"  refused: answerable {sum(r['refused'] for r in ans)}/{len(ans)}, unanswerable "
              f"{sum(r['refused'] for r in una)}/{len(una)}; grades answerable "
              + str({g: sum(r['grade'] == g for r in ans) for g in ('high', 'medium', 'low')})
              + " unanswerable " + str({g: sum(r['grade'] == g for r in una) for g in ('high', 'medium', 'low')}))
    if args.dump:
        Path(args.dump).write_text(json.dumps(dump, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
