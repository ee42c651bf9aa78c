"""`ragspine eval --corrective`: the refusal report over judged and unanswerable questions (#36)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine_tools.evaluate import evaluate_dataset

pytestmark = pytest.mark.slow

DOCS = {
    "d1": "Chlorophyll absorbs light so plants convert carbon dioxide into sugar.",
    "d2": "Magma rises through the crust and erupts as lava from a volcano.",
    "d3": "Glaciers carve valleys as compacted snow slowly flows downhill.",
}
QUERIES = {"q1": "plants convert light into sugar", "q2": "magma erupts as lava from a volcano", "q3": "glaciers carve valleys"}
UNANSWERABLE = [{"_id": "ns-1", "text": "zqxv wwpt blorf", "kind": "nonsense"},
                {"_id": "od-1", "text": "who painted the famous portrait in the louvre", "kind": "off-domain"}]


def write_dataset(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in DOCS.items()),
                                       encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()),
                                        encoding="utf-8")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td3\t1\n", encoding="utf-8")
    (root / "unanswerable.jsonl").write_text("".join(json.dumps(q) + "\n" for q in UNANSWERABLE), encoding="utf-8")
    return root


def test_eval_reports_refusals_of_answerable_and_unanswerable_questions(tmp_path):
    ds = write_dataset(tmp_path / "tiny")
    out = tmp_path / "eval"
    [plain] = evaluate_dataset(ds, modes=("bm25",), embedding="none", out=out, quiet=True)
    assert "refusals" not in plain.metrics  # not asked: no extra questions run
    [res] = evaluate_dataset(ds, modes=("bm25",), embedding="none", out=out, quiet=True, corrective="relevance")
    rf = res.metrics["refusals"]
    assert res.metrics["corrective"] == "relevance"
    # BM25 only: the lexical calibration; a question whose words no row holds is refused, the judged ones are not
    assert rf["answerable"] == {"questions": 3, "refused": 0}
    assert rf["unanswerable"] == {"questions": 2, "refused": 2,
                                  "by_kind": {"nonsense": {"questions": 1, "refused": 1}, "off-domain": {"questions": 1, "refused": 1}}}
    assert rf["confidence_auroc"] == 1.0
    [off] = evaluate_dataset(ds, modes=("bm25",), embedding="none", out=out, quiet=True, corrective="off")
    assert off.metrics["refusals"]["unanswerable"]["refused"] == 0  # graded, never refused
    assert off.metrics["refusals"]["confidence_auroc"] == 1.0  # the same confidence in every mode

    proc = subprocess.run([sys.executable, "-m", "ragspine_tools.cli", "eval", str(ds), "--mode", "bm25", "--embedding", "none",
                           "--out", str(out), "--corrective", "relevance"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "corrective relevance: refused 0/3 answerable, 2/2 unanswerable (nonsense 1/1, off-domain 1/1); confidence AUROC 1.0000" in proc.stdout


def test_a_malformed_unanswerable_line_names_the_file_and_line(tmp_path):
    ds = write_dataset(tmp_path / "tiny")
    (ds / "extra-unanswerable.jsonl").write_text('{"_id": "x"}\n', encoding="utf-8")
    from ragspine_core.errors import DatasetError
    from ragspine_tools.evaluate import unanswerable_questions

    with pytest.raises(DatasetError, match=r"extra-unanswerable.jsonl:1: .*\"text\""):
        unanswerable_questions(ds)
