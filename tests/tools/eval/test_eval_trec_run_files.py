"""TREC run files: the 6-column format, exact round trips, and trec_eval reading them."""

from __future__ import annotations

import pytest

from ragspine_core.errors import ConfigError, DatasetError
from ragspine_tools.eval.metrics import evaluate_run, read_trec_run, write_trec_run

RUN = {
    "q2": {"d3": 0.5, "d1": 0.5, "d2": 0.75},
    "q10": {"dx": -1.25, "dy": 1 / 3},
}


def test_written_run_has_six_columns_ranked_by_score_then_doc_id(tmp_path):
    path = tmp_path / "run.trec"
    write_trec_run(path, RUN, "bm25")
    lines = path.read_text(encoding="utf-8").splitlines()
    # Queries in sorted order ("q10" < "q2"); ties (d1, d3 at 0.5) by doc id ascending.
    assert [line.split()[:4] for line in lines] == [
        ["q10", "Q0", "dy", "1"],
        ["q10", "Q0", "dx", "2"],
        ["q2", "Q0", "d2", "1"],
        ["q2", "Q0", "d1", "2"],
        ["q2", "Q0", "d3", "3"],
    ]
    assert all(len(line.split()) == 6 and line.endswith(" bm25") for line in lines)


def test_run_round_trips_bit_exact(tmp_path):
    path = tmp_path / "run.trec"
    write_trec_run(path, RUN, "x")
    assert read_trec_run(path) == RUN


def test_trec_eval_reads_our_file_and_agrees_with_our_metrics(tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    path = tmp_path / "run.trec"
    write_trec_run(path, RUN, "x")
    with path.open(encoding="utf-8") as handle:
        parsed = pytrec_eval.parse_run(handle)
    assert {q: dict(d) for q, d in parsed.items()} == RUN
    qrels = {"q2": {"d1": 1, "d3": 2}, "q10": {"dx": 1}}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(parsed)
    ours = evaluate_run(read_trec_run(path), qrels, gain="linear")
    for qid in qrels:
        assert ours.per_query[qid]["ndcg@10"] == pytest.approx(theirs[qid]["ndcg_cut_10"], abs=1e-12)


def test_reader_accepts_tabs_and_crlf(tmp_path):
    path = tmp_path / "run.trec"
    path.write_bytes(b"q1\tQ0\td1\t1\t2.5\tr\r\nq1 Q0 d2 2 1e-3 r\r\n\r\n")
    assert read_trec_run(path) == {"q1": {"d1": 2.5, "d2": 0.001}}


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("q1 Q0 d1 1 2.5 r\nq1 Q0 d2 2 r\n", "expected 6 fields"),
        ("q1 Q0 d1 1 2.5 r\nq1 Q0 d2 2 high r\n", "'high' is not a number"),
        ("q1 Q0 d1 1 2.5 r\nq1 Q0 d1 2 1.0 r\n", "listed twice"),
    ],
)
def test_malformed_run_line_is_reported_with_file_and_line(tmp_path, content, why):
    path = tmp_path / "bad.trec"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=why) as info:
        read_trec_run(path)
    assert "bad.trec:2" in str(info.value)


def test_missing_run_file_is_a_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        read_trec_run(tmp_path / "absent.trec")


@pytest.mark.parametrize(
    "run, name",
    [({"q 1": {"d": 1.0}}, "r"), ({"q": {"d\t1": 1.0}}, "r"), ({"q": {"d": 1.0}}, "my run")],
)
def test_ids_or_names_with_whitespace_cannot_be_written(tmp_path, run, name):
    with pytest.raises(ConfigError, match="whitespace"):
        write_trec_run(tmp_path / "run.trec", run, name)
