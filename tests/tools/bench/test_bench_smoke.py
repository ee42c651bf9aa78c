"""``ragspine bench`` runs end to end on a small synthetic corpus and reports its figures."""

from __future__ import annotations

import json

import pytest




@pytest.fixture(scope="module")
def bench_main():
    from ragspine_tools.bench.bench_lexical import main

    return main


def test_bench_json_has_the_side_by_side_figures_and_ours_agrees_with_the_reference(bench_main, tmp_path, capsys):
    code = bench_main([
        "--corpus", "synthetic-10k", "--passages", "3000", "--queries", "50", "--rounds", "1",
        "--cold-start", "ours", "--no-tracemalloc", "--json", "--out", str(tmp_path),
    ])
    assert code == 0
    report = json.loads(capsys.readouterr().out)

    for key in ("qps_ratio", "build_speed_ratio", "engines", "corpus", "machine", "goals"):
        assert key in report
    assert report["corpus"]["rows"] == 3000
    assert report["machine"]["cpu"] and report["machine"]["python"]
    ours = report["engines"]["ours"]
    for key in ("build_s", "index_mb", "open_s", "cold_start", "build_rss_delta_mb"):
        assert key in ours
    assert ours["cold_start"]["total_s"] > 0
    for qset in ("normal", "stop"):
        figures = ours[qset]
        for key in ("qps", "cpu_qps", "batch_qps", "p50_ms", "p99_ms", "top10_overlap", "top10_valid"):
            assert figures[key] is not None, (qset, key)
        assert figures["top10_overlap"] == 1.0 and figures["top10_valid"] == 1.0
    for name in ("bm25s-numpy", "bm25s-numba", "tantivy"):
        assert name in report["engines"]  # measured, or skipped with the reason
    if "qps" in (report["engines"]["bm25s-numba"].get("normal") or {}):
        assert report["qps_ratio"] > 0 and report["build_speed_ratio"] > 0
        assert report["engines"]["bm25s-numba"]["normal"]["top10_overlap"] == 1.0

    assert (tmp_path / "lexical_synthetic-3k.md").read_text(encoding="utf-8").startswith("# Lexical benchmark")
    assert json.loads((tmp_path / "lexical_synthetic-3k.json").read_text(encoding="utf-8"))["qps_ratio"] == report["qps_ratio"]


def test_bench_skips_scifact_with_a_clear_message_when_the_dataset_is_absent(bench_main, tmp_path, capsys, monkeypatch):
    from ragspine_tools.bench import bench_lexical

    monkeypatch.setattr(bench_lexical, "SCIFACT_DIR", tmp_path / "no-such-dataset")
    assert bench_main(["--corpus", "scifact", "--json", "--out", str(tmp_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "SciFact not found" in report["skipped"] and "no-such-dataset" in report["skipped"]
