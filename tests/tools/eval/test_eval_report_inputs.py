"""``write_eval_report`` on results that cannot draw a report: a located error, not a crash
inside the HTML renderer."""

from __future__ import annotations

import pytest

from ragspine_tools.evaluate import ModeResult, write_eval_report
from tests.conftest import REPO_ROOT

SAMPLE_SET = REPO_ROOT / "data" / "eval" / "sample"


def test_a_result_without_its_per_query_report_and_run_is_a_located_error(tmp_path) -> None:
    bare = ModeResult(mode="bm25", reranker="none", metrics={"active_mode": "bm25"}, per_query_ndcg={"q1": 1.0},
                      seconds_per_query=0.01, run_path=str(tmp_path / "bm25.trec"))
    with pytest.raises(ValueError, match=r"the bm25 result has no per-query report and run .* evaluate_dataset"):
        write_eval_report(tmp_path, SAMPLE_SET, [bare], split="dev")
    assert list(tmp_path.iterdir()) == []  # nothing half-written
