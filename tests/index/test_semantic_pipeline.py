"""The semantic chunker through the real Dagster assets: switch a library to it, backfill, query.

``ingest_library`` is ``dg.materialize`` of every asset for one library partition (what
``ragspine ingest`` and a backfill run do); the embedding backend is the offline
``deterministic`` one, so the semantic boundaries are drawn with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

dg = pytest.importorskip("dagster")
pytestmark = pytest.mark.slow

from ragspine_assets.ingest import ingest_library  # noqa: E402
from ragspine_query import open_library  # noqa: E402
from ragspine_core import schema  # noqa: E402
from ragspine_query.retriever import HybridRetriever, RetrievalConfig  # noqa: E402

DOCS = {
    "biology.md": ("---\ndoc_id: biology\ntitle: Cell notes\n---\n"
                   "Mitochondria produce ATP inside the cell. The cell divides its mitochondria when it needs energy. "
                   "Damaged mitochondria make the cell die. The river flooded the valley after heavy rain. "
                   "Flood barriers held the river back. Farmers in the valley lost crops in the flood.\n"),
    "markets.md": ("---\ndoc_id: markets\ntitle: Market wrap\n---\nBank shares fell sharply on Tuesday.\n\n"
                   "Bond yields dropped as investors sought safety.\n\n营收增长放缓。利润率下降。\n"),
    "secret.md": ("---\ndoc_id: secret\nsensitivity: RESTRICTED\n---\nQUOKKAMARKER merger terms were agreed. "
                  "The QUOKKAMARKER board approved the price.\n"),
}
N_DOCS = len(DOCS)


def _meta(result_instance, asset: str) -> dict:
    ev = result_instance.get_latest_materialization_event(dg.AssetKey(asset))
    return {k: v.value for k, v in ev.asset_materialization.metadata.items()}


def _chunkers(data: Path) -> set[str]:
    with open_library(data / "artifacts" / "lib") as lib:
        return {f"{r[0]}@{r[1]}" for r in lib.execute_read(f"SELECT DISTINCT chunker, chunker_version FROM {schema.CHUNK_TABLE}")}


def test_switching_a_library_to_the_semantic_chunker_rechunks_and_serves_queries(tmp_path):
    data = tmp_path / "data"
    raw = data / "raw" / "lib"
    raw.mkdir(parents=True)
    for name, text in DOCS.items():
        (raw / name).write_text(text, encoding="utf-8")
    instance = dg.DagsterInstance.ephemeral()

    first = ingest_library(raw, embedding="deterministic", instance=instance)
    assert _meta(instance, "chunks")["chunker"] == "paragraph@1"
    assert _chunkers(data) == {"paragraph@1"}

    # the user switches the library's chunker; the next run (a backfill) redoes every document
    (raw / "_library.toml").write_text('chunker = "semantic"\nbreakpoint_percentile = 40\n', encoding="utf-8")
    second = ingest_library(raw, embedding="deterministic", instance=instance)
    chunks = _meta(instance, "chunks")
    assert chunks["chunker"] == "semantic@1+deterministic-hash-v1-d64;breakpoint_percentile=40"
    assert chunks["documents_unchanged"] == 0
    assert chunks["documents_changed"] + chunks["documents_rechunked_identical"] == N_DOCS
    assert chunks["documents_changed"] >= 1
    assert "deterministic-hash-v1-d64" in chunks["boundary_embedder"]
    assert chunks["sentence_windows_embedded"] > 0
    assert "QUOKKAMARKER" not in repr(chunks)
    assert _chunkers(data) == {"semantic@1+deterministic-hash-v1-d64;breakpoint_percentile=40",
                               "semantic@1+lexical-tfidf-v1-d1024;breakpoint_percentile=40"}  # RESTRICTED: lexical
    assert second.snapshot_id != first.snapshot_id

    with open_library(data / "artifacts" / "lib") as lib:
        bio = [(r[0], r[1]) for r in lib.execute_read(
            f"SELECT start_char, end_char FROM {schema.CHUNK_TABLE} WHERE doc_id = 'biology' ORDER BY start_char")]
        assert len(bio) >= 2, "the two-topic paragraph is cut at a semantic boundary"
        retriever = HybridRetriever(lib, config=RetrievalConfig(mode="bm25"))
        hits = retriever.search("flood barriers river valley", top_k=3, include_restricted=False)
        top = hits[0].chunk
        assert (top.doc_id, top.chunker) == ("biology", "semantic")
        assert "Flood barriers" in top.text and "Mitochondria" not in top.text

    # nothing changed: nothing is re-chunked, re-embedded or re-published
    third = ingest_library(raw, embedding="deterministic", instance=instance)
    again = _meta(instance, "chunks")
    assert (again["documents_unchanged"], again["chunks_written"]) == (N_DOCS, 0)
    assert third.snapshot_id == second.snapshot_id
