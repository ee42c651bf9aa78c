"""A failing blocking asset check stops publication; the previous snapshot keeps serving."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

dg = pytest.importorskip("dagster")

from ragspine_assets.ingest import ingest_library  # noqa: E402
from ragspine_query import open_library  # noqa: E402
from ragspine_core.errors import RagspineError  # noqa: E402
from ragspine_query.retriever import HybridRetriever  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_corrupted_chunk_fails_the_blocking_check_and_nothing_is_published(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(REPO / "data" / "raw" / "sample", data / "raw" / "sample")
    shutil.copy(REPO / "data" / "glossary.toml", data / "glossary.toml")
    instance = dg.DagsterInstance.ephemeral()
    first = ingest_library(data / "raw" / "sample", embedding="none", instance=instance)
    current = data / "artifacts" / "sample" / "current"
    assert current.resolve().name == first.snapshot_id

    # Corrupt one active chunk in the store: its text is no longer a substring of its source.
    with sqlite3.connect(data / "artifacts" / "sample" / "chunk_store.sqlite") as conn:
        (chunk_id,) = conn.execute(
            "SELECT chunk_id FROM narrative_chunk WHERE active = 1 AND doc_id = 'globex-market-share-note' LIMIT 1").fetchone()
        conn.execute("UPDATE narrative_chunk SET text = 'tampered text', index_text = 'tampered text' WHERE chunk_id = ?", (chunk_id,))
    # ...and change another document, so a publish would otherwise happen.
    other = data / "raw" / "sample" / "initech-company-profile.md"
    other.write_text(other.read_text(encoding="utf-8") + "\nInitech opened a new office in 2025.\n", encoding="utf-8")

    with pytest.raises(RagspineError, match=r"(?s)blocking asset check failed.*chunk_text_is_substring_of_source.*previous snapshot keeps serving"):
        ingest_library(data / "raw" / "sample", embedding="none", instance=instance)

    check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("chunks"), "chunk_text_is_substring_of_source")]
    )
    evaluation = next(iter(check.values())).evaluation
    assert evaluation is not None and evaluation.passed is False
    assert chunk_id in str(evaluation.metadata)

    # Publication stopped: current still points at the first snapshot, which still answers.
    assert current.resolve().name == first.snapshot_id
    with open_library(data / "artifacts" / "sample") as lib:
        assert lib.snapshot_id == first.snapshot_id
        hits = HybridRetriever(lib).search("Globex market share", top_k=3)
        assert hits and all(h.chunk.text != "tampered text" for h in hits)
