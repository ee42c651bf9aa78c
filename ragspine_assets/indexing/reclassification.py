"""Reclassification is retroactive: a snapshot never serves as open what is RESTRICTED now.

A document whose sensitivity rose to RESTRICTED after a snapshot was published is still
open (PUBLIC or INTERNAL) inside that older snapshot. Rolling back to it, or keeping
``current`` pinned to it, would serve the document again as open. This module finds
such documents by comparing a snapshot's chunk table with the chunk store's active rows
(what the last run parsed). Callers report them by count only: their ids are not shown.
"""

from __future__ import annotations

from pathlib import Path

from ragspine_query import schema
from ragspine_query.library import connect_read_only

from .chunk_store import ChunkStore


def restricted_now(store_path: Path) -> set[str]:
    """Doc ids the chunk store's active rows mark RESTRICTED (empty when there is no store)."""
    if not Path(store_path).is_file():
        return set()
    with ChunkStore(store_path) as store:
        return store.restricted_doc_ids()


def open_documents(snapshot_dir: Path) -> set[str]:
    """Doc ids a published snapshot serves as open (not RESTRICTED)."""
    conn = connect_read_only(Path(snapshot_dir) / schema.SNAPSHOT_CHUNKS_FILE, immutable=True)
    try:
        rows = conn.execute(
            f"SELECT DISTINCT doc_id FROM {schema.CHUNK_TABLE} WHERE upper(sensitivity) != 'RESTRICTED'").fetchall()
    finally:
        conn.close()
    return {r[0] for r in rows}


def reclassified_documents(snapshot_dir: Path, store_path: Path) -> list[str]:
    """Doc ids that ``snapshot_dir`` serves as open although they are RESTRICTED now."""
    return sorted(open_documents(snapshot_dir) & restricted_now(store_path))


__all__ = ["open_documents", "reclassified_documents", "restricted_now"]
