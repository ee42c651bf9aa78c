"""Tier 2: the versioned SQLite chunk store.

Write side: ``ragspine_index.chunk_store.ChunkStore``; read side:
``ragspine_core.chunk_rows.ChunkStoreReader`` (``mode=ro``).
"""

from __future__ import annotations

import sqlite3

import pytest

from ragspine_index.chunk_store import ChunkStore
from ragspine_core import schema
from ragspine_core.chunk_rows import ChunkStoreReader
from ragspine_core.errors import IndexNotFoundError
from ragspine_core.records import Chunk


def chunk(doc_id: str, ordinal: int, text: str, **kw) -> Chunk:
    return Chunk(
        chunk_id=f"{doc_id}:{ordinal}:{text}", library_id="lib", doc_id=doc_id, ordinal=ordinal, text=text,
        start=ordinal * 100, end=ordinal * 100 + len(text), **kw,
    )


def active(store: ChunkStore, doc_id: str) -> list[tuple[str, int]]:
    return [(r["chunk_id"], r["version"]) for r in store.execute_read(
        f"SELECT chunk_id, version FROM {schema.CHUNK_TABLE} WHERE doc_id = ? AND active = 1 ORDER BY ordinal", (doc_id,))]


def all_rows(store: ChunkStore, doc_id: str) -> list[tuple[str, int, int]]:
    return [(r["chunk_id"], r["version"], r["active"]) for r in store.execute_read(
        f"SELECT chunk_id, version, active FROM {schema.CHUNK_TABLE} WHERE doc_id = ? ORDER BY version, ordinal", (doc_id,))]


@pytest.fixture
def store(tmp_path):
    with ChunkStore(tmp_path / "chunk_store.sqlite") as s:
        yield s


def test_first_write_is_version_one_and_active(store):
    n = store.replace_doc_chunks("d1", [chunk("d1", 0, "a"), chunk("d1", 1, "b")], "2024-01-01", content_hash="h1")
    assert n == 2
    assert active(store, "d1") == [("d1:0:a", 1), ("d1:1:b", 1)]
    assert store.document_hashes() == {"d1": "h1"}


def test_replacement_bumps_version_and_deactivates_old_rows(store):
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a"), chunk("d1", 1, "b")], content_hash="h1")
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a2")], content_hash="h2")
    assert active(store, "d1") == [("d1:0:a2", 2)]
    assert all_rows(store, "d1") == [("d1:0:a", 1, 0), ("d1:1:b", 1, 0), ("d1:0:a2", 2, 1)]
    assert store.document_hashes() == {"d1": "h2"}


def test_reingesting_identical_chunks_is_idempotent(store):
    chunks = [chunk("d1", 0, "a"), chunk("d1", 1, "b")]
    store.replace_doc_chunks("d1", chunks, content_hash="h1")
    assert store.replace_doc_chunks("d1", chunks, content_hash="h1") == 0
    assert all_rows(store, "d1") == [("d1:0:a", 1, 1), ("d1:1:b", 1, 1)]


def test_same_chunks_with_new_content_hash_is_a_new_version(store):
    chunks = [chunk("d1", 0, "a")]
    store.replace_doc_chunks("d1", chunks, content_hash="h1")
    store.replace_doc_chunks("d1", chunks, content_hash="h1-metadata-edit")
    assert active(store, "d1") == [("d1:0:a", 2)]


def test_empty_list_withdraws_the_document(store):
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a")], content_hash="h1")
    store.replace_doc_chunks("d2", [chunk("d2", 0, "z")], content_hash="h2")
    store.replace_doc_chunks("d1", [])
    assert active(store, "d1") == []
    assert "d1" not in store.document_hashes()
    assert active(store, "d2") == [("d2:0:z", 1)]
    assert store.replace_doc_chunks("d1", []) == 0  # withdrawing twice is a no-op
    # history is kept: the withdrawn version is still there, inactive
    assert all_rows(store, "d1") == [("d1:0:a", 1, 0)]


def test_readding_a_withdrawn_document_gets_a_higher_version(store):
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a")], content_hash="h1")
    store.replace_doc_chunks("d1", [])
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a")], content_hash="h1")
    (_, version), = active(store, "d1")
    assert version >= 2


def test_rows_carry_lineage(store):
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a", chunker="paragraph", chunker_version="1")], "2024-06-30",
                             content_hash="h1", source_path="reports/d1.md", run_id="run-42",
                             chunker="paragraph", chunker_version="1")
    (row,) = store.execute_read(f"SELECT * FROM {schema.CHUNK_TABLE}")
    assert (row["doc_id"], row["start_char"], row["end_char"]) == ("d1", 0, 1)
    assert (row["chunker"], row["chunker_version"], row["valid_as_of"], row["run_id"]) == ("paragraph", "1", "2024-06-30", "run-42")
    assert row["ingested_at"].endswith("Z") and row["doc_content_hash"] == "h1"
    (doc,) = store.execute_read(f"SELECT * FROM {schema.DOCUMENT_TABLE}")
    assert (doc["source_path"], doc["run_id"], doc["version"]) == ("reports/d1.md", "run-42", 1)


