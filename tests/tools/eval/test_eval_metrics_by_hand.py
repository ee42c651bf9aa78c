"""Metrics on cases small enough to compute by hand; the arithmetic is in the comments."""

from __future__ import annotations

import ast
import math
import sys
from pathlib import Path

import pytest

from ragspine_core.errors import ConfigError, DatasetError, RagspineError
from ragspine_tools.eval.metrics import (
    EvalReport,
    aggregate_chunk_hits_to_docs,
    evaluate_run,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
    trec_ranking,
)

LOG2_3 = math.log2(3)  # 1.5849625007211562

# Three retrieved documents with graded judgments, plus one relevant document (d)
# the run missed and one retrieved document (b) judged non-relevant.
RUN = {"a": 3.0, "b": 2.0, "c": 1.0}
QRELS = {"a": 2, "b": 0, "c": 1, "d": 3}


def test_ndcg_exponential_gain_matches_hand_arithmetic():
    # Ranking a, b, c. Gains 2^rel - 1: a -> 3, b -> 0, c -> 1.
    # DCG  = 3/log2(2) + 0/log2(3) + 1/log2(4) = 3 + 0 + 0.5 = 3.5
    # Ideal: d (7), a (3), c (1) = 7/1 + 3/log2(3) + 1/2 = 7.5 + 1.892789... = 9.392789...
    # nDCG = 3.5 / 9.392789... = 0.372626...
    expected = 3.5 / (7 + 3 / LOG2_3 + 0.5)
    assert ndcg_at_k(RUN, QRELS, k=10) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.3726264, abs=1e-6)


def test_ndcg_linear_gain_matches_hand_arithmetic():
    # Linear gains (trec_eval's): a -> 2, c -> 1.  DCG = 2 + 1/2 = 2.5
    # Ideal: d (3), a (2), c (1) = 3 + 2/log2(3) + 1/2 = 3.5 + 1.261859... = 4.761859...
    # nDCG = 2.5 / 4.761859... = 0.525004...
    expected = 2.5 / (3 + 2 / LOG2_3 + 0.5)
    assert ndcg_at_k(RUN, QRELS, k=10, gain="linear") == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.5250045, abs=1e-6)


def test_ndcg_cut_also_cuts_the_ideal_ranking():
    # k=1: DCG = gain(a) = 3; ideal DCG@1 = gain(d) = 7  ->  3/7
    assert ndcg_at_k(RUN, QRELS, k=1) == pytest.approx(3 / 7, abs=1e-12)


def test_recall_counts_relevant_documents_in_the_top_k():
    # Relevant (grade >= 1): a, c, d -> 3.  Top 2 = a, b -> 1 found -> 1/3.  Top 100 -> a, c -> 2/3.
    assert recall_at_k(RUN, QRELS, k=2) == pytest.approx(1 / 3)
    assert recall_at_k(RUN, QRELS, k=100) == pytest.approx(2 / 3)


def test_mrr_is_the_reciprocal_rank_of_the_first_relevant_document_within_k():
    run = {"b": 3.0, "x": 2.0, "c": 1.0}  # b non-relevant, x unjudged, c relevant at rank 3
    assert mrr_at_k(run, QRELS, k=10) == pytest.approx(1 / 3)
    assert mrr_at_k(run, QRELS, k=2) == 0.0


def test_query_without_relevant_documents_scores_zero_everywhere():
    qrels = {"a": 0, "b": 0}
    assert ndcg_at_k(RUN, qrels) == 0.0
    assert recall_at_k(RUN, qrels) == 0.0
    assert mrr_at_k(RUN, qrels) == 0.0


def test_negative_grades_count_as_non_relevant():
    # a (grade -1) at rank 1 contributes nothing; c (grade 1) at rank 2: 1/log2(3); ideal 1.
    assert ndcg_at_k({"a": 2.0, "c": 1.0}, {"a": -1, "c": 1}) == pytest.approx(1 / LOG2_3)


def test_score_ties_rank_the_larger_document_id_first_like_trec_eval():
    # Equal scores: trec_eval orders by docno descending, whatever the insertion order.
    assert trec_ranking({"a": 1.0, "z": 1.0, "m": 2.0}) == ["m", "z", "a"]
    assert trec_ranking({"z": 1.0, "a": 1.0, "m": 2.0}) == ["m", "z", "a"]
    # String order, not numeric: "9" > "10".
    assert trec_ranking({"10": 0.5, "9": 0.5}) == ["9", "10"]
    # The relevant document loses the tie, so it sits at rank 2.
    assert mrr_at_k({"a": 1.0, "z": 1.0}, {"a": 1}) == 0.5


def test_scores_equal_in_float32_are_ties_like_trec_eval():
    # trec_eval keeps scores as C floats: 1.0 + 1e-9 rounds to 1.0, so "a" and "b" tie and
    # the larger id "b" goes first; a gap of 1e-6 survives float32 and "a" wins.
    assert trec_ranking({"a": 1.0 + 1e-9, "b": 1.0}) == ["b", "a"]
    assert trec_ranking({"a": 1.0 + 1e-6, "b": 1.0}) == ["a", "b"]


