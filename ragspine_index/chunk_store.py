"""Write side of the versioned SQLite chunk store (explicit schema, parameterized SQL)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from ragspine_core import schema
from ragspine_core.chunk_rows import connect_read_only, iter_chunks_sql
from ragspine_core.records import Chunk, is_restricted

_COLS = schema.CHUNK_COLUMN_NAMES
#: Page cache of a chunk-store connection, KiB (SQLite allocates it only as pages are used).
CACHE_KIB = 262_144
_INSERT = f"INSERT INTO {schema.CHUNK_TABLE} ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))})"


_RESTRICTED_NOW = (f"SELECT DISTINCT doc_id FROM {schema.CHUNK_TABLE} "
                   "WHERE active = 1 AND upper(sensitivity) = 'RESTRICTED'")


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def chunk_row(chunk: Chunk, *, version: int, active: int, ingested_at: str, run_id: str, doc_content_hash: str, valid_as_of: str, row_idx: int | None = None) -> tuple:
    values: dict[str, Any] = {
        "chunk_id": chunk.chunk_id, "library_id": chunk.library_id, "doc_id": chunk.doc_id,
        "ordinal": chunk.ordinal, "text": chunk.text, "start_char": chunk.start, "end_char": chunk.end,
        "title": chunk.title, "source_locator": chunk.source_locator, "entity": chunk.entity,
        "topic": chunk.topic, "geography": chunk.geography, "period": chunk.period,
        "language": chunk.language, "sensitivity": chunk.sensitivity,
        "valid_as_of": valid_as_of or chunk.valid_as_of, "chunker": chunk.chunker,
        "chunker_version": chunk.chunker_version, "heading": chunk.heading,
        "parent_id": chunk.parent_id, "parent_text": chunk.parent_text,
        "extra_json": json.dumps(dict(chunk.extra), sort_keys=True, ensure_ascii=False),
        "index_text": chunk.index_text, "doc_content_hash": doc_content_hash, "version": version,
        "active": active, "ingested_at": ingested_at, "run_id": run_id, "row_idx": row_idx,
    }
    return tuple(values[c] for c in _COLS)


def init_schema(conn: sqlite3.Connection) -> None:
    """Create the tables if missing and add any column an older file lacks (additive)."""
    # tables first, then additive column migration, then indexes (which may need new columns)
    for stmt in schema.CHUNK_DDL:
        if not stmt.lstrip().upper().startswith("CREATE INDEX"):
            conn.execute(stmt)
    for table, cols in ((schema.CHUNK_TABLE, schema.CHUNK_COLUMNS), (schema.DOCUMENT_TABLE, schema.DOCUMENT_COLUMNS)):
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        for name, sqltype, default in cols:
            if name not in have:
                nullable_type = sqltype.replace(" NOT NULL", "")
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {nullable_type} DEFAULT {default}")
    for stmt in schema.CHUNK_DDL:
        if stmt.lstrip().upper().startswith("CREATE INDEX"):
            conn.execute(stmt)
    conn.execute("INSERT OR REPLACE INTO schema_info(key, value) VALUES ('schema_version', ?)", (str(schema.SCHEMA_VERSION),))
    conn.commit()


def count_active_chunks(store_path: str | Path) -> tuple[int, int]:
    """(open, RESTRICTED) active chunks of the store, without reading their text."""
    with ChunkStore(store_path) as store:
        rows = store.execute_read(f"SELECT sensitivity FROM {schema.CHUNK_TABLE} WHERE active = 1")
    restricted = sum(1 for r in rows if is_restricted(r["sensitivity"]))
    return len(rows) - restricted, restricted


class ChunkStore:
    """The versioned chunk store: every version kept, one active version per document."""

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = Path(db_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.db_path)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a crash can lose the last commits but never corrupts the store, and
        # one fsync per document (thousands per run) no longer dominates ingest time
        self._conn.execute("PRAGMA synchronous=NORMAL")
        # a large store's id index does not fit SQLite's default 2 MB page cache; every
        # insert of a random chunk id then reads pages back (superlinear at 1M chunks)
        self._conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        self._in_transaction = False
        self.init_schema()

    @contextlib.contextmanager
    def transaction(self):
        """Group many :meth:`replace_doc_chunks` calls into one commit (rolled back on error)."""
        if self._in_transaction:
            yield
            return
        self._in_transaction = True
        try:
            with self._conn:
                yield
        finally:
            self._in_transaction = False

    def _write(self):
        """The transaction a single write runs in: its own, or the enclosing :meth:`transaction`."""
        return contextlib.nullcontext() if self._in_transaction else self._conn

    def init_schema(self) -> None:
        init_schema(self._conn)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ChunkStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents -------------------------------------------------------------------
    def document_hashes(self) -> dict[str, str]:
        """doc_id -> content hash of the active version of every active document."""
        rows = self._conn.execute(f"SELECT doc_id, content_hash FROM {schema.DOCUMENT_TABLE} WHERE active = 1")
        return {r["doc_id"]: r["content_hash"] for r in rows}

    def restricted_doc_ids(self) -> set[str]:
        """Doc ids whose active chunks are RESTRICTED (what the last run parsed)."""
        return {r[0] for r in self._conn.execute(_RESTRICTED_NOW)}

    def restricted_index_texts(self) -> set[str]:
        """The index text of every version of every document that is RESTRICTED now."""
        sql = f"SELECT DISTINCT index_text FROM {schema.CHUNK_TABLE} WHERE doc_id IN ({_RESTRICTED_NOW})"
        return {r[0] for r in self._conn.execute(sql)}

    def document_chunkers(self) -> dict[str, str]:
        rows = self._conn.execute(f"SELECT doc_id, chunker, chunker_version FROM {schema.DOCUMENT_TABLE} WHERE active = 1")
        return {r["doc_id"]: f"{r['chunker']}@{r['chunker_version']}" for r in rows}

    def replace_doc_chunks(self, doc_id: str, chunks: Sequence[Chunk], valid_as_of: str = "", *, content_hash: str = "", source_path: str = "", run_id: str = "", chunker: str = "", chunker_version: str = "") -> int:
        """Versioned replacement of one document's chunks; returns rows written.

        Bumps ``version = max(version) + 1``, deactivates older rows and inserts the new
        ones active. Idempotent: re-ingesting identical chunks with the same content hash
        writes nothing. An empty ``chunks`` withdraws the document.
        """
        conn = self._conn
        cur = conn.execute(f"SELECT chunk_id, parent_id, heading, index_text FROM {schema.CHUNK_TABLE} "
                           "WHERE doc_id = ? AND active = 1 ORDER BY ordinal", (doc_id,))
        active_rows = [tuple(r) for r in cur]
        active_ids = [r[0] for r in active_rows]
        active_hash = conn.execute(f"SELECT content_hash FROM {schema.DOCUMENT_TABLE} WHERE doc_id = ? AND active = 1", (doc_id,)).fetchone()
        # identical = same ids and the same parent windows, headings and index text (a chunker
        # setting such as a sentence window or the contextual header can change only those)
        same = active_rows == [(c.chunk_id, c.parent_id, c.heading, c.index_text) for c in chunks]
        if chunks and same and (active_hash and active_hash[0] == content_hash):
            if chunker:  # identical output from a new chunker version: record lineage in place
                with self._write():
                    conn.execute(
                        f"UPDATE {schema.DOCUMENT_TABLE} SET chunker = ?, chunker_version = ? WHERE doc_id = ? AND active = 1",
                        (chunker, chunker_version, doc_id))
                    conn.execute(
                        f"UPDATE {schema.CHUNK_TABLE} SET chunker_version = ? WHERE doc_id = ? AND active = 1",
                        (chunker_version, doc_id))
            return 0
        if not chunks and not active_ids and not active_hash:
            return 0
        now = utc_now()
        (max_v,) = conn.execute(
            f"SELECT MAX(v) FROM (SELECT MAX(version) AS v FROM {schema.CHUNK_TABLE} WHERE doc_id = ? "
            f"UNION ALL SELECT MAX(version) FROM {schema.DOCUMENT_TABLE} WHERE doc_id = ?)",
            (doc_id, doc_id),
        ).fetchone()
        version = int(max_v or 0) + 1
        with self._write():
            conn.execute(f"UPDATE {schema.CHUNK_TABLE} SET active = 0 WHERE doc_id = ? AND active = 1", (doc_id,))
            conn.execute(f"UPDATE {schema.DOCUMENT_TABLE} SET active = 0 WHERE doc_id = ? AND active = 1", (doc_id,))
            conn.executemany(
                _INSERT,
                [chunk_row(c, version=version, active=1, ingested_at=now, run_id=run_id, doc_content_hash=content_hash, valid_as_of=valid_as_of) for c in chunks],
            )
            if chunks:
                conn.execute(
                    f"INSERT INTO {schema.DOCUMENT_TABLE} (doc_id, content_hash, source_path, chunker, chunker_version, version, active, ingested_at, run_id) VALUES (?,?,?,?,?,?,1,?,?)",
                    (doc_id, content_hash, source_path, chunker, chunker_version, version, now, run_id),
                )
        return len(chunks)

    def iter_chunks(self, *, doc_id: str | None = None, topic: str | None = None, entity: str | None = None, geography: str | None = None, period: str | None = None, language: str | None = None, include_inactive: bool = False) -> list[Chunk]:
        return iter_chunks_sql(self._conn, include_inactive=include_inactive, doc_id=doc_id, topic=topic, entity=entity, geography=geography, period=period, language=language)

    def execute_read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run one read statement on a separate ``mode=ro`` connection.

        Raises ValueError for anything but SELECT/WITH/PRAGMA; a write disguised as one
        (``WITH … DELETE``, ``PRAGMA x = 1``) fails in SQLite itself (read-only database).
        """
        if not sql.lstrip().lower().startswith(("select", "with", "pragma")):
            raise ValueError("execute_read only runs SELECT/WITH/PRAGMA statements; use replace_doc_chunks to write")
        self._conn.commit()
        conn = connect_read_only(self.db_path)
        try:
            return list(conn.execute(sql, params))
        finally:
            conn.close()