def test_iter_chunks_is_an_and_filter_over_active_rows(store):
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a", entity="ACME_CN", period="2024Q3")], content_hash="1")
    store.replace_doc_chunks("d2", [chunk("d2", 0, "b", entity="ACME_CN", period="2024Q4")], content_hash="2")
    store.replace_doc_chunks("d3", [chunk("d3", 0, "c", entity="ACME_US", period="2024Q3")], content_hash="3")
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a2", entity="ACME_CN", period="2024Q3")], content_hash="1b")
    assert [c.chunk_id for c in store.iter_chunks(entity="ACME_CN")] == ["d1:0:a2", "d2:0:b"]
    assert [c.chunk_id for c in store.iter_chunks(entity="ACME_CN", period="2024Q3")] == ["d1:0:a2"]
    assert [c.chunk_id for c in store.iter_chunks(period="2024Q3")] == ["d1:0:a2", "d3:0:c"]
    assert [(c.chunk_id, c.version) for c in store.iter_chunks(doc_id="d1", include_inactive=True)] == [
        ("d1:0:a", 1), ("d1:0:a2", 2)]
    assert store.iter_chunks(entity="NOBODY") == []


def test_execute_read_refuses_plain_writes(store):
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a")], content_hash="h1")
    for sql in (f"DELETE FROM {schema.CHUNK_TABLE}", f"UPDATE {schema.CHUNK_TABLE} SET active = 0",
                "INSERT INTO schema_info VALUES ('x', 'y')", "DROP TABLE schema_info"):
        with pytest.raises(ValueError, match="SELECT"):
            store.execute_read(sql)
    assert active(store, "d1") == [("d1:0:a", 1)]


@pytest.mark.parametrize(
    "sql",
    [
        f"WITH doomed AS (SELECT 1) DELETE FROM {schema.CHUNK_TABLE}",
        f"WITH doomed AS (SELECT 1) UPDATE {schema.CHUNK_TABLE} SET active = 0",
        "PRAGMA user_version = 7",
    ],
)
def test_execute_read_refuses_writes_disguised_as_reads(store, sql):
    store.replace_doc_chunks("d1", [chunk("d1", 0, "a")], content_hash="h1")
    with pytest.raises((ValueError, sqlite3.DatabaseError)):
        store.execute_read(sql)
    assert active(store, "d1") == [("d1:0:a", 1)]
    assert store.execute_read("PRAGMA user_version")[0][0] == 0


OLD_COLUMNS = ("chunk_id", "library_id", "doc_id", "ordinal", "text", "start_char", "end_char",
               "title", "sensitivity", "version", "active")


def make_old_store(path) -> None:
    """A chunk store written by an older release: fewer columns, no row_idx, no lineage."""
    conn = sqlite3.connect(path)
    cols = ", ".join(f"{c} {'INTEGER' if c in ('ordinal', 'start_char', 'end_char', 'version', 'active') else 'TEXT'}"
                     for c in OLD_COLUMNS)
    conn.execute(f"CREATE TABLE {schema.CHUNK_TABLE} ({cols}, PRIMARY KEY (chunk_id, version))")
    conn.execute(f"CREATE TABLE {schema.DOCUMENT_TABLE} (doc_id TEXT, content_hash TEXT, version INTEGER, active INTEGER)")
    conn.execute(f"INSERT INTO {schema.CHUNK_TABLE} VALUES ('old:0', 'lib', 'old', 0, 'kept text', 0, 9, 'Old', 'PUBLIC', 1, 1)")
    conn.execute(f"INSERT INTO {schema.DOCUMENT_TABLE} VALUES ('old', 'h-old', 1, 1)")
    conn.commit()
    conn.close()


def test_older_schema_migrates_additively_and_keeps_rows(tmp_path):
    path = tmp_path / "old.sqlite"
    make_old_store(path)
    with ChunkStore(path) as store:
        have = {r[1] for r in store.execute_read(f"PRAGMA table_info({schema.CHUNK_TABLE})")}
        assert set(schema.CHUNK_COLUMN_NAMES) <= have
        (old,) = store.iter_chunks(doc_id="old")
        assert (old.chunk_id, old.text, old.title, old.version) == ("old:0", "kept text", "Old", 1)
        assert (old.chunker, old.extra, old.index_text) == ("paragraph", (), "")  # column defaults
        assert store.document_hashes() == {"old": "h-old"}
        store.replace_doc_chunks("old", [chunk("old", 0, "new text")], content_hash="h-new")
        assert active(store, "old") == [("old:0:new text", 2)]


def test_reader_opens_read_only_and_a_write_raises(tmp_path):
    path = tmp_path / "chunk_store.sqlite"
    with ChunkStore(path) as store:
        store.replace_doc_chunks("d1", [chunk("d1", 0, "a", entity="ACME_CN")], content_hash="h1")
    with ChunkStoreReader(path) as reader:
        assert [c.chunk_id for c in reader.iter_chunks(entity="ACME_CN")] == ["d1:0:a"]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader.execute_read(f"DELETE FROM {schema.CHUNK_TABLE}")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader.execute_read(f"WITH x AS (SELECT 1) UPDATE {schema.CHUNK_TABLE} SET active = 0")
    with ChunkStoreReader(path) as reader:
        assert len(reader.iter_chunks()) == 1


def test_reader_on_a_missing_file_names_the_asset(tmp_path):
    with pytest.raises(IndexNotFoundError, match="chunks"):
        ChunkStoreReader(tmp_path / "absent.sqlite")
    assert not (tmp_path / "absent.sqlite").exists()
