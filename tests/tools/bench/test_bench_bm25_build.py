"""ragspine_tools/bench/bench_bm25_build.py prints real figures of a real build."""

from __future__ import annotations

import json


def test_bm25_build_bench_reports_the_build_it_ran(capsys):
    from ragspine_tools.bench.bench_bm25_build import main

    assert main(["3000"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["chunks"] == 3000 and out["documents"] == 1000
    assert out["postings"] > 3000  # every synthetic chunk has several distinct terms
    assert out["blend_mb"] > 0 and out["peak_rss_mb"] >= out["rss_before_mb"] > 0
