"""One index pipeline: ``build_library`` (evaluation, benchmarks) and the Dagster assets
(``ragspine ingest``) run the same declared steps, so the same input publishes the same
snapshot, and a failing blocking check stops ``build_library`` exactly as it stops a run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

dg = pytest.importorskip("dagster", reason="the Dagster path needs the 'pipeline' extra")

from ragspine_index.artifacts import LibraryPaths  # noqa: E402
from ragspine_index.pipeline import STEPS, build_library  # noqa: E402
from ragspine_index.step_api import BlockingCheckError  # noqa: E402
from ragspine_query import open_library  # noqa: E402
from ragspine_core import schema  # noqa: E402
from tests.conftest import SAMPLE_LIBRARY, copy_sample_data, ingest  # noqa: E402

pytestmark = pytest.mark.slow


def _paths(data: Path) -> LibraryPaths:
    return LibraryPaths(SAMPLE_LIBRARY, data / "raw" / SAMPLE_LIBRARY, data / "artifacts" / SAMPLE_LIBRARY)


def _build(data: Path, **kwargs):
    return build_library(_paths(data), cache_path=data / "cache" / "embeddings.sqlite",
                         glossary_path=data / "glossary.toml", **kwargs)


def _manifest(snapshot_dir: Path) -> dict:
    return json.loads((Path(snapshot_dir) / schema.MANIFEST_FILE).read_text(encoding="utf-8"))


def _rows(snapshot_dir: Path) -> list[tuple]:
    with sqlite3.connect(Path(snapshot_dir) / schema.SNAPSHOT_CHUNKS_FILE) as conn:
        return conn.execute(
            "SELECT row_idx, chunk_id, version, doc_id, text, index_text, sensitivity FROM narrative_chunk "
            "ORDER BY row_idx").fetchall()


def test_build_library_and_dagster_publish_the_same_snapshot(tmp_path):
    """Two copies of the sample library whose _library.toml asks for deterministic vectors,
    run-level embedding "none" on both paths: the library's own setting wins on both."""
    by_library, by_dagster = copy_sample_data(tmp_path / "a"), copy_sample_data(tmp_path / "b")
    for data in (by_library, by_dagster):
        (data / "raw" / SAMPLE_LIBRARY / "_library.toml").write_text('embedding = "deterministic"\n', encoding="utf-8")

    built = _build(by_library, embedding="none", run_id="eval-path")
    summary = ingest(by_dagster / "raw" / SAMPLE_LIBRARY, embedding="none")

    assert list(built.timings) == [s.name for s in STEPS]
    assert built.snapshot_id == summary.snapshot_id
    a, b = _manifest(built.snapshot_dir), _manifest(summary.snapshot_dir)
    assert a["run_id"] == "eval-path" and b["run_id"] == summary.run_id
    # equal but for run metadata (the SQLite file's size depends on the run id stored in its rows)
    strip = lambda m: {k: v for k, v in m.items() if k not in ("created_at", "run_id", "artifacts")}  # noqa: E731
    assert strip(a) == strip(b)
    assert {k: v for k, v in a["artifacts"].items() if not k.endswith(".sqlite")} == {
        k: v for k, v in b["artifacts"].items() if not k.endswith(".sqlite")}
    assert a["artifacts"][schema.SNAPSHOT_CHUNKS_FILE]["sha256"] == b["artifacts"][schema.SNAPSHOT_CHUNKS_FILE]["sha256"]
    assert a["embedding"]["model_id"].startswith("deterministic"), "the library's _library.toml embedding wins"
    assert a["counts"]["embedded_chunks"] > 0
    assert set(a[schema.MANIFEST_ARTIFACT_SETS]) == {"chunks", "bm25", "bm25_doc", "bm25_blend", "embeddings", "glossary",
                                                         "summary_tree", "relation_graph",
                                                         "bm25_public"}  # the sample holds INTERNAL rows
    for name, entry in a[schema.MANIFEST_ARTIFACT_SETS].items():
        spec = schema.ARTIFACT_REGISTRY[name]
        assert entry == {"path": spec.path, "asset": spec.asset}
        assert (Path(built.snapshot_dir) / spec.path).exists()
    assert _rows(built.snapshot_dir) == _rows(summary.snapshot_dir)
    for rel in ("glossary.json", f"{schema.BM25_DIR}/{schema.BM25_IMPACTS}", f"{schema.EMBEDDINGS_DIR}/{schema.EMB_VECTORS}"):
        assert (Path(built.snapshot_dir) / rel).read_bytes() == (Path(summary.snapshot_dir) / rel).read_bytes()

    # identical inputs, a second run: the same id again, nothing new published
    again = _build(by_library, embedding="none", run_id="eval-path-2")
    assert again.snapshot_id == built.snapshot_id


def test_build_library_stops_on_a_failing_blocking_check_and_the_previous_snapshot_keeps_serving(tmp_path):
    data = copy_sample_data(tmp_path / "data")
    first = _build(data, embedding="none")
    paths = _paths(data)
    assert paths.current.resolve().name == first.snapshot_id

    # corrupt one active chunk in the store (as tests/end_to_end/test_blocking_checks.py does) ...
    with sqlite3.connect(paths.chunk_store) as conn:
        (chunk_id,) = conn.execute(
            "SELECT chunk_id FROM narrative_chunk WHERE active = 1 AND doc_id = 'globex-market-share-note' LIMIT 1").fetchone()
        conn.execute("UPDATE narrative_chunk SET text = 'tampered text', index_text = 'tampered text' WHERE chunk_id = ?",
                     (chunk_id,))
    # ... and change another document, so a publication would otherwise happen
    other = data / "raw" / SAMPLE_LIBRARY / "initech-company-profile.md"
    other.write_text(other.read_text(encoding="utf-8") + "\nInitech opened a new office in 2025.\n", encoding="utf-8")

    with pytest.raises(BlockingCheckError,
                       match=r"(?s)chunks\.chunk_text_is_substring_of_source failed.*" + chunk_id
                       + r".*previous snapshot keeps serving \(" + first.snapshot_id) as info:
        _build(data, embedding="none")
    assert (info.value.step, info.value.check) == ("chunks", "chunk_text_is_substring_of_source")

    assert paths.current.resolve().name == first.snapshot_id
    assert [p.name for p in paths.snapshots.iterdir() if not p.name.startswith(".")] == [first.snapshot_id]
    with open_library(paths.root) as lib:
        assert lib.snapshot_id == first.snapshot_id
        assert all(c.text != "tampered text" for c in lib.chunks_by_rows(range(lib.n_chunks)))
