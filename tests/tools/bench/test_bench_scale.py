"""``bench_scale`` end to end at 2,000 chunks: real ingest, real ANN, real re-ingest.

The assets run for real (``ingest_library``, embedding none, no summary tree to keep it
fast); the usearch index is built by the product's builder over the synthetic vectors;
the figures asserted are the run's own outputs.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest




@pytest.fixture(scope="module")
def bench_scale():
    pytest.importorskip("dagster")
    from ragspine_core.dense.ann import engine_available  # imports usearch in the order that cannot crash

    if not engine_available("usearch"):
        pytest.skip("the scale benchmark's ANN rows need the 'ann' extra (usearch)")
    from ragspine_tools.bench import bench_scale

    return bench_scale


@pytest.fixture(scope="module")
def run(bench_scale, tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    out, work = root / "reports", root / "work"
    assert bench_scale.main(["--scale", "2000", "--workdir", str(work), "--queries", "20", "--rounds", "1",
                             "--no-tree", "--no-minilm", "--out", str(out)]) == 0
    return json.loads((out / "scale_2000.json").read_text()), out, work


def test_ingest_figures_are_real(run) -> None:
    report, out, _ = run
    ing = report["ingest"]
    assert 1800 <= ing["chunks"] <= 2200 and ing["documents"] == 614
    assert ing["documents_per_s"] > 0 and ing["chunks_per_s"] > ing["documents_per_s"]
    assert ing["peak_rss_growth_mb"] >= 0 and ing["process_peak_rss_mb"] > 0
    assert {"documents", "chunks", "bm25_index", "relation_graph", "index_manifest"} <= set(ing["step_seconds"])
    assert ing["artifact_mb"]["chunks.sqlite"] > 0 and ing["snapshot_mb"] > 0
    assert ing["asset_metadata"]["chunks"]["chunks_written"] == ing["chunks"]
    assert len(ing["load_before"]) == 3
    md = (out / "scale_2000.md").read_text()
    assert "documents/s" in md and "recall@10" in md and "Re-ingest" in md


def test_query_figures_and_recall(run) -> None:
    report, _, work = run
    q = report["query"]
    assert q["rows"] == report["ingest"]["chunks"] == q["vectors"]["rows"]
    assert 0.0 <= q["recall"]["recall_at_10"] <= 1.0 and q["recall"]["recall_at_10"] >= 0.9  # 2k points: near exact
    assert 0.0 <= q["recall"]["hybrid_top10_agreement"] <= 1.0
    assert q["ann"]["params"]["engine"] == "usearch" and q["ann"]["params"]["count"] == q["rows"]
    assert q["ann"]["mb"] > 0 and not q["ann"]["reused"]
    for name in ("bm25", "hybrid_exact", "hybrid_ann", "dense_exact", "dense_ann"):
        fig = q["latency"][name]
        assert math.isfinite(fig["p50_ms"]) and 0 < fig["p50_ms"] <= fig["p99_ms"], (name, fig)
        assert fig["n"] == 20
    assert "skipped" in q["latency"]["hybrid_ann_minilm"]  # --no-minilm
    assert any(p.name.startswith("ann_") for p in work.iterdir())


def test_reingest_recomputes_only_the_changed_documents(run) -> None:
    report, _, _ = run
    re_ = report["reingest"]
    changed = re_["changed_documents"]
    assert changed == math.ceil(report["ingest"]["documents"] / 100)
    assert re_["documents_changed_by_asset"] == changed
    assert re_["documents_unchanged_by_asset"] == report["ingest"]["documents"] - changed
    # every chunk of a changed document is re-chunked, and nothing else
    snap = Path(re_["snapshot_dir"])
    con = sqlite3.connect(snap / "chunks.sqlite")
    changed_ids = [f"doc-{i:07d}" for i in range(0, report["ingest"]["documents"], 100)]
    n = con.execute(f"SELECT COUNT(*) FROM narrative_chunk WHERE doc_id IN ({','.join('?' * len(changed_ids))})",
                    changed_ids).fetchone()[0]
    con.close()
    assert re_["chunks_rechunked"] == re_["chunks_of_changed_documents"] == n > 0
    assert 0 < re_["vectors_to_embed"] <= n  # content-hash ids: untouched chunks keep theirs
    assert re_["bm25_rows_reindexed"] >= report["ingest"]["chunks"]
    assert re_["seconds"] > 0


def test_reuse_reruns_the_query_phase_alone(bench_scale, run, tmp_path) -> None:
    report, _, work = run
    assert bench_scale.main(["--scale", "2000", "--workdir", str(work), "--reuse", "--phases", "query", "--queries", "10",
                             "--rounds", "1", "--no-minilm", "--out", str(tmp_path)]) == 0
    again = json.loads((tmp_path / "scale_2000.json").read_text())
    assert again["ingest"] == json.loads(json.dumps(report["ingest"]))  # carried over, not re-measured
    assert "reingest" not in again
    con = sqlite3.connect(Path(report["reingest"]["snapshot_dir"]) / "chunks.sqlite")
    rows = con.execute("SELECT COUNT(*) FROM narrative_chunk").fetchone()[0]
    con.close()
    assert again["query"]["rows"] == rows  # the re-ingested snapshot is the one reused
    # vectors and ANN index are reused when the row count did not change
    assert again["query"]["ann"]["reused"] is (rows == report["query"]["rows"])


def test_ragspine_bench_scale_dispatches_to_the_scale_benchmark(capsys) -> None:
    pytest.importorskip("dagster")
    from ragspine_tools.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["bench", "--scale", "2000", "--help"])
    assert exc.value.code == 0
    assert "ragspine bench --scale" in capsys.readouterr().out


def test_ann_update_phase_on_prebuilt_vectors(bench_scale, tmp_path) -> None:
    work = tmp_path / "w"
    args = ["--scale", "3000", "--rows", "3000", "--workdir", str(work), "--ann-threads", "1"]
    assert bench_scale.main([*args, "--prebuild-ann", "3000"]) == 0
    assert bench_scale.main([*args, "--phases", "ann_update", "--queries", "20", "--rounds", "1",
                             "--out", str(tmp_path)]) == 0
    up = json.loads((tmp_path / "scale_3000_ann_update.json").read_text())["ann_update"]
    assert up["removed"] == up["added"] == 30 and up["moved"] > 2000
    assert up["params"]["count"] == 3000 and up["params"]["rows_changed_since_full"] == 60
    assert up["rows_found_at_their_new_position"] == "200/200" and up["recall_at_10"] >= 0.9
    assert up["update_s"] >= 0 and math.isfinite(up["latency"]["dense_ann_updated"]["p50_ms"])
