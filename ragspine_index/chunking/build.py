"""Turn a parsed document into :class:`ragspine_core.records.Chunk` records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragspine_core.records import Chunk

from ragspine_index.converters.regions import fragment_for
from ragspine_index.chunking.contextual import index_text
from ragspine_index.chunking.ids import make_chunk_id, make_parent_id
from ragspine_index.chunking.chunker_registry import Chunker, chunker_signature

if TYPE_CHECKING:
    from ragspine_index.source_documents.model import SourceDocument


def build_chunks(doc: SourceDocument, chunker: Chunker, *, contextual: bool = True) -> list[Chunk]:
    """Chunk ``doc`` and fill every field of each chunk record.

    Parameters:
        doc: a parsed document; chunks are spans of ``doc.body``.
        chunker: any :class:`Chunker` (see :func:`make_chunker`).
        contextual: prepend the context header to ``index_text`` (else it equals ``text``).

    Returns:
        Chunks in body order, ``ordinal`` counting from 0. ``parent_id``/``parent_text``
        are set only for chunkers with parent windows (parent_child, qa, sentence_window).
        A converted document's chunks carry where they are in the original file in
        ``source_locator`` (``reports/q3.pdf#page=4``), so their locator is
        ``…#page=4&chars=120-560``.

    Raises:
        ValueError: the chunker broke the substring invariant (a chunker bug; the message
            names the chunker, document and span).
    """
    chunks: list[Chunk] = []
    body = doc.body
    version = chunker_signature(chunker)  # the version plus any non-default setting
    for ordinal, span in enumerate(chunker.chunk(doc)):
        _check_span(doc, chunker, span.start, span.end, span.text, span.parent_start, span.parent_end)
        parent_id = parent_text = ""
        if span.parent_start >= 0:
            parent_id = make_parent_id(doc.library_id, doc.doc_id, span.parent_start, span.parent_end)
            parent_text = body[span.parent_start : span.parent_end]
        chunks.append(
            Chunk(
                chunk_id=make_chunk_id(
                    doc.library_id, doc.doc_id, chunker.name, span.start, span.end, span.text
                ),
                library_id=doc.library_id,
                doc_id=doc.doc_id,
                ordinal=ordinal,
                text=span.text,
                start=span.start,
                end=span.end,
                title=doc.title,
                source_locator=_located(doc, span.start, span.end),
                entity=doc.entity,
                topic=doc.topic,
                geography=doc.geography,
                period=doc.period,
                language=doc.language,
                sensitivity=doc.sensitivity,
                valid_as_of=doc.valid_as_of,
                chunker=chunker.name,
                chunker_version=version,
                heading=span.heading,
                parent_id=parent_id,
                parent_text=parent_text,
                extra=doc.extra,
                index_text=index_text(doc, span) if contextual else span.text,
            )
        )
    return chunks


def _located(doc: SourceDocument, start: int, end: int) -> str:
    """The document's ``source_locator``, plus where in the original file the span is
    (``#page=4``) for a converted file (:func:`~..converters.regions.fragment_for`)."""
    regions = getattr(doc, "regions", ())
    if not regions:
        return doc.source_locator
    fragment = fragment_for(regions, start, end)
    if not fragment:
        return doc.source_locator
    return f"{doc.source_locator}{'&' if '#' in doc.source_locator else '#'}{fragment}"


def _check_span(
    doc: SourceDocument, chunker: Chunker, start: int, end: int, text: str, parent_start: int, parent_end: int
) -> None:
    where = f"chunker {chunker.name}@{chunker.version} on document {doc.doc_id!r} span {start}-{end}"
    if not (0 <= start < end <= len(doc.body)) or doc.body[start:end] != text:
        raise ValueError(f"{where}: chunk text is not body[start:end]; this is a chunker bug")
    if not text.strip():
        raise ValueError(f"{where}: whitespace-only chunk; this is a chunker bug")
    if parent_start >= 0 and not (parent_start <= start and end <= parent_end <= len(doc.body)):
        raise ValueError(f"{where}: parent span {parent_start}-{parent_end} does not contain the chunk")
