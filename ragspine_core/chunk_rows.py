"""Reading chunk rows from SQLite, shared by the reader and the writer: a ``mode=ro``
connection, a row turned into a :class:`~ragspine_core.records.Chunk`, the metadata
pre-filter, and :class:`ChunkStoreReader` over a chunk store file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Sequence

from ragspine_core import schema
from ragspine_core.errors import IndexNotFoundError
from ragspine_core.records import Chunk

_SELECT = ", ".join(schema.CHUNK_COLUMN_NAMES)
ITER_FILTER_FIELDS = ("doc_id", "topic", "entity", "geography", "period", "language")



def connect_read_only(db_path: Path, *, immutable: bool = False) -> sqlite3.Connection:
    """Open SQLite read-only (``mode=ro``); ``immutable`` for published snapshots."""
    if not db_path.is_file():
        raise IndexNotFoundError(f"{db_path} is missing: materialize the chunks asset")
    uri = f"file:{db_path.as_posix()}?mode=ro" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn


def row_to_chunk(row: sqlite3.Row | dict[str, Any]) -> Chunk:
    extra = json.loads(row["extra_json"] or "{}")
    return Chunk(
        chunk_id=row["chunk_id"],
        library_id=row["library_id"],
        doc_id=row["doc_id"],
        ordinal=int(row["ordinal"]),
        text=row["text"],
        start=int(row["start_char"]),
        end=int(row["end_char"]),
        title=row["title"],
        source_locator=row["source_locator"],
        entity=row["entity"],
        topic=row["topic"],
        geography=row["geography"],
        period=row["period"],
        language=row["language"],
        sensitivity=row["sensitivity"],
        valid_as_of=row["valid_as_of"],
        chunker=row["chunker"],
        chunker_version=row["chunker_version"],
        heading=row["heading"],
        parent_id=row["parent_id"],
        parent_text=row["parent_text"],
        extra=tuple(sorted((str(k), str(v)) for k, v in extra.items())),
        index_text=row["index_text"],
        version=int(row["version"]),
    )


def iter_chunks_sql(conn: sqlite3.Connection, *, include_inactive: bool = False, **filters: str | None) -> list[Chunk]:
    """AND-combined metadata pre-filter; active rows only unless ``include_inactive``."""
    clauses: list[str] = []
    params: list[Any] = []
    for field in ITER_FILTER_FIELDS:
        value = filters.pop(field, None)
        if value is not None:
            clauses.append(f"{field} = ?")
            params.append(value)
    if filters:
        raise TypeError(f"unknown iter_chunks filter(s) {sorted(filters)}; allowed: {', '.join(ITER_FILTER_FIELDS)}")
    if not include_inactive:
        clauses.append("active = 1")
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"SELECT {_SELECT} FROM {schema.CHUNK_TABLE}{where} ORDER BY doc_id, version, ordinal, chunk_id"
    return [row_to_chunk(r) for r in conn.execute(sql, params)]


class ChunkStoreReader:
    """Read-only view of a chunk store file (``mode=ro``); never writes."""

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = Path(db_path)
        self._conn = connect_read_only(self.db_path)

    def iter_chunks(self, *, doc_id: str | None = None, topic: str | None = None, entity: str | None = None, geography: str | None = None, period: str | None = None, language: str | None = None, include_inactive: bool = False) -> list[Chunk]:
        return iter_chunks_sql(self._conn, include_inactive=include_inactive, doc_id=doc_id, topic=topic, entity=entity, geography=geography, period=period, language=language)

    def execute_read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run one read-only statement (the connection itself refuses writes)."""
        return list(self._conn.execute(sql, params))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ChunkStoreReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