def test_evaluate_run_means_over_every_judged_query_and_missing_queries_score_zero():
    qrels = {"q1": QRELS, "q2": {"x": 1}, "q3": {"y": 1}}
    run = {"q1": RUN, "q2": {"x": 5.0}, "q3": {}, "unjudged": {"x": 1.0}}
    report = evaluate_run(run, qrels)
    # q1: nDCG 0.372626 (above), q2: 1.0 (x at rank 1, ideal x), q3: 0 (empty ranking).
    expected_ndcg = (3.5 / (7 + 3 / LOG2_3 + 0.5) + 1.0 + 0.0) / 3
    assert isinstance(report, EvalReport)
    assert report.n_queries == 3
    assert report.ndcg_at_10 == pytest.approx(expected_ndcg, abs=1e-12)
    # recall@100: q1 2/3, q2 1, q3 0 -> 5/9.   mrr@10: 1, 1, 0 -> 2/3.
    assert report.recall_at_100 == pytest.approx(5 / 9)
    assert report.mrr_at_10 == pytest.approx(2 / 3)
    assert set(report.per_query) == {"q1", "q2", "q3"}
    assert report.per_query["q3"] == {k: 0.0 for k in report.per_query["q3"]}
    assert report.to_dict() == {
        "ndcg@10": report.ndcg_at_10,
        "recall@100": report.recall_at_100,
        "mrr@10": report.mrr_at_10,
        "n_queries": 3,
        # the multi-hop keys (HotpotQA) are always reported too
        "recall@2": report.means["recall@2"],
        "recall@5": report.means["recall@5"],
        "both@5": report.means["both@5"],
        "both@10": report.means["both@10"],
    }
    assert report.metric("mrr@10") == {"q1": 1.0, "q2": 1.0, "q3": 0.0}


def test_evaluate_run_adds_requested_cutoffs_to_the_headline_ones():
    report = evaluate_run({"q": RUN}, {"q": QRELS}, ks=(1, 5))
    assert sorted(report.means) == sorted(
        [f"{m}@{k}" for k in (1, 2, 5, 10, 100) for m in ("ndcg", "recall", "mrr")] + ["both@5", "both@10"]
    )
    assert report.means["ndcg@1"] == pytest.approx(3 / 7)
    with pytest.raises(ConfigError, match="ndcg@3"):
        report.metric("ndcg@3")


def test_chunk_hits_become_documents_scored_by_their_best_chunk():
    hits = [("d1", 0.2), ("d2", 0.9), ("d1", 0.7), ("d3", 0.1), ("d1", 0.4)]
    assert aggregate_chunk_hits_to_docs(hits) == {"d1": 0.7, "d2": 0.9, "d3": 0.1}
    assert aggregate_chunk_hits_to_docs(hits, depth=2) == {"d2": 0.9, "d1": 0.7}
    assert aggregate_chunk_hits_to_docs([], depth=3) == {}


def test_truncating_aggregated_runs_at_depth_never_changes_metrics_cut_at_that_depth():
    # Many ties straddling the cut: truncation must keep the documents trec_eval ranks first.
    hits = [(f"d{i:02d}", float(i % 4)) for i in range(40)]
    qrels = {f"d{i:02d}": i % 3 for i in range(0, 40, 3)}
    full = aggregate_chunk_hits_to_docs(hits)
    cut = aggregate_chunk_hits_to_docs(hits, depth=10)
    assert len(cut) == 10
    assert ndcg_at_k(cut, qrels, 10) == ndcg_at_k(full, qrels, 10)
    assert mrr_at_k(cut, qrels, 10) == mrr_at_k(full, qrels, 10)
    assert recall_at_k(cut, qrels, 10) == recall_at_k(full, qrels, 10)


@pytest.mark.parametrize("bad_k", [0, -1, 2.5, True])
def test_invalid_cutoff_is_a_config_error_naming_the_value(bad_k):
    with pytest.raises(ConfigError, match="positive integer"):
        ndcg_at_k(RUN, QRELS, k=bad_k)


def test_unknown_gain_lists_the_allowed_ones():
    with pytest.raises(ConfigError, match="exponential.*linear"):
        ndcg_at_k(RUN, QRELS, gain="log")


def test_nan_scores_are_refused_with_the_document_named():
    with pytest.raises(DatasetError, match="'b'"):
        ndcg_at_k({"a": 1.0, "b": float("nan")}, QRELS)
    with pytest.raises(DatasetError, match="NaN"):
        aggregate_chunk_hits_to_docs([("a", float("nan"))])


def test_empty_qrels_cannot_be_averaged():
    with pytest.raises(DatasetError, match="qrels are empty") as info:
        evaluate_run({"q": RUN}, {})
    assert isinstance(info.value, RagspineError)


def test_eval_package_imports_only_stdlib_numpy_and_ragspine():
    package = Path(__file__).resolve().parents[3] / "ragspine_query" / "eval"
    allowed = set(sys.stdlib_module_names) | {"numpy", "ragspine_query", "__future__"}
    for source in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [node.module.split(".")[0]]
            else:
                continue
            assert set(roots) <= allowed, f"{source.name} imports {roots}"
