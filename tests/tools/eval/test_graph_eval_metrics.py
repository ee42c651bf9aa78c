"""Multi-hop metrics added for the graph mode: recall@2/@5, both@5/@10, per question type."""

from __future__ import annotations

import json

import pytest

from ragspine_tools.eval.metrics import evaluate_run


def test_both_at_k_and_recall_at_2_5_and_groups():
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1, "d": 1}, "q3": {"e": 1, "f": 0}}
    run = {
        "q1": {"a": 9, "x": 8, "y": 7, "z": 6, "b": 5},          # both in the top 5
        "q2": {"c": 9, "x": 8, "y": 7, "z": 6, "w": 5, "d": 4},  # second one at rank 6
        "q3": {"x": 9, "e": 8},                                  # its one relevant doc at rank 2
    }
    rep = evaluate_run(run, qrels)
    d = rep.to_dict()
    assert d["both@5"] == pytest.approx(2 / 3) and d["both@10"] == pytest.approx(1.0)
    assert d["recall@2"] == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert d["recall@5"] == pytest.approx((1.0 + 0.5 + 1.0) / 3)
    groups = rep.by_group({"q1": "bridge", "q2": "bridge", "q3": "comparison"})
    assert groups["bridge"]["n_queries"] == 2 and groups["bridge"]["both@5"] == pytest.approx(0.5)
    assert groups["comparison"]["both@10"] == 1.0
    json.dumps(d)


def test_query_types_are_read_from_queries_jsonl(tmp_path):
    from ragspine_tools.evaluate import query_types

    (tmp_path / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "a", "type": "bridge"}) + "\n" + json.dumps({"_id": "q2", "text": "b"}) + "\n")
    assert query_types(tmp_path) == {"q1": "bridge"}
    assert query_types(tmp_path / "missing") == {}
