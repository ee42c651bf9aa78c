"""Turn a parsed document into :class:`ragspine_core.records.Chunk` records."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from ragspine_core.records import Chunk

from ragspine_index.converters.regions import fragment_for
from ragspine_index.chunking.contextual import index_text
from ragspine_index.chunking.ids import make_chunk_id, make_parent_id
from ragspine_index.chunking.chunker_registry import Chunker, chunker_signature
from ragspine_index.chunking.paragraph import DEFAULT_CHUNK_CHARS, hard_cut, paragraph_spans
from ragspine_index.chunking.spans import NO_PARENT, ChunkSpan, iter_lines, trim

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
    for ordinal, span in enumerate(chunk_spans(doc, chunker)):
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


#: The keys of a converted file's regions that are places a citation names one of: a chunk
#: is cut at the boundary between two sheets, slides or sections (PDF pages are cited as a
#: range, ``page=3&end_page=4``, instead: a page break falls mid-sentence).
_UNIT_KEYS = ("sheet", "slide", "anchor")
_WORD = re.compile(r"\w")


def chunk_spans(doc: SourceDocument, chunker: Chunker) -> list[ChunkSpan]:
    """The spans :func:`build_chunks` makes chunks of: the chunker's; for a converted file cut into sheets, slides or sections
    (:func:`_units`), each chunked on its own, its Markdown tables packed in whole row groups
    (the converters repeat the header row per group), and no span without a word."""
    units = _units(doc)
    if units is None:
        return chunker.chunk(doc)
    out: list[ChunkSpan] = []
    for a, b in units:
        out.extend(_unit_spans(doc, chunker, a, b))
    return [s for s in out if _WORD.search(s.text)]


def _units(doc: SourceDocument) -> list[tuple[int, int]] | None:
    """``[start, end)`` of each sheet, slide or section of a converted file's body (text
    between two places belongs to the next one: a sheet's ``## Sheet:`` line); None for a
    document that is not a converted file with such places."""
    regions = getattr(doc, "regions", ())
    if not regions:
        return None
    keys = []
    for _, _, frag in regions:
        pairs = dict(p.partition("=")[::2] for p in frag.split("&"))
        key = next(((k, pairs[k]) for k in _UNIT_KEYS if k in pairs), None)
        if key is None:
            return None  # pages (PDF), a CSV's cells: one text, cited as a range
        keys.append(key)
    cuts = [0]
    if keys[0][0] == "anchor" and doc.body[:regions[0][0]].strip():
        cuts.append(regions[0][0])  # the text before the first heading is no section's
    for i in range(1, len(regions)):
        if keys[i] != keys[i - 1]:
            cuts.append(regions[i - 1][1])
    cuts.append(len(doc.body))
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if doc.body[a:b].strip()]


def _is_table(body: str, a: int, b: int) -> bool:
    return all(body[s:e].lstrip().startswith("|") for s, e in iter_lines(body, a, b))


def _unit_spans(doc: SourceDocument, chunker: Chunker, a: int, b: int) -> list[ChunkSpan]:
    """One place's spans: its text runs through the chunker (as a document of their own),
    its table groups (paragraphs of ``|`` lines) are packed whole into the chunker's budget."""
    body = doc.body
    budget = getattr(chunker, "max_chars", DEFAULT_CHUNK_CHARS)
    paragraphs = paragraph_spans(body, a, b)
    heading = next((body[s:e].lstrip("# ").strip() for s, e in paragraphs[:1] if body[s:e].startswith("#")), "")
    out: list[ChunkSpan] = []
    run: list[tuple[int, int]] = []
    run_table = False
    lead: list[tuple[int, int]] = []  # heading lines right before a table go with its first rows
    for s, e in [*paragraphs, (b, b)]:
        table = s < e and _is_table(body, s, e)
        if run and (s == e or table != run_table):
            lo, hi = run[0][0], run[-1][1]
            if run_table:
                out.extend(_table_spans(body, lead + run, budget, heading))
                lead = []
            elif table and all(body[x:y].startswith("#") and "\n" not in body[x:y] for x, y in run):
                lead = run
            else:
                sub = dataclasses.replace(doc, body=body[lo:hi], regions=())
                for sp in chunker.chunk(sub):
                    parent = (sp.parent_start + lo, sp.parent_end + lo) if sp.parent_start != NO_PARENT else (NO_PARENT, NO_PARENT)
                    out.append(ChunkSpan(sp.start + lo, sp.end + lo, sp.text, sp.heading or heading, *parent))
            run = []
        run_table = table
        if s < e:
            run.append((s, e))
    return out


def _table_spans(body: str, groups: list[tuple[int, int]], budget: int, heading: str) -> list[ChunkSpan]:
    """Table groups packed whole into ``budget``; a group over it is cut at rows (a row over
    it, at ``budget``)."""
    pieces: list[tuple[int, int]] = []
    for s, e in groups:
        if e - s <= budget:
            pieces.append((s, e))
            continue
        for ls, le in iter_lines(body, s, e):
            pieces.extend(hard_cut(body, ls, le, budget) if le - ls > budget else [trim(body, ls, le)])
    out: list[ChunkSpan] = []
    cur: tuple[int, int] | None = None
    for s, e in pieces:
        if s >= e:
            continue
        if cur is not None and e - cur[0] <= budget:
            cur = (cur[0], e)
            continue
        if cur is not None:
            out.append(ChunkSpan(cur[0], cur[1], body[cur[0]:cur[1]], heading))
        cur = (s, e)
    if cur is not None:
        out.append(ChunkSpan(cur[0], cur[1], body[cur[0]:cur[1]], heading))
    return out


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
