"""Deterministic content-hash identifiers for chunks and parent windows.

The id is the sha256 of a JSON array of the fields, so no two different field tuples
can encode to the same bytes (no separator ambiguity), and a leading tag keeps chunk
and parent ids in different spaces.
"""

from __future__ import annotations

import hashlib
import json

_CHUNK_TAG = "ragspine-chunk/2"
_PARENT_TAG = "ragspine-parent/1"


def _digest(fields: list[object]) -> str:
    encoded = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def _check_span(start: int, end: int) -> None:
    for label, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{label} must be an integer, got {value!r}")
    if not 0 <= start <= end:
        raise ValueError(f"span must satisfy 0 <= start <= end, got start={start}, end={end}")


def make_chunk_id(library_id: str, doc_id: str, chunker_name: str, start: int, end: int, text: str) -> str:
    """sha256 hex over (library, doc, chunker name, span, text).

    The chunker *version* is deliberately not part of the id: after a chunker change, a
    chunk that comes out byte-identical (same span, same text) keeps its id, so nothing
    downstream of it is rebuilt or re-embedded. The version is recorded as lineage on the
    chunk row instead.
    """
    _check_span(start, end)
    return _digest([_CHUNK_TAG, library_id, doc_id, chunker_name, start, end, text])


def make_parent_id(library_id: str, doc_id: str, start: int, end: int) -> str:
    """sha256 hex over (library, doc, parent span); children of one parent share it."""
    _check_span(start, end)
    return _digest([_PARENT_TAG, library_id, doc_id, start, end])
