"""What the relation graph is built from: one open chunk (:class:`GraphChunk`) and one
extracted relation (:class:`Triple`)."""

from __future__ import annotations

from dataclasses import dataclass


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
