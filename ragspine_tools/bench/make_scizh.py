"""Build ``scizh``: a second judged library for the confidence and the corrective loop (#36).

A library unlike the sample (no company, no glossary): English biomedical abstracts
(SciFact) and Chinese Wikipedia paragraphs (CMRC 2018, as ``cmrc2018-retrieval``), side by
side. The questions, all seeded from ``--seed``:

* **answerable** — SciFact *train* claims (never its test split) and CMRC questions whose
  judged documents are all in the library (``kind`` ``en-claim`` / ``zh-question``);
* **answer-elsewhere** (unanswerable) — questions of the same two sets whose judged
  documents are all kept *out* of the library: in-domain questions the library cannot
  answer;
* the hand-written ``off-domain`` and ``nonsense`` questions of
  ``data/eval/scizh/extra-unanswerable.jsonl``.

Distractor documents are drawn from the rest of each corpus, never a document judged for
an answer-elsewhere question. Writes ``<raw>/scizh/scizh.jsonl`` (the library) and the
judged set's ``queries.jsonl``, ``qrels/dev.tsv`` and ``unanswerable.jsonl`` into ``--set``
(``data/eval/scizh``), then::

    ragspine ingest data/raw/scizh
    python -m ragspine_tools.bench.query_fields data/artifacts/scizh --set data/eval/scizh \\
        --config corrective=off --config corrective=relevance

Licences: SciFact claims CC BY 4.0, abstracts ODC-By 1.0; CMRC 2018 CC BY-SA 4.0.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from ragspine_tools.bench.query_fields import read_jsonl, read_qrels

N = {"en_ans": 45, "zh_ans": 35, "en_away": 15, "zh_away": 12, "en_distract": 250, "zh_distract": 150}


def build(datasets: Path, raw: Path, out: Path, seed: int = 36) -> dict[str, int]:
    rng = random.Random(seed)
    sci, cm = datasets / "scifact", datasets / "cmrc2018-retrieval"
    sci_docs = {d["_id"]: d for d in read_jsonl(sci / "corpus.jsonl")}
    cm_docs = {d["_id"]: d for d in read_jsonl(cm / "corpus.jsonl")}
    sci_q = {q["_id"]: q["text"] for q in read_jsonl(sci / "queries.jsonl")}
    cm_q = {q["_id"]: q["text"] for q in read_jsonl(cm / "queries.jsonl")}
    sci_rel = {q: {d for d, g in v.items() if g >= 1} for q, v in read_qrels(sci / "qrels" / "train.tsv").items()}
    cm_rel = {q: {d for d, g in v.items() if g >= 1} for q, v in read_qrels(cm / "qrels" / "test.tsv").items()}

    def pick(rel: dict[str, set[str]], n_ans: int, n_away: int) -> tuple[list[str], list[str]]:
        ids = sorted(q for q, v in rel.items() if v)
        rng.shuffle(ids)
        away: list[str] = []
        ans: list[str] = []
        away_docs: set[str] = set()
        for q in ids:  # answer-elsewhere first: their documents leave the library
            if len(away) < n_away:
                away.append(q)
                away_docs |= rel[q]
        for q in ids:
            if len(ans) < n_ans and q not in away and not (rel[q] & away_docs):
                ans.append(q)
        return ans, away

    en_ans, en_away = pick(sci_rel, N["en_ans"], N["en_away"])
    zh_ans, zh_away = pick(cm_rel, N["zh_ans"], N["zh_away"])
    banned = set().union(*(sci_rel[q] for q in en_away), *(cm_rel[q] for q in zh_away))

    def docs_for(rel, ans, pool, n):
        keep = set().union(*(rel[q] for q in ans))
        rest = sorted(d for d in pool if d not in keep and d not in banned)
        rng.shuffle(rest)
        return sorted(keep) + sorted(rest[:n])

    en_docs = docs_for(sci_rel, en_ans, sci_docs, N["en_distract"])
    zh_docs = docs_for(cm_rel, zh_ans, cm_docs, N["zh_distract"])
    (raw / "scizh").mkdir(parents=True, exist_ok=True)
    with open(raw / "scizh" / "scizh.jsonl", "w", encoding="utf-8") as f:
        for prefix, ids, pool, lang in (("sf-", en_docs, sci_docs, "en"), ("cm-", zh_docs, cm_docs, "zh")):
            for d in ids:
                rec = {"doc_id": prefix + d, "title": pool[d].get("title") or prefix + d, "text": pool[d]["text"],
                       "language": lang, "sensitivity": "PUBLIC"}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with open(out / "queries.jsonl", "w", encoding="utf-8") as fq, open(out / "qrels" / "dev.tsv", "w", encoding="utf-8") as fr:
        fr.write("query-id\tcorpus-id\tscore\n")
        for prefix, ids, texts, rel, lang, kind in (("sf-", en_ans, sci_q, sci_rel, "en", "en-claim"),
                                                    ("cm-", zh_ans, cm_q, cm_rel, "zh", "zh-question")):
            for q in ids:
                fq.write(json.dumps({"_id": prefix + q, "text": texts[q], "lang": lang, "kind": kind}, ensure_ascii=False) + "\n")
                for d in sorted(rel[q]):
                    fr.write(f"{prefix + q}\t{prefix + d}\t2\n")
    with open(out / "unanswerable.jsonl", "w", encoding="utf-8") as fu:
        for prefix, ids, texts, lang in (("sf-", en_away, sci_q, "en"), ("cm-", zh_away, cm_q, "zh")):
            for q in ids:
                fu.write(json.dumps({"_id": prefix + q, "text": texts[q], "lang": lang, "kind": "answer-elsewhere"},
                                    ensure_ascii=False) + "\n")
    return {"documents": len(en_docs) + len(zh_docs), "answerable": len(en_ans) + len(zh_ans),
            "answer-elsewhere": len(en_away) + len(zh_away)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", type=Path, default=Path("/work/shared/datasets"), help="folder holding scifact/ and cmrc2018-retrieval/")
    ap.add_argument("--raw", type=Path, default=Path("data/raw"), help="where the library folder scizh/ is written")
    ap.add_argument("--set", type=Path, default=Path("data/eval/scizh"), help="the judged set folder")
    ap.add_argument("--seed", type=int, default=36)
    args = ap.parse_args(argv)
    print(build(args.datasets, args.raw, args.set, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
