"""`ragspine bench --ingest --synthetic N` through the real Dagster assets (embedding none)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("dagster")


@pytest.mark.slow
def test_the_ingest_bench_reports_every_step_of_a_real_run(capsys):
    from ragspine_index.pipeline import STEPS
    from ragspine_tools.bench.bench_ingest import main

    assert main(["--synthetic", "12", "--embedding", "none", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["documents"] == 12 and rep["chunks"] > 12
    assert sorted(rep["steps"]) == sorted(s.name for s in STEPS)  # in the order Dagster ran them
    total = rep["total"]
    assert total["cpu_s"] == pytest.approx(sum(s["cpu_s"] for s in rep["steps"].values()), abs=0.05)
    assert total["cpu_ms_per_chunk"] == pytest.approx(1000 * total["cpu_s"] / rep["chunks"], rel=0.05)
    assert 0 <= rep["summary_tree_share"] <= 1
