"""Tier 3: re-materialization is deterministic and incremental; publishing is atomic.

One private copy of the built sample data root goes through two more real runs:
an unchanged re-run, then a run after one document changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.publish import list_snapshots
from ragspine_core import schema
from ragspine_core.chunk_rows import ChunkStoreReader
from ragspine_query.library import connect_read_only, open_library
from ragspine_query.retriever import HybridRetriever, RetrievalConfig
from tests.conftest import copy_data_root, ingest

pytestmark = pytest.mark.slow

CHANGED_DOC = "acme-eu-2024q3-earnings"
CHANGED_FILE = Path("reports") / "acme-eu-2024q3-earnings.md"
NEW_PARAGRAPH = "\n\nAddendum: the Zanzibarian distributor rebate programme lifted fourth quarter bookings.\n"
QUERIES = [
    "why did Acme Europe revenue decline in Q3 2024",
    "数据出境 第五条",
    "为什么营收下滑",
    "PowerFlex 7 price",
    "gross margin 2024",
    "Zanzibarian distributor rebate",
    "Zanzibarian",
]


def snapshot_chunk_ids(snapshot_dir: Path) -> list[str]:
    conn = connect_read_only(snapshot_dir / schema.SNAPSHOT_CHUNKS_FILE, immutable=True)
    try:
        return [r[0] for r in conn.execute(f"SELECT chunk_id FROM {schema.CHUNK_TABLE} ORDER BY row_idx")]
    finally:
        conn.close()


def rankings(lib) -> dict[str, list[tuple[str, float, float]]]:
    r = HybridRetriever(lib, config=RetrievalConfig(mode="bm25"))
    return {q: [(h.chunk_id, h.score, h.scores["bm25"]) for h in r.search(q, top_k=20)] for q in QUERIES}


def active_versions(store: Path) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    with ChunkStoreReader(store) as reader:
        for row in reader.execute_read(f"SELECT doc_id, version FROM {schema.CHUNK_TABLE} WHERE active = 1"):
            out.setdefault(row["doc_id"], set()).add(row["version"])
    return out


@pytest.fixture(scope="module")
def runs(built_sample, tmp_path_factory):
    """States after: the shared build (A), an unchanged re-run (A'), a one-document change (B)."""
    data = copy_data_root(built_sample.parent.parent, tmp_path_factory.mktemp("reindex") / "data")
    raw = data / "raw" / "sample"
    art = data / "artifacts" / "sample"
    state: dict = {"art": art}
    reader_a = open_library(art)
    state["a"] = {"snapshot_id": reader_a.snapshot_id, "dir": reader_a.snapshot_dir,
                  "chunk_ids": snapshot_chunk_ids(reader_a.snapshot_dir), "rankings": rankings(reader_a),
                  "manifest": reader_a.manifest, "versions": active_versions(art / schema.CHUNK_STORE_FILE)}

    rerun = ingest(raw)
    with open_library(art) as lib:
        state["a2"] = {"summary": rerun, "snapshot_id": lib.snapshot_id, "chunk_ids": snapshot_chunk_ids(lib.snapshot_dir),
                       "rankings": rankings(lib), "manifest": lib.manifest,
                       "versions": active_versions(art / schema.CHUNK_STORE_FILE)}

    path = raw / CHANGED_FILE
    path.write_text(path.read_text(encoding="utf-8") + NEW_PARAGRAPH, encoding="utf-8")
    changed = ingest(raw)
    with open_library(art) as lib:
        state["b"] = {"summary": changed, "snapshot_id": lib.snapshot_id, "chunk_ids": snapshot_chunk_ids(lib.snapshot_dir),
                      "rankings": rankings(lib), "manifest": lib.manifest,
                      "versions": active_versions(art / schema.CHUNK_STORE_FILE)}
    state["reader_a"] = reader_a
    yield state
    reader_a.close()


def test_unchanged_rerun_publishes_the_same_snapshot(runs):
    assert runs["a2"]["snapshot_id"] == runs["a"]["snapshot_id"]
    assert runs["a2"]["summary"].changed is False


def test_unchanged_rerun_gives_byte_identical_chunk_ids_and_artifacts(runs):
    assert runs["a2"]["chunk_ids"] == runs["a"]["chunk_ids"]
    assert "\n".join(runs["a2"]["chunk_ids"]).encode() == "\n".join(runs["a"]["chunk_ids"]).encode()
    assert runs["a2"]["manifest"]["artifacts"] == runs["a"]["manifest"]["artifacts"]
    assert runs["a2"]["versions"] == runs["a"]["versions"]


def test_unchanged_rerun_gives_identical_rankings(runs):
    assert runs["a2"]["rankings"] == runs["a"]["rankings"]


def test_changing_one_document_bumps_only_its_chunk_version(runs):
    before, after = runs["a"]["versions"], runs["b"]["versions"]
    assert after[CHANGED_DOC] == {max(before[CHANGED_DOC]) + 1}
    assert {d: v for d, v in after.items() if d != CHANGED_DOC} == {d: v for d, v in before.items() if d != CHANGED_DOC}


def test_changing_one_document_changes_only_its_chunk_ids(runs):
    a, b = runs["a"]["manifest"]["documents"], runs["b"]["manifest"]["documents"]
    assert {d for d in a.keys() | b.keys() if a.get(d) != b.get(d)} == {CHANGED_DOC}
    gained = set(runs["b"]["chunk_ids"]) - set(runs["a"]["chunk_ids"])
    lost = set(runs["a"]["chunk_ids"]) - set(runs["b"]["chunk_ids"])
    assert gained
    with open_library(runs["art"]) as lib:
        rows = lib.execute_read(
            f"SELECT DISTINCT doc_id FROM {schema.CHUNK_TABLE} WHERE chunk_id IN ({','.join('?' * len(gained))})", sorted(gained))
    assert {r[0] for r in rows} == {CHANGED_DOC}
    assert len(lost) <= len(gained) + 1  # only the changed document's tail chunks differ


def test_changing_one_document_publishes_a_new_snapshot(runs):
    b = runs["b"]
    assert b["snapshot_id"] != runs["a"]["snapshot_id"] and b["summary"].changed is True
    assert runs["a"]["rankings"]["Zanzibarian"] == []  # the new word is only in the new snapshot
    assert b["rankings"]["Zanzibarian"][0][0] in set(b["chunk_ids"]) - set(runs["a"]["chunk_ids"])
    snaps = list_snapshots(LibraryPaths("sample", Path(), runs["art"]))
    assert snaps[0]["snapshot_id"] == b["snapshot_id"] and snaps[0]["current"]
    older = {s["snapshot_id"]: s for s in snaps[1:]}
    assert runs["a"]["snapshot_id"] in older and not older[runs["a"]["snapshot_id"]]["current"]  # kept for rollback


def test_reader_opened_before_a_republish_keeps_its_snapshot(runs):
    reader = runs["reader_a"]
    assert reader.snapshot_id == runs["a"]["snapshot_id"]
    assert rankings(reader) == runs["a"]["rankings"]
    assert (runs["art"] / schema.CURRENT_POINTER).resolve().name == runs["b"]["snapshot_id"]


def test_snapshot_manifest_hashes_match_the_files(runs):
    from ragspine_index.artifacts import sha256_file

    snap = (runs["art"] / schema.CURRENT_POINTER).resolve()
    manifest = json.loads((snap / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
    for rel, info in manifest["artifacts"].items():
        f = snap / rel
        assert f.stat().st_size == info["bytes"], rel
        if info["sha256"] and not rel.endswith(".sqlite"):
            assert sha256_file(f) == info["sha256"], rel
