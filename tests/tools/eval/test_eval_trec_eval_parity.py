"""Our metrics equal pytrec_eval's (trec_eval's) on hundreds of random runs with ties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine_tools.eval.metrics import evaluate_run, mrr_at_k, ndcg_at_k, recall_at_k, trec_ranking

pytrec_eval = pytest.importorskip("pytrec_eval")

TOL = 1e-9

# Ids chosen so that string order differs from numeric order and from insertion order,
# and includes non-ASCII (trec_eval compares bytes; UTF-8 byte order == code-point order).
DOC_POOL = (
    [str(i) for i in range(0, 120, 3)]
    + [f"doc-{i:03d}" for i in range(60)]
    + ["é", "ü", "z", "Z", "a-b", "ÿ1", "中文"]
)


def _random_case(rng: np.random.Generator, n_queries: int):
    """Random graded qrels and runs whose scores tie often, some only in float32."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.choice(len(DOC_POOL), size=int(rng.integers(1, 20)), replace=False)
        qrels[qid] = {DOC_POOL[i]: int(rng.integers(0, 4)) for i in judged}
        size = int(rng.integers(0, len(DOC_POOL)))
        retrieved = rng.choice(len(DOC_POOL), size=size, replace=False)
        style = q % 4
        if style == 0:  # integer scores: many exact ties
            scores = rng.integers(0, 5, size=size).astype(float)
        elif style == 1:  # one decimal: some ties
            scores = np.round(rng.normal(size=size), 1)
        elif style == 2:  # distinct in float64, tied in float32
            scores = 1.0 + rng.integers(0, 3, size=size) * 1e-9 + rng.integers(0, 3, size=size)
        else:  # continuous
            scores = rng.normal(size=size) * 10
        run[qid] = {DOC_POOL[i]: float(s) for i, s in zip(retrieved, scores)}
    return qrels, run


def _top(run_q: dict[str, float], k: int) -> dict[str, float]:
    return {d: run_q[d] for d in trec_ranking(run_q)[:k]}


@pytest.fixture(scope="module")
def random_case():
    return _random_case(np.random.default_rng(20240521), n_queries=400)


def test_ndcg_linear_gain_and_recall_equal_trec_eval_per_query(random_case):
    qrels, run = random_case
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_100"}).evaluate(run)
    ours = evaluate_run(run, qrels, gain="linear")
    checked = 0
    for qid, values in ours.per_query.items():
        if qid not in theirs:  # pytrec_eval omits queries with an empty run; ours score 0
            assert not run[qid] and values["ndcg@10"] == 0.0 and values["recall@100"] == 0.0
            continue
        assert values["ndcg@10"] == pytest.approx(theirs[qid]["ndcg_cut_10"], abs=TOL), qid
        assert values["recall@100"] == pytest.approx(theirs[qid]["recall_100"], abs=TOL), qid
        checked += 1
    assert checked >= 350
    mean = math.fsum(v["ndcg_cut_10"] for v in theirs.values()) / len(qrels)
    assert ours.ndcg_at_10 == pytest.approx(mean, abs=TOL)


def test_ndcg_exponential_gain_equals_trec_eval_on_qrels_regraded_to_2_pow_rel_minus_1(random_case):
    # trec_eval's gain is the grade itself, so grading 2^rel - 1 makes it compute our default.
    qrels, run = random_case
    regraded = {q: {d: 2**r - 1 if r > 0 else r for d, r in j.items()} for q, j in qrels.items()}
    theirs = pytrec_eval.RelevanceEvaluator(regraded, {"ndcg_cut_10"}).evaluate(run)
    ours = evaluate_run(run, qrels)  # gain="exponential"
    assert len(theirs) >= 350
    for qid, values in theirs.items():
        assert ours.per_query[qid]["ndcg@10"] == pytest.approx(values["ndcg_cut_10"], abs=TOL), qid


def test_mrr_at_10_equals_trec_eval_recip_rank_on_runs_cut_to_10(random_case):
    # recip_rank has no cut-off, so compare on runs that only hold their top 10.
    qrels, run = random_case
    cut = {q: _top(docs, 10) for q, docs in run.items()}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    ours = evaluate_run(run, qrels)
    assert len(theirs) >= 350
    for qid, values in theirs.items():
        assert ours.per_query[qid]["mrr@10"] == pytest.approx(values["recip_rank"], abs=TOL), qid


grades = st.integers(min_value=0, max_value=3)
ids = st.sampled_from(["1", "2", "10", "a", "b", "B", "ab", "é"])
scores = st.sampled_from([0.0, 0.5, 1.0, 1.0 + 1e-9, 1.0 + 1e-5, -2.0, 3.25])


@settings(max_examples=150, deadline=None)
@given(
    run_q=st.dictionaries(ids, scores, min_size=1, max_size=8),
    qrels_q=st.dictionaries(ids, grades, min_size=1, max_size=8),
    k=st.integers(min_value=1, max_value=6),
)
def test_single_query_metrics_equal_trec_eval_for_any_small_tied_run(run_q, qrels_q, k):
    measures = {f"ndcg_cut_{k}", f"recall_{k}", "recip_rank"}
    theirs = pytrec_eval.RelevanceEvaluator({"q": qrels_q}, measures).evaluate({"q": run_q})["q"]
    cut_rr = pytrec_eval.RelevanceEvaluator({"q": qrels_q}, {"recip_rank"}).evaluate(
        {"q": _top(run_q, k)}
    )["q"]["recip_rank"]
    assert ndcg_at_k(run_q, qrels_q, k, gain="linear") == pytest.approx(theirs[f"ndcg_cut_{k}"], abs=TOL)
    assert recall_at_k(run_q, qrels_q, k) == pytest.approx(theirs[f"recall_{k}"], abs=TOL)
    assert mrr_at_k(run_q, qrels_q, len(run_q)) == pytest.approx(theirs["recip_rank"], abs=TOL)
    assert mrr_at_k(run_q, qrels_q, k) == pytest.approx(cut_rr, abs=TOL)
