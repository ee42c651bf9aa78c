"""Candidate confidence signals for the corrective loop's refusals (#36, second round).

Computes, per question of a judged set (as ``query_fields`` reads it), signals read off the
library's **open** rows (IDF over open rows, as :class:`ragspine_query.assessment._LibraryTerms`):
the best lexical share (``lexical``), IDF coverage of the lexical top 3/5/10 (``covK``), the
share of the query's IDF mass in terms no open row holds (``unseen``), and per dense channel
the best cosine, its gap over the next 19 (``-gap``), the query's IDF share in the channel's
best row (``-cov1``) and top 5 (``-cov5``), and the overlap of its top 10 with the lexical
top 10 (``-agree``); the query's best IDF coverage within one sentence (``sent1``) or two
adjacent sentences (``sent2``) of the lexical top 20 (do the query's terms stand together,
or only somewhere in one row?); the product's features (``lexical``, dense ``-gap`` and
cosine) over the open rows the **rule-extracted** filters allow (``…-xf``: entity and period
read off the query, confidence ≥ 0.7; the plain value when nothing is extracted, 0 when the
filters allow no open row); with ``--sentences``, per dense channel the best cosine of the
query with one *sentence* of the channel's top 5 rows (``-sent``) and how far it stands
above the best row's cosine (``-sentlift``; slow: every sentence is embedded). Then, for each ``--features`` set, fits the logistic calibration on the
*first* set's dev half (as ``query_fields --fit``), chooses ``low`` there (≤ 3 % of dev
answerable refused), and reports AUROC and refusals on its dev/test halves and, without
refitting, on every further set::

    python -m ragspine_tools.bench.confidence_signals \\
        data/artifacts/sample:data/eval/sample data/artifacts/scizh:data/eval/scizh \\
        --features vector-gap,vector:e5-gap,vector:multilingual \\
        --features vector-gap,vector:e5-gap,vector:multilingual,vector:e5-cov1

A measuring tool only: the product's features are :func:`ragspine_query.assessment.relevance_features`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ragspine_tools.bench.query_fields import auroc, fit_logistic, is_dev, read_jsonl, read_qrels


#: where a chunk's text is cut into sentences (English and Chinese end marks, line breaks)
SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_END.split(text) if s and len(s.strip()) > 3] or [text]


def question_signals(library: str, judged: Path, *, sentences: bool = False) -> list[dict[str, Any]]:
    from ragspine_core.glossary import Glossary
    from ragspine_core.settings import Settings
    from ragspine_query.assessment import RelevanceGrader, relevance_features
    from ragspine_query.builder import PipelineSpec, build_pipeline
    from ragspine_query.filter_extraction import DEFAULT_MIN_CONFIDENCE, make_filter_extractor
    from ragspine_query.source import retrievers_of

    qrels = read_qrels(judged / "qrels" / "dev.tsv")
    ans = [q for q in read_jsonl(judged / "queries.jsonl") if q["_id"] in qrels]
    una = read_jsonl(judged / "unanswerable.jsonl") + read_jsonl(judged / "extra-unanswerable.jsonl")
    settings = Settings.from_env()  # the bench's edge: the environment, read once
    src = build_pipeline([library], PipelineSpec.from_settings(settings), settings=settings).source
    assert src is not None  # build_pipeline always gives its pipeline the retriever it searches
    grader = RelevanceGrader(src)
    ret = retrievers_of(src)[0]
    t = grader._terms_of(ret.library.library_id)
    assert t is not None
    allowed = t.open_rows
    gpath = ret.library.artifact_path("glossary")
    extractor = make_filter_extractor("rules", glossary=Glossary.load(gpath) if gpath else None, source=src)
    assert extractor is not None
    row_sentences: dict[int, list[set[str]]] = {}
    row_sentence_texts: dict[int, list[str]] = {}
    sentence_vectors: dict[tuple[str, int], np.ndarray] = {}

    def sentences_of(row: int) -> list[str]:
        if row not in row_sentence_texts:
            row_sentence_texts[row] = _sentences(ret.library.chunks_by_rows([row])[0].text)
        return row_sentence_texts[row]

    rows = []
    for q in ans + una:
        toks = sorted(set(t.analyze(q["text"])))
        w = {x: t.weight(x) for x in toks}
        total = sum(w.values()) or 1.0
        acc = np.zeros(len(allowed))
        inrow: dict[str, set[int]] = {}
        for x in toks:
            i = t.vocab.get(x)
            if i is not None and t.idf[i] > 0:
                p = t.postings[t.indptr[i]:t.indptr[i + 1]]
                p = p[allowed[p]]
                acc[p] += t.idf[i]
                inrow[x] = set(p.tolist())
        acc[~allowed] = -1
        order = np.lexsort((np.arange(len(acc)), -acc))

        def cov(rows_: set[int]) -> float:
            return sum(v for x, v in w.items() if x in inrow and inrow[x] & rows_) / total

        f = {"lexical": float(acc[order[0]]) / total, "unseen": sum(v for x, v in w.items() if x not in inrow) / total}
        for k in (3, 5, 10):
            f[f"cov{k}"] = cov(set(order[:k].tolist()))
        for span in (1, 2):  # the query's terms together in one sentence (or two adjacent ones) of a lexical top-20 row
            best = 0.0
            for rid in (int(i) for i in order[:20] if acc[i] > 0):
                if rid not in row_sentences:
                    row_sentences[rid] = [set(t.analyze(x)) for x in sentences_of(rid)]
                sset = row_sentences[rid]
                for i in range(len(sset)):
                    words = set().union(*sset[i:i + span])
                    best = max(best, sum(v for x, v in w.items() if x in words) / total)
            f[f"sent{span}"] = best
        preds = [p.predicate for p in extractor.extract(q["text"]).predicates if p.confidence >= DEFAULT_MIN_CONFIDENCE]
        plain = relevance_features(ret, t, q["text"])
        xf = (relevance_features(ret, t, q["text"], preds) or {}) if preds else plain
        for name in plain or {}:
            f[name + "-xf"] = float((xf or {}).get(name, 0.0))
        lex10 = set(order[:10].tolist())
        for ch in ret.channels:
            if ch.on_demand or not (ch.name == "vector" or ch.name.startswith("vector:")):
                continue
            rr, ss = ch.search(q["text"], 20, allowed)
            f[ch.name] = float(ss[0])
            f[ch.name + "-gap"] = float(ss[0] - np.mean(ss[1:]))
            f[ch.name + "-agree"] = len(set(rr[:10].tolist()) & lex10) / 10
            f[ch.name + "-cov5"] = cov(set(rr[:5].tolist()))
            f[ch.name + "-cov1"] = cov({int(rr[0])})
            if sentences:  # the query against single sentences of the channel's top 5 rows
                qv = getattr(ch, "model").embed([q["text"]], kind="query")[0]
                best = -1.0
                for rid in rr[:5].tolist():
                    if (ch.name, rid) not in sentence_vectors:
                        sentence_vectors[(ch.name, rid)] = getattr(ch, "model").embed(sentences_of(rid), kind="passage")
                    best = max(best, float((sentence_vectors[(ch.name, rid)] @ qv).max()))
                f[ch.name + "-sent"] = best
                f[ch.name + "-sentlift"] = best - float(ss[0])
        rows.append({"id": q["_id"], "y": int(q["_id"] in qrels), "kind": q.get("kind", "unanswerable"),
                     "dev": is_dev(q["_id"]), "f": f})
    return rows


def report(sets: list[tuple[str, list[dict]]], names: list[str]) -> None:
    def arr(rows):
        return (np.asarray([[r["f"].get(n, 0.0) for n in names] for r in rows]), np.asarray([r["y"] for r in rows]),
                np.asarray([r["dev"] for r in rows]))

    x, y, dev = arr(sets[0][1])
    w, b = fit_logistic(x[dev], y[dev], l2=0.1)
    p = 1 / (1 + np.exp(-(x @ w + b)))
    pa = np.sort(p[dev & (y == 1)])
    low = float(pa[int(np.floor(0.03 * len(pa)))])
    print(f"features {','.join(names)}: weights {np.round(w, 3).tolist()}, bias {b:.3f}, low {low:.4f}")
    for label, (xs, ys, devs) in [(sets[0][0], (x, y, dev))] + [(n, arr(r)) for n, r in sets[1:]]:
        ps = 1 / (1 + np.exp(-(xs @ w + b)))
        parts = (("dev", devs), ("test", ~devs), ("all", np.ones_like(devs))) if label == sets[0][0] else (("all", np.ones_like(devs)),)
        for part, m in parts:
            a, u = ps[m & (ys == 1)], ps[m & (ys == 0)]
            print(f"  {label} {part}: AUROC {auroc(a.tolist(), u.tolist()):.3f}; refused answerable "
                  f"{int((a < low).sum())}/{len(a)}, unanswerable {int((u < low).sum())}/{len(u)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", help="LIBRARY:JUDGED_SET; the first is fitted on (its dev half)")
    ap.add_argument("--features", action="append", default=[], help="comma-separated signal names (repeatable)")
    ap.add_argument("--sentences", action="store_true", help="also the dense sentence signals (-sent, -sentlift; slow)")
    args = ap.parse_args(argv)
    sets = []
    for pair in args.pairs:
        lib, _, judged = pair.partition(":")
        sets.append((Path(lib).name, question_signals(lib, Path(judged), sentences=args.sentences)))
    names = sorted(sets[0][1][0]["f"])
    for n in names:
        col = [(r["f"][n], r["y"]) for r in sets[0][1]]
        print(f"{n:28s} AUROC {auroc([v for v, y in col if y], [v for v, y in col if not y]):.3f}")
    for spec in args.features:
        report(sets, [n.strip() for n in spec.split(",") if n.strip()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
