"""What the relation graph is built from: one open chunk (:class:`GraphChunk`, read from the
chunk store by :func:`read_graph_chunks`) and one extracted relation (:class:`Triple`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragspine_index.chunk_store import ChunkStore


@dataclass(frozen=True, slots=True)
class GraphChunk:
    """What the graph builder reads of one snapshot row."""

    row: int
    chunk_id: str
    doc_id: str
    text: str
    title: str
    entity: str
    sensitivity: str


@dataclass(frozen=True, slots=True)
class Triple:
    """One (subject, predicate, object) relation a model read in a chunk (unverified)."""

    subject: str
    predicate: str
    object: str


def read_graph_chunks(store_path: Path) -> list[GraphChunk]:
    """Active chunks in snapshot row order (chunk_id order), with the fields the graph reads."""
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            "SELECT chunk_id, doc_id, text, title, entity, sensitivity FROM narrative_chunk WHERE active = 1 ORDER BY chunk_id")
    return [GraphChunk(i, r["chunk_id"], r["doc_id"], r["text"], r["title"], r["entity"], r["sensitivity"]) for i, r in enumerate(rows)]
