"""`ragspine eval` end to end on a tiny BEIR corpus the test writes itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine_tools.evaluate import evaluate_dataset
from ragspine_tools.eval.metrics import read_trec_run

pytestmark = pytest.mark.slow

DOCS = {
    "d1": ("Photosynthesis", "Chlorophyll absorbs light so plants convert carbon dioxide into sugar."),
    "d2": ("Volcanoes", "Magma rises through the crust and erupts as lava from a volcano."),
    "d3": ("Tides", "The gravitational pull of the moon drives ocean tides twice a day."),
    "d4": ("Vaccines", "A vaccine trains the immune system to recognise a pathogen."),
    "d5": ("Glaciers", "Glaciers carve valleys as compacted snow slowly flows downhill."),
    "d6": ("Moon landing", "Astronauts first walked on the moon in 1969."),
}
QUERIES = {
    "q1": "how do plants make sugar from light",   # d1
    "q2": "why does lava erupt from a volcano",    # d2
    "q3": "moon gravity ocean tides",              # d3 (2), d6 (1)
    "q4": "immune system vaccine",                 # d4
}
QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d3", 2), ("q3", "d6", 1), ("q4", "d4", 1)]


def write_dataset(root: Path) -> Path:
    root.mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc_id, (title, text) in DOCS.items():
            fh.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in QUERIES.items():
            fh.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (root / "qrels").mkdir()
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in QRELS]
    (root / "qrels" / "test.tsv").write_bytes(("\r\n".join(lines) + "\r\n").encode())  # CRLF on purpose
    return root


def test_tiny_eval_scores_indexes_through_the_pipeline_and_caches(tmp_path):
    ds = write_dataset(tmp_path / "tiny")
    out = tmp_path / "eval"
    [res] = evaluate_dataset(ds, modes=("bm25",), embedding="none", out=out, quiet=True)
    m = res.metrics
    assert m["n_queries"] == 4 and m["mode"] == "bm25" and m["reranker"] == "none"
    # every query's best document is the judged one; q3 must rank d3 (rel 2) above d6 (rel 1)
    run = read_trec_run(res.run_path)
    assert [max(run[q], key=run[q].get) for q in ("q1", "q2", "q3", "q4")] == ["d1", "d2", "d3", "d4"]
    assert run["q3"]["d3"] > run["q3"]["d6"]
    assert m["mrr@10"] == pytest.approx(1.0) and m["recall@100"] == pytest.approx(1.0)
    assert m["ndcg@10"] == pytest.approx(1.0)
    # the index was built by the production pipeline and is published like any library
    libs = list(out.glob("tiny-*/artifacts/tiny/current/manifest.json"))
    assert len(libs) == 1 and json.loads(libs[0].read_text())["counts"]["documents"] == 6

    # a second run with the same corpus and code reuses the cached index (no rebuild)
    proc = subprocess.run(
        [sys.executable, "-m", "ragspine_tools.cli", "eval", str(ds), "--mode", "bm25", "--embedding", "none",
         "--out", str(out), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "reusing cached index" in proc.stderr
    payload = json.loads(proc.stdout)
    assert {"ndcg@10", "recall@100", "mrr@10", "n_queries", "mode", "reranker"} <= set(payload)
    assert payload["ndcg@10"] == pytest.approx(m["ndcg@10"])


def test_missing_qrels_file_is_a_clear_error(tmp_path):
    ds = write_dataset(tmp_path / "tiny")
    proc = subprocess.run([sys.executable, "-m", "ragspine_tools.cli", "eval", str(ds), "--split", "dev",
                           "--embedding", "none", "--out", str(tmp_path / "eval")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "dev" in proc.stderr and "qrels" in proc.stderr
