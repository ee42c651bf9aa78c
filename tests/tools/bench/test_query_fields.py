"""The measuring tools of issue 36: AUROC, the logistic fit, and the untagged split's metadata stripping."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragspine_tools.bench.query_fields import auroc, fit_logistic, is_dev
from ragspine_tools.bench.untagged_split import strip_metadata


def test_auroc_counts_ties_half_and_orders():
    assert auroc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auroc([0.1], [0.9]) == 0.0
    assert auroc([0.5], [0.5]) == 0.5
    assert np.isnan(auroc([], [0.1]))


def test_fit_logistic_separates_and_returns_raw_scale_weights():
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.normal(0.8, 0.05, (40, 1)), rng.normal(0.6, 0.05, (40, 1))])
    y = np.asarray([1.0] * 40 + [0.0] * 40)
    w, b = fit_logistic(x, y, l2=0.1)
    p = 1 / (1 + np.exp(-(x @ w + b)))
    assert w[0] > 0 and auroc(p[y == 1].tolist(), p[y == 0].tolist()) > 0.95
    assert 1 / (1 + np.exp(-(0.7 * w[0] + b))) == pytest.approx(0.5, abs=0.15)  # the boundary sits between the classes


def test_dev_split_is_deterministic():
    assert [is_dev(f"q-{i}") for i in range(20)] == [is_dev(f"q-{i}") for i in range(20)]
    assert 0 < sum(is_dev(f"q-{i}") for i in range(200)) < 200


def test_strip_metadata_removes_entity_topic_geography(tmp_path):
    md = tmp_path / "a.md"
    md.write_text("---\ndoc_id: a\nentity: ACME_CN\ntopic: risk\ngeography: CN\nperiod: 2024\n---\n# entity: stays in the body\n",
                  encoding="utf-8")
    strip_metadata(md)
    text = md.read_text(encoding="utf-8")
    assert "ACME_CN" not in text and "topic: risk" not in text and "period: 2024" in text and "# entity: stays" in text
    toml = tmp_path / "b.pdf.meta.toml"
    toml.write_text('doc_id = "b"\nentity = "X"\ntopic = "y"\n', encoding="utf-8")
    strip_metadata(toml)
    assert toml.read_text(encoding="utf-8") == 'doc_id = "b"\n'
    jl = tmp_path / "c.jsonl"
    jl.write_text(json.dumps({"doc_id": "c", "entity": "X", "text": "t"}) + "\n", encoding="utf-8")
    strip_metadata(jl)
    assert json.loads(jl.read_text(encoding="utf-8")) == {"doc_id": "c", "text": "t"}


@pytest.mark.slow
def test_bench_ranks_and_scores_exactly_as_ragspine_eval(tmp_path):
    """The bench's nDCG@10 per question is ``ragspine eval``'s for the same library and
    settings. A document of many matching paragraphs fills the first ten chunks, so a bench
    that ranked documents from the top ten chunks only (as it did) would miss the judged
    document that ``ragspine eval`` ranks second."""
    from ragspine_tools.bench.query_fields import ndcg10, run_config
    from ragspine_tools.evaluate import evaluate_dataset

    ds = tmp_path / "many"
    ds.mkdir()
    filler = " ".join(f"word{i}" for i in range(60))
    docs = {"big": "\n\n".join(f"Solar inverter maintenance note {i}: inverter fans and inverter filters. {filler}" for i in range(14)),
            "hit": "Inverter warranty: ten years on parts.",
            "other": "Glaciers carve valleys as compacted snow slowly flows downhill."}
    (ds / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs.items()),
                                     encoding="utf-8")
    queries = {"q1": "solar inverter maintenance fans filters", "q2": "glaciers carve valleys"}
    (ds / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()), encoding="utf-8")
    (ds / "qrels").mkdir()
    (ds / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\thit\t2\nq1\tbig\t1\nq2\tother\t1\n", encoding="utf-8")
    out = tmp_path / "eval"
    [res] = evaluate_dataset(ds, modes=("bm25",), embedding="none", out=out, quiet=True)
    [lib] = list(out.glob("many-*/artifacts/many"))
    rows = run_config([str(lib)], [{"_id": q, "text": t} for q, t in queries.items()],
                      {"retrieval_mode": "bm25", "embedding": "none"})
    qrels = {"q1": {"hit": 2, "big": 1}, "q2": {"other": 1}}
    bench = {r["id"]: ndcg10(r["run"], qrels[r["id"]]) for r in rows}
    assert bench == pytest.approx(res.per_query_ndcg, abs=1e-12)
    assert sum(bench.values()) / len(bench) == pytest.approx(res.metrics["ndcg@10"], abs=1e-12)
    q1 = next(r for r in rows if r["id"] == "q1")
    assert q1["docs"][:2] == ["big", "hit"] and all(r["score"] is not None and not r["refused"] for r in rows)
